"""The audit log (issue 46 item 5): every start, stop, rename, delete and job is recorded with who did it and how,
append-only and private to the workspace's owner; members read nothing of it, by the engine or the page; `studio
audit` prints it."""

from __future__ import annotations

import json
import stat
import sys

import pytest

from engine.cli import main as studio
from engine.core import accounts, audit
from engine.runs import records
from engine.runs import registry as runs
from tests.helpers import demo_spec


@pytest.fixture()
def home(run_registry):
    yield run_registry
    accounts.set_viewer_source(None)


def test_each_action_is_recorded_with_who_and_how(home, demo_paths, capsys):
    spec = demo_spec(demo_paths, train={"max_steps": 1})
    rid = runs.submit(spec, name="first", start=False)
    runs.rename(rid, "renamed")
    runs.stop(rid)
    runs.delete(rid)
    job = runs.submit_command([sys.executable, "-c", "pass"], name="a job", tags=["export"], start=False)
    runs.stop(job)
    done = [(e["who"], e["via"], e["action"], e["target"]) for e in reversed(audit.entries())]
    assert done == [
        ("operator", "studio", "start", rid),
        ("operator", "studio", "rename", rid),
        ("operator", "studio", "stop", rid),
        ("operator", "studio", "delete", rid),
        ("operator", "studio", "job", job),
        ("operator", "studio", "stop", job),
    ]
    first = audit.path().read_bytes()
    assert stat.S_IMODE(audit.path().stat().st_mode) == 0o600
    assert json.loads(first.splitlines()[0])["detail"] == {"name": "first"}

    # the command line acts for the person at the shell
    assert studio(["runs", "delete", job, "--yes"]) == 0
    after = audit.path().read_bytes()
    assert after.startswith(first), "earlier entries are never rewritten"
    last = json.loads(after.splitlines()[-1])
    assert (last["who"], last["via"], last["action"], last["target"]) == ("operator", "shell", "delete", job)
    capsys.readouterr()
    assert studio(["audit", "--action", "delete", "--json"]) == 0
    printed = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [(e["target"], e["via"]) for e in printed] == [(rid, "studio"), (job, "shell")]


def test_members_act_under_their_name_and_read_nothing(home, demo_paths):
    from studio.tabs import runs_audit

    accounts.add("ann", "correct horse", admin=True)
    accounts.add("bob", "battery staple")
    who = {"name": "bob"}
    accounts.set_viewer_source(lambda: who["name"])
    rid = runs.submit(demo_spec(demo_paths, train={"max_steps": 1}), name="bob's", start=False)
    runs.stop(rid)
    assert audit.entries() == []  # bob is a member
    shown, note = runs_audit.table("zh")
    assert shown["data"] == [] and note == "审计日志仅对管理员显示。"
    with pytest.raises(records.RunsError):
        runs.stop("nope-" + rid)  # an unknown run: refused, and nothing recorded for it
    who["name"] = None
    with accounts.acting_for("bob"):  # his own command line, with his personal token (studio.member_api)
        api_run = runs.submit(demo_spec(demo_paths, train={"max_steps": 1}), name="bob's api", start=False)
    who["name"] = "ann"  # an admin reads every entry, bob's under his name
    said = [(e["who"], e["via"], e["action"]) for e in reversed(audit.entries())]
    assert said == [("bob", "studio", "start"), ("bob", "studio", "stop"), ("bob", "api", "start")]
    assert audit.entries(limit=1)[0]["target"] == api_run
    shown, note = runs_audit.table("en")
    assert [r[1:4] for r in shown["data"]][1:] == [["bob", "studio", "stopped"], ["bob", "studio", "started a run"]]
    assert shown["headers"][0] == "time" and note == ""


def test_logins_are_recorded_without_the_password(home):
    from studio import team

    accounts.add("ann", "correct horse")
    assert team.login("ann", "correct horse") and not team.login("ann", "wrong horse!")
    assert not team.login("nobody", "correct horse")
    said = [(e["who"], e["action"]) for e in reversed(audit.entries())]
    assert said == [("ann", "login"), ("ann", "login-failed"), ("nobody", "login-failed")]
    assert "horse" not in audit.path().read_text()
