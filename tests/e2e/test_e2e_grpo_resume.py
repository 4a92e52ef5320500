"""A GRPO run from the form stopped, resumed and merged, as a person does it (issue 26): the GRPO preset loaded into
the Train form with a checkpoint every 2 steps, Start, Stop once the reward chart draws, the page saying where the
checkpoint went; then Resume in the Runs tab, the resumed run watched to its end on the Train tab (its reward curves
drawn), and the finished run merged in the Export tab.

Each claim is checked against files read here, not through the studio's code: the runs' events.jsonl (the resumed
run's steps continue after the checkpoint's), and the merged folder's safetensors headers against the base model's
(the same tensor names and shapes: the adapter folded into the weights, no LoRA tensors left)."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import open_tab, pick
from tests.e2e.conftest import wait_text as _wait_text
from tests.e2e.test_e2e_charts import wait_finished, wait_logged, wait_svg
from tests.e2e.test_e2e_grpo import _preset
from tests.e2e.test_walking_skeleton import merge_in_export_tab
from tests.helpers import safetensors_shapes

pytestmark = pytest.mark.slow  # a real server, two runs, a merge and a browser

ID_RE = r"\d{8}-\d{6}-[0-9a-f]+"
# A step takes a quarter second on the demo model: enough of them that Stop, clicked once the chart draws, lands
# midway on a busy machine too; a checkpoint every 2 steps.
STEPS = 160


def _events(server, run_id: str) -> list[dict]:
    path = server.home / "runs" / run_id / "events.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _reward_steps(events: list[dict]) -> list[int]:
    return [e["step"] for e in events if e["type"] == "log" and "reward" in e["payload"].get("metrics", {})]


def test_grpo_run_stopped_resumed_and_merged(page, server, shots):
    tag = uuid.uuid4().hex[:6]
    preset, run_name = f"grpo-resume-{tag}", f"grpo-resume-{tag}"
    _preset(server, preset, run_name, max_steps=STEPS, save_steps=2)
    page.wait_for_selector("#start-btn:not([disabled])", timeout=90_000)
    page.click("#presets button")
    page.click("#preset-pick input")
    page.get_by_role("option", name=preset, exact=True).click()
    page.wait_for_function(f"document.querySelector('#preset-msg').innerText.includes('{preset}')", timeout=90_000)
    expect(page.locator("#f-train-max-steps input")).to_have_value(str(STEPS), timeout=90_000)

    # ---- Start, then Stop once the reward chart has points
    page.wait_for_selector("#start-btn:not([disabled])", timeout=90_000)
    page.click("#start-btn")
    page.wait_for_function(
        "(re) => new RegExp('Started run (' + re + ')').test(document.querySelector('#action-msg').innerText)",
        arg=ID_RE,
        timeout=90_000,
    )
    run_id = re.search(f"Started run ({ID_RE})", page.inner_text("#action-msg")).group(1)
    wait_logged(server, run_id, timeout=400)  # this run trains (the chart may still show an earlier GRPO run)
    drawn = wait_svg(page, "#plot-grpo-rewards", "s.lines.some(l => l.visible && l.points >= 1)", timeout_ms=400_000)
    assert drawn and any(line["points"] >= 1 for line in drawn["lines"]), drawn
    page.click("#stop-btn")
    page.wait_for_function(
        "['checkpoint saved at', 'is still stopping', 'has already ended'].some(w =>"
        " document.querySelector('#action-msg').innerText.includes(w))",
        timeout=300_000,
    )
    assert "has already ended" not in page.inner_text("#action-msg"), "the run ended before Stop: more steps needed"
    status = _wait_text(page, "#run-status", "stopped", timeout=300_000)
    assert "checkpoint saved at" in status, status
    page.screenshot(path=str(shots / "grpo-resume-stopped.png"))
    stopped = [e for e in _events(server, run_id) if e["type"] == "stopped"]
    assert stopped, _events(server, run_id)[-5:]
    k, checkpoint = stopped[-1]["step"], stopped[-1]["payload"]["checkpoint"]
    assert 0 < k < STEPS and Path(checkpoint).is_dir(), stopped  # stopped midway, its checkpoint on disk
    assert checkpoint in status, (checkpoint, status)
    assert _reward_steps(_events(server, run_id)) == list(range(1, k + 1))

    # ---- Resume in the Runs tab: a new run from the stopped run's checkpoint
    open_tab(page, "Runs")
    pick(page, "#runs-one", run_id)
    page.click("#runs-resume")
    said = _wait_text(page, "#runs-msg", f"resumed run {run_id} as run ", timeout=120_000)
    new_id = re.search(f"as run ({ID_RE})", said).group(1)
    assert new_id != run_id and checkpoint in said, said  # it starts from the checkpoint the page named
    page.screenshot(path=str(shots / "grpo-resume-resumed.png"))

    # ---- the resumed run watched to its end on the Train tab
    open_tab(page, "Train")
    pick(page, "#run-picker", new_id)
    wait_finished(page, new_id, timeout_ms=600_000)
    events = _events(server, new_id)
    assert events[-1]["type"] == "finished", events[-3:]
    steps = _reward_steps(events)
    assert steps == list(range(k + 1, STEPS + 1)), (k, steps)  # continues after the checkpoint, not from step 1
    rewards = wait_svg(
        page,
        "#plot-grpo-rewards",
        f"s.lines.length === 3 && s.lines.every(l => l.visible && l.points === {len(steps)}) && s.legend.length === 3",
        timeout_ms=180_000,
    )
    assert rewards and sorted(rewards["legend"]) == ["has_digit", "math", "total"], rewards
    assert all(line["visible"] and line["points"] == len(steps) for line in rewards["lines"]), rewards["lines"]
    page.locator("#plot-grpo-rewards").scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "grpo-resume-finished.png"))

    # ---- the finished run merged in the Export tab: the base model's tensors, trained
    merged = Path(merge_in_export_tab(page, new_id, timeout=400_000))
    page.screenshot(path=str(shots / "grpo-resume-merged.png"))
    assert (merged / "config.json").is_file(), sorted(p.name for p in merged.iterdir())
    base = safetensors_shapes(server.home / "models" / "demo-tiny-llama")
    got = safetensors_shapes(merged)
    assert base and got == base, (sorted(set(got) ^ set(base)), {k: (got.get(k), v) for k, v in base.items()})
    assert not [name for name in got if "lora" in name.lower()]
