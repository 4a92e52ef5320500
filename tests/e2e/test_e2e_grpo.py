"""A GRPO run as a person watches it on the dashboard: each reward function's curve and the weighted total, KL and
completion length, and the sample completions table with their rewards, in English and Chinese. The run is started
with `studio train --detach` (the command line a user types) and chosen in the page's run picker."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from playwright.sync_api import expect

from tests.e2e.test_e2e_charts import wait_svg

pytestmark = pytest.mark.slow  # a real server, run and browser
ROOT = Path(__file__).resolve().parents[2]
STEPS = 3


def test_grpo_dashboard_draws_rewards_and_sample_completions(page, server, shots, tmp_path):
    spec = {
        "model": {"name_or_path": str(server.home / "models" / "demo-tiny-llama")},
        "method": {
            "stage": "grpo",
            "grpo": {
                "num_generations": 4,
                "max_completion_length": 8,
                "beta": 0.04,
                "rewards": [{"kind": "math"}, {"kind": "regex", "name": "has_digit", "pattern": r".*\d.*"}],
            },
        },
        "data": {"datasets": ["grpo_arith"]},
        "train": {"max_steps": STEPS, "per_device_batch_size": 4, "gradient_accumulation": 1, "logging_steps": 1},
        "output": {"run_name": "grpo-e2e"},
    }
    path = tmp_path / "grpo.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    env = {**os.environ, "STUDIO_HOME": str(server.home), "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-m", "engine.cli", "train", str(path), "--detach"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    run_id = re.search(r"\d{8}-\d{6}-[0-9a-f]+", out.stdout + out.stderr).group(0)

    page.wait_for_selector("#run-picker input", timeout=60_000)
    page.fill("#run-picker input", run_id)
    page.keyboard.press("Enter")
    page.wait_for_function(
        f"document.querySelector('#run-status').innerText.includes('{run_id}')"
        " && document.querySelector('#run-status').innerText.includes('completed')",
        timeout=600_000,
    )
    events = [json.loads(x) for x in (server.home / "runs" / run_id / "events.jsonl").read_text().splitlines()]
    logs = [e for e in events if e["type"] == "log"]
    assert len(logs) == STEPS

    # one line per reward and the total, a point per logged step each
    check = f"s.lines.filter(l => l.visible).length === 3 && s.lines.every(l => l.points === {STEPS})"
    drawn = wait_svg(page, "#plot-grpo-rewards", check + " && s.legend.includes('total')", timeout_ms=120_000)
    assert drawn and sorted(drawn["legend"]) == ["has_digit", "math", "total"], drawn
    expect(page.locator("#plot-grpo-rewards")).to_contain_text("GRPO rewards")
    drawn = wait_svg(page, "#plot-grpo-kl", "s.legend.includes('KL') && s.lines.length === 2")
    assert drawn and sorted(drawn["legend"]) == ["KL", "entropy"], drawn
    drawn = wait_svg(page, "#plot-grpo-length", "s.legend.includes('mean length') && s.lines.length === 2")
    assert drawn and sorted(drawn["legend"]) == ["clipped %", "mean length"], drawn

    # the newest step's samples, as the events file holds them
    newest = [e for e in events if e["type"] == "completions"][-1]["payload"]["samples"]
    table = page.locator("#grpo-samples")
    expect(table).to_be_visible()
    expect(table).to_contain_text("has_digit")
    expect(table).to_contain_text("What is")
    rows = table.locator("tbody tr")
    expect(rows).to_have_count(len(newest))
    question = re.search(r"What is \d+ [-+*] \d+\?", newest[0]["prompt"]).group(0)
    expect(rows.first).to_contain_text(question)
    page.locator("#plot-grpo-rewards").scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "grpo-dashboard.png"), full_page=True)

    page.click("#lang-picker input")
    page.get_by_role("option", name="中文").click()
    expect(page.locator("#plot-grpo-rewards")).to_contain_text("GRPO 奖励", timeout=30_000)
    drawn = wait_svg(page, "#plot-grpo-rewards", "s.legend.includes('总分')")
    assert drawn and "总分" in drawn["legend"], drawn
    expect(page.locator("#grpo-samples")).to_contain_text("提示")
