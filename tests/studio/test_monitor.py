"""The dashboard reads a run folder incrementally from offsets; a fresh view re-reads the same from 0."""

from __future__ import annotations

import json

import pytest

from engine.core import events
from engine.core.messages import payload_message
from studio import monitor, monitor_text
from studio.i18n.localize import localize
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
    assert set(f["curve"]) == {"train loss", "train loss (smoothed)", "eval loss"}
    assert list(f[f["curve"] == "train loss"]["x"]) == [100, 200, 300]
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
    assert set(mem["curve"]) == {"GPU 0 used", "GPU 0 total"} and list(util["percent"]) == [40]


def test_failed_run_shows_cause_and_tick_skips_when_idle(tmp_path):
    path = _write_run(tmp_path, 1)
    events.append_event(path, "failed", 1, cause="oom", error="CUDA out of memory", traceback="Traceback ...")
    (tmp_path / "train.log").write_text("line 1\nboom\n")
    view = monitor.new_view("r1", tmp_path)
    monitor.read_new(view)
    assert "oom" in monitor_text.status_line(view) and "out of memory" in monitor_text.failure_text(view)
    assert monitor_text.log_tail(tmp_path).endswith("boom\n")
    view = {**view, "run_dir": str(tmp_path)}
    import gradio as gr

    out = dashboard.tick(view, "r1", "step", 0.6, False, "en")
    for _ in range(dashboard.SETTLE_TICKS):  # the ticks that send the plots again after their series changed
        out = dashboard.tick(out[0], "r1", "step", 0.6, False, "en")
        assert out[1] != gr.skip() and out[1]["color_map"] == {"train loss": monitor.PALETTE[0]}
    out2 = dashboard.tick(out[0], "r1", "step", 0.6, False, "en")
    assert all(o == gr.skip() for o in out2[1:])
    assert "100%" not in monitor_text.progress_html(view) or True


def test_poll_moves_the_stamp_only_when_there_is_something_to_show(tmp_path):
    """The timer's event writes session state only; the charts come from ``show`` on the stamp's change. A quiet
    tick leaves the stamp (no chart is touched) and an ended run (or none) slows the timer to IDLE_TICK_S."""
    import gradio as gr

    path = _write_run(tmp_path, 2)
    view = {**monitor.new_view("r1", tmp_path), "run_dir": str(tmp_path)}
    view, stamp, interval = dashboard.poll(view, 0, "r1", "step", 0.6, False, "en")
    assert stamp == 1 and interval == gr.update(value=dashboard.TICK_S)  # new lines: shown, the run goes on
    shown = dashboard.show(view)
    assert shown[1] != gr.skip() and "to_show" not in view  # the loss chart is drawn
    assert all(o == gr.skip() for o in dashboard.show(view)[1:])  # nothing new kept: a repeat shows nothing
    events.append_event(path, "finished", 2, train_loss=1.0)
    stamps = [stamp]
    for _ in range(dashboard.SETTLE_TICKS + 3):
        view, stamp, interval = dashboard.poll(view, stamps[-1], "r1", "step", 0.6, False, "en")
        stamps.append(stamps[-1] if stamp == gr.skip() else stamp)
        if stamp != gr.skip():
            dashboard.show(view)
    assert view["interval"] == dashboard.IDLE_TICK_S  # the run ended: every 3 s now
    assert stamps[-1] == stamps[-2] == stamps[-3]  # settled: quiet ticks leave the stamp alone
    view, stamp, interval = dashboard.poll(view, stamps[-1], "r1", "step", 0.6, False, "en")
    assert stamp == gr.skip() and interval == gr.skip()
    view, stamp, interval = dashboard.poll(monitor.new_view(None, None), 0, None, "step", 0.6, False, "en")
    assert interval == gr.update(value=dashboard.IDLE_TICK_S)


def _log(path, step: int, loss: float) -> None:
    events.append_event(path, "log", step, loss=loss, learning_rate=1e-3, grad_norm=1.0, progress=step / 100)


