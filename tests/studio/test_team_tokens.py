"""Team mode's personal tokens on the page (issue 46 item 6): the Runs tab's *Command-line tokens* makes a token shown
once, lists the account's tokens by id and label (never the token), revokes its own; another member can neither see
nor revoke them; the stored file holds digests only (mode 600); a token of a removed account acts for nobody."""

from __future__ import annotations

import json
import stat

import pytest

from engine.core import accounts, api_tokens, workspace


@pytest.fixture()
def team(tmp_path, monkeypatch):
    monkeypatch.setenv("STUDIO_HOME", str(tmp_path))
    accounts.add("ann", "correct horse")
    accounts.add("bob", "battery staple")
    who = {"name": "ann"}
    accounts.set_viewer_source(lambda: who["name"])
    yield who
    accounts.set_viewer_source(None)


def test_tokens_are_shown_once_listed_by_id_and_revoked_by_their_owner(team):
    from studio.tabs import runs_tokens

    table, said, token = runs_tokens.create("laptop")
    assert token.startswith(api_tokens.PREFIX) and said.startswith("✅") and "\n" not in said
    [[token_id, label, _created]] = table["data"]
    assert label == "laptop" and token not in json.dumps([table, said, runs_tokens.listed()])
    assert api_tokens.owner_of(token) == "ann" and api_tokens.owner_of(token + "x") is None
    stored = workspace.home() / api_tokens.FILE
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600 and token not in stored.read_text()
    team["name"] = "bob"
    assert runs_tokens.listed()[0]["data"] == []
    _, said = runs_tokens.revoke(token_id)
    assert said.startswith("❌") and token_id in said and api_tokens.owner_of(token) == "ann"
    team["name"] = None  # the operator: the shell is their command line
    assert "server's shell" in runs_tokens.listed()[1] and runs_tokens.create("x")[1].startswith("❌")
    team["name"] = "ann"
    table, said = runs_tokens.revoke(token_id)
    assert said.startswith("✅") and table["data"] == [] and api_tokens.owner_of(token) is None
    _, _, again = runs_tokens.create("")
    accounts.remove("ann")
    assert api_tokens.owner_of(again) is None  # the account is gone: its tokens act for nobody
