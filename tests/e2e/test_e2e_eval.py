"""The Evaluate tab in a real browser: a demo LoRA run with two checkpoints is evaluated with its base from the page
(base + checkpoint-2 + checkpoint-4, the run's held-out rows); the test reads what a person sees: the table's rows,
the chart's drawn series (one point per evaluated model, beside the training loss) and the side-by-side rows, whose
cells are the prompts, references and answers the evaluation wrote."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _train_run_with_checkpoints(home: Path) -> str:
    spec = yaml.safe_load((home / "demo_spec.yaml").read_text(encoding="utf-8"))
    spec["train"].update(max_steps=4, save_steps=2, logging_steps=1)
    spec["data"].update(max_samples=48, val_size=6)
    spec["output"]["report_to"] = ["none"]
    path = home / "eval-e2e.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    env = {**os.environ, "STUDIO_HOME": str(home)}
    out = subprocess.run(
        [sys.executable, "-m", "engine.cli", "train", str(path), "--name", "eval-e2e"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0 and "completed" in out.stdout, out.stdout[-2000:] + out.stderr[-2000:]
    return out.stdout.split()[1].rstrip(":")


def _rows(page, selector: str) -> list[list[str]]:
    return page.evaluate(
        """(sel) => [...document.querySelectorAll(sel + ' [role=row].virtual-row')].map(
            tr => [...tr.querySelectorAll('[role=gridcell]')].map(td => td.innerText.trim()))""",
        selector,
    )


def test_evaluate_base_and_two_checkpoints_from_the_page(page, server, shots):
    run_id = _train_run_with_checkpoints(server.home)
    page.get_by_role("tab", name="Evaluate").click()
    page.click("#eval-run input")
    page.get_by_role("option", name=run_id).first.click()
    page.wait_for_function(
        "document.querySelectorAll('#eval-ckpts input[type=checkbox]:checked').length === 2", timeout=90_000
    )
    page.get_by_label("Final weights").uncheck()
    for sel, value in (("#eval-limit input", "3"), ("#eval-max-new input", "8")):
        page.fill(sel, value)
        page.press(sel, "Tab")
    page.click("#eval-start")
    page.wait_for_function("document.querySelector('#eval-status').innerText.includes('finished')", timeout=600_000)
    page.wait_for_function("document.querySelectorAll('#eval-sbs .virtual-row').length === 3", timeout=90_000)
    page.screenshot(path=str(shots / "eval-tab.png"), full_page=True)

    table = _rows(page, "#eval-table")
    assert [r[0].lstrip("★ ").strip() for r in table] == ["base", "checkpoint-2", "checkpoint-4"]
    assert [r[1] for r in table] == ["0", "2", "4"]
    assert sum(r[0].startswith("★") for r in table) == 1  # the best tuned row is marked
    assert not table[0][0].startswith("★")

    charts = page.evaluate(
        """() => [...document.querySelectorAll('#eval-charts svg.eval-chart')].map(s => ({
            measure: s.dataset.measure,
            points: (s.querySelector('polyline.series-measure').getAttribute('points') || '').trim().split(/\\s+/),
            loss: (s.querySelector('polyline.series-train-loss').getAttribute('points') || '').trim().split(/\\s+/),
            shown: s.getBoundingClientRect().width > 0}))"""
    )
    assert [c["measure"] for c in charts][:2] == ["loss", "perplexity"]
    assert all(len(c["points"]) == 3 and c["shown"] for c in charts)
    assert all(len(c["loss"]) == 4 for c in charts)  # the training loss at steps 1..4

    folder = sorted((server.home / "runs").glob("*/eval_plan.json"))[-1].parent  # the evaluation's folder
    preds = [json.loads(x) for x in (Path(folder) / "predictions.jsonl").read_text(encoding="utf-8").splitlines()]
    base = {p["index"]: p for p in preds if p["model"] == "base"}
    tuned = {p["index"]: p for p in preds if p["model"] == "checkpoint-4"}
    shown = _rows(page, "#eval-sbs")
    want = [
        [base[i]["prompt"], base[i]["reference"], base[i]["prediction"], tuned[i]["prediction"]] for i in sorted(base)
    ]
    assert [[" ".join(c.split()) for c in r] for r in shown] == [[" ".join(c.split()) for c in r] for r in want]
