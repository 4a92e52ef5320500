"""Fair shares of one studio (issue 46 item 3): users take turns for the slots, first in, first out within a user;
a member's own limits (runs at once, runs waiting); and a member's run never writes into another member's run
folder. The order is checked on the real scheduler, with real command runs started by their detached wrappers."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from engine.core import accounts, audit
from engine.runs import fair, records, scheduler, store, submit_checks
from engine.runs import registry as runs
from engine.spec.schema import SpecError
from tests import helpers
from tests.helpers import demo_spec


@pytest.fixture()
def team(run_registry):
    accounts.add("ann", "correct horse")
    accounts.add("bob", "battery staple")
    who = {"name": "ann"}
    accounts.set_viewer_source(lambda: who["name"])
    yield who
    accounts.set_viewer_source(None)


def _queued(owner: str, created: float) -> SimpleNamespace:
    return SimpleNamespace(owner=owner, created=created, id=f"{owner}{created}")


def test_users_take_turns_first_in_first_out_within_each():
    a1, a2, a3, b1 = _queued("ann", 1), _queued("ann", 2), _queued("ann", 3), _queued("bob", 4)
    assert fair.order([a1, a2, a3, b1], {}) == [a1, b1, a2, a3]  # nobody has run yet: the oldest first, then turns
    assert fair.order([a2, a3, b1], {"ann": 10.0}) == [b1, a2, a3]  # ann's run just started: bob's turn
    assert fair.order([a2, a3, b1], {"ann": 10.0, "bob": 11.0}) == [a2, b1, a3]
    op = [_queued("", 1), _queued("", 2), _queued("", 3)]
    assert fair.order(op, {"": 5.0}) == op  # single-user mode: the queue's own order


def _command(who: dict, name: str, owner: str) -> str:
    who["name"] = owner
    return runs.submit_command([sys.executable, "-c", "pass"], name=name, start=False)


def test_one_slot_goes_ann_bob_ann_ann(team):
    """Ann queues three runs, then Bob one, with one CPU slot: they start A, B, A, A."""
    ids = [_command(team, n, o) for n, o in (("a1", "ann"), ("a2", "ann"), ("a3", "ann"), ("b1", "bob"))]
    team["name"] = None  # the operator's view: every run
    runs.schedule()
    done = helpers.wait_for(
        lambda: all(store.get(i).status == "completed" for i in ids) and [store.get(i) for i in ids], timeout=120
    )
    started = [r.name for r in sorted(done, key=lambda r: r.started)]
    assert started == ["a1", "b1", "a2", "a3"], started


def test_a_members_limits(team, monkeypatch):
    accounts.set_quota("ann", max_running=1)
    accounts.set_quota("bob", max_queued=2)
    monkeypatch.setenv("STUDIO_CPU_SLOTS", "2")
    team["name"] = "ann"
    long = [sys.executable, "-c", "import time; time.sleep(60)"]
    a1 = runs.submit_command(long, name="a1", start=False)
    a2 = runs.submit_command(long, name="a2", start=False)
    team["name"] = "bob"
    b1 = runs.submit_command(long, name="b1", start=False)
    b2 = runs.submit_command(long, name="b2", start=False)
    with pytest.raises(records.RunsError, match="bob has 2 runs waiting in the queue"):
        runs.submit_command(long, name="b3", start=False)
    team["name"] = None
    runs.schedule()
    status = {r: store.get(r).status for r in (a1, a2, b1, b2)}
    # two slots: ann's second waits for her own limit, so bob's two take the second slot... one of them
    assert status[a1] == "running" and status[a2] == "queued", status
    assert sorted(status[b] for b in (b1, b2)) == ["queued", "running"], status
    from studio.tabs.train_actions import own_limit

    assert own_limit(store.get(a2)) == {"n": 1, "runs": a1}
    assert own_limit(store.get(b2 if status[b2] == "queued" else b1)) is None  # bob waits for a slot, not a limit
    for r in (a1, a2, b1, b2):
        runs.stop(r, grace_s=1)


def test_a_member_cannot_write_into_another_members_run_folder(team, demo_paths):
    team["name"] = "ann"
    theirs = runs.submit(demo_spec(demo_paths, output={"output_dir": "outs/ann"}), name="ann's", start=False)
    runs.stop(theirs)
    team["name"] = "bob"
    with pytest.raises(records.RunsError):
        runs.get(theirs)  # bob does not see ann's run...
    spec = demo_spec(demo_paths, output={"output_dir": "outs/ann"})
    problems = submit_checks.output_problems(spec)
    assert problems and problems[0][0] == "output.output_dir", problems  # ...and may not write into its folder
    with pytest.raises(SpecError, match="output.output_dir"):
        runs.submit(spec, name="bob's", start=False)


def test_a_members_disk_quota_counts_their_runs_and_jobs_outputs_once(team, tmp_path):
    """`studio users quota ann --max-disk-gb`: what ann's runs and jobs hold (run folders, an export's --out folder),
    each file once, an independent sum of the bytes written; at the limit her next run is refused naming it, bob's
    runs are not counted for her, and deleting what she no longer needs lets her start again."""
    from engine.core import workspace

    team["name"] = "ann"
    job = runs.submit_command([sys.executable, "-c", "pass"], name="export", start=False)
    out = workspace.home() / "exports" / "ann-export"
    out.mkdir(parents=True)
    (out / "model.gguf").write_bytes(b"\0" * 3_000_000)
    rec = store.get(job)
    store.update(job, command=[*rec.command, "--out", str(out)])
    (Path(rec.run_dir) / "train.log").write_bytes(b"x" * 1_000_000)
    team["name"] = "bob"
    theirs = runs.submit_command([sys.executable, "-c", "pass"], name="bob's", start=False)
    (Path(store.get(theirs).run_dir) / "big.bin").write_bytes(b"\0" * 5_000_000)
    expected = sum(f.stat().st_size for d in (Path(rec.run_dir), out) for f in d.rglob("*") if f.is_file())
    assert submit_checks.used_bytes("ann") == expected and 4_000_000 <= expected < 4_100_000
    accounts.set_quota("ann", max_disk_gb=0.004)  # 4 MB: she is over it
    team["name"] = "ann"
    with pytest.raises(records.RunsError, match=r"ann's runs and jobs hold 4\.0 MB of the workspace, their limit is "):
        runs.submit_command([sys.executable, "-c", "pass"], name="one more", start=False)
    team["name"] = "bob"  # bob has no limit of his own, and ann's does not touch him
    runs.stop(runs.submit_command([sys.executable, "-c", "pass"], name="bob's second", start=False))
    team["name"] = "ann"
    (out / "model.gguf").unlink()
    runs.stop(runs.submit_command([sys.executable, "-c", "pass"], name="after cleaning", start=False))
    assert "0.004 GB on disk" in _quota_line("ann")


def _quota_line(name: str) -> str:
    import contextlib
    import io

    said = io.StringIO()
    with contextlib.redirect_stdout(said):
        assert accounts.cli(["quota", name]) == 0
    return said.getvalue()


def test_an_admin_moves_a_queued_run_to_the_front_and_a_member_may_not(team):
    """One slot, ann's a1 a2 a3 and bob's b1 queued: the turns would start a1, b1, a2, a3. An admin moves a3 to the
    front; the real scheduler starts a3 first (ann's turn), then bob's, then ann's others; the queue's order and a
    run's position say the same beforehand.
    Bob (a member) moving his run is refused naming who may, and so is moving a run that is not queued."""
    from studio.tabs.train_actions import queue_position

    accounts.add("root", "root's password", admin=True)
    ids = [_command(team, n, o) for n, o in (("a1", "ann"), ("a2", "ann"), ("a3", "ann"), ("b1", "bob"))]
    team["name"] = "bob"
    with pytest.raises(records.RunsError, match="only the operator or an admin moves a run in the queue"):
        runs.move_first(ids[3])
    with pytest.raises(records.RunsError, match="no run with id"):
        runs.move_first(ids[2])  # ann's run is no run of his
    team["name"] = "root"
    assert [r.name for r in scheduler.queue_order()] == ["a1", "b1", "a2", "a3"]
    runs.move_first(ids[2])
    assert [r.name for r in scheduler.queue_order()] == ["a3", "b1", "a1", "a2"] and queue_position(ids[2]) == 1
    assert [e["action"] for e in audit.entries(10)][0] == "move"
    team["name"] = None
    runs.schedule()
    done = helpers.wait_for(
        lambda: all(store.get(i).status == "completed" for i in ids) and [store.get(i) for i in ids], timeout=120
    )
    assert [r.name for r in sorted(done, key=lambda r: r.started)] == ["a3", "b1", "a1", "a2"]
    with pytest.raises(records.RunsError, match="is completed, not queued"):
        runs.move_first(ids[0])
