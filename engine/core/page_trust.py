"""What the page may use that the shell may: reward code only from the workspace's reward folder, secrets only
towards the destinations the operator bound them to, and no loopback, link-local or private address the operator did
not allow.

Light: stdlib only. The ``studio`` command acts for the person at the shell (``engine.core.acting``) and keeps its
freedom; these rules hold for everything else: the page, and any caller of the engine outside ``acting.shell()``. The
engine applies them where a spec is accepted (``engine.spec.grpo_group``'s context rules for reward files, the
registry's submit for notifications, ``engine.jobs.evals`` for the judge), not only in a form.

The operator's settings, read from the environment (``studio.settings`` refuses a malformed one at start):

- ``STUDIO_PAGE_CODE``: ``on`` lets the page upload reward files into ``$STUDIO_HOME/rewards/``; ``off`` (the
  default) leaves that folder to the operator. Either way the page names reward files only in that folder.
- ``STUDIO_PAGE_SECRETS``: ``NAME=HOST[:PORT]`` entries separated by commas, e.g.
  ``SMTP_PASS=smtp.example.com:587,JUDGE_KEY=judge.internal``: the only environment variables the page may name (an
  SMTP password, a webhook URL, a judge's key), each only towards its hosts; a name may be bound to several hosts by
  repeating it; without a port, any port of that host. A webhook variable's host is the one in its URL (its value).
- ``STUDIO_PAGE_HOSTS``: ``HOST[:PORT]`` entries separated by commas: loopback, link-local or private hosts the page
  may send to without a secret (a judge on this machine, an SMTP relay on the LAN). A host bound in
  ``STUDIO_PAGE_SECRETS`` is allowed as well.
- ``STUDIO_PAGE_REMOTE_CODE``: ``on`` lets the page train a model whose own Python code would run
  (``model.trust_remote_code`` on a model that ships code: ``auto_map`` in its configs, ``.py`` files in its folder);
  ``off`` (the default) refuses such a run from the page, naming the field. That code is not the workspace's and runs
  unconfined, with the studio's rights.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import socket
import urllib.parse
from pathlib import Path

from engine.core import member_secrets, workspace
from engine.core.messages import Message, message

ENV_CODE = "STUDIO_PAGE_CODE"
ENV_SECRETS = "STUDIO_PAGE_SECRETS"
ENV_HOSTS = "STUDIO_PAGE_HOSTS"
ENV_REMOTE_CODE = "STUDIO_PAGE_REMOTE_CODE"

Destination = tuple[str, int | None]  # host (lower case, IPv6 without brackets), port (None: any)

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_REWARD_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*\.py$")
_DEFAULT_PORTS = {"http": 80, "https": 443}


class PageTrustError(ValueError):
    """A malformed operator setting, or what the page may not do; its argument is a catalog ``Message``."""


# ------------------------------------------------------------------------------------------- operator settings
def _switch(var: str, environ: dict[str, str] | None) -> bool:
    text = str((os.environ if environ is None else environ).get(var) or "off").strip().lower()
    if text in ("on", "1", "yes", "true"):
        return True
    if text in ("off", "0", "no", "false", ""):
        return False
    raise PageTrustError(message("workspace.page_setting_bad", var=var, entry=text, form="on | off"))


def page_code_on(environ: dict[str, str] | None = None) -> bool:
    """Whether ``STUDIO_PAGE_CODE`` lets the page put reward files into the reward folder."""
    return _switch(ENV_CODE, environ)


def page_remote_code_on(environ: dict[str, str] | None = None) -> bool:
    """Whether ``STUDIO_PAGE_REMOTE_CODE`` lets the page train a model whose own code would run."""
    return _switch(ENV_REMOTE_CODE, environ)


def _destination(text: str, var: str) -> Destination:
    item = text.strip()
    host, port = item, None
    if item.startswith("["):  # [v6]:port
        host, _, rest = item[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else (None if not rest else "?")
    elif item.count(":") == 1:
        host, port = item.split(":")
    try:
        number = None if port is None else int(port)
    except ValueError:
        number = -1
    if not host or any(c in host for c in "/@ ") or (number is not None and not 1 <= number <= 65535):
        raise PageTrustError(message("workspace.page_setting_bad", var=var, entry=item, form="HOST[:PORT]"))
    return host.lower(), number


def page_secrets(environ: dict[str, str] | None = None) -> dict[str, list[Destination]]:
    """``STUDIO_PAGE_SECRETS`` as {variable name: the destinations it may go to}."""
    text = str((os.environ if environ is None else environ).get(ENV_SECRETS) or "")
    out: dict[str, list[Destination]] = {}
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        name, sep, where = entry.partition("=")
        if not sep or not _NAME.match(name.strip()) or not where.strip():
            raise PageTrustError(
                message("workspace.page_setting_bad", var=ENV_SECRETS, entry=entry, form="NAME=HOST[:PORT]")
            )
        out.setdefault(name.strip(), []).append(_destination(where, ENV_SECRETS))
    return out


def page_hosts(environ: dict[str, str] | None = None) -> list[Destination]:
    """``STUDIO_PAGE_HOSTS``: the private destinations the page may send to without a secret."""
    text = str((os.environ if environ is None else environ).get(ENV_HOSTS) or "")
    return [_destination(e, ENV_HOSTS) for e in text.split(",") if e.strip()]


def check_settings(environ: dict[str, str] | None = None) -> None:
    """Raise ``PageTrustError`` naming the variable and the entry when a setting is malformed."""
    page_code_on(environ)
    page_remote_code_on(environ)
    page_secrets(environ)
    page_hosts(environ)


# ----------------------------------------------------------------------------------------------- reward code
def reward_problem(path: str | Path) -> Message | None:
    """Why the page may not run the reward file ``path`` (links resolved): it is not a regular ``.py`` file inside
    the workspace's reward folder. None when it may."""
    folder = workspace.rewards_dir()
    p = Path(path).expanduser()
    try:
        real = p.resolve(strict=True)
    except (OSError, RuntimeError):
        real = p.resolve()
    if not real.is_relative_to(folder) or not real.is_file() or real.suffix != ".py":
        return message("workspace.page_reward_outside", path=p, folder=folder, switch=ENV_CODE)
    return None