def test_a_tick_sends_only_the_outputs_that_changed(tmp_path):
    """Every update redraws its component in the browser: once the plots have settled, a new logged step sends the
    curves it moved and the progress, not the curves it left alone (throughput, not logged), the hidden plots of
    other stages nor the empty failure box. The ticks that settle a plot (its series or range changed) still send
    everything."""
    import gradio as gr

    path = _write_run(tmp_path, 2)
    view = {**monitor.new_view("r1", tmp_path), "run_dir": str(tmp_path)}
    out = dashboard.tick(view, "r1", "step", 0.0, False, "en")
    assert len(out[1:]) == len(dashboard.OUTPUT_NAMES) and all(o != gr.skip() for o in out[1:])  # a fresh view: all
    while out[0].get("settle"):
        out = dashboard.tick(out[0], "r1", "step", 0.0, False, "en")
        assert all(o != gr.skip() for o in out[1:])  # a settle tick sends everything
    out = dashboard.tick(out[0], "r1", "step", 0.0, False, "en")
    assert all(o == gr.skip() for o in out[1:])  # nothing new
    _log(path, 3, 0.5)
    out = dashboard.tick(out[0], "r1", "step", 0.0, False, "en")
    sent = {name for name, o in zip(dashboard.OUTPUT_NAMES, out[1:]) if o != gr.skip()}
    assert {"loss", "lr", "grad_norm", "progress"} <= sent, sent  # lr, grad_norm: one point more, same value
    hidden = {"rewards", "accuracy", "grpo_rewards", "grpo_std", "grpo_kl", "grpo_length", "grpo_samples"}
    assert not sent & (hidden | {"tps", "failure", "alerts"}), sent


def test_a_tick_before_the_last_show_keeps_what_that_one_found(tmp_path):
    """Two ticks before the page asked for the first one's outputs (a busy page): the second finds only what moved
    since, so what the first found is kept for ``show`` rather than lost until the curve moves again."""
    import gradio as gr

    path = _write_run(tmp_path, 2)
    view = {**monitor.new_view("r1", tmp_path), "run_dir": str(tmp_path)}
    stamp = 0
    while True:  # settle, showing each time
        view, new, _ = dashboard.poll(view, stamp, "r1", "step", 0.0, False, "en")
        if new == gr.skip():
            break
        stamp = new
        dashboard.show(view)
    _log(path, 3, 0.5)
    view, stamp, _ = dashboard.poll(view, stamp, "r1", "step", 0.0, False, "en")
    (tmp_path / "train.log").write_text("a new line\n")  # only the log moves before the next tick
    view, stamp, _ = dashboard.poll(view, stamp, "r1", "step", 0.0, False, "en")
    shown = dict(zip(dashboard.OUTPUT_NAMES, dashboard.show(view)[1:]))
    assert shown["loss"] != gr.skip() and len(shown["loss"]["value"]) > 0  # the first tick's curve
    assert shown["log"] == "a new line\n"  # and the second's log


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
        numeric = [c for c in frame.columns if c not in monitor.LABEL_COLUMNS]
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


def test_each_plot_gets_the_colours_of_its_series_one_send_after_them(tmp_path):
    """gradio draws a plot anew when its color_map changes, with the value it held before: the map of a frame's
    series goes out with the next send (then SETTLE_TICKS sends follow), so the redraw knows every series."""
    import gradio as gr

    path = _write_run(tmp_path, 1)
    view = monitor.new_view("r1", tmp_path)
    first = dashboard.tick(view, "r1", "step", 0.6, False, "en")
    assert first[1]["color_map"] is None  # nothing sent before: no map yet
    second = dashboard.tick(first[0], "r1", "step", 0.6, False, "en")
    assert second[1]["color_map"] == {"train loss": monitor.PALETTE[0]}  # the series the plot now holds
    events.append_event(path, "log", 2, loss=1.0)
    events.append_event(path, "eval", 2, eval_loss=1.2)
    out = dashboard.tick(second[0], "r1", "step", 0.6, False, "en")
    assert set(out[1]["value"]["curve"]) == {"train loss", "train loss (smoothed)", "eval loss"}
    assert out[1]["color_map"] == {"train loss": monitor.PALETTE[0]}  # still the map of what the plot held
    out = dashboard.tick(out[0], "r1", "step", 0.6, False, "en")  # no new line: sent again, with the new map
    assert out[1]["color_map"] == monitor.loss_colors("en") and out[1] != gr.skip()
    for _ in range(dashboard.SETTLE_TICKS):
        out = dashboard.tick(out[0], "r1", "step", 0.6, False, "en")
    assert out[1] == gr.skip()  # settled
    # A language switch renames every series: the Chinese map follows one send later, from the view it outputs.
    view, loss = dashboard.redraw(out[0], "step", 0.6, False, "zh")[:2]
    assert loss["color_map"] == monitor.loss_colors("en") and set(loss["value"]["curve"]) == {
        "训练损失",
        "训练损失（平滑）",
        "验证损失",
    }
    out = dashboard.tick(view, "r1", "step", 0.6, False, "zh")
    assert out[1]["color_map"] == monitor.loss_colors("zh")


