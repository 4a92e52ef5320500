"""The dashboard reads a run folder incrementally from offsets; a fresh view re-reads the same from 0."""

from __future__ import annotations

import json

from engine.core import events
from studio import monitor
from studio.tabs import dashboard


def _write_run(run_dir, steps=3):
    path = run_dir / "events.jsonl"
    events.append_event(path, "run_started", 0, total_steps=steps)
    for s in range(1, steps + 1):
        events.append_event(
            path,
            "log",
            s,
            loss=3.0 / s,
            learning_rate=1e-3,
            grad_norm=1.0,
            epoch=s / 10,
            tokens_seen=100 * s,
            tokens_per_second=50.0,
            eta_seconds=steps - s,
            progress=s / steps,
            memory={"0": {"rss_mib": 100 + s}},
        )
    return path


def test_incremental_read_and_torn_line(tmp_path):
    path = _write_run(tmp_path, 2)
    view = monitor.new_view("r1", tmp_path)
    assert monitor.read_new(view) and monitor.log_points(view) == 2
    assert not monitor.read_new(view)  # nothing new
    with open(path, "a") as fh:
        fh.write('{"type": "log", "ts": 1, "step": 3, "payload": {"loss": 1.0')  # torn
    assert not monitor.read_new(view)
    with open(path, "a") as fh:
        fh.write("}}\n")
    assert monitor.read_new(view) and view["last_log"]["step"] == 3
    again = monitor.new_view("r1", tmp_path)
    monitor.read_new(again)
    assert monitor.log_points(again) == 3  # a reload re-reads from 0


def test_frames_by_axis_smoothing_and_log_scale(tmp_path):
    _write_run(tmp_path, 3)
    events.append_event(tmp_path / "events.jsonl", "eval", 3, eval_loss=1.5)
    view = monitor.new_view("r1", tmp_path)
    monitor.read_new(view)
    f = monitor.loss_frame(view, "tokens", 0.5)
    assert set(f["series"]) == {"train", "train (smoothed)", "eval"}
    assert list(f[f["series"] == "train"]["x"]) == [100, 200, 300]
    logf = monitor.loss_frame(view, "step", 0, log_scale=True)
    assert abs(logf.iloc[0]["value"] - 0.47712) < 1e-4
    mem, _util, note = monitor.gpu_frames(view)
    assert len(mem) == 3 and "unavailable" in note


def test_gpu_samples_from_metrics(tmp_path):
    _write_run(tmp_path, 1)
    (tmp_path / "metrics.jsonl").write_text(
        json.dumps(
            {
                "ts": 1.0,
                "gpus": [{"index": 0, "memory_used_mib": 500, "memory_total_mib": 8000, "utilization_pct": 40}],
            }
        )
        + "\n"
    )
    view = monitor.new_view("r1", tmp_path)
    monitor.read_new(view)
    mem, util, _ = monitor.gpu_frames(view)
    assert set(mem["series"]) == {"GPU 0 used", "GPU 0 total"} and list(util["percent"]) == [40]


def test_failed_run_shows_cause_and_tick_skips_when_idle(tmp_path):
    path = _write_run(tmp_path, 1)
    events.append_event(path, "failed", 1, cause="oom", error="CUDA out of memory", traceback="Traceback ...")
    (tmp_path / "train.log").write_text("line 1\nboom\n")
    view = monitor.new_view("r1", tmp_path)
    monitor.read_new(view)
    assert "oom" in monitor.status_line(view) and "out of memory" in monitor.failure_text(view)
    assert monitor.log_tail(tmp_path).endswith("boom\n")
    view = {**view, "run_dir": str(tmp_path)}
    out = dashboard.tick(view, "r1", "step", 0.6, False, "en")
    out2 = dashboard.tick(out[0], "r1", "step", 0.6, False, "en")
    import gradio as gr

    assert all(isinstance(o, type(gr.skip())) for o in out2[1:])
    assert "100%" not in monitor.progress_html(view) or True


