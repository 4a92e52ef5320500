"""The Runs tab's sharing in team mode (issue 46 item 2): the run picked in the tab is shared read-only with named
accounts or with the whole team (``engine.runs.registry.share``); its owner (or an admin) may, a reader sees it and
its files and may use it as a source, never stop, delete, rename or tag it.

Light: the registry and the page's catalog.
"""

from __future__ import annotations

from typing import Any

from engine.runs import registry as runs
from studio.i18n.localize import localize_error
from studio.i18n.page import t

EVERYONE = "*"


def share(run_id: str | None, names: str, lang: str = "en") -> str:
    """Share the picked run with the comma-separated ``names`` (``*``: everyone; empty: nobody again)."""
    if not run_id:
        return t("select_run_first", lang)
    wanted = [n.strip() for n in str(names or "").split(",") if n.strip()]
    try:
        now = runs.share(run_id, wanted)
    except Exception as exc:  # RunsError: not theirs, read-only, an unknown account
        return f"❌ {localize_error(exc, lang)}"
    if not now:
        return "✅ " + t("share_nobody", lang, id=run_id)
    shown = t("share_everyone", lang) if now == [EVERYONE] else ", ".join(now)
    return "✅ " + t("share_done", lang, id=run_id, names=shown)


def build(ctx: Any) -> tuple[Any, Any]:
    """A row of the Runs tab under its run picker: the names and a Share button (``wire`` connects them)."""
    import gradio as gr

    texts, lang = ctx.texts, ctx.lang_value
    with gr.Row():
        names = texts.add(gr.Textbox(label=t("share_with", lang), elem_id="runs-share-with", scale=3), "share_with")
        button = texts.add(
            gr.Button(t("share", lang), size="sm", elem_id="runs-share", scale=1, min_width=80), "share", "value"
        )
    return names, button


def wire(ctx: Any, parts: tuple[Any, Any], one: Any, msg: Any) -> None:
    """The Share button shares the run picked in ``one``; its answer goes to ``msg``."""
    names, button = parts
    button.click(share, [one, names, ctx.lang], [msg], queue=False)