def test_resource_plots_are_titled_by_what_they_show(tmp_path, monkeypatch):
    """CPU-only samples: RAM and CPU load (per core, no 100 % cap); GPU samples: GPU memory and utilisation; before
    any sample, the machine's GPUs decide."""
    _write_run(tmp_path, 1)
    cpu = {"ts": 1.0, "gpus": [], "rss_mib": 120.0, "cpu_pct": 180.0}
    (tmp_path / "metrics.jsonl").write_text(json.dumps(cpu) + "\n")
    view = monitor.new_view("r1", tmp_path)
    monitor.read_new(view)
    out = dashboard.render(view, "step", 0, False, "en")
    assert (
        out[4]["label"] == "RAM: all the run's processes, resident (MiB)"
        and out[5]["label"].startswith("CPU load")
        and out[5]["y_lim"] == [0, None]
    )
    zh = dashboard.render(view, "step", 0, False, "zh")
    assert zh[4]["label"] == "内存：本运行全部进程的常驻内存 (MiB)" and zh[5]["label"].startswith("CPU 负载")
    gpu = {"ts": 1.0, "gpus": [{"index": 0, "memory_used_mib": 500, "memory_total_mib": 8000, "utilization_pct": 40}]}
    (tmp_path / "metrics.jsonl").write_text(json.dumps(gpu) + "\n")
    view = monitor.new_view("r1", tmp_path)
    monitor.read_new(view)
    out = dashboard.render(view, "step", 0, False, "en")
    assert (
        out[4]["label"] == "GPU memory in use, all processes on the GPU (MiB)"
        and out[5]["label"] == "GPU utilisation (%)"
    )
    assert out[5]["y_lim"] == [0, 100]
    (tmp_path / "metrics.jsonl").unlink()
    view = monitor.new_view("r1", tmp_path)
    monitor.read_new(view)
    monkeypatch.setattr(dashboard, "machine_has_gpu", lambda: True)
    assert (
        dashboard.render(view, "step", 0, False, "en")[4]["label"]
        == "GPU memory in use, all processes on the GPU (MiB)"
    )
    monkeypatch.setattr(dashboard, "machine_has_gpu", lambda: False)
    assert dashboard.render(view, "step", 0, False, "en")[4]["label"] == "RAM: all the run's processes, resident (MiB)"


def test_color_map_keeps_fixed_colours_and_gives_others_distinct_ones():
    frame = monitor.plot_frame({"x": [1, 2, 3], "value": [1, 1, 1], "run": ["b", "a", "b"]}, ["x", "value", "run"])
    assert monitor.color_map(frame, "run") == {"b": monitor.PALETTE[0], "a": monitor.PALETTE[1]}
    assert monitor.color_map(frame, "run", {"a": monitor.PALETTE[0]}) == {
        "b": monitor.PALETTE[1],
        "a": monitor.PALETTE[0],
    }
    assert monitor.color_map(monitor.plot_frame([], ["x", "value", "run"]), "run") == {}


