"""Team mode: a member's personal tokens for the command line against a shared studio (issue 46 item 6).

Light: stdlib. A member creates a token on the page (the Runs tab's *Command-line tokens*), sees it once, and sets it
as ``STUDIO_TOKEN`` beside ``STUDIO_SERVER`` (``engine.commands.remote_cli``); the studio's HTTP API
(``studio.member_api``) acts for the token's account, under the same ownership rules as the page. Stored in
``$STUDIO_HOME/api_tokens.json`` (file mode 600, written whole and renamed into place): per token its id, account,
label, creation time and the SHA-256 of the token, never the token itself. A token of an account that no longer
exists answers nothing; a member revokes their own tokens, an admin or the operator anyone's.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from pathlib import Path

from engine.core import accounts, audit, workspace
from engine.core.messages import message

FILE = "api_tokens.json"
PREFIX = "st_"


class TokenError(ValueError):
    """A token operation that cannot be done; the message names the token or the rule."""


def _path() -> Path:
    return workspace.home() / FILE


def _load() -> list[dict]:
    try:
        data = json.loads(_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [t for t in data.get("tokens", []) if isinstance(t, dict)] if isinstance(data, dict) else []


def _save(tokens: list[dict]) -> None:
    workspace.write_private_json(_path(), {"tokens": tokens})


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def create(label: str = "") -> tuple[str, str]:
    """A new token of the asking account: (its id, the token, shown this once)."""
    owner = accounts.owner_of_new()
    if not owner:
        raise TokenError(message("workspace.token_operator"))
    token = PREFIX + secrets.token_urlsafe(32)
    token_id = secrets.token_hex(4)
    label = " ".join(str(label or "").split())[:60]
    entry = {"id": token_id, "owner": owner, "label": label, "created": time.time(), "sha256": _digest(token)}
    _save([*_load(), entry])
    audit.record("token", token_id, label=label)
    return token_id, token


def listed() -> list[dict]:
    """The asking account's tokens (id, label, created), never their digests; every token for the operator/admin."""
    who = accounts.viewer()
    return [
        {"id": t["id"], "owner": t.get("owner", ""), "label": t.get("label", ""), "created": t.get("created", 0)}
        for t in _load()
        if who is None or t.get("owner") == who.name
    ]


def revoke(token_id: str) -> None:
    """Revoke a token: the asking account's own, or anyone's for an admin or the operator."""
    tokens = _load()
    who = accounts.viewer()
    found = [t for t in tokens if t.get("id") == str(token_id).strip() and (who is None or t.get("owner") == who.name)]
    if not found:
        raise TokenError(message("workspace.token_unknown", id=token_id))
    _save([t for t in tokens if t not in found])
    audit.record("revoke-token", str(token_id))


def owner_of(token: str) -> str | None:
    """The account a presented token acts for; None for an unknown or revoked token or a removed account."""
    if not token or not token.startswith(PREFIX):
        return None
    digest = _digest(token)
    for t in _load():
        if hmac.compare_digest(str(t.get("sha256", "")), digest):
            owner = str(t.get("owner") or "")
            return owner if owner and owner in accounts.load() else None
    return None
