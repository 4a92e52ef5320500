"""Team mode: each account's own secrets (issue 46 item 4): a hub token, a W&B key, a webhook URL, a judge's or an
SMTP server's key, stored for that account only and handed only to its runs.

Light: stdlib. ``$STUDIO_HOME/secrets/<account>.json`` (folder mode 700, file mode 600, written whole and renamed into
place), outside the registry and every run folder: {variable name: value}. The page sets and removes them and shows
their names only, never a value back. When a run or job of an account starts (``engine.runs.scheduler.launch``), the
account's values go into its processes' environment, in memory only, under their names; a member's run gets none of
the operator's secrets (the studio's own environment) except those the operator bound for the page
(``STUDIO_PAGE_SECRETS``), and an admin's run gets the operator's where it holds none of its own. What the page
checks before a launch (a webhook's host, a judge's key being set) reads the same: ``environ``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from engine.core import accounts, workspace
from engine.core.messages import message

FOLDER = "secrets"
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
MAX_VALUE = 4096
# the names the page offers first: what Studio's runs and jobs read (any variable name may be stored)
SUGGESTED = ("HF_TOKEN", "WANDB_API_KEY", "MODELSCOPE_API_TOKEN")


class SecretError(ValueError):
    """A secret that cannot be stored; the message names the variable or the rule."""


def _path(owner: str) -> Path:
    return workspace.home() / FOLDER / f"{owner}.json"


def load(owner: str) -> dict[str, str]:
    """The account's secrets ({} for the operator, an unknown name, or none stored)."""
    if not owner or not accounts.NAME.fullmatch(owner):
        return {}
    try:
        data = json.loads(_path(owner).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items() if NAME.match(str(k))} if isinstance(data, dict) else {}


def _save(owner: str, secrets: dict[str, str]) -> None:
    target = _path(owner)
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(target.parent, 0o700)
    workspace.write_private_json(target, secrets)


def _owner_asking() -> str:
    """The logged-in account the page acts for (an admin too); refused for the operator and single-user mode,
    whose secrets are the studio's environment."""
    owner = accounts.owner_of_new()
    if not owner:
        raise SecretError(message("workspace.secret_operator"))
    return owner


def put(name: str, value: str) -> None:
    """Store the asking account's secret ``name``; an empty value is refused (remove it instead)."""
    owner = _owner_asking()
    name = str(name or "").strip()
    if not NAME.match(name):
        raise SecretError(message("workspace.secret_bad_name", name=name))
    if not value or len(value) > MAX_VALUE or "\n" in value or "\x00" in value:
        raise SecretError(message("workspace.secret_bad_value", name=name, n=MAX_VALUE))
    secrets = load(owner)
    secrets[name] = value
    _save(owner, secrets)


def remove(name: str) -> bool:
    """Forget the asking account's secret ``name``; False when it held none of that name."""
    owner = _owner_asking()
    secrets = load(owner)
    if secrets.pop(str(name or "").strip(), None) is None:
        return False
    _save(owner, secrets)
    return True


def names() -> list[str]:
    """The names of the asking account's secrets (never their values); [] for the operator."""
    owner = accounts.owner_of_new()
    return sorted(load(owner)) if owner else []


def held(name: str) -> bool:
    """Whether the account the call acts for holds a secret of this name (then it is theirs to send anywhere the
    page may reach, without the operator's binding)."""
    owner = accounts.owner_of_new()
    return bool(owner) and name in load(owner)


def environ() -> dict[str, str]:
    """The environment as the asking account's runs will see its secrets: the studio's, with the account's own
    values over it (what the page's checks of a webhook's host or a judge's key read)."""
    owner = accounts.owner_of_new()
    return {**os.environ, **load(owner)} if owner else dict(os.environ)


def run_environment(env: dict[str, str], owner: str, names: list[str], bound: set[str]) -> dict[str, str]:
    """A run's environment for its owner: the owner's secrets over ``env``; for a member, the operator's values of
    ``names`` (the secret variables a run may read) dropped unless the operator bound them for the page (``bound``).
    The operator's runs (owner ``""``) keep ``env`` as it is."""
    if not owner:
        return env
    account = accounts.load().get(owner)
    mine = load(owner)
    if account is not None and account.admin:  # an admin's runs: the operator's secrets where it holds none
        return {**env, **mine}
    out = {k: v for k, v in env.items() if k not in names or k in bound}
    out.update(mine)
    if "HF_TOKEN" in names and not out.get("HF_TOKEN"):
        # no token of the member's: huggingface_hub must not fall back on the operator's saved login either
        out["HF_HUB_DISABLE_IMPLICIT_TOKEN"] = "1"
    return out