# ------------------------------------------------------------------- preference stages: the trainer's own figures
# The ``metrics`` of real log events (EventsCallback.on_log) as TRL 1.16's trainers fill them on the tiny test model.
DPO_METRICS = {
    "entropy": 7.327280521392822,
    "logits/chosen": 0.001007041717703278,
    "logits/rejected": 0.0010554241771633562,
    "mean_token_accuracy": 0.0,
    "rewards/chosen": 0.0,
    "rewards/rejected": 0.0,
    "rewards/accuracies": 0.0,
    "rewards/margins": 0.0,
    "logps/chosen": -68.05667114257812,
    "logps/rejected": -68.16442108154297,
    "train_runtime": 0.0652,
    "train_tokens_per_second": 2945.826,
}
KTO_METRICS = {
    "kl": 0.0,
    "entropy": 7.3265745639801025,
    "logits/chosen": -0.0006997849559411407,
    "logits/rejected": -0.0023070566821843386,
    "rewards/chosen": 0.0,
    "logps/chosen": -36.73889923095703,
    "rewards/rejected": 0.0,
    "logps/rejected": -36.7569522857666,
    "rewards/margins": 0.0,
    "train_runtime": 0.3855,
    "train_tokens_per_second": 435.844,
}
RM_METRICS = {
    "min_reward": 0.3978271484375,
    "mean_reward": 0.41461181640625,
    "max_reward": 0.431396484375,
    "accuracy": 0.25,
    "margin": -0.0267333984375,
    "train_runtime": 0.3257,
    "train_tokens_per_second": 1498.305,
}


def _write_stage_run(run_dir, metrics, steps=3, drift=None):
    """A run whose log events carry ``metrics`` as the trainer writes them; ``drift`` moves the listed figures by
    step so the curves differ."""
    path = run_dir / "events.jsonl"
    events.append_event(path, "run_started", 0, total_steps=steps)
    for s in range(1, steps + 1):
        figures = {k: v + (drift or {}).get(k, 0) * s for k, v in metrics.items()}
        events.append_event(
            path,
            "log",
            s,
            loss=0.69 - 0.1 * s,
            learning_rate=0.005,
            grad_norm=0.2,
            epoch=s / 4,
            tokens_per_second=2973.72,
            samples_per_second=61.952,
            tokens_seen=192 * s,
            memory=[{"rss_mib": 806.5, "rank": 0}],
            eta_seconds=0.1,
            progress=s / steps,
            max_steps=steps,
            elapsed_seconds=0.06 * s,
            metrics=figures,
        )
    return path


def test_dpo_rewards_margins_and_accuracy_are_drawn_with_names_in_both_languages(tmp_path):
    path = _write_stage_run(
        tmp_path, DPO_METRICS, drift={"rewards/chosen": 0.1, "rewards/rejected": -0.1, "rewards/margins": 0.2}
    )
    # TRL's eval figures come in the eval event, prefixed eval_ as the Trainer logs them
    events.append_event(
        path,
        "eval",
        3,
        eval_loss=0.6,
        eval_runtime=0.05,
        **{f"eval_{k}": v for k, v in DPO_METRICS.items() if not k.startswith("train_")},
    )
    view = monitor.new_view("r1", tmp_path)
    monitor.read_new(view)
    rewards = monitor.stage_frame(view, "rewards", "step", "en")
    assert list(dict.fromkeys(rewards["curve"])) == [
        "chosen",
        "rejected",
        "margin",
        "chosen (eval)",
        "rejected (eval)",
        "margin (eval)",
    ]
    assert list(rewards[rewards["curve"] == "margin"]["value"]) == pytest.approx([0.2, 0.4, 0.6])
    assert list(rewards[rewards["curve"] == "chosen"]["x"]) == [1, 2, 3]
    assert list(rewards[rewards["curve"] == "chosen (eval)"]["x"]) == [3]
    tokens = monitor.stage_frame(view, "rewards", "tokens")
    assert list(tokens[tokens["curve"] == "rejected"]["x"]) == [192, 384, 576]
    assert list(tokens[tokens["curve"] == "rejected (eval)"]["x"]) == [576]  # an eval at the loss point before it
    accuracy = monitor.stage_frame(view, "accuracy", "step", "en")
    assert list(dict.fromkeys(accuracy["curve"])) == ["accuracy", "accuracy (eval)"]
    assert set(monitor.stage_frame(view, "rewards", "step", "zh")["curve"]) == {
        "被选",
        "被拒",
        "差值",
        "被选（验证）",
        "被拒（验证）",
        "差值（验证）",
    }
    assert set(monitor.stage_frame(view, "accuracy", "step", "zh")["curve"]) == {"准确率", "准确率（验证）"}
    # every drawn name has its own colour, the same in both languages
    for lang in ("en", "zh"):
        colors = monitor.stage_colors(lang)
        assert len(set(colors.values())) == len(colors)
        for plot in monitor.STAGE_PLOTS:
            assert set(monitor.stage_frame(view, plot, "step", lang)["curve"]) <= set(colors)
    assert list(monitor.stage_colors("en").values()) == list(monitor.stage_colors("zh").values())
    # the page: both plots shown, titled in the page's language, their colours one send after their series
    out = dashboard.render(view, "step", 0.6, False, "en")
    assert [o["visible"] for o in out[10:12]] == [True, True] and out[10]["color_map"] is None
    assert out[10]["y_title"] == "value"
    out = dashboard.render(view, "step", 0.6, False, "zh")
    assert out[10]["color_map"] == {n: monitor.stage_colors("en")[n] for n in rewards["curve"].unique()}
    assert out[11]["color_map"] == {"accuracy": monitor.PALETTE[4], "accuracy (eval)": monitor.PALETTE[8]}
    assert out[10]["y_title"] == "数值" and out[10]["x_title"] == "步"
    from studio.i18n.page import t

    assert t("stage_rewards", "en") == "Rewards of chosen / rejected answers" and "奖励" in t("stage_rewards", "zh")
    assert t("stage_accuracy", "en").startswith("Accuracy") and t("stage_accuracy", "zh").startswith("准确率")


