"""An evaluation's results as people read them: the table (rows base / checkpoint-N / final, columns the measures,
and the degenerate answers of each model), the best row by a measure and each tuned row's verdict against the base
(``engine.eval.verdict``), the side-by-side answers (base vs tuned, filtered to rows that differ or got worse), an
SVG chart of a measure over training steps beside the training loss, and the self-contained ``report.html``
written into the evaluation's folder. The CLI, the Evaluate tab and the report all read these. Light: stdlib only.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from engine.eval import verdict
from engine.eval.messages import message
from engine.eval.spec import direction
from engine.eval.verdict import fmt


def read(folder: str | Path) -> tuple[dict | None, list[dict]]:
    folder = Path(folder)
    try:
        results = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        results = None
    preds = []
    try:
        for line in (folder / "predictions.jsonl").read_text(encoding="utf-8").splitlines():
            if line.strip():
                preds.append(json.loads(line))
    except (OSError, ValueError):
        pass
    return results, preds


DEGENERATE = "degenerate"  # the table's last column when the models generated answers: degenerate / answers


def default_column(cols: list[str]) -> str:
    """The measure the best row is picked by until the user picks one: ROUGE-L, else BLEU-4, else the loss."""
    return next((c for c in ("rouge-l", "bleu-4", "loss") if c in cols), cols[0] if cols else "loss")


def table(results: dict, preds: list[dict] = ()) -> tuple[list[str], list[list[str]]]:
    """(header, rows of text): model, step, then each column; and with ``preds`` that hold answers, each model's
    degenerate answers of its answers ("6/6")."""
    cols = results["columns"]
    rows = [
        [r["label"], "" if r.get("step") is None else str(r["step"]), *[fmt(r["metrics"].get(c)) for c in cols]]
        for r in results["rows"]
    ]
    counts = verdict.degenerate_counts(list(preds))
    if not counts:
        return ["model", "step", *cols], rows
    for row, r in zip(rows, results["rows"]):
        n, total = counts.get(r["label"], (None, None))
        row.append("" if n is None else f"{n}/{total}")
    return ["model", "step", *cols, DEGENERATE], rows


def verdict_rows(verdicts: dict) -> list[list]:
    """[model, measure, difference, 95% interval, verdict word (a Message)] per tuned row and measure."""
    return [
        [label, col, verdict.signed(v["diff"]), f"[{verdict.signed(v['low'])}, {verdict.signed(v['high'])}]",
         message(f"eval.verdict_{v['verdict']}")]
        for label, found in verdicts.items()
        for col, v in found.items()
    ]  # fmt: skip


def _text(header: list[str], rows: list[list]) -> str:
    rows = [[str(c) for c in r] for r in rows]
    widths = [max(len(x) for x in col) for col in zip(header, *rows)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(lines)


def text_verdict(results: dict, preds: list[dict], column: str | None = None) -> str:
    """``studio eval``'s lines under the table: the best row and whether it beats the base, each tuned row's
    verdicts, the models with degenerate answers."""
    column = column or default_column(results.get("columns") or [])
    verdicts = verdict.compare(results, preds)
    lines = [str(m) for m in verdict.summary(results, verdicts, column)]
    if verdicts:
        lines += [str(message("eval.verdict_title", resamples=verdict.RESAMPLES))]
        lines += [_text(["model", "measure", "difference", "95% interval", "verdict"], verdict_rows(verdicts))]
    return "\n".join(lines + [str(m) for m in verdict.degenerate_lines(preds)])


def text_table(results: dict, preds: list[dict] = ()) -> str:
    header, rows = table(results, preds)
    return _text(header, rows)


def side_by_side(preds: list[dict], base: str, tuned: str, show: str = "all", column: str = "rouge-l") -> list[dict]:
    """Per row: prompt (as rendered), question (the last user turn), reference, the base's answer, the tuned answer.
    ``show``: all | differ (the answers differ) | worse (the tuned answer scores lower by ``column``, or its loss is
    higher for loss / perplexity)."""
    by = {}
    for p in preds:
        by.setdefault(p["model"], {})[p["index"]] = p
    a, b = by.get(base, {}), by.get(tuned, {})
    out = []
    for idx in sorted(set(a) & set(b)):
        pa, pb = a[idx], b[idx]
        ans_a, ans_b = pa.get("prediction", ""), pb.get("prediction", "")
        if show == "differ" and ans_a == ans_b:
            continue
        if show == "worse":
            if direction(column) < 0:
                la, lb = pa.get("loss"), pb.get("loss")
                if la is None or lb is None or lb <= la:
                    continue
            else:
                sa, sb = (pa.get("scores") or {}).get(column), (pb.get("scores") or {}).get(column)
                if sa is None or sb is None or sb >= sa:
                    continue
        # the question as the user asked it (the last user turn); the rendered template for rows without one (pt)
        question = pa.get("question") or pa["prompt"]
        row = {"index": idx, "prompt": pa["prompt"], "question": question, "reference": pa["reference"]}
        out.append(row | {"base": ans_a, "tuned": ans_b})
    return out


def series(results: dict, column: str) -> list[tuple[int, float]]:
    """(step, value) of ``column`` for the rows with a step (base at 0, checkpoints, final), by step."""
    pts = [
        (r["step"], r["metrics"][column])
        for r in results.get("rows", [])
        if r.get("step") is not None and r["metrics"].get(column) is not None
    ]
    return sorted(pts)


def charted(results: dict) -> list[str]:
    """The measures that have a figure at some step: a chart each. A measure with none (the judge's mean score in
    pairwise mode, which scores nothing; a measure every row failed) would draw an empty chart."""
    return [c for c in results.get("columns") or [] if series(results, c)]


def _span(points: list[tuple[int, float]]) -> tuple[float, float]:
    """The value range a series is drawn over (a flat series gets a range of 1 above its value)."""
    ys = [v for _, v in points] or [0.0]
    lo, hi = min(ys), max(ys)
    return lo, (hi if hi > lo else lo + 1)


def chart_svg(results: dict, column: str, width: int = 560, height: int = 220, title: str | None = None) -> str:
    """An SVG line chart: ``column`` over training steps (left axis, its values in blue), the training loss (right
    axis, dashed, its values in grey); each axis labelled at its lowest, middle and highest value; ``title`` in the
    page's language (English by default)."""
    pts = series(results, column)
    loss = [(s, v) for s, v in results.get("train_loss") or []]
    pad, top = 56, 28
    steps = [s for s, _ in pts] + [s for s, _ in loss]
    if not steps:
        return f'<svg class="eval-chart" width="{width}" height="{height}"></svg>'
    x0, x1 = min(steps), max(steps) or 1
    bottom = height - 30

    def y_of(v: float, span: tuple[float, float]) -> float:
        lo, hi = span
        return bottom - (v - lo) / (hi - lo) * (bottom - top)

    def scale(points, span):
        return " ".join(
            f"{pad + (s - x0) / max(1, x1 - x0) * (width - 2 * pad):.1f},{y_of(v, span):.1f}" for s, v in points
        )

    def ticks(span, x: float, anchor: str, colour: str, axis: str) -> str:
        lo, hi = span
        return "".join(
            f'<text class="tick-{axis}" x="{x}" y="{y_of(v, span) + 3:.1f}" font-size="10" text-anchor="{anchor}" '
            f'fill="{colour}">{fmt(v)}</text>'
            for v in (lo, (lo + hi) / 2, hi)
        )

    measure_span, loss_span = _span(pts), _span(loss)
    marks = "".join(
        f'<circle cx="{p.split(",")[0]}" cy="{p.split(",")[1]}" r="3" fill="#2563eb"><title>{s}: {fmt(v)}</title>'
        "</circle>"
        for p, (s, v) in zip(scale(pts, measure_span).split(), pts)
    )
    left = ticks(measure_span, pad - 6, "end", "#2563eb", "measure") if pts else ""
    right = ticks(loss_span, width - pad + 6, "start", "#888", "loss") if loss else ""
    return (
        f'<svg class="eval-chart" data-measure="{html.escape(column)}" width="{width}" height="{height}" '
        f'xmlns="http://www.w3.org/2000/svg">'
        f'<text x="{pad}" y="16" font-size="12">{html.escape(title or f"{column} by step (dashed: training loss)")}'
        "</text>"
        f'<line x1="{pad}" y1="{bottom}" x2="{width - pad}" y2="{bottom}" stroke="#999"/>'
        f'<line x1="{pad}" y1="{top}" x2="{pad}" y2="{bottom}" stroke="#ccc"/>'
        f'<line x1="{width - pad}" y1="{top}" x2="{width - pad}" y2="{bottom}" stroke="#eee"/>'
        f"{left}{right}"
        f'<text x="{pad}" y="{height - 12}" font-size="10">{x0}</text>'
        f'<text x="{width - pad}" y="{height - 12}" font-size="10" text-anchor="end">{x1}</text>'
        f'<polyline class="series-train-loss" fill="none" stroke="#aaa" stroke-dasharray="4 3" '
        f'points="{scale(loss, loss_span)}"/>'
        f'<polyline class="series-measure" data-points="{len(pts)}" fill="none" stroke="#2563eb" stroke-width="2" '
        f'points="{scale(pts, measure_span)}"/>{marks}</svg>'
    )


