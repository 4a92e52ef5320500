"""Messages that keep their catalog key: the base every part's message catalog builds on.

Light: stdlib only. A ``Message`` is a plain ``str`` holding the English text the CLI prints and tests match, that
also remembers its catalog key and parameters, so the page can show the same message in another language
(``studio.i18n`` holds the Chinese, keyed the same). Each part keeps its own catalog beside it
(``engine.spec.messages``, ``engine.lf.messages``, ``engine.data.messages``, ``engine.plan.messages``,
``engine.machine.messages``, ``engine.runs.messages``, ``engine.export.messages``) and makes its messages with
``make``; keys carry the part's prefix so one Chinese table serves them all.
"""

from __future__ import annotations

from typing import Any


class Message(str):
    """English text plus the catalog key and parameters it was made from (key '' when it has none)."""

    key: str
    params: dict[str, Any]

    def __new__(cls, text: str, key: str = "", params: dict[str, Any] | None = None) -> Message:
        obj = super().__new__(cls, text)
        obj.key = key
        obj.params = dict(params or {})
        return obj

    def __reduce__(self) -> tuple:
        return (Message, (str(self), self.key, self.params))


def make(catalog: dict[str, str], key: str, /, **params: Any) -> Message:
    """``catalog``'s English text for ``key`` with ``params`` filled in (a KeyError names an unknown key). The other
    catalogs (``engine.data.messages``, ``plan_messages``, ``doctor_messages``, ``run_messages``) make their
    messages with this; their keys carry a prefix ("data.", "plan.", ...) so one Chinese table serves them all. A
    parameter may itself be a Message (a problem inside a place): the page translates it too."""
    return Message(catalog[key].format(**params), key, params)


def from_exception(exc: BaseException) -> Message | str:
    """An exception's catalog message when it was raised with one (``ValueError(message(...))``), else its text."""
    first = exc.args[0] if len(exc.args) == 1 else None
    return first if isinstance(first, Message) else str(exc)


def to_json(msg: Any) -> Any:
    """A message as JSON data for an event file (``{"text", "key", "params"}``; its parameters likewise, other
    values as text), so a reader in another process can rebuild it with ``from_json``; plain text stays text."""
    if not getattr(msg, "key", ""):
        return msg if msg is None or isinstance(msg, (bool, int, float)) else str(msg)
    return {"text": str(msg), "key": msg.key, "params": {k: to_json(v) for k, v in msg.params.items()}}


def from_json(data: Any) -> Any:
    """The inverse of ``to_json``: a ``Message`` (English text, key, parameters) or the value as it was."""
    if isinstance(data, dict) and set(data) == {"text", "key", "params"}:
        return Message(str(data["text"]), str(data["key"]), {k: from_json(v) for k, v in data["params"].items()})
    return data


def payload_message(payload: dict | None, name: str) -> Any:
    """Field ``name`` of an event's payload as a Message when the writer stored its key beside it (``<name>_msg``,
    see ``to_json``), else the text as written (``None`` when absent)."""
    payload = payload or {}
    stored = from_json(payload.get(f"{name}_msg"))
    return stored if isinstance(stored, Message) else payload.get(name)