def test_kto_and_rm_draw_the_figures_their_trainers_log(tmp_path):
    kto, rm = tmp_path / "kto", tmp_path / "rm"
    kto.mkdir(), rm.mkdir()
    _write_stage_run(kto, KTO_METRICS)
    _write_stage_run(rm, RM_METRICS, drift={"accuracy": 0.25})
    view = monitor.new_view("kto", kto)
    monitor.read_new(view)
    assert list(dict.fromkeys(monitor.stage_frame(view)["curve"])) == ["chosen", "rejected", "margin"]
    assert monitor.stage_frame(view, "accuracy").empty  # KTOTrainer logs no accuracy: that plot stays hidden
    out = dashboard.render(view, "step", 0.6, False, "en")
    assert [o["visible"] for o in out[10:12]] == [True, False]
    view = monitor.new_view("rm", rm)
    monitor.read_new(view)
    assert list(dict.fromkeys(monitor.stage_frame(view)["curve"])) == ["margin", "mean reward"]
    acc = monitor.stage_frame(view, "accuracy", "epoch", "en")
    assert list(acc["value"]) == [0.5, 0.75, 1.0] and list(acc["x"]) == [0.25, 0.5, 0.75]
    assert set(monitor.stage_frame(view, "rewards", "step", "zh")["curve"]) == {"差值", "平均奖励"}


def test_runs_without_stage_figures_hide_the_plot_and_figures_stay_bounded(tmp_path):
    _write_run(tmp_path, 3)  # an sft run: no metrics in its log events
    view = monitor.new_view("r1", tmp_path)
    monitor.read_new(view)
    for plot in monitor.STAGE_PLOTS:
        frame = monitor.stage_frame(view, plot)
        assert frame.empty and str(frame["value"].dtype) == "float64"
    assert [o["visible"] for o in dashboard.render(view, "step", 0.6, False, "en")[10:12]] == [False, False]
    assert monitor.stage_frame(monitor.new_view(None, None)).empty
    # a long dpo run: the figures are thinned like the loss, read incrementally
    n = 2 * monitor.MAX_POINTS + 10
    line = json.dumps(events.make_event("log", 1, loss=0.5, tokens_seen=1, metrics=DPO_METRICS)) + "\n"
    (tmp_path / "events.jsonl").write_text(line * n)
    view = monitor.new_view("r1", tmp_path)
    monitor.read_new(view)
    assert monitor.MAX_POINTS // 2 <= len(view["stage"]["step"]) <= monitor.MAX_POINTS
    assert not monitor.read_new(view)


