"""Alerts where a person looks, without a browser: the dashboard's view, its Loss chart marks and list, the Runs
table's column and ``studio runs show`` (studio.alerts, studio.monitor, studio.tabs.runs, engine.commands.runs_cli)."""

from __future__ import annotations

from engine.core.events import append_event
from engine.spec.watch_group import HealthSpec
from engine.watch import health
from studio import alerts, monitor
from studio.tabs import dashboard


def _run_folder(tmp_path):
    path = tmp_path / "events.jsonl"
    for step, loss in enumerate([2.0, 1.8, 1.7, 1.6], start=1):
        append_event(path, "log", step, loss=loss, learning_rate=1e-3, grad_norm=1.0)
    watch = health.HealthWatch(HealthSpec())
    (alert,) = watch.observe_log(5, loss=1.5, grad_norm=float("inf"))
    alert.write(path)
    append_event(path, "log", 5, loss=1.5, grad_norm="inf")
    return tmp_path


def test_view_marks_and_list(tmp_path):
    view = monitor.new_view("r1", _run_folder(tmp_path))
    assert monitor.read_new(view)
    assert view["alerts"] == [
        {
            "step": 5,
            "rule": "grad_norm",
            "action": "stop",
            "reason": "gradient norm inf",
            "reason_msg": view["alerts"][0]["reason_msg"],
        }
    ]
    frame = monitor.loss_frame(view, "step", 0.0)
    marked = alerts.marks(view["alerts"], frame, float)
    rule = marked[marked["curve"] == "⚠ grad norm @5"]
    # a vertical rule at step 5 across the losses drawn (1.5 to 2.0, read from the events written above)
    assert rule["x"].tolist() == [5.0, 5.0] and sorted(rule["value"].tolist()) == [1.5, 2.0]
    assert len(marked) == len(frame) + 2 and str(marked["x"].dtype) == "float64"
    assert alerts.mark_colors(view["alerts"]) == {"⚠ grad norm @5": alerts.ALERT_COLOR}

    table = alerts.table_markdown(view["alerts"])
    assert table.splitlines()[0] == "**Health alerts**"
    assert "| 5 | Gradient norm blow-up | stop | gradient norm inf |" in table
    zh = alerts.table_markdown(view["alerts"], "zh")
    assert "| 5 | 梯度范数爆炸 | 停止 | 梯度范数为 inf |" in zh and zh.startswith("**健康告警**")
    assert alerts.marks([], frame, float) is frame and alerts.table_markdown([]) == ""


def test_dashboard_render_shows_them(tmp_path):
    view = monitor.new_view("r1", _run_folder(tmp_path))
    monitor.read_new(view)
    out = dashboard.render(view, "step", 0.0, False, "en")
    loss_update, alert_update = out[0], out[-1 - dashboard.GRPO_OUTPUTS]  # the GRPO panel comes after the alerts
    assert "⚠ grad norm @5" in set(loss_update["value"]["curve"])
    assert alert_update["visible"] is True and "gradient norm inf" in alert_update["value"]
    # on the epoch axis the mark sits where step 5's loss point is
    out = dashboard.render(view, "epoch", 0.0, False, "en")
    assert "⚠ grad norm @5" in set(out[0]["value"]["curve"])


def test_runs_column_and_cli_show(tmp_path):
    found = alerts.read_alerts(_run_folder(tmp_path))
    assert alerts.column_text(found) == "1 · Gradient norm blow-up @5"
    assert alerts.column_text(found, "zh") == "1 · 梯度范数爆炸 @5"
    assert alerts.column_text([]) == ""


def test_runs_show_lists_alerts(tmp_path, run_registry, capsys):
    from engine.commands.runs_cli import cli
    from engine.runs import registry as runs

    rid = runs.submit_command(["true"], name="with alerts")
    rec = runs.get(rid)
    watch = health.HealthWatch(HealthSpec())
    (alert,) = watch.observe_log(12, loss=float("nan"))
    alert.write(rec.events_path)
    assert cli(["runs", "show", rid]) == 0
    shown = capsys.readouterr().out
    assert "alerts       1" in shown and "  step 12  loss_nan (stop): loss nan" in shown
