"""The measures on generated answers, per row and averaged, as LLaMA-Factory computes them
(``src/llamafactory/train/sft/metric.py``, ``ComputeSimilarity``): the answer and the reference are cut into words by
jieba (so Chinese scores by words, English by words and spaces), ROUGE-1/2/L are rouge-chinese's F scores on the
space-joined words (0 when either side has no word), BLEU-4 is nltk's ``sentence_bleu`` on the characters with
``SmoothingFunction().method3``; each row's score ×100 rounded to 4 places, the measure their mean. Exact match:
the stripped texts are equal. Accuracy: over rows whose reference is short (one word or one letter, e.g. a
multiple-choice answer), whether the answer starts with it. Light: stdlib; jieba, nltk and rouge_chinese are imported
when a score is computed (pure Python, no ML stack)."""

from __future__ import annotations

import re
import statistics

# the measures on generated answers -> the columns ``row_scores`` fills for them (averaged over rows); the evaluation
# spec's table (engine.eval.spec.COLUMNS) takes them from here
ROW_MEASURE_COLUMNS: dict[str, tuple[str, ...]] = {
    "bleu": ("bleu-4",),
    "rouge": ("rouge-1", "rouge-2", "rouge-l"),
    "exact": ("exact_match",),
    "accuracy": ("accuracy",),
}
ROW_COLUMNS = tuple(c for columns in ROW_MEASURE_COLUMNS.values() for c in columns)
_SHORT = re.compile(r"^\(?([A-Za-z0-9]{1,16})[).:]?$")


def similarity(pred: str, label: str) -> dict[str, float]:
    """One row's {rouge-1, rouge-2, rouge-l, bleu-4}, each ×100 rounded to 4 places (LF's ComputeSimilarity)."""
    import jieba
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu
    from rouge_chinese import Rouge

    jieba.setLogLevel(60)
    hypothesis = list(jieba.cut(pred))
    reference = list(jieba.cut(label))
    if len(" ".join(hypothesis).split()) == 0 or len(" ".join(reference).split()) == 0:
        result = {"rouge-1": {"f": 0.0}, "rouge-2": {"f": 0.0}, "rouge-l": {"f": 0.0}}
    else:
        result = Rouge().get_scores(" ".join(hypothesis), " ".join(reference))[0]
    out = {k: round(v["f"] * 100, 4) for k, v in result.items()}
    bleu = sentence_bleu([list(label)], list(pred), smoothing_function=SmoothingFunction().method3)
    out["bleu-4"] = round(bleu * 100, 4)
    return out


def short_answer(reference: str) -> str | None:
    """The answer of a row whose reference is one word or letter ("B", "(c)", "42", "yes"), upper-cased; else None."""
    m = _SHORT.match(reference.strip())
    return m.group(1).upper() if m else None


def accurate(pred: str, short: str) -> bool:
    """Whether the answer starts with the short reference: its first word, or for a letter its first letter."""
    words = re.findall(r"[A-Za-z0-9]+", pred)
    return bool(words) and words[0].upper() == short


def row_scores(pred: str, label: str, measures: list[str]) -> dict[str, float]:
    """The generation measures of one row (bleu / rouge ×100, exact_match and accuracy 100 or 0; accuracy only for
    a short reference)."""
    out: dict[str, float] = {}
    if "bleu" in measures or "rouge" in measures:
        sim = similarity(pred, label)
        if "bleu" in measures:
            out["bleu-4"] = sim["bleu-4"]
        if "rouge" in measures:
            out |= {k: sim[k] for k in ("rouge-1", "rouge-2", "rouge-l")}
    if "exact" in measures:
        out["exact_match"] = 100.0 if pred.strip() == label.strip() else 0.0
    if "accuracy" in measures:
        short = short_answer(label)
        if short is not None:
            out["accuracy"] = 100.0 if accurate(pred, short) else 0.0
    return out


def average(rows: list[dict[str, float]], names: list[str]) -> dict[str, float | None]:
    """The mean of each measure over the rows that have it (None where none has: accuracy without short rows)."""
    out: dict[str, float | None] = {}
    for name in names:
        values = [r[name] for r in rows if name in r]
        out[name] = round(statistics.fmean(values), 4) if values else None
    return out