# ------------------------------------------------------------------- Slurm runs of several nodes
def _gpu_sample(ts, used, util):
    return {
        "ts": ts,
        "gpus": [{"index": 0, "memory_used_mib": used, "memory_total_mib": 8000, "utilization_pct": util}],
    }


def _lines(*samples):
    return "".join(json.dumps(s) + "\n" for s in samples)


def test_every_node_of_a_slurm_run_is_drawn_under_its_name(tmp_path):
    from engine.runs.metrics import node_file

    assert node_file(0) == "metrics.jsonl" and monitor.NODE_FILE.match(node_file(3))[1] == "3"
    _write_run(tmp_path, 1)
    (tmp_path / node_file(0)).write_text(_lines(_gpu_sample(10.0, 500, 40), _gpu_sample(11.0, 600, 50)))
    (tmp_path / node_file(1)).write_text(_lines(_gpu_sample(10.5, 700, 60)))
    view = monitor.new_view("r1", tmp_path)
    monitor.read_new(view)
    mem, util, _ = monitor.gpu_frames(view)
    assert list(dict.fromkeys(mem["curve"])) == [
        "node 0 · GPU 0 used",
        "node 0 · GPU 0 total",
        "node 1 · GPU 0 used",
        "node 1 · GPU 0 total",
    ]
    assert list(dict.fromkeys(util["curve"])) == ["node 0 · GPU 0", "node 1 · GPU 0"]
    assert list(util[util["curve"] == "node 1 · GPU 0"]["t"]) == [0.5]  # one time axis: the earliest sample is 0
    zh, zu, _ = monitor.gpu_frames(view, "zh")
    assert "节点 1 · GPU 0 已用" in set(zh["curve"]) and "节点 0 · GPU 0" in set(zu["curve"])
    # incremental: new lines of a node's file, and a node whose file appears later
    with open(tmp_path / node_file(1), "a") as fh:
        fh.write(_lines(_gpu_sample(11.5, 710, 61)))
    (tmp_path / node_file(2)).write_text(_lines(_gpu_sample(12.0, 800, 70)))
    assert monitor.read_new(view) and not monitor.read_new(view)
    _, util, _ = monitor.gpu_frames(view)
    assert list(util[util["curve"] == "node 1 · GPU 0"]["percent"]) == [60, 61]
    assert list(util[util["curve"] == "node 2 · GPU 0"]["percent"]) == [70]
    again = monitor.new_view("r1", tmp_path)  # a reload reads the same
    monitor.read_new(again)
    assert monitor.gpu_frames(again)[1].equals(util)


def test_nodes_without_gpus_show_each_nodes_ram_and_load_and_one_node_looks_as_before(tmp_path):
    _write_run(tmp_path, 1)
    cpu = [{"ts": 1.0, "gpus": [], "rss_mib": 120.0, "cpu_pct": 90.0, "gpu_note": "GPU metrics off: no NVML"}]
    (tmp_path / "metrics.jsonl").write_text(_lines(*cpu))
    view = monitor.new_view("r1", tmp_path)
    monitor.read_new(view)
    one = monitor.gpu_frames(view)
    assert set(one[0]["curve"]) == {"CPU RAM (run)"} and set(one[1]["curve"]) == {"CPU"}  # as a local run's
    (tmp_path / "metrics-node1.jsonl").write_text(_lines({"ts": 1.2, "gpus": [], "rss_mib": 130.0, "cpu_pct": 80.0}))
    monitor.read_new(view)
    mem, util, note = monitor.gpu_frames(view)
    assert list(dict.fromkeys(mem["curve"])) == ["node 0 · CPU RAM (run)", "node 1 · CPU RAM (run)"]
    assert list(dict.fromkeys(util["curve"])) == ["node 0 · CPU", "node 1 · CPU"] and "no NVML" in note
    zh_mem, zh_util, _ = monitor.gpu_frames(view, "zh")
    assert "节点 1 · CPU 内存（本运行）" in set(zh_mem["curve"]) and "节点 1 · CPU" in set(zh_util["curve"])


