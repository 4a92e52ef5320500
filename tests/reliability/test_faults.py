"""Faults: the trainer SIGKILLed at five points of one run, each time resumed from what the last one left; a corrupt
newest checkpoint; torn event lines; an output folder that cannot be written; a disk that fills.

Everything runs the real detached launch (runs.submit -> engine.runs.runner -> engine.trainer.train) on
the demo model, CPU, one thread. The studio-killed-mid-run case lives in tests/engine/test_runs_train.py
(test_studio_killed_mid_run_then_a_new_studio_sees_it_completed) and is not repeated here.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
from pathlib import Path

import psutil
import pytest
import yaml

from engine.core import events
from engine.runs import records, store
from engine.runs import registry as runs
from engine.trainer.train import checkpoint_ok
from tests import helpers


@pytest.fixture
def home(demo_paths, run_registry) -> Path:
    """A private registry (demo_paths first: the demo model stays in the session workspace where it was built)."""
    return run_registry


def spec_data(demo_paths, steps: int, save_steps: int, **output) -> dict:
    data = yaml.safe_load(Path(demo_paths["example_spec"]).read_text())
    data["train"].update(max_steps=steps, logging_steps=1, save_steps=save_steps, save_total_limit=20)
    data["data"]["max_samples"] = 64
    data["output"]["report_to"] = ["none"]
    data["output"].update(output)
    return data


wait_for = functools.partial(helpers.wait_for, timeout=150.0, every=0.05)


def run_events(rid: str) -> list[dict]:
    return events.read_all(Path(runs.get(rid, refresh_status=False).run_dir) / "events.jsonl")


def trainer_proc(rid: str) -> psutil.Process | None:
    for p in store.run_processes(rid):
        try:
            cmd = " ".join(p.cmdline())
        except psutil.Error:
            continue
        if "engine.trainer.train" in cmd and "accelerate" not in cmd:
            return p
    return None


def kill_trainer(rid: str, proc: psutil.Process) -> records.RunRecord:
    proc.send_signal(signal.SIGKILL)
    return wait_for(lambda: runs.get(rid).status != "running" and runs.get(rid), timeout=60)


def ckpts(out: Path) -> list[Path]:
    return sorted((out / "checkpoints").glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[-1]))


def first_logged_step(rid: str) -> int | None:
    steps = [e["step"] for e in run_events(rid) if e["type"] == "log" and "loss" in e["payload"]]
    return min(steps) if steps else None


def assert_killed(tally, point: str, rec: records.RunRecord) -> None:
    last = events.last_event(Path(rec.run_dir) / "events.jsonl")
    ok = (
        rec.status == "failed"
        and "SIGKILL" in rec.reason
        and last is not None
        and last["type"] == "failed"
        and last["payload"].get("cause") == "killed"
        and (Path(rec.run_dir) / "train.log").is_file()
        and (Path(rec.run_dir) / "spec.yaml").is_file()
    )
    tally.check(f"faults::kill@{point} -> failed with reason", ok, f"{rec.status} {rec.reason[:300]!r} {last}")


def test_sigkill_at_five_points_then_resume_each_time(home, demo_paths, tally):
    """A -> kill before data_ready; B (resumed) -> kill at run_started; C -> kill mid-step; D -> kill while a
    checkpoint is being written; E -> kill right after a checkpoint event; F -> newest checkpoint corrupted,
    resume falls back to the previous good one, says so in train.log and completes. Each resumed run is its own run
    (own folder) that starts from its parent's newest complete checkpoint, or the one its parent started from."""
    max_steps, every = 10, 2
    rid = runs.submit(spec_data(demo_paths, max_steps, every), name="victim")

    def out() -> Path:  # the current run's output folder: its own
        return Path(runs.get(rid, refresh_status=False).output_dir)

    # A: as soon as the trainer process exists, before data_ready (start-up / data preparation).
    proc = wait_for(lambda: trainer_proc(rid), timeout=60, every=0.02)
    assert "data_ready" not in [e["type"] for e in run_events(rid)]
    assert_killed(tally, "data-prep", kill_trainer(rid, proc))
    assert ckpts(out()) == []

    # B: the resumed run, killed the moment it reports run_started (model loaded, no step taken).
    parent, rid = rid, runs.resume(rid)
    tally.check(
        "faults::resumed run has its own folder",
        out() == Path(runs.get(rid).run_dir) != Path(runs.get(parent).run_dir),
        f"{out()}",
    )
    wait_for(lambda: "run_started" in [e["type"] for e in run_events(rid)], every=0.02)
    assert_killed(tally, "run-started", kill_trainer(rid, trainer_proc(rid)))
    assert ckpts(out()) == []

    # C: mid-step: one step after a checkpoint was written.
    rid = runs.resume(rid)
    wait_for(lambda: any(e["type"] == "log" and e["step"] == every + 1 for e in run_events(rid)), every=0.02)
    tally.check(
        "faults::resume with no checkpoint yet starts from scratch, says so",
        "no checkpoint yet" in (Path(runs.get(rid).run_dir) / "train.log").read_text(),
        "",
    )
    proc = trainer_proc(rid)
    assert_killed(tally, "mid-step", kill_trainer(rid, proc))
    good = [c for c in ckpts(out()) if checkpoint_ok(c)]
    # On a busy machine the kill can land after the trainer went on into the next save (step 4): then the newest
    # folder is a partial one, which must read as such, with a loadable one before it (D covers that fall-back).
    after = ckpts(out())[ckpts(out()).index(good[-1]) + 1 :] if good else ckpts(out())
    tally.check(
        "faults::kill@mid-step -> last complete checkpoint loadable, any newer one seen as partial",
        bool(good) and all(not checkpoint_ok(c) for c in after) and len(after) <= 1,
        f"{ckpts(out())}",
    )
    tally.note("faults::kill@mid-step", "landed mid-save of the next checkpoint" if after else "landed between saves")
    resume_from = int(good[-1].name.split("-")[-1])

    # D: while the next checkpoint folder is being written (killed as soon as it appears).
    rid = runs.resume(rid)
    tally.check(
        "faults::resume after mid-step continues from the checkpoint",
        wait_for(lambda: first_logged_step(rid)) == resume_from + 1,
        f"first step {first_logged_step(rid)}",
    )
    target = out() / "checkpoints" / f"checkpoint-{resume_from + every}"
    proc = wait_for(lambda: trainer_proc(rid), every=0.02)
    wait_for(lambda: target.exists(), every=0.002)
    rec = kill_trainer(rid, proc)
    assert_killed(tally, "checkpoint-save", rec)
    torn = not checkpoint_ok(target)
    tally.note(
        "faults::kill@checkpoint-save -> failed with reason",
        "kill landed mid-save (partial folder)" if torn else "the save completed before the kill landed",
    )
    good = [c for c in ckpts(out()) if checkpoint_ok(c)]  # none when the save was torn: D's start point stays
    resume_from = int(good[-1].name.split("-")[-1]) if good else resume_from

    # E: right after a checkpoint event of the resumed run.
    rid = runs.resume(rid)

    def log() -> str:
        return (Path(runs.get(rid, refresh_status=False).run_dir) / "train.log").read_text()

    if torn:
        wait_for(lambda: "falling back" in log())
        tally.check(
            "faults::partial checkpoint -> resume falls back and says so",
            f"checkpoint-{resume_from + every}" in log(),
            log()[-2000:],
        )
    tally.check(
        "faults::resume after a kill during save continues from the last good checkpoint",
        wait_for(lambda: first_logged_step(rid)) == resume_from + 1,
        f"first step {first_logged_step(rid)}",
    )
    proc = trainer_proc(rid)
    ev = wait_for(lambda: next((e for e in run_events(rid) if e["type"] == "checkpoint"), None), every=0.01)
    assert_killed(tally, "after-save", kill_trainer(rid, proc))
    saved = Path(ev["payload"]["path"])
    tally.check("faults::kill@after-save -> that checkpoint loadable", checkpoint_ok(saved), str(saved))

    # F: corrupt the newest complete checkpoint (truncated weights) -> fall back to the previous good one, loudly: an
    # older one of E's, else the one E started from. E's kill can land once the next save has begun (CI, 2 busy
    # cores: checkpoint-8 held only README.md): that torn folder is newer but has no weights to corrupt, and resume
    # passes it over as well.
    def step_of(path: Path) -> int:
        return int(path.name.split("-")[-1])

    started = runs.get(rid).load_spec().train.resume_from
    good = [c for c in [*ckpts(out()), Path(started)] if checkpoint_ok(c)]
    newest = max(good, key=step_of)
    previous = max((c for c in good if step_of(c) < step_of(newest)), key=step_of)
    weights = next(newest.glob("*.safetensors"))
    weights.write_bytes(weights.read_bytes()[:100])
    rid = runs.resume(rid)
    rec = wait_for(lambda: runs.get(rid).status != "running" and runs.get(rid), timeout=240)
    text = (Path(rec.run_dir) / "train.log").read_text()
    tally.check(
        "faults::corrupt newest checkpoint -> fallback said in train.log",
        f"checkpoint {newest} is incomplete or corrupt; falling back" in text,
        text[-2000:],
    )
    tally.check(
        "faults::corrupt newest checkpoint -> resumes from the previous good one",
        first_logged_step(rid) == int(previous.name.split("-")[-1]) + 1,
        f"first {first_logged_step(rid)}",
    )
    tally.check(
        "faults::resumed run completes after five kills",
        rec.status == "completed" and (out() / "adapter").is_dir(),
        rec.reason[-2000:],
    )
    last = events.last_event(Path(rec.run_dir) / "events.jsonl")
    assert last["type"] == "finished" and last["step"] == max_steps
    check_damages(tally, out(), spec_data(demo_paths, max_steps, every))


