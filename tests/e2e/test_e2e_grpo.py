"""GRPO from the page as a person does it (issue 26): a preset with two reward functions (the math checker and a
format regex) loaded into the Train form, the rewards dry-run on 8 real rows with a table of scores per function and
row, then the run started and watched: each reward's curve and the weighted total drawn as coloured lines named in
the legend, KL and completion length, and the sample completions with their rewards.

Every score is checked against a computation made here: the dataset's own answers against the dataset file, the
samples' regex reward against Python's ``re`` on the completion shown."""

from __future__ import annotations

import json
import re
import uuid

import pytest
import yaml
from playwright.sync_api import expect

from tests.e2e.conftest import open_tab
from tests.e2e.test_e2e_charts import wait_finished, wait_svg

pytestmark = pytest.mark.slow  # a real server, a run and a browser

HAS_DIGIT = r".*\d.*"


def _preset(server, name: str, run_name: str, max_steps: int = 3, save_steps: int = 1000) -> None:
    """A preset as the page saves one: the GRPO example with the demo model, a short run and two rewards (a
    checkpoint every ``save_steps`` steps)."""
    data = {
        "schema_version": 1,
        "model": {"name_or_path": str(server.home / "models" / "demo-tiny-llama")},
        "method": {
            "stage": "grpo",
            "finetuning": "lora",
            "grpo": {
                "num_generations": 4,
                "max_prompt_length": 128,
                "max_completion_length": 8,
                "beta": 0.04,  # a KL term, so TRL logs kl (LoRA's reference: the base with the adapter off)
                "rewards": [
                    {"kind": "math", "weight": 1.0},
                    {"kind": "regex", "name": "has_digit", "pattern": HAS_DIGIT, "weight": 0.5},
                ],
            },
        },
        "data": {"datasets": ["grpo_arith"], "template": "auto"},
        "train": {
            "max_steps": max_steps,
            "per_device_batch_size": 4,
            "gradient_accumulation": 1,
            "learning_rate": 1.0e-3,
            "logging_steps": 1,
            "save_steps": save_steps,
        },
        "launch": {"device": "auto"},
        "output": {"run_name": run_name, "report_to": ["none"]},
    }
    folder = server.home / "presets"
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


TABLE_JS = """(sel) => [...document.querySelectorAll(sel + ' [role=row]')].map(
  r => [...r.querySelectorAll('[role=gridcell], [role=columnheader]')].map(c => c.innerText.trim()))"""