def test_a_lone_value_gets_a_range_around_it_and_a_spread_one_keeps_vegas():
    """Issue 27 item 15: Vega ticks a zero-width axis "8.900000"; a plot of one point (or of one value) gets a range
    around it, a plot whose values spread gets Vega's (sent as [None, None]: gr.update drops a None)."""
    assert monitor.span([8.9]) == pytest.approx([8.01, 9.79])
    assert monitor.span([1.0, 1.0]) == [0.0, 2.0]  # a whole number (a first step): +- 1
    assert monitor.span([0.0]) == [-1.0, 1.0]
    assert monitor.span([2e-4]) == pytest.approx([1.8e-4, 2.2e-4])
    assert monitor.span([1.0, 2.0]) == [None, None] == monitor.FREE
    assert monitor.span([]) == [None, None] and monitor.span([float("nan")]) == [None, None]
    # A fixed end stays: utilisation from 0, accuracy 0 to 1.
    assert monitor.span([0.0], [0, None]) == [0, 1.0]
    assert monitor.span([40.0], [0, None]) == [0, None]
    assert monitor.span([0.5], [0, 1]) == [0, 1]
    frame = monitor.plot_frame({"x": [1.0], "value": [8.9]}, ["x", "value"])
    assert monitor.axis_limits(frame, "x", "value") == {"x_lim": [0.0, 2.0], "y_lim": pytest.approx([8.01, 9.79])}


def test_a_one_step_run_sends_every_plot_a_range_then_vegas_once_it_spreads(tmp_path):
    """The dashboard sends each plot the range of what it shows; a changed range (which draws the plot anew with
    the value it held) is followed by SETTLE_TICKS sends, so the redrawn plot gets its points."""
    import gradio as gr

    path = _write_run(tmp_path, 1)
    out = dashboard.tick(monitor.new_view("r1", tmp_path), "r1", "step", 0.6, False, "en")
    loss, lr, gn, tps = out[1:5]
    assert loss["x_lim"] == [0.0, 2.0] and loss["y_lim"] == [2.0, 4.0]  # one loss point, 3.0 at step 1
    assert lr["y_lim"] == pytest.approx([9e-4, 1.1e-3]) and gn["y_lim"] == [0.0, 2.0] and tps["y_lim"] == [45, 55]
    accuracy = out[12]  # the preference stage's share: 0 to 1, however few its points
    assert accuracy["y_lim"] == [0, 1] and accuracy["x_lim"] == monitor.FREE
    for _ in range(dashboard.SETTLE_TICKS + 1):
        out = dashboard.tick(out[0], "r1", "step", 0.6, False, "en")
    assert out[1] == gr.skip()
    events.append_event(path, "log", 2, loss=1.0, learning_rate=1e-3, grad_norm=0.5, tokens_per_second=60.0)
    out = dashboard.tick(out[0], "r1", "step", 0.6, False, "en")
    assert out[1]["x_lim"] == out[1]["y_lim"] == monitor.FREE  # two points: Vega's own range
    assert out[2]["x_lim"] == monitor.FREE and out[2]["y_lim"] == pytest.approx([9e-4, 1.1e-3])  # lr stayed one
    out = dashboard.tick(out[0], "r1", "step", 0.6, False, "en")
    assert out[1] != gr.skip()  # the changed range is followed by sends of the same frames


def test_a_stopped_runs_header_says_stopped_once(tmp_path):
    """The header of a stopped run read "stopped · stopped (stopped by the user (SIGTERM))": the reason now stands
    in for the status word, once, in English and in Chinese."""
    path = _write_run(tmp_path, 2)
    events.append_event(
        path, "stopped", 2, reason="stopped by the user (process ended before it reported; exit code 0)"
    )
    view = monitor.new_view("r1", tmp_path)
    monitor.read_new(view)
    line = monitor_text.status_line(view, "stopped")
    assert line.lower().count("stopped") == 1 and "by the user" in line, line
    zh = monitor_text.status_line(view, "stopped", "zh")
    assert zh.count("停止") == 1 and "由用户停止" in zh, zh


