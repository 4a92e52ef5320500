"""Datasets tab: pick or upload a dataset, map its columns, register it, preview rows, see one masked sample and the
token-length histogram against the cutoff, read as the Train form's stage uses it: sft / dpo truncate longer
samples; pt cuts texts into blocks of the cutoff (packing: texts joined, the tail under one block dropped).

Light: gradio, pandas, engine.data.dataset_registry / masked_samples (jinja2 + the ``tokenizers`` library, never
transformers). This module lays the tab out and draws what a dataset looks like (preview, masked sample, length
histogram); the left column's upload and registration are studio.tabs.data_register's, a row's images
studio.tabs.data_images'.

Bounded: whatever an upload holds (up to the cap), the tab reads only a file's head (``engine.data.files.read_head``:
``PAGE_READ_BYTES`` of it, rows of at most ``PAGE_RECORD_BYTES``; a longer row is named, file and line, not read),
tokenizes at most ``LENGTHS_TEXT_CHARS`` for the histogram and sends cells of at most ``PREVIEW_CELL_CHARS``.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import pandas as pd

from engine.core import accounts, workspace
from engine.data import dataset_registry as reg
from engine.data.masked_samples import render_sample, token_lengths
from engine.data.messages import message
from engine.data.packing import packing_efficiency, pt_blocks  # the trainer's own packing and pt blocks
from engine.data.templates import tokenizer_info
from studio import backend, histogram, monitor
from studio.i18n.localize import localize, localize_error
from studio.i18n.page import t
from studio.i18n.said import said
from studio.tabs import data_images, data_register, share

PREVIEW_ROWS = 8
LENGTHS_ROWS = 400
LENGTHS_TEXT_CHARS = 2 << 20  # text tokenized for the histogram at most (the demo tokenizer: ~1.5M tokens, seconds)
PREVIEW_CELL_CHARS = 2000  # a preview cell sent to the browser, at most
HIST_COLUMNS = ["first", "last", "rows", "cutoff"]  # a bar: its lengths first..last, its rows, its side's label


def head(name: str, n: int = LENGTHS_ROWS) -> tuple[list[dict], list, bool]:
    """(the dataset's first rows, problems met reading them, whether they are the whole file): one bounded read the
    sample and histogram share."""
    return reg.head_rows_counted(name, workspace.data_dir(), n=n)


def rows_note(figures: int, whole: bool, shown: int, lang: str = "en") -> str:
    """What the preview and the figures are read from: the file's own rows, and how many rows the sample and the
    histogram use (all of them, or the first ones)."""
    key = "figures_all" if whole else "figures_head"
    return t("rows_shown", lang, shown=shown) + " · " + t(key, lang, rows=figures)


def _cell(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return (
        text
        if len(text) <= PREVIEW_CELL_CHARS
        else text[:PREVIEW_CELL_CHARS] + f" … (+{len(text) - PREVIEW_CELL_CHARS})"
    )


def preview(name: str, n: int = PREVIEW_ROWS) -> pd.DataFrame:
    """The first ``n`` rows as the file has them (its own columns: an alpaca file's instruction / input / output),
    each cell cut to ``PREVIEW_CELL_CHARS``."""
    rows = reg.raw_head(name, workspace.data_dir(), n=n)
    columns = list(dict.fromkeys(k for r in rows for k in r))
    return pd.DataFrame([{k: _cell(r.get(k, "")) for k in columns} for r in rows[:n]], columns=columns)


def sample_html(
    name: str, model: str, template: str, lang: str = "en", stage: str = "sft", rows: list[dict] | None = None
) -> str:
    """One row as the model sees it: prompt pieces grey (not trained), response pieces green (trained); in stage
    pt the whole text is trained. ``rows`` from ``head`` if already read."""
    if rows is None:
        rows = reg.preview_rows(name, workspace.data_dir(), n=1)
    if not rows:
        return f"<p>{html.escape(t('no_rows', lang))}</p>"
    pieces = render_sample(template or "auto", tokenizer_info(model or None), rows[0], stage or "sft")
    spans = "".join(
        f'<span class="{"tok-train" if trained else "tok-prompt"}">{html.escape(text)}</span>'
        for text, trained in pieces
    )
    return f'<div class="sample-box" id="sample-render">{spans}</div>'


def _row_chars(row: dict) -> int:
    texts = [m.get("content", "") for m in row.get("messages") or []]
    texts += [row.get(k) or "" for k in ("system", "text", "chosen", "rejected")]
    return sum(len(str(x)) for x in texts)


def _within_text_budget(rows: list[dict]) -> list[dict]:
    """The leading rows whose texts add up to at most ``LENGTHS_TEXT_CHARS`` (at least one row)."""
    total = 0
    for i, row in enumerate(rows):
        total += _row_chars(row)
        if total > LENGTHS_TEXT_CHARS:
            return rows[: max(1, i)]
    return rows


# The bars' colours by what the stage does to them: kept whole blue, truncated (or split) red, joined teal.
SIDE_COLORS = {
    "kept": "#1f77b4",
    "over_cutoff": "#d62728",
    "pt_one_block": "#1f77b4",
    "pt_split": "#d62728",
    "pt_joined": "#17becf",
}


def _side(stage: str, packing: bool, over: bool) -> str:
    """The histogram's colour of a bar: what the stage does to texts of that length."""
    if stage != "pt":
        return "over_cutoff" if over else "kept"
    if packing:
        return "pt_joined"
    return "pt_split" if over else "pt_one_block"


def hist_html(frame: pd.DataFrame, cutoff: int, stage: str = "sft", packing: bool = False, lang: str = "en") -> str:
    """The histogram as the page shows it (studio.histogram): the bars of ``lengths``' frame in their side's colour,
    the cutoff as a line."""
    if frame.empty:
        return ""
    stage = stage or "sft"
    packing = bool(packing) and stage in ("sft", "pt")
    cutoff = int(cutoff or 0)
    bars = [histogram.Bin(int(r.first), int(r.last), int(r.rows), r.first > cutoff) for r in frame.itertuples()]
    sides = tuple((t(k, lang), SIDE_COLORS[k]) for k in (_side(stage, packing, False), _side(stage, packing, True)))
    words = {
        "x": t("ax_tokens_n", lang),
        "y": t("ax_rows", lang),
        "cutoff": t("hist_cutoff", lang),
        "tip": t("hist_tip", lang),
    }
    title = f'<div class="hist-title">{html.escape(t("lengths", lang))}</div>'
    return f'<div class="len-hist-box" id="ds-hist-svg">{title}{histogram.svg(bars, cutoff, sides, words)}</div>'


def lengths(
    name: str,
    model: str,
    template: str,
    cutoff: int,
    limit: int = LENGTHS_ROWS,
    packing: bool = False,
    lang: str = "en",
    stage: str = "sft",
    rows: list[dict] | None = None,
    pixels: tuple[int, int] | None = None,
) -> tuple[pd.DataFrame, str]:
    """(histogram frame, note) for up to ``limit`` rows holding at most ``LENGTHS_TEXT_CHARS`` of text (the first
    row always), read as ``stage`` uses the cutoff: sft / dpo, the share truncated (and the packing efficiency with
    packing); pt, the blocks the texts become (and with packing the tail tokens dropped)."""
    if rows is None:
        rows = reg.preview_rows(name, workspace.data_dir(), n=limit)
    rows = _within_text_budget(rows[:limit])
    if not rows or not model or not (Path(model) / "tokenizer.json").is_file():
        note = t("no_rows", lang) if not rows else t("needs_tokenizer", lang)
        return monitor.plot_frame([], HIST_COLUMNS), note
    stage = stage or "sft"
    packing = bool(packing) and stage in ("sft", "pt")  # the spec refuses packing with dpo, kto and rm
    counts = token_lengths(template or "auto", model, rows, stage)
    pixels = pixels or data_images.pixel_bounds()  # the form's model.vision.image_max_pixels / image_min_pixels
    counts = data_images.with_image_tokens(counts, rows, model, data_images.placeholder_tokens(model), pixels)
    cutoff = int(cutoff or 0)
    frame = monitor.plot_frame(
        [
            {"first": b.first, "last": b.last, "rows": b.rows, "cutoff": t(_side(stage, packing, b.over), lang)}
            for b in histogram.bins(counts, cutoff)
        ],
        HIST_COLUMNS,
    )
    if stage == "pt" and cutoff:
        cut = pt_blocks(counts, cutoff, packing)
        common = {"rows": len(counts), "max": max(counts), "cutoff": cutoff, "blocks": cut["blocks"]}
        if not packing:
            per = f"{cut['blocks'] / len(counts):.2f}"
            return frame, t("lengths_note_pt", lang, **common, per=per, split=cut["split"])
        note = t("lengths_note_pt_packed", lang, **common, tokens=cut["tokens"], tail=cut["tail"])
        return frame, note + (t("pt_no_block", lang) if not cut["blocks"] else "")
    over = sum(c > cutoff for c in counts)
    note = t(
        "lengths_note",
        lang,
        rows=len(counts),
        max=max(counts),
        cutoff=cutoff,
        share=f"{over / len(counts):.1%}",
        over=over,
    )
    if packing and cutoff:
        note += t("packing_eff", lang, eff=f"{packing_efficiency(counts, cutoff):.0%}")
    return frame, note + data_images.image_tokens_note(rows, model, lang, pixels)


def build(ctx: Any) -> None:
    import gradio as gr

    texts, lang = ctx.texts, ctx.lang_value
    names = backend.registered_datasets()
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=300):
            pick = texts.add(
                gr.Dropdown(names, value=names[0] if names else None, label=t("dataset", lang), elem_id="ds-pick"),
                "dataset",
            )
            upload = texts.add(
                gr.File(
                    label=t("upload", lang),
                    file_types=list(data_register.UPLOAD_TYPES),
                    type="filepath",
                    elem_id="ds-upload",
                ),
                "upload",
            )
            ctx.redraw.append(upload)
            stored = gr.State("")
            up_msg = gr.Markdown(elem_id="ds-upload-msg")
            ds_name = texts.add(gr.Textbox(label=t("ds_name", lang), max_lines=1, elem_id="ds-name"), "ds_name")
            fmt = texts.add(
                gr.Radio(["alpaca", "sharegpt"], value="alpaca", label=t("formatting", lang), elem_id="ds-format"),
                "formatting",
            )
            roles = sorted(
                {r for rs in data_register.COLUMN_ROLES.values() for r in rs}, key=lambda r: (r != "prompt", r)
            )
            with gr.Accordion(t("columns", lang), open=True) as col_acc:
                texts.add(col_acc, "columns")
                role_boxes = {
                    r: texts.add(
                        gr.Dropdown([], label=t(f"role_{r}", lang), allow_custom_value=True, elem_id=f"ds-col-{r}"),
                        f"role_{r}",
                    )
                    for r in roles
                }
            reg_btn = texts.add(
                gr.Button(t("register", lang), variant="primary", elem_id="ds-register"),
                "register",
                "value",
            )
            reg_msg = gr.Markdown(elem_id="ds-register-msg")
            sharing = share.build(ctx, "ds") if accounts.team_mode() else None  # the picked dataset, read-only
            share_msg = gr.Markdown(elem_id="ds-share-msg")
        with gr.Column(scale=2, min_width=420):
            rows = texts.add(
                gr.Dataframe(  # until a dataset is picked: one column named for what it will show, not "1 2 3"
                    headers=[t("preview_rows", lang)],
                    label=t("preview_rows", lang),
                    max_height=260,
                    wrap=True,
                    elem_id="ds-rows",
                ),
                "preview_rows",
            )
            rows_md = gr.Markdown(elem_id="ds-rows-note")
            texts.add(gr.Markdown(t("sample_legend", lang)), "sample_legend", "value")
            sample = gr.HTML(elem_id="ds-sample")
            hist = gr.HTML(elem_id="ds-hist")
            hist_note = gr.Markdown(elem_id="ds-hist-note")

    form = ctx.form
    model, template, cutoff = form["model.name_or_path"], form["data.template"], form["data.cutoff_len"]
    packing, stage = form["data.packing"], form["method.stage"]
    max_px, min_px = form["model.vision.image_max_pixels"], form["model.vision.image_min_pixels"]

    def _show(name, model_, template_, cutoff_, packing_, stage_, max_px_, min_px_, lang_):
        if not name:
            return gr.skip(), "", gr.skip(), "", ""
        try:
            got, problems, whole = head(name)  # one bounded read of the file's head for the sample and histogram
            pixels = data_images.pixel_bounds(max_px_, min_px_)  # images sized as the form's run will size them
            frame, note = lengths(
                name,
                model_,
                template_,
                cutoff_,
                packing=bool(packing_),
                lang=lang_,
                stage=stage_ or "sft",
                rows=got,
                pixels=pixels,
            )
            shown = sample_html(name, model_, template_, lang_, stage_ or "sft", rows=got)
            if got:  # a row's images beside its text, its placeholders with the tokens they become
                refs = list(got[0].get("images") or [])
                marked = data_images.mark_placeholders(shown, model_, lang_, refs, pixels)
                shown = data_images.thumbnails_html(got[0], lang_) + marked
            if problems:  # a row too long for the page, a torn line...: named above the sample
                listed = "".join(f"<li>{html.escape(data_register.problem_text(p, lang_))}</li>" for p in problems[:5])
                shown = f'<ul class="ds-problems" id="ds-problems">{listed}</ul>' + shown
            table = preview(name)
            used = len(_within_text_budget(got[:LENGTHS_ROWS]))
            about = rows_note(used, whole and used == len(got), len(table), lang_)
            drawn = hist_html(frame, cutoff_, stage_ or "sft", bool(packing_), lang_)
            return table, shown, drawn, note, about
        except Exception as exc:  # bad data or template: the registry's own message, shown where it applies
            return gr.skip(), f"<p>❌ {html.escape(localize_error(exc, lang_))}</p>", "", "", ""

    # The list is read again on page load and when opened (uploads from another tab or the CLI appear).
    pick.focus(lambda: gr.update(choices=backend.registered_datasets()), None, [pick], queue=False)
    ctx.on_load.append((lambda: gr.update(choices=backend.registered_datasets()), None, [pick]))

    # Drawn again in the page's language when it switches (the note and the chart's words are this handler's).
    gr.on(
        [pick.change, ctx.tab.select],
        _show,
        shown_from := [pick, model, template, cutoff, packing, stage, max_px, min_px, ctx.lang],
        [rows, sample, hist, hist_note, rows_md],
    )
    ctx.on_lang.append((_show, shown_from, [rows, sample, hist, hist_note, rows_md]))
    editing = gr.State("")  # the registered dataset whose mapping the left column shows (Register replaces it)

    def _edit(name):
        """A registered dataset picked: its file, name, format and column mapping, to fix in place."""
        found = data_register.picked_mapping(name)
        updates = [gr.update(choices=found["choices"], value=found["columns"].get(r)) for r in roles]
        return found["path"], name, found["formatting"], name if found["path"] else "", *updates

    pick.input(_edit, [pick], [stored, ds_name, fmt, editing, *role_boxes.values()], queue=False)

    # What Upload and Register said, in every language: a language switch says it again (issue 27 item 12)
    up_said, reg_said = gr.State({}), gr.State({})

    def _said(render, lang_) -> tuple[str, dict]:
        msg = said(render, lang_)
        return msg, msg.texts

    def _upload(path, lang_):
        """A new file: the last Register's words go (they were about another file); a refused file is taken off the
        widget, so no file is shown that Register would then call missing ("upload a file first")."""
        keep = [gr.update() for _ in roles]
        if not path:
            return "", "", gr.update(), gr.update(), gr.update(), "", gr.update(), *keep, {}, {}
        try:
            dest = data_register.store_upload(path)
        except (ValueError, OSError) as exc:
            msg, texts = _said(lambda code, err=exc: f"❌ {localize_error(err, code)}", lang_)
            return "", msg, gr.update(), gr.update(), gr.update(), "", None, *keep, texts, {}
        try:
            cols = data_register.file_columns(dest)
        except (ValueError, OSError) as exc:  # not JSON / not UTF-8 / not Parquet: Python's own words as the detail
            dest.unlink(missing_ok=True)  # a refused upload leaves nothing behind in uploads/
            unreadable = message("upload.unreadable", name=dest.name, error=exc)
            msg, texts = _said(lambda code: f"❌ {localize(unreadable, code)}", lang_)
            return "", msg, gr.update(), gr.update(), gr.update(), "", None, *keep, texts, {}
        formatting = "sharegpt" if "conversations" in cols or "messages" in cols else "alpaca"
        guess = data_register.guess_mapping(cols, formatting)
        updates = [gr.update(choices=cols, value=guess.get(r)) for r in roles]
        name = dest.stem.replace("-", "_")
        # Checked at once with the proposed mapping: a file that cannot train says so here, with the rows and
        # columns at fault, while the mapping and the format below can still be changed.
        refusal = data_register.trainability_text(str(dest), name, formatting, guess)

        def stored_text(code: str) -> str:
            msg = t("stored", code, name=dest.name, columns=", ".join(cols))
            return f"{msg}\n\n{refusal(code)}" if refusal(code) else msg

        msg, texts = _said(stored_text, lang_)
        return str(dest), msg, name, formatting, "", "", gr.update(), *updates, texts, {}

    upload.upload(
        _upload,
        [upload, ctx.lang],
        [stored, up_msg, ds_name, fmt, editing, reg_msg, upload, *role_boxes.values(), up_said, reg_said],
    )

    def _cleared():
        """The file taken off the widget (its ×): what was said and filled in from it goes with it, and the stored
        path too, so Register no longer registers a file the page no longer shows ("upload a file first")."""
        return "", "", "", "", *[gr.update(choices=[], value=None) for _ in roles], {}, {}

    upload.clear(
        _cleared, None, [stored, up_msg, ds_name, reg_msg, *role_boxes.values(), up_said, reg_said], queue=False
    )

    def _register(path, name, formatting, editing_, lang_, *cols):
        mapping = {r: v for r, v in zip(role_boxes, cols) if r in data_register.COLUMN_ROLES[formatting]}
        found = data_register.registered_entry(editing_) if editing_ and editing_ == name else None
        same_file = bool(found and path and Path(found["path"]).resolve() == Path(path).resolve())
        msg, texts = _said(data_register.register_text(path, name, formatting, mapping, replace=same_file), lang_)
        names_ = backend.registered_datasets()
        ok = msg.startswith(("✅", "⚠"))
        return msg, gr.update(choices=names_, value=name) if ok else gr.update(), gr.update(choices=names_), texts

    reg_btn.click(
        _register,
        [stored, ds_name, fmt, editing, ctx.lang, *role_boxes.values()],
        [reg_msg, pick, form["data.datasets"], reg_said],
    )
    if sharing is not None:
        share.wire(ctx, sharing, pick, share_msg, share.share_dataset)
    resay = lambda up, reg_, code: ((up or {}).get(code, gr.skip()), (reg_ or {}).get(code, gr.skip()))  # noqa: E731
    ctx.on_lang.append((resay, [up_said, reg_said, ctx.lang], [up_msg, reg_msg]))
