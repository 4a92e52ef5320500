"""Health alerts as a person sees them (issue 28): a run started from the page with learning rate 1.0 diverges, a
health rule stops it, and the dashboard marks the alert's step on the Loss chart (a red rule named in the legend),
lists it with its reason, says why the run stopped, and the Runs table counts it; in English and in Chinese.
Screenshots go to test-artifacts/."""

from __future__ import annotations

import json
import uuid

import pytest
from playwright.sync_api import expect

from engine.core.messages import payload_message
from studio.alerts import ALERT_COLOR
from studio.i18n.localize import localize
from tests.e2e.test_e2e_charts import start_run, wait_svg

pytestmark = pytest.mark.slow  # a real server, a run and a browser


def alert_events(server, run_id: str) -> list[dict]:
    path = server.home / "runs" / run_id / "events.jsonl"
    return [e for e in map(json.loads, path.read_text().splitlines()) if e["type"] == "alert"]


def test_a_diverging_run_is_stopped_and_its_alert_marked_and_listed(page, server, shots):
    run_id = start_run(page, f"diverge-{uuid.uuid4().hex[:6]}", steps=60, lr="1")
    page.wait_for_function(
        f"(() => {{ const s = document.querySelector('#run-status').innerText;"
        f" return s.includes('{run_id}') && /stopped|completed|failed/.test(s); }})",
        timeout=600_000,
    )
    status = page.inner_text("#run-status")
    assert "stopped by health rule" in status, status
    every = alert_events(server, run_id)  # a busy machine may add a throughput note before the stop
    (alert,) = [a for a in every if a["payload"]["action"] == "stop"]
    step, reason = alert["step"], alert["payload"]["reason"]
    assert alert["payload"]["rule"] == "grad_norm" and f"at step {step}" in status

    # the mark: a red vertical rule (two points) at the alert's step, its own legend entry
    name = f"⚠ grad norm @{step}"
    check = f"s.legend.includes({json.dumps(name)}) && s.lines.some(l => l.color === '{ALERT_COLOR}' && l.visible)"
    drawn = wait_svg(page, "#plot-loss", check)
    page.locator("#plot-loss").scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "health-alert-mark.png"))
    assert drawn and name in drawn["legend"], drawn
    red = [line for line in drawn["lines"] if line["color"] == ALERT_COLOR]
    assert len(red) == len(every) and all(r["visible"] and r["points"] == 2 for r in red), drawn["lines"]

    # the list under the status: step, rule, action, reason
    expect(page.locator("#run-alerts")).to_contain_text("Health alerts", timeout=90_000)
    listed = page.inner_text("#run-alerts")
    assert str(step) in listed and "Gradient norm blow-up" in listed and "stop" in listed and reason in listed, listed

    # in Chinese: the legend, the list and the reason follow the language
    page.click("#lang-picker input")
    page.get_by_role("option", name="中文").click()
    zh = f"⚠ 梯度范数 @{step}"
    drawn = wait_svg(page, "#plot-loss", f"s.legend.includes({json.dumps(zh)})")
    assert drawn and zh in drawn["legend"], drawn
    expect(page.locator("#run-alerts")).to_contain_text("健康告警", timeout=90_000)
    listed = page.inner_text("#run-alerts")
    # the reason in Chinese: inf / NaN, or a finite norm over the limit, whichever the divergence reached first
    reason_zh = localize(payload_message(alert["payload"], "reason"), "zh")
    assert reason_zh.startswith("梯度范数") and reason_zh != reason, reason_zh
    assert "梯度范数爆炸" in listed and reason_zh in listed and "停止" in listed, listed
    expect(page.locator("#run-status")).to_contain_text("被健康规则停止", timeout=90_000)
    page.screenshot(path=str(shots / "health-alert-zh.png"))