def check_damages(tally, out: Path, spec_dict: dict) -> None:
    """Truncated / missing trainer_state.json, truncated / missing weights, missing optimizer: each makes a copy of
    the newest checkpoint unloadable (for the trainer and for the registry's light check that picks a resumed run's
    checkpoint), and resume_from='last' falls back past it."""
    import shutil

    from engine.runs.checkpoints import complete
    from engine.spec.schema import parse_spec
    from engine.trainer.train import resolve_resume

    newest = ckpts(out)[-1]
    damages = {
        "trainer_state.json truncated": lambda d: (d / "trainer_state.json").write_text(
            (d / "trainer_state.json").read_text()[:20]
        ),
        "trainer_state.json missing": lambda d: (d / "trainer_state.json").unlink(),
        "weights truncated": lambda d: next(d.glob("*.safetensors")).write_bytes(b"\x00" * 7),
        "weights missing": lambda d: next(d.glob("*.safetensors")).unlink(),
        "optimizer missing": lambda d: (d / "optimizer.pt").unlink(),
    }
    spec = parse_spec({**spec_dict, "train": {**spec_dict["train"], "resume_from": "last"}})
    for what, damage in damages.items():
        copy = out / "checkpoints" / f"checkpoint-{int(newest.name.split('-')[-1]) + 1000}"
        shutil.copytree(newest, copy)
        damage(copy)
        ok = not checkpoint_ok(copy) and not complete(copy) and resolve_resume(spec, out) == str(newest)
        tally.check(f"faults::checkpoint damage: {what} -> fallback", ok, what)
        shutil.rmtree(copy)