# ----------------------------------------------------------------------------------------------- core's own catalog
# The workspace's folder rules (engine.core.folders): where outputs may go and who owns a folder. The owner labels
# ("workspace.owner_*") are parameters of the other messages, translated with them.
MESSAGES: dict[str, str] = {
    "workspace.outside": "{path} is outside the workspace ({home}) and every folder STUDIO_OUTPUT_ROOTS allows "
    "({roots}): choose a folder inside the workspace, or allow its root with STUDIO_OUTPUT_ROOTS",
    "workspace.root_refused": "{path} is inside {root}, which STUDIO_OUTPUT_ROOTS names but which is never allowed "
    "(a system folder, / or the home folder itself): choose a folder inside the workspace",
    "workspace.system": "{path} is a system folder, the home folder itself or /, or lies inside a system folder: "
    "Studio never writes there; choose another folder",
    "workspace.is_root": "{path} is an output root itself (STUDIO_OUTPUT_ROOTS): choose a folder inside it",
    "workspace.owned": "{path} belongs to {owner}: choose another folder",
    "workspace.holds": "{path} holds {owner}: choose a folder that holds no run's, dataset's or model's files",
    "workspace.roots_none": "none",
    "workspace.owner_workspace": "the workspace {path}",
    "workspace.owner_data": "the dataset folder {path}",
    "workspace.owner_models": "the models folder {path}",
    "workspace.owner_model": "the base model {path}",
    "workspace.owner_runs": "the runs folder {path}",
    "workspace.owner_run": "run {id} ({path})",
    "workspace.owner_exports": "the exports folder {path}",
    "workspace.owner_uploads": "the uploads folder {path}",
    "workspace.owner_presets": "the presets folder {path}",
    "workspace.owner_registry": "the run registry {path}",
    "workspace.owner_cache": "the tokenized-dataset cache {path}",
    "workspace.in_exports": "{path} is inside the exports folder {exports}, where merged and exported models live: "
    "choose a folder of the run's own",
    "workspace.not_empty": "{path} already holds files the run did not write ({found}): choose a new or empty folder",
    "workspace.owner_rewards": "the reward folder {path}",
    # What the page may use (engine.core.page_trust); the shell is not bound by these.
    "workspace.page_setting_bad": "{var}: {entry!r} is not {form}",
    "workspace.page_reward_outside": "{path} is outside the workspace's reward folder ({folder}): the page runs "
    "reward code only from there (the operator puts files there, or lets the page upload them with {switch}=on)",
    "workspace.page_code_off": "the page may not upload reward code: the operator allows it with {switch}=on (or "
    "puts the file into {folder})",
    "workspace.page_file_outside": "{path} is outside the workspace ({home}): the page reads files only from the "
    "workspace; put it under {uploads}, or run the studio command at the shell, which may name any file",
    "workspace.page_dataset_dir_outside": "{path} is outside the workspace ({home}): the page reads datasets only "
    "from the workspace (register or upload them in the Datasets tab); the studio command may name any folder",
    "workspace.page_remote_code": "{model} ships its own Python code ({code}), which trust_remote_code would run "
    "on this server: the page runs no code from outside the workspace (the operator allows it with {switch}=on; "
    "`studio train` at the shell may run it), or turn trust_remote_code off",
    "workspace.page_remote_code_unknown": "{model}'s config cannot be read here, so it cannot be told whether "
    "trust_remote_code would run code of its own: download the model first, turn trust_remote_code off, or the "
    "operator allows the page to with {switch}=on",
    "workspace.page_reward_name": "{name!r} is not a reward file name: letters, digits, _ . - ending in .py",
    "workspace.page_secret_unbound": "the page may not use the environment variable {name}: the operator has not "
    "bound it for the page ({var}={name}=HOST[:PORT])",
    "workspace.page_secret_elsewhere": "the page may send {name} only to {allowed}, not to {dest} ({var})",
    "workspace.page_private_host": "{dest} is a loopback, link-local or private address ({address}): the page may "
    "send there only when the operator allows it ({var})",
    "workspace.page_host_unresolved": "{dest} cannot be resolved here ({error}), so it cannot be checked to be a "
    "public address: the page may send there only when the operator allows it ({var})",
    # Team mode's secrets per account (engine.core.member_secrets): said on the page.
    "workspace.secret_operator": "the operator's secrets are the studio's environment (set where the studio starts); "
    "secrets stored here are an account's own, in team mode",
    "workspace.secret_bad_name": "{name!r} is not a variable name: a letter or _, then letters, digits or _ "
    "(up to 64)",
    "workspace.secret_bad_value": "{name}: a value of one line, up to {n} characters (to forget a secret, remove it)",
    # Team mode's personal tokens (engine.core.api_tokens): said on the page and to the member's command line.
    "workspace.token_operator": "tokens are an account's own, in team mode: the operator's command line is the shell",
    "workspace.token_unknown": "no token {id!r} of yours (it may be revoked already)",
    # Sharing a member's dataset or model read-only (engine.core.belongings).
    "workspace.share_unknown": "{name!r} is no account of this studio (see `studio users list`; * shares with "
    "everyone)",
    "workspace.share_no_team": "sharing is for team mode: this workspace has no accounts, and everything in it is "
    "everyone's who reaches the studio",
    "workspace.share_already": "{what} is shared with the whole team already: what the operator or an admin adds is "
    "everyone's",
    "workspace.share_not_yours": "{what} is {owner}'s: only they (or an admin) share it",
    "workspace.share_no_dataset": "no dataset {name!r} of yours is registered in {path}",
    "workspace.share_no_model": "{path} is no model folder of yours in the workspace's models folder",
    # Team mode's accounts (engine.core.accounts): said by `studio users`.
    "workspace.accounts_unreadable": "the accounts file {path} cannot be read ({error}): fix or remove it",
    "workspace.account_bad_name": "{name!r} is not an account name: 1 to 32 letters, digits, _ . -, starting with a "
    "letter or digit",
    "workspace.account_exists": "account {name!r} exists already: change its password with `studio users passwd`",
    "workspace.account_unknown": "there is no account {name!r}: `studio users list` shows them",
    "workspace.account_short_password": "the password is too short: at least {n} characters",
    "workspace.account_bad_quota": "a quota is a number of runs or of GB, 0 for no limit: got {value}",
    "workspace.account_last_admin": "{name!r} is the last admin: make another admin first, or remove the members "
    "first",
    "workspace.account_mismatch": "the two passwords differ: nothing changed",
}


def message(key: str, /, **params: Any) -> Message:
    return make(MESSAGES, key, **params)