def dataset_dir_problem(path: str | Path) -> Message | None:
    """Why the page may not read datasets from the folder ``path`` (links resolved): it is outside the workspace.
    The page reads the workspace's own registry and uploads; a dataset folder elsewhere on the server is the
    shell's to name."""
    real = Path(path).expanduser().resolve()
    if real.is_relative_to(workspace.home().resolve()):
        return None
    return message("workspace.page_dataset_dir_outside", path=path, home=workspace.home())


def read_problem(path: str | Path) -> Message | None:
    """Why the page may not read the file ``path`` (links resolved), e.g. a GGUF to import: it is outside the
    workspace. The page reads only what is in the workspace; a file elsewhere on the server is the shell's."""
    real = Path(path).expanduser().resolve()
    if real.is_relative_to(workspace.home().resolve()):
        return None
    return message("workspace.page_file_outside", path=path, home=workspace.home(), uploads=workspace.uploads_dir())


def remote_code_problem(model: str, configs: list[dict | None], code_files: list[str]) -> Message | None:
    """Why the page may not load ``model`` with its own code (``model.trust_remote_code``): its configs
    (``config.json``, ``tokenizer_config.json``; None: not readable here) name classes of its own (``auto_map``),
    its folder holds Python files, or no config can be read here, so that cannot be told. None when no code of the
    model's would run, or when ``STUDIO_PAGE_REMOTE_CODE`` is on."""
    if page_remote_code_on():
        return None
    if not any(c is not None for c in configs):
        return message("workspace.page_remote_code_unknown", model=model, switch=ENV_REMOTE_CODE)
    mapped = sorted({k for c in configs if isinstance(c, dict) for k in (c.get("auto_map") or {})})
    if mapped or code_files:
        shown = ", ".join(mapped[:3] or code_files[:3])
        return message("workspace.page_remote_code", model=model, code=shown, switch=ENV_REMOTE_CODE)
    return None