def test_an_event_after_a_torn_line_is_not_lost(tmp_path, tally):
    """A full disk cuts a write short; the wrapper's failed event, appended once there is room, must be read: it is
    not glued onto the torn line (which would make both one unreadable line)."""
    path = tmp_path / "events.jsonl"
    events.append_event(path, "log", 5, loss=1.0)
    with open(path, "ab") as fh:
        fh.write(b'{"type":"log","ts":1.0,"step":6,"payload":{"loss":7.1')
    events.append_event(path, "failed", None, cause="disk", error="disk full")
    last = events.last_event(path, events.TERMINAL_TYPES)
    evs, _ = events.read_events(path, 0)
    tally.check(
        "faults::failed event after a torn line is read",
        last is not None and last["payload"]["cause"] == "disk" and [e["type"] for e in evs] == ["log", "failed"],
        path.read_text(),
    )


def test_torn_last_event_line_is_tolerated(tmp_path, tally):
    """A writer killed mid-append leaves a partial last line (and sometimes a torn line mid-file)."""
    path = tmp_path / "events.jsonl"
    events.append_event(path, "run_started", 0, total_steps=3)
    events.append_event(path, "log", 1, loss=1.0)
    whole = path.read_bytes()
    with open(path, "ab") as fh:
        fh.write(b'{"type": "log", "ts": 1.0, "step": 2, "payload": {"lo')
    evs, off = events.read_events(path, 0)
    tally.check(
        "faults::torn last line: read_events",
        [e["type"] for e in evs] == ["run_started", "log"] and off == len(whole),
        str(evs),
    )
    tally.check("faults::torn last line: last_event", events.last_event(path)["step"] == 1, "")
    with open(path, "ab") as fh:  # the writer comes back: the torn line is completed
        fh.write(b'ss": 0.5}}\n')
    more, _ = events.read_events(path, off)
    tally.check("faults::torn line completed later is read whole", [e["step"] for e in more] == [2], str(more))
    # junk in the middle (a crash followed by more appends) and binary garbage
    with open(path, "ab") as fh:
        fh.write(b'{"type": "lo\n\xff\xfe garbage\n[1, 2]\n{"no_type": 1}\n')
    events.append_event(path, "finished", 3)
    tally.check(
        "faults::junk lines mid-file skipped", [e["type"] for e in events.read_all(path)][-1] == "finished", ""
    )
    from engine.runs import metrics

    if hasattr(metrics, "read_samples"):
        (tmp_path / "metrics.jsonl").write_bytes(b'{"ts": 1, "cpu": 2}\n{"ts": 2, "cp')
        tally.check(
            "faults::torn metrics line: metrics.read_samples",
            len(metrics.read_samples(tmp_path / "metrics.jsonl")) == 1,
            "",
        )