def _table(page, selector: str, rows: int, timeout_ms: int = 180_000) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of a gr.Dataframe once it shows ``rows`` rows (it draws the rows in view: scrolled to it). The
    mouse is moved off the table first: a hovered header cell shows its menu button, whose "⋮" joins its text."""
    page.locator(selector).scroll_into_view_if_needed()
    page.mouse.move(0, 0)
    page.wait_for_function(
        f"(sel) => ({TABLE_JS})(sel).filter(r => r.length).length === {rows + 1}", arg=selector, timeout=timeout_ms
    )
    header, *body = [r for r in page.evaluate(TABLE_JS, selector) if r]
    return header, body


def test_grpo_from_the_form_dry_run_then_rewards_drawn_live(page, server, shots, fits_width):
    tag = uuid.uuid4().hex[:6]
    preset, run_name = f"grpo-e2e-{tag}", f"grpo-{tag}"
    _preset(server, preset, run_name)
    page.wait_for_selector("#start-btn:not([disabled])", timeout=90_000)
    page.click("#presets button")
    page.click("#preset-pick input")
    page.get_by_role("option", name=preset, exact=True).click()
    page.wait_for_function(f"document.querySelector('#preset-msg').innerText.includes('{preset}')", timeout=90_000)
    rewards_box = page.locator("#f-method-grpo-rewards textarea")
    page.locator("#sec-method-grpo").get_by_text("GRPO", exact=True).first.click()  # the section opens
    expect(rewards_box).to_have_value(re.compile(r"kind: math"), timeout=90_000)
    expect(rewards_box).to_have_value(re.compile(r"name: has_digit"))

    # ---- the dry run: the dataset's own answers, 8 rows, one column per reward
    page.locator("#rewards-try").get_by_text("Try the reward functions (GRPO)").click()
    page.click("#rt-run")
    page.wait_for_function(
        "(document.querySelector('#rt-summary')?.innerText ?? '').includes('has_digit')", timeout=180_000
    )
    header, rows = _table(page, "#rt-table", 8)
    assert header == ["dataset", "row", "completion", "math", "has_digit"], header
    answers = json.loads((server.home / "data" / "grpo_arith.json").read_text())[:8]
    for cells, row in zip(rows, answers):
        assert cells[0] == "grpo_arith" and cells[2] == row["output"], (cells, row)
        assert float(cells[3]) == 1.0  # the answer is its own reference
        assert float(cells[4]) == (1.0 if re.fullmatch(HAS_DIGIT, row["output"].strip(), re.S) else 0.0)
    summary = page.inner_text("#rt-summary")
    assert "math: mean 1 over 8 scored rows (weight 1)" in summary, summary
    assert "has_digit: mean 1 over 8 scored rows (weight 0.5)" in summary, summary
    page.locator("#rewards-try").screenshot(path=str(shots / "grpo-dry-run.png"))

    # ---- the run, watched: each reward's curve and the total, KL, length, the samples
    page.wait_for_selector("#start-btn:not([disabled])", timeout=90_000)
    page.click("#start-btn")
    id_re = r"\d{8}-\d{6}-[0-9a-f]+"
    page.wait_for_function(
        "(re) => new RegExp('Started run (' + re + ')').test(document.querySelector('#action-msg').innerText)",
        arg=id_re,
        timeout=90_000,
    )
    run_id = re.search(f"Started run ({id_re})", page.inner_text("#action-msg")).group(1)
    wait_finished(page, run_id, timeout_ms=600_000)
    events = [json.loads(line) for line in (server.home / "runs" / run_id / "events.jsonl").read_text().splitlines()]
    logs = [e["payload"]["metrics"] for e in events if e["type"] == "log" and "reward" in e["payload"]["metrics"]]
    assert len(logs) == 3, logs
    drawn = wait_svg(
        page,
        "#plot-grpo-rewards",
        "s.lines.length === 3 && s.lines.every(l => l.visible && l.points === 3) && s.legend.length === 3",
        timeout_ms=180_000,
    )
    assert drawn and sorted(drawn["legend"]) == ["has_digit", "math", "total"], drawn
    assert all(line["visible"] and line["points"] == 3 for line in drawn["lines"]), drawn["lines"]
    assert len({line["color"] for line in drawn["lines"]}) == 3, drawn["lines"]  # three colours told apart
    spread = wait_svg(
        page, "#plot-grpo-std", "s.lines.length === 3 && s.lines.every(l => l.visible && l.points === 3)"
    )
    assert spread and sorted(spread["legend"]) == ["has_digit", "math", "total"], spread
    kl = wait_svg(page, "#plot-grpo-kl", "s.lines.length === 2 && s.lines.every(l => l.visible && l.points === 3)")
    assert kl and sorted(kl["legend"]) == ["KL", "entropy"], kl
    length = wait_svg(page, "#plot-grpo-length", "s.lines.length === 2 && s.lines.every(l => l.visible)")
    assert length and len(length["legend"]) == 2, length
    # the Tokens/s chart draws GRPO's throughput too (issue 45 item 16: it stayed empty), one point per logged step
    tps = wait_svg(page, "#plot-tps", "s.lines.some(l => l.visible && l.points === 3)")
    assert tps and any(line["visible"] and line["points"] == 3 for line in tps["lines"]), tps
    last = [e for e in events if e["type"] == "completions"][-1]["payload"]["samples"]
    assert last
    head, samples = _table(page, "#grpo-samples", len(last), timeout_ms=90_000)
    assert head[:3] == ["step", "prompt", "completion"] and "math" in head and "total" in head, head
    col = head.index("has_digit")
    for cells, sample in zip(samples, last):
        assert "What is" in cells[1], cells
        want = 1.0 if re.fullmatch(HAS_DIGIT, sample["completion"].strip(), re.S) else 0.0
        assert float(cells[col]) == want, (cells, sample)
    page.locator("#plot-grpo-rewards").scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "grpo-run.png"))
    assert fits_width(page)

    # ---- the Runs tab compares runs on one reward: the figure picker offers what the run logged
    open_tab(page, "Runs")
    compare = page.locator("#runs-compare input")
    compare.click()
    compare.fill(run_name)  # the picker filters its labels by what is typed
    option = page.locator("[role=option]", has_text=run_name)
    expect(option).to_have_count(1, timeout=90_000)
    option.click()
    page.click("#runs-diff")  # closes the picker
    wait_svg(page, "#runs-overlay", "s.lines.length === 1 && s.lines[0].visible")
    page.click("#runs-figure input")
    page.get_by_role("option", name="reward: math", exact=True).click()
    drawn = wait_svg(page, "#runs-overlay", "s.lines.length === 1 && s.lines[0].visible && s.lines[0].points === 3")
    assert drawn and drawn["legend"] == [run_name], drawn
    expect(page.locator("#runs-overlay")).to_contain_text("reward: math")
    page.locator("#runs-overlay").scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "grpo-runs-overlay.png"))
