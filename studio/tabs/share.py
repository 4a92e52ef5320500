"""Sharing read-only in team mode (issue 46 item 2), one row for the Runs, Datasets and Models tabs: the run,
dataset or model picked in the tab is shared with named accounts or the whole team (``engine.runs.registry.share``,
``engine.data.dataset_registry.share_dataset``, ``engine.jobs.downloads.share_local``). Its owner (or an admin) may; a
reader lists it and uses it (a run as a source, a dataset or model to train on), never changes or deletes it. The tabs
build the row only in team mode.

Light: the registry, the data and models commands' sharing, and the page's catalog.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.core import workspace
from engine.data import dataset_registry as data_registry
from engine.jobs import downloads
from engine.runs import registry as runs
from studio.i18n.localize import localize_error
from studio.i18n.page import t

EVERYONE = "*"


def said(what: str, now: list[str], lang: str = "en") -> str:
    """What the page says once ``what`` is shared with ``now`` (nobody, everyone, or the accounts)."""
    if not now:
        return "✅ " + t("share_nobody", lang, id=what)
    shown = t("share_everyone", lang) if now == [EVERYONE] else ", ".join(now)
    return "✅ " + t("share_done", lang, id=what, names=shown)


def _share(what: str | None, names: str, how: Callable[[str, list[str]], list[str]], lang: str) -> str:
    what = str(what or "").strip()
    if not what:
        return t("share_pick_first", lang)
    wanted = [n.strip() for n in str(names or "").split(",") if n.strip()]
    try:
        now = how(what, wanted)
    except Exception as exc:  # not theirs, read-only, an unknown account or thing: its own words
        return f"❌ {localize_error(exc, lang)}"
    return said(what, now, lang)


def share_run(run_id: str | None, names: str, lang: str = "en") -> str:
    """Share the picked run with the comma-separated ``names`` (``*``: everyone; empty: nobody again)."""
    return _share(run_id, names, runs.share, lang)


def share_dataset(name: str | None, names: str, lang: str = "en") -> str:
    """Share the picked dataset of the workspace's data folder, as ``share_run`` does a run."""
    return _share(name, names, lambda n, w: data_registry.share_dataset(workspace.data_dir(), n, w), lang)


def share_model(name: str | None, names: str, lang: str = "en") -> str:
    """Share a model folder of the workspace (``models/<folder>``, as the Models tab lists it)."""
    return _share(name, names, downloads.share_local, lang)


def build(ctx: Any, prefix: str) -> tuple[Any, Any]:
    """A row: the names and a Share button (``#<prefix>-share-with``, ``#<prefix>-share``; ``wire`` connects them)."""
    import gradio as gr

    texts, lang = ctx.texts, ctx.lang_value
    with gr.Row():
        names = texts.add(
            gr.Textbox(label=t("share_with", lang), elem_id=f"{prefix}-share-with", scale=3), "share_with"
        )
        button = texts.add(
            gr.Button(t("share", lang), size="sm", elem_id=f"{prefix}-share", scale=1, min_width=80), "share", "value"
        )
    return names, button


def wire(ctx: Any, parts: tuple[Any, Any], picked: Any, msg: Any, how: Callable[[Any, str, str], str]) -> None:
    """The Share button shares what ``picked`` holds with ``how`` (``share_run``, ...); its answer goes to ``msg``."""
    names, button = parts
    button.click(how, [picked, names, ctx.lang], [msg], queue=False)