def test_output_folder_that_cannot_be_written(home, demo_paths, tally, tmp_path_factory, monkeypatch):
    """output_dir under a regular file, or in a folder without write permission: submit refuses with a problem naming
    output.output_dir and the path; nothing is queued. (Root ignores permission bits, so that case needs non-root.)
    The folders are outside the workspace, in a root the test allows (STUDIO_OUTPUT_ROOTS)."""
    from engine.spec.schema import SpecError

    tmp_path = tmp_path_factory.mktemp("outside")
    monkeypatch.setenv("STUDIO_OUTPUT_ROOTS", str(tmp_path))

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    targets = [blocker / "out"]
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        targets.append(locked / "out")
    for target in targets:
        with pytest.raises(SpecError) as info:
            runs.submit(spec_data(demo_paths, 2, 100, output_dir=str(target)), name="unwritable")
        ok = any(p == "output.output_dir" and str(target.parent) in m for p, m in info.value.problems)
        tally.check("faults::unwritable output -> clear error at submit", ok, str(info.value.problems))
    assert runs.list_runs(refresh_status=False) == []


def _tmpfs(path: Path, size: str) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return False
    return (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=False, capture_output=True
        ).returncode
        == 0
    )


def test_disk_fills_during_training(home, demo_paths, tally, tmp_path_factory, monkeypatch):
    """Output on a 3 MiB tmpfs: the first checkpoint (adapter + optimizer) does not fit -> failed with a clear
    'No space left' cause; the run folder (on the real disk) keeps spec, log, events and record. The tmpfs is outside
    the workspace, in a root the test allows (STUDIO_OUTPUT_ROOTS)."""
    mnt = tmp_path_factory.mktemp("outside") / "small-disk"
    monkeypatch.setenv("STUDIO_OUTPUT_ROOTS", str(mnt.parent))
    if not _tmpfs(mnt, "3m"):
        pytest.skip("cannot mount a size-limited tmpfs here (not root, or no mount permission)")
    try:
        rid = runs.submit(spec_data(demo_paths, 6, 2, output_dir=str(mnt / "out")), name="full-disk")
        rec = wait_for(lambda: runs.get(rid).status != "running" and runs.get(rid), timeout=180)
        rdir = Path(rec.run_dir)
        last = events.last_event(rdir / "events.jsonl")
        ok = (
            rec.status == "failed"
            and ("No space left" in rec.reason or "ENOSPC" in rec.reason or "disk" in rec.reason.lower())
            and last["type"] == "failed"
            and all(
                (rdir / f).is_file() for f in ("spec.yaml", "train.log", "events.jsonl", "exit.json", "launch.json")
            )
        )
        tally.check(
            "faults::disk full -> clear error, record and logs intact",
            ok,
            f"{rec.status}: {rec.reason[:800]} / {last}",
        )
        if (rdir / "record.json").is_file():
            json.loads((rdir / "record.json").read_text())
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False, capture_output=True)
