"""Is a tuned model better than its base? A claim with its uncertainty: for each tuned row (checkpoint, final,
adapter, model folder) and each measure with per-row values, the mean of the per-row differences (tuned - base, on the
rows both have) with a paired bootstrap 95% interval, and the verdict: better / worse when the interval lies wholly
on the measure's good / bad side (its direction: ``engine.eval.spec.direction``), no clear difference when it holds 0.

The bootstrap: the differences in row order (the rows' indexes, ascending), ``RESAMPLES`` resamples of as many rows
drawn with replacement, row ``floor(u * n)`` for each uniform double ``u`` of numpy's ``default_rng(SEED)`` (resample
by resample); the interval is the 2.5th and 97.5th percentiles of the resamples' means (numpy's default, linear).

The per-row values are the evaluation's ``predictions.jsonl`` (written by ``engine.trainer.evaluate``): each row's
``loss`` (the mean over its answer tokens, so its difference can differ a little from the table's token-weighted
loss), its ``scores`` (``engine.eval.measures.ROW_COLUMNS``: bleu-4, rouge-1/2/l, exact_match, accuracy on short
answers) and its ``judge_score``. Perplexity is exp of the loss: its verdict is the loss's (``FOLLOWS``). lm-eval's
TASK/acc (its own documents) and judge_win (already a comparison with the base) have no per-row values here.

Also here: the best tuned row by a measure (never one of several tied at a value no better than the base's), the
lines the report, the Evaluate tab and ``studio eval`` say about it, and degenerate answers (empty, whitespace only,
one token or piece repeated over the whole answer) counted per model. Light: stdlib; numpy when an interval is
computed.
"""

from __future__ import annotations

import re

from engine.core.messages import Message
from engine.eval.measures import ROW_COLUMNS
from engine.eval.messages import message
from engine.eval.spec import direction

RESAMPLES = 2000
SEED = 0
LEVEL = 0.95
BETTER, WORSE, SAME = "better", "worse", "same"
TUNED = ("checkpoint", "final", "adapter", "model")  # the rows held against the base (kind "base")
FOLLOWS = {"perplexity": "loss"}  # a column whose verdict is another's: exp(loss) rises and falls with the loss
_BLOCK = 1_000_000  # indexes drawn at once: the bootstrap's memory stays a few MB whatever the rows
_REPEATED = re.compile(r"(.+?)(?:\s*\1){2,}", re.DOTALL)  # one piece, three times or more, and nothing else


# ----------------------------------------------------------------------------------------------- per row
def has_rows(column: str) -> bool:
    """Whether the predictions keep a per-row value of ``column``."""
    return column in ("loss", "judge") or column in ROW_COLUMNS


def row_values(preds: list[dict], label: str, column: str) -> dict[int, float]:
    """{row index: value of ``column``} for model ``label``'s predictions (the rows that have one)."""
    out = {}
    for p in preds:
        if p.get("model") != label:
            continue
        if column == "loss":
            value = p.get("loss")
        elif column == "judge":
            value = p.get("judge_score")
        else:
            value = (p.get("scores") or {}).get(column)
        if value is not None:
            out[p["index"]] = float(value)
    return out


def degenerate(answer: str) -> bool:
    """Empty, whitespace only, or one token (or piece) repeated over the whole answer: '!!!', 'the the the'."""
    text = answer.strip()
    return not text or _REPEATED.fullmatch(text) is not None


def degenerate_counts(preds: list[dict]) -> dict[str, tuple[int, int]]:
    """{model: (degenerate answers, answers)} over the predictions that have an answer."""
    out: dict[str, list[int]] = {}
    for p in preds:
        if "prediction" in p:
            n = out.setdefault(p["model"], [0, 0])
            n[0] += degenerate(p["prediction"] or "")
            n[1] += 1
    return {k: (a, b) for k, (a, b) in out.items()}


def degenerate_lines(preds: list[dict]) -> list[Message]:
    """One line per model with degenerate answers."""
    return [
        message("eval.degenerate", label=label, count=n, total=total)
        for label, (n, total) in degenerate_counts(preds).items()
        if n
    ]


