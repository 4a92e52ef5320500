"""The Evaluate tab in a real browser: a demo LoRA run with two checkpoints is evaluated with its base from the page
(base + checkpoint-2 + checkpoint-4, the run's held-out rows, and lm-eval's bundled demo task); the test reads what a
person sees: the table's rows (lm-eval's accuracy recomputed from the documents lm-eval scored), the chart's drawn
series (one point per evaluated model, beside the training loss) and the side-by-side rows, whose cells are the
prompts, references and answers the evaluation wrote; then a row opened in the Chat tab (its question in the prompt
box, the base and the checkpoint loaded) and sent to both models."""

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

from tests import eval_fixtures as fx
from tests.e2e.conftest import type_field
from tests.judge_standin import JudgeStandin

ROOT = Path(__file__).resolve().parents[2]


_TRAINED: dict[Path, str] = {}


def _train_run_with_checkpoints(home: Path) -> str:
    """A demo LoRA run of 4 steps with checkpoints at 2 and 4 (trained once per studio home, from the CLI)."""
    if home not in _TRAINED:
        _TRAINED[home] = _train(home)
    return _TRAINED[home]


def _train(home: Path) -> str:
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


def _completed_runs(home: Path) -> list[str]:
    """The ids of the workspace's completed training runs (ids sort by their start time)."""
    env = {**os.environ, "STUDIO_HOME": str(home)}
    code = (
        "from engine.runs import registry as r\n"
        "print(' '.join(x.id for x in r.list_runs(refresh_status=False) if x.training and x.status == 'completed'))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    return out.stdout.split()


def _rows(page, selector: str) -> list[list[str]]:
    return page.evaluate(
        """(sel) => [...document.querySelectorAll(sel + ' [role=row].virtual-row')].map(
            tr => [...tr.querySelectorAll('[role=gridcell]')].map(td => td.innerText.trim()))""",
        selector,
    )


ID_RE = r"\d{8}-\d{6}-[0-9a-f]+"


def _start_and_wait(page) -> str:
    """Start the evaluation and wait until the status says this one finished: the tab opens on the last evaluation,
    whose status may already say finished. Its id."""
    before = re.findall(ID_RE, page.inner_text("#eval-status"))
    page.click("#eval-start")
    page.wait_for_function(
        "([re, before]) => { const s = (document.querySelector('#eval-status')?.innerText ?? '');"
        " return s.includes('finished') && (s.match(new RegExp(re, 'g')) || []).some(x => !before.includes(x)); }",
        arg=[ID_RE, before],
        timeout=600_000,
    )
    return next(x for x in re.findall(ID_RE, page.inner_text("#eval-status")) if x not in before)


def test_evaluate_base_and_two_checkpoints_from_the_page(page, server, shots):
    run_id = _train_run_with_checkpoints(server.home)
    page.get_by_role("tab", name="Evaluate").click()
    # the first visit shows a run: the newest completed training run, never a job (merge, evaluation, serve)
    page.wait_for_function("(document.querySelector('#eval-run input')?.value ?? '').length > 0", timeout=30_000)
    picked = page.input_value("#eval-run input")
    assert picked.split(" · ")[0] == sorted(_completed_runs(server.home))[-1], picked
    page.click("#eval-run input")
    page.get_by_role("option", name=run_id).first.click()
    page.wait_for_function(
        "document.querySelectorAll('#eval-ckpts input[type=checkbox]:checked').length === 2", timeout=90_000
    )
    page.get_by_label("Final weights").uncheck()
    page.locator("#eval-measures").get_by_label("lm_eval", exact=True).check()  # the bundled demo task, offline
    for sel, value in (("#eval-limit input", "3"), ("#eval-max-new input", "8")):
        page.fill(sel, value)
        page.press(sel, "Tab")
    eval_id = _start_and_wait(page)
    page.wait_for_function("document.querySelectorAll('#eval-sbs .virtual-row').length === 3", timeout=90_000)
    page.screenshot(path=str(shots / "eval-tab.png"), full_page=True)

    table = _rows(page, "#eval-table")
    assert [r[0].lstrip("★ ").strip() for r in table] == ["base", "checkpoint-2", "checkpoint-4"]
    assert [r[1] for r in table] == ["0", "2", "4"]
    _verdicts_as_seen(page, server.home / "runs" / eval_id, table)

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

    # lm-eval's accuracy on the demo task: the share of documents lm-eval itself scored right, per model
    header = page.evaluate(
        "() => [...document.querySelectorAll('#eval-table [role=columnheader]')].map(h => h.innerText.trim())"
    )
    col = next(k for k, h in enumerate(header) if h.startswith("studio_demo_mc/acc"))
    folder = server.home / "runs" / eval_id  # the evaluation's folder
    docs = [json.loads(x) for x in (folder / "lm_eval_samples.jsonl").read_text(encoding="utf-8").splitlines()]
    for row in table:
        mine = [float(d["acc"]) for d in docs if d["model"] == row[0].lstrip("★ ").strip()]
        assert len(mine) == 12, (row, len(mine))  # the bundled task's 12 questions, each scored
        assert float(row[col]) == pytest.approx(100 * sum(mine) / len(mine), abs=0.01), (header, row)
    preds = [json.loads(x) for x in (Path(folder) / "predictions.jsonl").read_text(encoding="utf-8").splitlines()]
    base = {p["index"]: p for p in preds if p["model"] == "base"}
    tuned = {p["index"]: p for p in preds if p["model"] == "checkpoint-4"}
    shown = _rows(page, "#eval-sbs")
    want = [  # the question as asked, not the rendered template
        [base[i]["question"], base[i]["reference"], base[i]["prediction"], tuned[i]["prediction"]]
        for i in sorted(base)
    ]
    assert [[" ".join(c.split()) for c in r] for r in shown] == [[" ".join(c.split()) for c in r] for r in want]
    assert not any("<|im_start|>" in r[0] for r in shown)
    # the four columns side by side within the table: the answers are not pushed off to the right
    edges = page.evaluate(
        """() => { const t = document.querySelector('#eval-sbs').getBoundingClientRect();
            return [...document.querySelectorAll('#eval-sbs [role=columnheader]')].map(h => {
                const r = h.getBoundingClientRect(); return [r.left - t.left, r.right - t.left, t.width]; }); }"""
    )
    assert len(edges) == 4 and all(right <= width + 1 and right - left < width / 2 for left, right, width in edges)
    # the report is a download, served behind the login (not a path to copy)
    with page.expect_download() as got:
        page.click("#eval-report")
    assert got.value.suggested_filename == "report.html"
    assert Path(got.value.path()).read_bytes() == (folder / "report.html").read_bytes()

    # ---- a row opened in the Chat tab: the base and the checkpoint it was compared with, the row's question, Send
    k = 1
    page.locator("#eval-sbs [role=row].virtual-row").nth(k).locator("[role=gridcell]").first.click()
    page.click("#eval-open-chat")
    page.get_by_role("tab", name="Chat", selected=True).wait_for(state="visible")
    question = base[sorted(base)[k]]["question"]
    expect(page.locator("#chat-prompt textarea")).to_have_value(question, timeout=90_000)
    page.wait_for_function(
        "(document.querySelector('#chat-status')?.innerText ?? '').includes('loaded base, tuned')", timeout=180_000
    )
    status = page.inner_text("#chat-status")
    assert "checkpoint-4" in page.input_value("#chat-adapter input") and "checkpoint-4" in status, status
    page.click("#chat-send")
    page.wait_for_function(
        """() => ['#chat-base', '#chat-tuned'].every(p => document.querySelectorAll(p + ' .message-row').length === 2)
            && !document.querySelector('#chat-send').disabled""",
        timeout=240_000,
    )
    for pane in ("#chat-base", "#chat-tuned"):
        bubbles = [x.inner_text().strip() for x in page.locator(f"{pane} .message-row").all()]
        assert " ".join(bubbles[0].split()) == " ".join(question.split()) and bubbles[1], (pane, bubbles)
    page.screenshot(path=str(shots / "eval-open-in-chat.png"), full_page=True)


def _verdicts_as_seen(page, folder: Path, table: list[list[str]]) -> None:
    """What a person reads about the base: the ★ on the best tuned row by rouge-l (none when the tuned rows tie at a
    value no better than the base's), each tuned row's verdict per measure recomputed from predictions.jsonl with the
    bootstrap written out in eval_fixtures, "no tuned model beats the base" when none does, the degenerate answers;
    then Merge the best: a row that does not beat the base is not merged before Merge anyway."""
    header = page.evaluate(
        "() => [...document.querySelectorAll('#eval-table [role=columnheader]')].map(h => h.innerText.trim())"
    )
    rouge = next(k for k, h in enumerate(header) if h.startswith("rouge-l"))
    values = {r[0].lstrip("★ ").strip(): float(r[rouge]) for r in table}
    top = max(v for k, v in values.items() if k != "base")
    tied = [k for k, v in values.items() if k != "base" and v == top]
    best = None if len(tied) > 1 and top <= values["base"] else tied[0]
    assert [r[0].lstrip("★ ").strip() for r in table if r[0].startswith("★")] == ([best] if best else [])
    preds = [json.loads(x) for x in (folder / "predictions.jsonl").read_text(encoding="utf-8").splitlines()]
    by: dict[str, dict] = {}
    for p in preds:
        by.setdefault(p["model"], {})[p["index"]] = p
    degenerate = next(k for k, h in enumerate(header) if h.startswith("degenerate"))
    for row in table:
        mine = by[row[0].lstrip("★ ").strip()].values()
        assert row[degenerate] == f"{sum(fx.degenerate(p['prediction']) for p in mine)}/{len(mine)}", row
    seen = page.evaluate(
        """() => [...document.querySelectorAll('#eval-verdict table tbody tr')].map(
            tr => [...tr.querySelectorAll('td')].map(td => td.innerText.trim()))"""
    )
    want = []
    for label in ("checkpoint-2", "checkpoint-4"):
        for col in ("loss", "bleu-4", "rouge-1", "rouge-2", "rouge-l", "exact_match"):

            def value(p, col=col):
                return p["loss"] if col == "loss" else p["scores"][col]

            diffs = [value(by[label][i]) - value(by["base"][i]) for i in sorted(by["base"])]
            low, high = fx.bootstrap_interval(diffs)
            side = "better" if (low > 0) == (col != "loss") else "worse"
            want.append([label, col, "no clear difference" if low <= 0 <= high else side])
    assert [[r[0], r[1], r[4]] for r in seen] == want, seen
    said = page.inner_text("#eval-best")
    none_beats = not any(w == ["better"] for w in (x[2:] for x in want if x[1] == "rouge-l"))
    assert ("no tuned model beats the base by rouge-l" in said) is none_beats, said
    if best:
        assert f"best by rouge-l: {best}" in said
    page.click("#eval-merge")
    # the answer itself, not gradio's status lines ("queue: 1/1 | 0.0s", "processing | 0.1s") shown while the click
    # waits its turn and runs: every answer names the measure, refuses, or says what it merges
    page.wait_for_function(
        "(() => { const t = (document.querySelector('#eval-merged')?.innerText ?? '').trim();"
        " return t.startsWith('❌') || t.includes('rouge-l') || /merg/i.test(t); })()"
    )
    merged = page.inner_text("#eval-merged")
    if best is None:
        assert merged.startswith("❌ no best by rouge-l"), merged
        expect(page.locator("#eval-merge-anyway")).to_be_hidden()
    elif none_beats:  # asked first: nothing merges until Merge anyway is clicked
        assert f"{best} does not beat the base by rouge-l" in merged and "merge it anyway?" in merged, merged
        expect(page.locator("#eval-merge-anyway")).to_be_visible()
        page.click("#eval-merge-anyway")
    if best is not None:  # the merge followed to its end: the line says merged, not "merging …" for ever
        page.wait_for_function(
            "(document.querySelector('#eval-merged')?.innerText ?? '').includes('✅')", timeout=300_000
        )
        assert "merged" in page.inner_text("#eval-merged").lower()


def _pair_rule(prompt: str) -> str:
    """The stand-in judge: the longer answer wins; answers of one length: A (a judge biased to a position)."""
    a = prompt.split("Answer A:\n", 1)[1].split("\n\nAnswer B:\n", 1)[0]
    b = prompt.split("\n\nAnswer B:\n", 1)[1].split("\n\nWhich answer", 1)[0]
    return "Winner: B" if len(b) > len(a) else "Winner: A"


def test_pairwise_judge_from_the_page(page, server, shots):
    """The judge section as a person fills it: a local OpenAI-compatible judge, the Pairwise box (the prompt box then
    holds the pairwise prompt), Start; the table's judge_win is the tuned model's share of the verdicts, recomputed
    here from the answers the evaluation wrote and the judge's rule, and the judge was asked each row both ways."""
    run_id = _train_run_with_checkpoints(server.home)
    with JudgeStandin(_pair_rule) as judge:
        page.get_by_role("tab", name="Evaluate").click()
        page.click("#eval-run input")
        page.get_by_role("option", name=run_id).first.click()
        page.wait_for_function(
            "document.querySelectorAll('#eval-ckpts input[type=checkbox]:checked').length === 2", timeout=90_000
        )
        for ckpt in page.locator("#eval-ckpts input[type=checkbox]").all():
            ckpt.uncheck()  # the base and the final weights only
        page.get_by_label("Base model").uncheck()  # the Pairwise box evaluates it anyway: it is the other side
        measures = page.locator("#eval-measures")
        for name in ("loss", "bleu", "rouge"):
            measures.get_by_label(name, exact=True).uncheck()
        measures.get_by_label("judge", exact=True).check()
        page.locator("#eval-more").get_by_text("lm-eval tasks and the judge", exact=True).first.click()
        type_field(page, "#eval-judge-url textarea", judge.url)  # once the opened section is drawn
        type_field(page, "#eval-judge-model textarea", "judge-7b")
        page.locator("#eval-judge-pairwise input[type=checkbox]").check()
        expect(page.locator("#eval-judge-prompt textarea")).to_have_value(
            re.compile(r"Answer A:\n\{answer_a\}.*Winner: A, Winner: B or Winner: tie", re.DOTALL), timeout=90_000
        )
        for sel, value in (("#eval-limit input", "3"), ("#eval-max-new input", "8")):
            page.fill(sel, value)
            page.press(sel, "Tab")
        eval_id = _start_and_wait(page)
        sent = [r["body"]["messages"][-1]["content"] for r in judge.requests]
    page.locator("#eval-table").scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "eval-pairwise.png"), full_page=True)

    folder = server.home / "runs" / eval_id
    preds = [json.loads(x) for x in (folder / "predictions.jsonl").read_text(encoding="utf-8").splitlines()]
    base = {p["index"]: p["prediction"] for p in preds if p["model"] == "base"}
    final = {p["index"]: p["prediction"] for p in preds if p["model"] == "final"}
    assert len(base) == len(final) == 3 and len(sent) == 6  # each row asked twice
    points = []
    for i, answer in final.items():
        as_b = 1.0 if len(answer) > len(base[i]) else 0.0
        as_a = 1.0 if len(answer) >= len(base[i]) else 0.0
        points.append((as_a + as_b) / 2)
    want = 100 * sum(points) / len(points)
    header = page.evaluate(
        "() => [...document.querySelectorAll('#eval-table [role=columnheader]')].map(h => h.innerText.trim())"
    )
    table = {r[0].lstrip("★ ").strip(): r for r in _rows(page, "#eval-table")}
    assert set(table) == {"base", "final"}, table
    col = next(k for k, h in enumerate(header) if h.startswith("judge_win"))
    assert float(table["final"][col]) == pytest.approx(want, abs=0.01), (header, table, want)
    # the judge's mean score has no figure in this mode: no empty chart for it, one for the win rate
    drawn = page.evaluate(
        "() => [...document.querySelectorAll('#eval-charts svg.eval-chart')].map(s => s.dataset.measure)"
    )
    assert "judge_win" in drawn and "judge" not in drawn, drawn
