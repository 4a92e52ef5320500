"""The verdict against the base (engine.eval.verdict), without a model: the paired bootstrap interval checked against
a resample written here with numpy and against cases with a known answer; a tuned model that is worse (the demo's
answers-only-newlines case: no best among the tied tuned rows, "no tuned model beats the base"), one that ties, one
that is better; each measure's direction; degenerate answers; what the report and ``studio eval`` say.
And the data check before launch: an LF alpaca entry without ``columns`` has reference answers."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from engine.eval import report, verdict
from engine.eval.messages import EvalError
from engine.jobs import evals
from tests import eval_fixtures as fx


def _evaluation(base_scores, tuned: dict[str, list[float]], column="rouge-l", answers=None, base_answers=None):
    """results + predictions of a base and tuned rows, ``column`` scored per row (loss: the row's loss)."""
    results = {"columns": [column], "n_rows": len(base_scores), "rows": []}
    preds = []
    models = {"base": ("base", base_scores, base_answers), **{k: ("checkpoint", v, answers) for k, v in tuned.items()}}
    for step, (label, (kind, scores, said)) in enumerate(models.items()):
        results["rows"].append(
            {"label": label, "kind": kind, "step": step, "metrics": {column: round(float(np.mean(scores)), 4)}}
        )
        for i, s in enumerate(scores):
            p = {"model": label, "index": i, "prompt": f"q{i}", "reference": f"a{i}", "question": f"q{i}"}
            p["prediction"] = (said or {}).get(i, f"answer {i}") if said is not None else f"answer {i} of {label}"
            if column == "loss":
                p["loss"] = s
            else:
                p["scores"] = {column: s}
            preds.append(p)
    return results, preds


def test_interval_is_a_paired_bootstrap_of_the_mean_difference():
    rng = random.Random(7)
    base = [rng.uniform(0, 100) for _ in range(57)]
    tuned = [b + rng.gauss(3, 20) for b in base]
    results, preds = _evaluation(base, {"final": tuned})
    got = verdict.compare(results, preds)["final"]["rouge-l"]
    want_low, want_high = fx.bootstrap_interval([t - b for t, b in zip(tuned, base)])
    assert got["low"] == pytest.approx(want_low, abs=1e-9) and got["high"] == pytest.approx(want_high, abs=1e-9)
    assert got["diff"] == pytest.approx(np.mean(tuned) - np.mean(base))
    assert got["rows"] == 57
    # blocks of resamples draw the same stream: a set too large for one block gives the one-at-a-time answer
    big = [rng.gauss(0, 1) for _ in range(1200)]
    assert verdict.interval(big, resamples=900) == pytest.approx(fx.bootstrap_interval(big, resamples=900), abs=1e-12)
    # the percentile interval is near the normal one for a mean of many rows
    d = np.array(big)
    half = 1.96 * d.std(ddof=1) / np.sqrt(len(d))
    low, high = verdict.interval(big)
    assert low == pytest.approx(d.mean() - half, abs=0.25 * half) and high == pytest.approx(
        d.mean() + half, abs=0.25 * half
    )


def test_known_answers_identical_rows_and_every_row_better():
    same = [10.0, 0.0, 55.5, 100.0, 3.0]
    assert verdict.interval([0.0] * 5) == (0.0, 0.0)
    results, preds = _evaluation(same, {"final": list(same)})
    v = verdict.compare(results, preds)["final"]["rouge-l"]
    assert (v["diff"], v["low"], v["high"], v["verdict"]) == (0.0, 0.0, 0.0, "same")
    results, preds = _evaluation(same, {"final": [s + 1 + i for i, s in enumerate(same)]})
    v = verdict.compare(results, preds)["final"]["rouge-l"]
    assert v["low"] >= 1.0 and v["verdict"] == "better"  # every row better: no resample's mean reaches 0


def test_direction_per_measure():
    lower = [2.0, 2.5, 3.0, 2.2, 2.8, 2.1]
    results, preds = _evaluation(lower, {"final": [x - 0.5 for x in lower]}, column="loss")
    assert verdict.compare(results, preds)["final"]["loss"]["verdict"] == "better"  # lower loss is better
    results["columns"].append("perplexity")
    for r in results["rows"]:
        r["metrics"]["perplexity"] = round(float(np.exp(r["metrics"]["loss"])), 4)
    verdicts = verdict.compare(results, preds)
    assert "perplexity" not in verdicts["final"]  # no per-row values of its own ...
    assert verdict.beats_base(verdicts, "final", "perplexity")  # ... it follows the loss
    assert verdict.best(results, "perplexity") == "final"
    results, preds = _evaluation(lower, {"final": [x - 0.5 for x in lower]}, column="exact_match")
    assert verdict.compare(results, preds)["final"]["exact_match"]["verdict"] == "worse"  # higher is better


def test_a_tuned_model_that_answers_only_newlines_is_worse_and_not_best():
    """The demo's case (issue 44): every tuned row scores 0 where the base scores ~46; two tuned rows tie at 0."""
    rng = random.Random(3)
    base = [rng.uniform(20, 80) for _ in range(40)]
    newlines = {i: "\n\n" for i in range(40)}
    results, preds = _evaluation(base, {"checkpoint-15": [0.0] * 40, "final": [0.0] * 40}, answers=newlines)
    results["rows"][2]["kind"] = "final"
    verdicts = verdict.compare(results, preds)
    assert {label: v["rouge-l"]["verdict"] for label, v in verdicts.items()} == {
        "checkpoint-15": "worse",
        "final": "worse",
    }
    assert verdicts["final"]["rouge-l"]["high"] < 0
    assert verdict.best(results, "rouge-l") is None  # a tie at a value worse than the base is no pick
    said = [str(m) for m in verdict.summary(results, verdicts, "rouge-l")]
    assert said[0].startswith("no best by rouge-l: checkpoint-15, final tie at 0.0000")
    assert said[1] == "no tuned model beats the base by rouge-l"
    assert verdict.degenerate_counts(preds) == {"base": (0, 40), "checkpoint-15": (40, 40), "final": (40, 40)}
    text = report.text_verdict(results, preds)
    assert "no tuned model beats the base by rouge-l" in text
    assert "final: 40 of 40 answers are degenerate" in text
    assert [line.split()[:2] + line.split()[-1:] for line in text.splitlines() if line.rstrip().endswith("worse")] == [
        ["checkpoint-15", "rouge-l", "worse"],
        ["final", "rouge-l", "worse"],
    ]
    header, rows = report.table(results, preds)
    assert header[-1] == "degenerate" and [r[-1] for r in rows] == ["0/40", "40/40", "40/40"]
    page = report.html_report(results, preds)
    assert "no tuned model beats the base by rouge-l" in page and "40 of 40 answers are degenerate" in page
    assert 'class="best"' not in page and page.count('class="verdict-worse"') == 2
    # one tuned row alone, worse than the base: it is the best tuned row, and the page says it does not beat the base
    results["rows"].pop(2)
    alone = verdict.summary(results, verdict.compare(results, preds), "rouge-l")
    assert str(alone[0]).startswith("best by rouge-l: checkpoint-15, worse than the base by rouge-l: -")
    assert str(alone[1]) == "no tuned model beats the base by rouge-l"


def test_a_tuned_model_that_ties_with_the_base():
    rng = random.Random(5)
    base = [rng.uniform(0, 100) for _ in range(30)]
    tied = [b + (1 if i % 2 else -1) * rng.uniform(0, 30) for i, b in enumerate(base)]  # noise around the base
    results, preds = _evaluation(base, {"final": tied})
    verdicts = verdict.compare(results, preds)
    v = verdicts["final"]["rouge-l"]
    assert v["low"] < 0 < v["high"] and v["verdict"] == "same"
    said = [str(m) for m in verdict.summary(results, verdicts, "rouge-l")]
    assert said[0].startswith("best by rouge-l: final, no clear difference from the base by rouge-l")
    assert said[1] == "no tuned model beats the base by rouge-l"


def test_a_tuned_model_that_is_better_is_the_best():
    rng = random.Random(9)
    base = [rng.uniform(0, 60) for _ in range(30)]
    better = [b + rng.uniform(5, 30) for b in base]
    results, preds = _evaluation(base, {"checkpoint-2": base[:], "final": better})
    verdicts = verdict.compare(results, preds)
    assert (
        verdicts["final"]["rouge-l"]["verdict"] == "better"
        and verdicts["checkpoint-2"]["rouge-l"]["verdict"] == "same"
    )
    assert verdict.best(results, "rouge-l") == "final"
    said = [str(m) for m in verdict.summary(results, verdicts, "rouge-l")]
    assert len(said) == 1 and said[0].startswith("best by rouge-l: final, better than the base by rouge-l: +")
    # tied tuned rows that beat the base: the first is the pick (a final that is its last checkpoint)
    results, preds = _evaluation(base, {"checkpoint-4": better, "final": better})
    assert verdict.best(results, "rouge-l") == "checkpoint-4"


def test_degenerate_answers():
    for text in ("", "   ", "\n\n", "the the the the", "!!!!", "哈哈哈", "ha ha ha", "OK\nOK\nOK", "5050505050"):
        assert verdict.degenerate(text) and fx.degenerate(text), repr(text)
    for text in ("B", "2 plus 3 is 5.", "11", "ha ha", "“白色”的英文是 white。", "?!!!!!", "p 14 1140 1140 1140"):
        assert not verdict.degenerate(text) and not fx.degenerate(text), repr(text)


def test_an_alpaca_entry_without_columns_has_reference_answers(tmp_path):
    """LF's most common entry, {"file_name": "x.json"}: instruction / input / output by LF's default, sft rows for the
    data registry; the evaluation's check reads it the same way (it took it for text only and refused BLEU)."""
    from engine.data import dataset_registry as registry

    rows = [{"instruction": f"What is {i} plus 1?", "input": "", "output": f"{i + 1}"} for i in range(12)]
    (tmp_path / "x.json").write_text(json.dumps(rows))
    (tmp_path / "t.jsonl").write_text("".join(json.dumps({"text": f"line {i}"}) + "\n" for i in range(3)))
    info = {"x": {"file_name": "x.json"}, "t": {"file_name": "t.jsonl", "columns": {"prompt": "text"}}}
    (tmp_path / registry.INFO_NAME).write_text(json.dumps(info))
    assert len(registry.load_rows("x", tmp_path, "sft")) == 12  # what `studio data check` reads

    def spec(name):
        return {
            "models": {"base_model": "Qwen/Qwen2.5-0.5B"},
            "data": {"source": "dataset", "datasets": [name], "dataset_dir": str(tmp_path)},
            "measures": ["loss", "bleu", "rouge", "exact"],
        }

    plan = evals.resolve(spec("x"))
    assert plan["data"]["text"] is False
    with pytest.raises(EvalError) as err:  # a text-only entry is still refused
        evals.resolve(spec("t"))
    got = {field: str(msg) for field, msg in err.value.problems}
    assert "dataset t has no reference answers" in got["measures"]


def test_a_chart_over_checkpoints_labels_both_axes_with_the_values_it_draws():
    """Issue 45 item 13: the charts over checkpoints had no y-axis values. The measure's axis (left) is labelled at
    its lowest, middle and highest value, the training loss's (right) likewise, and the lowest and highest points are
    drawn at the heights of their labels."""
    import re

    results = {
        "columns": ["bleu-4"],
        "rows": [
            {"label": "base", "kind": "base", "step": 0, "metrics": {"bleu-4": 13.09}},
            {"label": "checkpoint-15", "kind": "checkpoint", "step": 15, "metrics": {"bleu-4": 40.5}},
            {"label": "final", "kind": "final", "step": 30, "metrics": {"bleu-4": 71.61}},
        ],
        "train_loss": [(1, 4.2), (10, 1.5), (30, 0.26)],
    }
    svg = report.chart_svg(results, "bleu-4")
    measure = re.findall(r'class="tick-measure" x="[\d.]+" y="([\d.]+)"[^>]*>([^<]+)<', svg)
    loss = re.findall(r'class="tick-loss" x="[\d.]+" y="([\d.]+)"[^>]*>([^<]+)<', svg)
    assert [label for _, label in measure] == [verdict.fmt(v) for v in (13.09, (13.09 + 71.61) / 2, 71.61)]
    assert [label for _, label in loss] == [verdict.fmt(v) for v in (0.26, (0.26 + 4.2) / 2, 4.2)]
    circles = [float(y) for y in re.findall(r'<circle cx="[\d.]+" cy="([\d.]+)"', svg)]
    assert circles[0] == pytest.approx(float(measure[0][0]) - 3) and circles[-1] == pytest.approx(
        float(measure[-1][0]) - 3
    )
