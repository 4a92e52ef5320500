"""What the Evaluate tab shows of an evaluation, in the page's language: the results table (the base and the final
model named in the page's words, the best row starred), the charts over checkpoints, the verdicts against the base
and the side-by-side answers; and the measures offered, by name.

Light: engine.eval's report and verdict (stdlib), the page's catalog.
"""

from __future__ import annotations

from engine.eval import report, verdict
from engine.eval.messages import message
from engine.eval.spec import MEASURES
from studio.i18n.localize import localize
from studio.i18n.page import t


def model_label(label: str, lang: str) -> str:
    """An evaluated model's row name on the page: the base and the final model in the page's language, checkpoints
    by their folder's name."""
    return t(f"eval_model_{label}", lang) if label in ("base", "final") else label


def measure_choices(lang: str) -> list[tuple[str, str]]:
    """The measures an evaluation can take, named in the page's language."""
    return [(t(f"eval_measure_{m}", lang), m) for m in MEASURES]


_VERDICTS: dict[str, tuple[tuple, dict]] = {}  # evaluation id -> (its finished rows, their verdicts)


def verdicts_of(job_id: str | None, results: dict | None, preds: list[dict]) -> dict:
    """``verdict.compare`` for the shown evaluation, computed again only when a model has finished since (a
    finished model's answers never change; the follow timer asks every second)."""
    if not results or not results.get("rows"):
        return {}
    key = tuple((r["label"], r["kind"]) for r in results["rows"])
    cached = _VERDICTS.get(job_id or "")
    if cached is not None and cached[0] == key:
        return cached[1]
    found = verdict.compare(results, preds)
    if job_id:
        _VERDICTS.clear()  # one evaluation is shown at a time: keep only its verdicts
        _VERDICTS[job_id] = (key, found)
    return found


def verdict_text(verdicts: dict, preds: list[dict], lang: str = "en") -> str:
    """Each tuned row against the base as a table, and the models with degenerate answers (markdown)."""
    parts = []
    if verdicts:
        heads = [t(f"eval_col_{k}", lang) for k in ("model", "measure", "difference", "interval", "verdict")]
        rows = [
            "| " + " | ".join([model_label(r[0], lang), *r[1:4], f"**{localize(r[4], lang)}**"]) + " |"
            for r in report.verdict_rows(verdicts)
        ]
        table = "\n".join(["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads), *rows])
        parts += [localize(message("eval.verdict_title", resamples=verdict.RESAMPLES), lang), table]
    warnings = ["⚠ " + localize(m, lang) for m in verdict.degenerate_lines(preds)]
    if warnings:
        parts.append("  \n".join(warnings))
    return "\n\n".join(parts)


def report_view(results: dict | None, preds: list[dict], column: str | None, show: str, lang: str = "en", job_id=None):
    """(table rows, charts HTML, best text, verdicts text, side-by-side rows) for the results so far."""
    words = [t(f"eval_col_{k}", lang) for k in ("prompt", "reference", "base", "tuned")]
    if not results or not results.get("rows"):
        empty = [t("eval_col_model", lang), t("eval_col_step", lang)]
        return {"headers": empty, "data": []}, "", "", "", {"headers": words, "data": []}
    header, rows = report.table(results, preds)
    # the measures keep their names; model, step and the degenerate answers are words of the page
    header = [t("eval_col_model", lang), t("eval_col_step", lang), *header[2:]]
    if header[-1] == report.DEGENERATE:
        header[-1] = t("eval_col_degenerate", lang)
    cols = results["columns"]
    column = column if column in cols else report.default_column(cols)
    best = verdict.best(results, column)
    rows = [[("★ " if r[0] == best else "") + model_label(r[0], lang), *r[1:]] for r in rows]
    charts = "".join(
        report.chart_svg(results, c, width=420, height=200, title=t("eval_chart_title", lang, measure=c))
        for c in report.charted(results)
    )
    verdicts = verdicts_of(job_id, results, preds)
    best_text = "  \n".join(localize(m, lang) for m in verdict.summary(results, verdicts, column))
    base, tuned = report.pair(results)
    sbs = []
    if base and tuned:
        sbs = [
            [x["question"], x["reference"], x["base"], x["tuned"]]
            for x in report.side_by_side(preds, base, tuned, show, column)
        ]
    return (
        {"headers": header, "data": rows},
        f'<div id="eval-chart-box" style="display:flex;flex-wrap:wrap;gap:8px">{charts}</div>',
        best_text,
        verdict_text(verdicts, preds, lang),
        {"headers": words, "data": sbs},
    )
