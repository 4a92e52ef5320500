"""Team mode's accounts (engine.core.accounts) and the runs each caller may see (engine.runs.owners)."""

from __future__ import annotations

import stat

import pytest

from engine.core import accounts
from engine.runs import owners, store
from engine.runs import records as records_mod
from engine.runs.records import RunRecord


@pytest.fixture()
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("STUDIO_HOME", str(tmp_path))
    yield tmp_path
    accounts.set_viewer_source(None)


def test_accounts_hash_verify_mode_and_remove(home):
    assert not accounts.team_mode()
    accounts.add("ann", "correct horse", admin=True)
    accounts.add("bob", "battery staple")
    assert stat.S_IMODE(accounts.path().stat().st_mode) == 0o600
    text = accounts.path().read_text()
    assert "correct horse" not in text and "$argon2id$" in text
    assert accounts.verify("ann", "correct horse") and not accounts.verify("ann", "battery staple")
    assert not accounts.verify("nobody", "correct horse")
    with pytest.raises(accounts.AccountError, match="exists already"):
        accounts.add("bob", "whatever123")
    with pytest.raises(accounts.AccountError, match="too short"):
        accounts.add("cy", "short")
    with pytest.raises(accounts.AccountError, match="last admin"):
        accounts.remove("ann")
    accounts.set_password("bob", "new password")
    assert accounts.verify("bob", "new password") and not accounts.verify("bob", "battery staple")
    assert stat.S_IMODE(accounts.path().stat().st_mode) == 0o600
    accounts.remove("bob")
    assert not accounts.verify("bob", "new password") and set(accounts.load()) == {"ann"}
    with pytest.raises(accounts.AccountError, match="no account 'bob'"):
        accounts.remove("bob")


def _run(home, run_id: str) -> str:
    store._connect().close()  # the registry before the folder (a folder alone is a lost run, rebuilt)
    rdir = home / "runs" / run_id
    rdir.mkdir(parents=True)
    return store._insert(
        RunRecord(
            id=run_id,
            name=run_id,
            status="completed",
            created=1.0,
            run_dir=str(rdir),
            output_dir=str(rdir),
            kind="command",
            command=["true"],
        )
    )


def test_members_see_only_their_runs(home):
    _run(home, "old")  # before team mode: the operator's
    accounts.add("ann", "correct horse", admin=True)
    accounts.add("bob", "battery staple")
    accounts.add("eve", "eve's password")
    who = {"name": None}
    accounts.set_viewer_source(lambda: who["name"])
    for name in ("bob", "eve"):
        who["name"] = name
        _run(home, f"{name}-run")
    assert store.get("bob-run").owner == "bob" and store.get("old").owner == ""
    who["name"] = "bob"
    assert [r.id for r in owners.list_runs()] == ["bob-run"]
    with pytest.raises(records_mod.RunsError, match="eve-run"):
        owners.get("eve-run")
    from engine.runs import registry

    with pytest.raises(records_mod.RunsError):
        registry.delete("eve-run")
    with pytest.raises(records_mod.RunsError):
        registry.rename("old", "mine now")
    assert store.get("eve-run").name == "eve-run"
    who["name"] = "ann"  # an admin, like the shell, sees every run
    assert {r.id for r in owners.list_runs()} == {"old", "bob-run", "eve-run"}
    who["name"] = None
    assert {r.id for r in registry.list_runs()} == {"old", "bob-run", "eve-run"}