# ----------------------------------------------------------------------------------------------- the interval
def interval(diffs: list[float], resamples: int = RESAMPLES, seed: int = SEED) -> tuple[float, float]:
    """The paired bootstrap's 95% interval of the mean of ``diffs`` (see the module's docstring)."""
    import numpy as np

    d = np.asarray(diffs, dtype=float)
    n = len(d)
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    block = max(1, _BLOCK // n)  # uniform doubles are drawn one per value: blocks do not change the stream
    for start in range(0, resamples, block):
        k = min(block, resamples - start)
        idx = np.floor(rng.random((k, n)) * n).astype(np.intp)
        means[start : start + k] = d[idx].mean(axis=1)
    tail = (1 - LEVEL) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def word(low: float, high: float, column: str) -> str:
    """better / worse when the interval excludes 0 on ``column``'s good / bad side, same when it holds 0."""
    if low > 0 or high < 0:
        return BETTER if (low > 0) == (direction(column) > 0) else WORSE
    return SAME


def compare(results: dict, preds: list[dict]) -> dict[str, dict[str, dict]]:
    """{tuned label: {column: {diff, low, high, verdict, rows}}} against the base, for every column with per-row
    values; {} when the base was not evaluated."""
    rows = results.get("rows") or []
    base = next((r["label"] for r in rows if r["kind"] == "base"), None)
    if base is None:
        return {}
    cols = [c for c in results.get("columns") or [] if has_rows(c)]
    base_values = {c: row_values(preds, base, c) for c in cols}
    out: dict[str, dict[str, dict]] = {}
    for r in rows:
        if r["kind"] not in TUNED:
            continue
        mine = out[r["label"]] = {}
        for c in cols:
            tuned = row_values(preds, r["label"], c)
            shared = sorted(set(tuned) & set(base_values[c]))
            if not shared:
                continue
            diffs = [tuned[i] - base_values[c][i] for i in shared]
            low, high = interval(diffs)
            mean = sum(diffs) / len(diffs)
            mine[c] = {"diff": mean, "low": low, "high": high, "verdict": word(low, high, c), "rows": len(shared)}
    return out


def verdict_of(verdicts: dict, label: str, column: str) -> dict | None:
    """``label``'s verdict by ``column`` (perplexity: the loss's), None when there is none."""
    found = verdicts.get(label) or {}
    return found.get(column) or found.get(FOLLOWS.get(column, ""))


def fmt(value) -> str:
    """A figure as the table shows it: 4 decimals below 10, else 2."""
    if value is None:
        return "n/a"
    return f"{value:.4f}" if abs(value) < 10 else f"{value:.2f}"


def signed(value: float) -> str:
    """A difference, its sign always shown."""
    return ("+" if value >= 0 else "") + fmt(value)


def versus(v: dict | None, column: str, has_base: bool = True) -> Message:
    """One verdict in words: 'worse than the base by rouge-l: -46.1 (95% interval ...)'."""
    if v is None:
        key = "eval.versus_none" if has_base else "eval.versus_no_base"
        return message(key, measure=FOLLOWS.get(column, column))
    return message(
        f"eval.versus_{v['verdict']}",
        measure=column if has_rows(column) else FOLLOWS.get(column, column),
        diff=signed(v["diff"]),
        low=signed(v["low"]),
        high=signed(v["high"]),
        rows=v["rows"],
    )


# ----------------------------------------------------------------------------------------------- the best row
def _value(row: dict, column: str):
    return row["metrics"].get(column)


def best(results: dict, column: str) -> str | None:
    """The best tuned row by ``column`` in its direction (the first of several tied); None when there is none, or
    when several tie at the top at a value no better than the base's (a tie of models that learned nothing, or
    answer nothing, is no pick)."""
    rows = results.get("rows") or []
    tuned = [r for r in rows if r["kind"] in TUNED and _value(r, column) is not None]
    if not tuned:
        return None
    sign = direction(column)
    top = max(_value(r, column) * sign for r in tuned)
    tied = [r for r in tuned if _value(r, column) * sign == top]
    base = next((_value(r, column) for r in rows if r["kind"] == "base" and _value(r, column) is not None), None)
    if len(tied) > 1 and base is not None and top <= base * sign:
        return None
    return tied[0]["label"]


def beats_base(verdicts: dict, label: str, column: str) -> bool:
    v = verdict_of(verdicts, label, column)
    return v is not None and v["verdict"] == BETTER


def summary(results: dict, verdicts: dict, column: str) -> list[Message]:
    """What is said about ``column``: the best tuned row and its verdict against the base, or why there is no best;
    and, when the base was evaluated, that no tuned model beats it when none does."""
    rows = results.get("rows") or []
    tuned = [r for r in rows if r["kind"] in TUNED and _value(r, column) is not None]
    if not tuned:
        return []
    base = next((r for r in rows if r["kind"] == "base"), None)
    label = best(results, column)
    if label is None:  # several tied at a value no better than the base's
        sign = direction(column)
        top = max(_value(r, column) * sign for r in tuned) * sign
        tied = ", ".join(r["label"] for r in tuned if _value(r, column) == top)
        out = [message("eval.tie_no_best", column=column, labels=tied, value=fmt(top), base=fmt(_value(base, column)))]
    else:
        against = versus(verdict_of(verdicts, label, column), column, base is not None)
        out = [message("eval.best", column=column, label=label, versus=against)]
    if base is not None and not any(beats_base(verdicts, r["label"], column) for r in tuned):
        out.append(message("eval.none_beats_base", column=column))
    return out
