"""What the Train tab says about runs as they move: Start of a spec already queued or running, a queued run's place,
Stop of a running or an ended run, the final stop report, the ETA of an ended run. No browser, no trainer: records
and events written by hand."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from engine.core import events as events_mod
from engine.runs import records, store
from engine.spec import schema as spec_mod
from studio import monitor, monitor_text
from studio.tabs import runs as runs_tab
from studio.tabs import train_actions

SPEC = {"model": {"name_or_path": "Qwen/Qwen2.5-0.5B"}, "data": {"datasets": ["x"]}}


def _record(home: Path, rid: str, status: str, spec: dict | None = None, started: float | None = None) -> Path:
    store.list_runs(refresh_status=False)  # the registry exists first: a missing one is rebuilt from the folders
    rdir = home / "runs" / rid
    rdir.mkdir(parents=True)
    text = spec_mod.dump_spec(spec_mod.parse_spec(spec or SPEC))
    store._insert(
        records.RunRecord(
            id=rid,
            name=rid,
            status=status,
            created=time.time(),
            started=started,
            run_dir=str(rdir),
            output_dir=str(rdir),
            spec=text,
        )
    )
    return rdir


@pytest.fixture
def fake_submit(run_registry, monkeypatch):
    """``train.check`` answers with SPEC and submit queues a record without starting anything."""
    from engine.runs import registry

    valid = spec_mod.parse_spec(SPEC)
    monkeypatch.setattr(train_actions, "check", lambda values: (valid, [], []))
    made: list[str] = []

    def submit(spec, name=None):
        rid = f"r{len(made) + 1}"
        _record(run_registry, rid, "queued", spec_mod.spec_to_dict(spec))
        made.append(rid)
        return rid

    monkeypatch.setattr(registry, "submit", submit)
    return made


def test_second_start_of_the_same_spec_asks_first(fake_submit):
    msg, rid, pending = train_actions.start_run({}, "en")
    assert rid == "r1" and pending == "" and "Queued run r1: position 1 in the queue" in msg, msg
    assert "Started" not in msg
    msg, rid, pending = train_actions.start_run({}, "en")
    assert rid is None and pending and "Run r1 with this very spec is already queued" in msg, msg
    assert fake_submit == ["r1"]
    zh, _, _ = train_actions.start_run({}, "zh")
    assert "配置完全相同的运行 r1 已在排队中" in zh, zh
    # the second click on the same form state confirms
    msg, rid, pending = train_actions.start_run({}, "en", pending)
    assert rid == "r2" and "position 2" in msg and fake_submit == ["r1", "r2"], msg
    # a stale confirmation (another form state) asks again
    msg, rid, _ = train_actions.start_run({}, "en", "0123456789abcdef")
    assert rid is None and "already queued" in msg


def test_stop_of_an_ended_run_says_so(run_registry):
    _record(run_registry, "done", "completed")
    msg, target = train_actions.stop_begin("done", "en")
    assert target is None and msg == "Run done has already ended (completed): nothing to stop.", msg
    assert "已经结束（已完成）" in train_actions.stop_begin("done", "zh")[0]
    assert "already ended" in runs_tab.act("stop", "done", "en")


def test_stop_of_a_running_run_says_it_saves_then_where(run_registry, monkeypatch):
    from engine.runs import registry

    rdir = _record(run_registry, "live", "running", started=time.time())
    msg, target = train_actions.stop_begin("live", "en")
    assert target == "live" and "saves a checkpoint" in msg and "Stopping run live" in msg, msg

    ckpt = rdir / "checkpoints" / "checkpoint-12"

    def stop(run_id, grace_s=None, *, wait=True):  # what the trainer and the wrapper do on SIGTERM
        reason = registry.run_message("runs.user_stop_saved", step=12, checkpoint=ckpt)
        events_mod.append_event(rdir / "events.jsonl", "log", 12, loss=1.5, eta_seconds=300, progress=0.1)
        events_mod.append_event(
            rdir / "events.jsonl", "stopped", 12, reason=str(reason), signal="SIGTERM", checkpoint=str(ckpt)
        )
        store.update(run_id, status="stopped", ended=time.time())
        return True

    monkeypatch.setattr(registry, "stop", stop)
    final = train_actions.stop_finish(target, "en")
    assert final.startswith("✅ Run live stopped at step 12; checkpoint saved at ") and str(ckpt) in final, final
    assert "SIGTERM" not in final and "Stopping" not in final
    zh = train_actions.stop_report(registry.get("live"), "zh")
    assert "已在第 12 步停止；检查点已保存到" in zh, zh
    # the dashboard's progress line of the ended run has no ETA any more
    view = monitor.new_view("live", rdir)
    monitor.read_new(view)
    assert "ETA" not in monitor_text.progress_html(view) and "10%" in monitor_text.progress_html(view)
    view["terminal"] = None  # the same log line while the run was going had one
    assert "ETA 5m00s" in monitor_text.progress_html(view)


def test_stop_report_without_checkpoint_and_from_the_queue(run_registry):
    from engine.runs import registry

    rdir = _record(run_registry, "early", "stopped", started=time.time())
    events_mod.append_event(rdir / "events.jsonl", "stopped", 3, reason="x", checkpoint=None)
    assert (
        train_actions.stop_report(registry.get("early")) == "⚠ Run early stopped at step 3; no checkpoint was saved."
    )
    _record(run_registry, "waiting", "queued")
    msg, target = train_actions.stop_begin("waiting", "en")
    assert target == "waiting" and "from the queue" in msg
    assert train_actions.stop_finish("waiting", "en") == "Run waiting was removed from the queue."


def test_run_picker_labels_follow_the_status(run_registry):
    from studio.app import Ctx

    _record(run_registry, "one", "running", started=time.time())
    before = Ctx.run_choices("en")
    store.update("one", status="stopped", ended=time.time())
    after = Ctx.run_choices("en")
    assert before != after and after[0][0].endswith("· stopped") and before[0][0].endswith("· running")


def test_stop_signals_in_the_clicks_own_request(run_registry, monkeypatch):
    """Issue 27 item 14: the click's handler (stop_now) stops the run before it answers; the follow-up that waits
    for the end does not signal it again (the Runs tab's Stop is the same call)."""
    from engine.runs import registry

    _record(run_registry, "busy", "running", started=time.time())
    calls = []

    def stop(run_id, grace_s=None, *, wait=True):
        calls.append((run_id, wait))
        store.update(run_id, stop_requested=time.time())
        return False

    monkeypatch.setattr(registry, "stop", stop)
    msg, target = train_actions.stop_now("busy", "en")
    assert target == "busy" and "Stopping run busy" in msg and calls == [("busy", False)], (msg, calls)
    store.update("busy", status="stopped", ended=time.time())
    train_actions.stop_finish("busy", "en")
    assert calls == [("busy", False)], calls
    _record(run_registry, "busy2", "running", started=time.time())
    assert "Stopping run busy2" in runs_tab.act("stop", "busy2", "en") and calls[-1] == ("busy2", False)
    assert train_actions.stop_now("busy", "en")[1] is None and len(calls) == 2  # ended: nothing to stop


def test_stop_still_running_at_the_deadline_says_so(run_registry, monkeypatch):
    """A run that has not ended when the wait is over (a busy machine saving its checkpoint) is said to be stopping,
    not "has already ended (running)"."""
    from engine.runs import registry

    _record(run_registry, "slow", "running", started=time.time())
    monkeypatch.setattr(registry, "stop", lambda run_id, grace_s=None, *, wait=True: False)
    monkeypatch.setattr(train_actions, "stop_grace_s", lambda: -14.0)  # the wait ends at once
    msg = train_actions.stop_finish("slow", "en")
    assert msg.startswith("⏳ Run slow is still stopping") and "already ended" not in msg, msg
    assert train_actions.stop_finish("slow", "zh").startswith("⏳ 运行 slow 仍在停止")


def test_a_queued_start_names_the_run_holding_its_slot(fake_submit, run_registry):
    """Queued behind a training run: Start names that run and says its Stop frees the slot (issue 45 item 12)."""
    import copy

    other = copy.deepcopy(SPEC)
    other["train"] = {"learning_rate": 0.001}  # another spec: not a twin of this Start
    _record(run_registry, "t0", "running", spec=other, started=time.time())
    msg, rid, _ = train_actions.start_run({}, "en")
    assert rid == "r1" and "it waits for the slot held by run t0 (t0): it starts when that ends" in msg, msg