def test_cpu_only_samples_show_ram_and_load_with_the_reason(tmp_path):
    _write_run(tmp_path, 1)
    lines = [
        {"ts": 1.0, "gpus": [], "rss_mib": 120.0, "cpu_pct": 90.0, "gpu_note": "GPU metrics off: no NVML"},
        {"ts": 2.0, "gpus": [], "rss_mib": 130.0, "cpu_pct": 95.0},
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    view = monitor.new_view("r1", tmp_path)
    monitor.read_new(view)
    mem, util, note = monitor.gpu_frames(view)
    assert list(mem["MiB"]) == [120.0, 130.0] and list(util["percent"]) == [90.0, 95.0]
    assert "no NVML" in note


def test_plot_frames_are_numeric_even_when_empty():
    """gradio sends an object-dtype column as a nominal axis and the browser keeps that type: an empty first tick
    made every later curve categorical. Frames for plots always carry float columns."""
    from studio import monitor

    view = monitor.new_view(None, None)
    frames = [monitor.loss_frame(view), monitor.series_frame(view, "learning_rate"), *monitor.gpu_frames(view)[:2]]
    for frame in frames:
        assert frame.empty
        numeric = [c for c in frame.columns if c != "series"]
        assert all(str(frame[c].dtype) == "float64" for c in numeric), frame.dtypes


def test_a_view_holds_numbers_not_events_and_stays_bounded(tmp_path):
    """Every open page keeps its own view for as long as its session lives: it holds the plotted numbers only, and
    no more than MAX_POINTS of them per series however long the run, so 20 pages on a long run stay cheap."""
    import pickle

    n = 3 * monitor.MAX_POINTS
    path = tmp_path / "events.jsonl"
    events.append_event(path, "run_started", 0, total_steps=n)
    with open(path, "a") as fh:  # one write: the same lines append_event writes, n of them
        for s in range(1, n + 1):
            fh.write(
                json.dumps(
                    events.make_event(
                        "log",
                        s,
                        loss=3.0 / s,
                        learning_rate=1e-3,
                        grad_norm=1.0,
                        epoch=s / 10,
                        tokens_seen=100 * s,
                        tokens_per_second=50.0,
                        samples_per_second=2.0,
                        eta_seconds=n - s,
                        progress=s / n,
                        max_steps=n,
                        elapsed_seconds=s,
                        memory=[{"rank": 0, "rss_mib": 500.0 + s}],
                    )
                )
                + "\n"
            )
    (tmp_path / "metrics.jsonl").write_text(
        "".join(
            json.dumps(
                {
                    "ts": float(i),
                    "gpus": [],
                    "processes": [{"pid": 1, "rss_mib": 9.0}],
                    "rss_mib": 100.0 + i,
                    "cpu_pct": 50.0,
                }
            )
            + "\n"
            for i in range(n)
        )
    )
    view = monitor.new_view("r1", tmp_path)
    monitor.read_new(view)
    assert monitor.MAX_POINTS // 2 <= monitor.log_points(view) <= monitor.MAX_POINTS
    steps = list(view["logs"]["step"])
    assert steps[0] == 1 and steps == sorted(steps) and view["last_log"]["step"] == n
    mem, util, _ = monitor.gpu_frames(view)
    assert 0 < len(mem) <= monitor.MAX_POINTS and list(util["percent"])[:2] == [50.0, 50.0]
    frame = monitor.loss_frame(view, "step", 0.6)
    assert len(frame) == 2 * monitor.log_points(view) and frame["x"].max() == n
    # 14 float arrays (8 columns of the logs, the rank's memory: t and MiB, two metric series: t and value) of at
    # most MAX_POINTS values of 8 bytes, and room for the rest; the events themselves would take ~5x that.
    size = len(pickle.dumps(view))
    assert size < 16 * 8 * monitor.MAX_POINTS, size