def pair(results: dict) -> tuple[str | None, str | None]:
    """The base row and the tuned row to compare: base, and the final weights (else the last checkpoint)."""
    rows = results.get("rows", [])
    base = next((r["label"] for r in rows if r["kind"] == "base"), None)
    tuned = [r for r in rows if r["kind"] in verdict.TUNED]
    final = next((r["label"] for r in tuned if r["kind"] == "final"), None)
    return base, final or (tuned[-1]["label"] if tuned else None)


_CSS = (
    "body{font-family:system-ui,sans-serif;margin:24px;color:#222}table{border-collapse:collapse;margin:12px 0}"
    "td,th{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}th{background:#f4f4f4}"
    "tr.best td{background:#ecfdf5;font-weight:600}tr.verdict-worse td{background:#fef2f2}"
    "tr.verdict-better td{background:#ecfdf5}pre{white-space:pre-wrap;margin:0;max-width:40em}"
)


def _html_table(header: list[str], rows: list[list], classes: list[str] | None = None) -> str:
    trs = "".join(
        f'<tr class="{c}">' + "".join(f"<td>{html.escape(str(x))}</td>" for x in r) + "</tr>"
        for r, c in zip(rows, classes or [""] * len(rows))
    )
    return "<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + f"</tr>{trs}</table>"