def test_every_stop_reason_says_stopped_once(tmp_path):
    """Every way a run is stopped (the trainer's own stop, saved or not; the runner's when the trainer could not say;
    a health rule; Slurm's cancel; before the start; a bare signal) reads "stopped" once in the header, and its
    reason in full, in English and in Chinese (issue 45 item 17: the trainer's own stop read with no "stopped" at
    all, a bare signal twice)."""
    from engine.core.messages import to_json
    from engine.runs.messages import message
    from engine.watch import health

    how = message("runs.how_signal", signal="SIGTERM")
    reasons = [
        message("runs.user_stop_saved", step=3, checkpoint="/w/checkpoint-3"),
        message("runs.user_stop_unsaved", step=3),
        message("runs.user_stop_kept", step=3, how=how, checkpoint="/w/checkpoint-2"),
        message("runs.user_stop_early", how=how),
        health.stop_reason("loss NaN", 5, None, False),
        message("runs.slurm_cancelled", job=12),
        message("runs.stopped_before_start"),
    ]
    for reason in [*[{"reason": str(m), "reason_msg": to_json(m)} for m in reasons], {"reason": "SIGTERM"}]:
        view = {"run_id": "r1", "terminal": {"type": "stopped", "payload": reason}, "last_log": {"step": 3}}
        line = monitor_text.status_line(view, "stopped")
        assert line.lower().count("stopped") == 1 and reason["reason"].removeprefix("stopped ") in line, line
        zh = monitor_text.status_line(view, "stopped", "zh")
        assert zh.count("停止") == 1, zh
        if "reason_msg" in reason:
            assert localize(payload_message(reason, "reason"), "zh") in zh, zh
    assert line == "**r1** · stopped (SIGTERM) · step 3"
    # the trainer has said it stopped, the registry (and so the run picker) not yet: the header says running until
    # the registry's status ends, not "running · stopped (...)"
    assert monitor_text.status_line(view, "running") == "**r1** · running · step 3"


def test_the_run_pickers_label_and_the_header_move_in_one_answer(tmp_path, monkeypatch):
    """Issue 45 item 17: the run picker's labels followed every 3 s, the header every 0.5 s, and they disagreed
    (completed against running, and the reverse). A tick that finds the run's status moved reads the picker's
    labels at that moment, and one ``show`` draws both; the timer keeps its fast pace until the registry's status
    ends too (it is recorded after the trainer's last event)."""
    import types

    import gradio as gr

    path = _write_run(tmp_path, 2)
    rec = types.SimpleNamespace(id="r1", name="demo", status="running", kind="train", started=None, training=True)
    monkeypatch.setattr(dashboard.runs, "get", lambda run_id, **k: rec)
    monkeypatch.setattr(dashboard.backend, "training_runs", lambda: [rec])
    view, stamp = {**monitor.new_view("r1", tmp_path), "run_dir": str(tmp_path)}, 0

    def seen() -> list[dict]:
        """Each answer the page drew, as (the header, the picker's labels or None when left alone)."""
        nonlocal view, stamp
        drawn = []
        while True:
            view, new, _ = dashboard.poll(view, stamp, "r1", "step", 0.0, False, "en")
            if new == gr.skip():
                return drawn
            stamp = new
            out = dict(zip([*dashboard.OUTPUT_NAMES, "picker"], dashboard.show(view)[1:]))
            header = out["status"] if isinstance(out["status"], str) else out["status"].get("value")
            drawn.append((header, None if out["picker"] == gr.skip() else out["picker"]["choices"]))

    drawn = seen()
    assert drawn[0][1] == [("r1 · demo · running", "r1")] and "· running ·" in drawn[0][0], drawn[0]
    assert all(labels is None for _, labels in drawn[1:])  # the status stayed: the picker is left alone
    events.append_event(path, "finished", 2, train_loss=1.0, adapter_dir="/w/adapter")
    drawn = seen()  # the trainer ended; the registry has not recorded it yet: both still say running
    assert drawn and all("· running ·" in header and labels is None for header, labels in drawn), drawn
    assert view["interval"] == dashboard.TICK_S
    rec.status = "completed"
    drawn = seen()
    header, labels = drawn[0]
    assert labels == [("r1 · demo · completed", "r1")] and "· completed ·" in header and "running" not in header
    assert view["interval"] == dashboard.IDLE_TICK_S
