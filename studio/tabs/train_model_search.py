"""Train tab: the model picker inside the Model section. A search box asks ``engine.models.search`` (the hub's search
when it answers, Studio's table of published configs when it does not, said in one line) and shows each model's
size, licence, gating and whether it is downloaded; picking a row puts its id in the Model field, which the plan
panel follows, so the plan appears before anything is downloaded.

Light: gradio, engine.models.search, engine.plan.model_shape (the table's parameter counts). Handlers are plain
functions of widget values so tests call them without a browser.
"""

from __future__ import annotations

from typing import Any

import gradio as gr

from engine.core.units import file_size
from engine.models import search
from studio.i18n.localize import localize
from studio.i18n.page import t

COLUMNS = ["ms_col_id", "ms_col_params", "ms_col_size", "ms_col_licence", "ms_col_gated", "ms_col_cached"]
GATED = {"no": "ms_gated_no", "manual": "ms_gated_manual", "auto": "ms_gated_auto"}


def _count(config: dict) -> int | None:
    from engine.plan.model_shape import param_counts

    return param_counts(config)["total"]


def headers(lang: str = "en") -> list[str]:
    return [t(key, lang) for key in COLUMNS]


def cells(row: search.ModelRow, lang: str = "en") -> list[str]:
    """One row of the table as a person reads it, in the page's language."""
    unknown = t("ms_unknown", lang)
    size = file_size(row.size_bytes) if row.size_bytes else unknown
    if row.size_bytes and row.source == search.TABLE:
        size = f"≈ {size}"
    return [
        row.id,
        search.human_count(row.parameters) or unknown,
        size,
        row.licence or unknown,
        t(GATED[row.gated], lang) if row.gated in GATED else unknown,
        t("ms_cached_yes" if row.cached else "ms_cached_no", lang),
    ]


def find(query: str, lang: str = "en") -> tuple[str, dict[str, Any], search.SearchResult]:
    """(the line saying where the rows came from, the table's value, the result kept for a language switch) for a
    query typed in the search box."""
    found = search.search_models(query or "", count=_count)
    return (*shown(found, lang), found)


def shown(found: search.SearchResult | None, lang: str = "en") -> tuple[str, dict[str, Any]]:
    """The note and the table of a search's result in ``lang`` (an empty table before any search)."""
    if found is None:
        return "", {"headers": headers(lang), "data": []}
    return localize(found.note, lang), {"headers": headers(lang), "data": [cells(r, lang) for r in found.rows]}


def picked(row_value: list | None) -> str | None:
    """The model id of a picked row (its first cell), or None for an empty row."""
    if not row_value:
        return None
    first = str(row_value[0] or "").strip()
    return first or None


def build(texts: Any, lang: str) -> dict[str, Any]:
    """Lay out the picker (inside the Model section); returns its widgets for ``wire``."""
    with gr.Accordion(t("ms_title", lang), open=False, elem_id="model-search") as acc:
        texts.add(acc, "ms_title")
        with gr.Row(equal_height=True):
            query = texts.add(
                gr.Textbox(
                    label=t("ms_query", lang),
                    placeholder="qwen 7b",
                    max_lines=1,
                    scale=4,
                    elem_id="model-search-query",
                ),
                "ms_query",
            )
            go = texts.add(
                gr.Button(t("ms_search", lang), size="sm", scale=1, elem_id="model-search-btn"), "ms_search", "value"
            )
        note = gr.Markdown(elem_id="model-search-note")
        table = texts.add(
            gr.Dataframe(
                value={"headers": headers(lang), "data": []},
                headers=headers(lang),
                interactive=False,
                wrap=True,
                # the six columns within the form's width at 1280 px (their natural widths took 1080 px of 670)
                column_widths=["31%", "11%", "13%", "14%", "16%", "15%"],
                max_height=320,
                label=t("ms_results", lang),
                elem_id="model-search-results",
            ),
            "ms_results",
        )
    return {"query": query, "go": go, "note": note, "table": table, "found": gr.State(None)}


def wire(widgets: dict[str, Any], model_box: Any, ctx: Any) -> None:
    """Enter or the button searches; a click on a row puts its id in the Model field (whose change the plan panel
    and the template hint follow)."""
    outputs = [widgets["note"], widgets["table"]]
    gr.on(
        [widgets["go"].click, widgets["query"].submit],
        find,
        [widgets["query"], ctx.lang],
        [*outputs, widgets["found"]],
        trigger_mode="always_last",
    )
    ctx.on_lang.append((shown, [widgets["found"], ctx.lang], outputs))  # the rows in the page's words

    widgets["table"].select(_pick, None, [model_box], queue=False)


def _pick(evt: gr.SelectData) -> Any:
    """The Model field's update for a clicked row (gradio passes the row's cells in ``row_value``)."""
    name = picked(evt.row_value)
    return gr.skip() if name is None else gr.update(value=name)