def html_report(results: dict, preds: list[dict], column: str | None = None) -> str:
    column = column or default_column(results["columns"])
    top = verdict.best(results, column)
    header, rows = table(results, preds)
    main = _html_table(header, rows, ["best" if r[0] == top else "" for r in rows])
    verdicts = verdict.compare(results, preds)
    said = [*verdict.summary(results, verdicts, column), *verdict.degenerate_lines(preds)]
    against = ""
    if verdicts:
        title = message("eval.verdict_title", resamples=verdict.RESAMPLES)
        words = [f"verdict-{v['verdict']}" for found in verdicts.values() for v in found.values()]
        heads = ["model", "measure", "difference", "95% interval", "verdict"]
        against = f"<h2>Against the base</h2><p>{html.escape(title)}</p>"
        against += _html_table(heads, verdict_rows(verdicts), words)
    charts = "".join(chart_svg(results, c) for c in charted(results))
    base, tuned = pair(results)
    sbs = ""
    if base and tuned:
        items = side_by_side(preds, base, tuned)
        sbs = (
            f"<h2>Side by side: {html.escape(base)} vs {html.escape(tuned)}</h2><table><tr><th>#</th><th>prompt</th>"
            "<th>reference</th><th>base</th><th>tuned</th></tr>"
            + "".join(
                f"<tr><td>{x['index']}</td>"
                + "".join(f"<td><pre>{html.escape(x[k])}</pre></td>" for k in ("prompt", "reference", "base", "tuned"))
                + "</tr>"
                for x in items
            )
            + "</table>"
        )
    state = results.get("state", "")
    note = f"<p>state: {html.escape(state)} {html.escape(results.get('error') or '')}</p>"
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>Studio evaluation</title>"
        f"<style>{_CSS}</style></head><body><h1>Evaluation</h1>{note}"
        f"<p>{results.get('n_rows', 0)} rows</p>"
        + "".join(f'<p class="verdict">{html.escape(m)}</p>' for m in said)
        + f"{main}{against}<div>{charts}</div>{sbs}</body></html>"
    )


def write_report(folder: str | Path) -> Path:
    folder = Path(folder)
    results, preds = read(folder)
    out = folder / "report.html"
    if results is not None:
        out.write_text(html_report(results, preds), encoding="utf-8")
    return out