def save_reward(source: str | Path, name: str) -> Path:
    """Put an uploaded reward file into the reward folder as ``name`` (a plain ``.py`` file name), when
    ``STUDIO_PAGE_CODE`` is on; ``PageTrustError`` says why not otherwise."""
    if not page_code_on():
        raise PageTrustError(message("workspace.page_code_off", switch=ENV_CODE, folder=workspace.rewards_dir()))
    name = Path(str(name)).name
    if not _REWARD_NAME.match(name):
        raise PageTrustError(message("workspace.page_reward_name", name=name))
    target = workspace.rewards_dir() / name
    tmp = target.with_name(f".{name}.upload")
    shutil.copyfile(Path(source), tmp)
    os.replace(tmp, target)
    return target


# ------------------------------------------------------------------------------------- secrets and destinations
def url_destination(url: str) -> Destination | None:
    """(host, port) of an http(s) URL (the scheme's default port when it names none), None when it has no host."""
    parts = urllib.parse.urlsplit(str(url).strip())
    try:
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname:
        return None
    return parts.hostname.lower(), port or _DEFAULT_PORTS.get(parts.scheme.lower())


def _matches(dest: Destination, allowed: list[Destination]) -> bool:
    host, port = dest
    return any(h == host and (p is None or p == port) for h, p in allowed)


def _show(dest: Destination) -> str:
    host, port = dest
    host = f"[{host}]" if ":" in host else host
    return host if port is None else f"{host}:{port}"


def _not_public(host: str, port: int | None) -> tuple[str | None, str | None]:
    """(the first loopback / link-local / private / reserved address ``host`` stands for, or None; why the name could
    not be resolved, or None)."""
    try:
        addresses = [ipaddress.ip_address(host)]
    except ValueError:
        try:
            infos = socket.getaddrinfo(host, port or 0, proto=socket.IPPROTO_TCP)
        except (OSError, UnicodeError) as exc:
            return None, str(getattr(exc, "strerror", None) or exc)
        addresses = [ipaddress.ip_address(i[4][0].split("%")[0]) for i in infos]
    for a in addresses:
        a = a.ipv4_mapped or a if isinstance(a, ipaddress.IPv6Address) else a
        if not a.is_global or a.is_multicast:
            return str(a), None
    return None, None


def destination_problem(dest: Destination | None, secret: str = "") -> Message | None:
    """Why the page may not send to ``dest`` (with the secret held by the variable ``secret``, if any): the variable
    is not bound for the page, or not to this host; or, with no binding that names it, the host is (or resolves to)
    a loopback, link-local or private address that ``STUDIO_PAGE_HOSTS`` does not allow. ``dest`` None: not known
    yet (a webhook variable that is not set), only the binding is checked. None when it may."""
    bound = page_secrets()
    if secret and member_secrets.held(secret):
        secret = ""  # the account's own (team mode): theirs to send wherever the page may reach
    if secret:
        if secret not in bound:
            return message("workspace.page_secret_unbound", name=secret, var=ENV_SECRETS)
        if dest is not None and not _matches(dest, bound[secret]):
            allowed = ", ".join(_show(d) for d in bound[secret])
            return message(
                "workspace.page_secret_elsewhere", name=secret, dest=_show(dest), allowed=allowed, var=ENV_SECRETS
            )
        return None  # the operator bound it to this very destination
    if dest is None:
        return None
    if _matches(dest, page_hosts()) or any(_matches(dest, dests) for dests in bound.values()):
        return None
    address, unresolved = _not_public(*dest)
    if unresolved is not None:
        return message("workspace.page_host_unresolved", dest=_show(dest), error=unresolved, var=ENV_HOSTS)
    if address is not None:
        return message("workspace.page_private_host", dest=_show(dest), address=address, var=ENV_HOSTS)
    return None
