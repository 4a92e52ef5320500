"""Models tab: what is local (the workspace's models/, the Hugging Face cache and ModelScope's) with sizes and their
source, downloads from the hub or ModelScope as registry runs (progress, cancel; a new download of the same repo
resumes), GGUF files imported as base models (engine.jobs.gguf_imports: dequantized into the workspace's models/,
verified), and delete.

Light: gradio + pandas; the downloads run in their own processes (engine.jobs.downloads, engine.models.download).
Handlers are plain functions of the page's language.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from engine.core import accounts
from engine.core.messages import payload_message
from engine.core.units import file_size
from engine.jobs import downloads, gguf_imports
from engine.models import local, ms_models, reach
from engine.runs import owners
from studio import follow
from studio.i18n.localize import localize, localize_error
from studio.i18n.page import STRINGS, t
from studio.tabs import share

COLUMNS = ["name", "source", "size", "state", "path"]


def _where(source: str, lang: str) -> str:
    """A local model's place in the page's language (workspace / the Hugging Face cache / ModelScope's)."""
    key = f"m_src_{source}"
    return t(key, lang) if key in STRINGS else source


def models_frame(lang: str = "en") -> pd.DataFrame:
    rows = [
        (m.name, _where(m.source, lang), file_size(m.size), t(f"m_{'' if m.complete else 'in'}complete", lang), m.path)
        for m in local.list_local()
        if owners.path_problem(m.path) is None  # team mode: not another member's import
    ]
    return pd.DataFrame(rows, columns=[t(f"m_{c}", lang) for c in COLUMNS])


def downloads_text(lang: str = "en") -> str:
    """The recent downloads, newest first: state and progress (or the result / the error) in the page's language."""
    return _downloads(lang)[0]


FOLLOW_S, IDLE_S = 1.0, 5.0  # the downloads' timer while one goes / with none (one started from the CLI shows)


def poll_downloads(lang: str, seen: dict | None) -> tuple[Any, dict, Any]:
    """The timer's tick: the list when it changed, and the timer every FOLLOW_S while a download goes, every IDLE_S
    otherwise (each tick is an event the browser handles across the whole page)."""
    import gradio as gr

    seen = dict(seen or {})
    text, going = _downloads(lang)
    timer = follow.retime(seen, FOLLOW_S if going else IDLE_S)
    shown = gr.skip() if seen.get("text") == text else text
    seen["text"] = text
    return shown, seen, timer


def _downloads(lang: str) -> tuple[str, bool]:
    """(the list's text, whether a download is queued or running)."""
    jobs = downloads.list_downloads(limit=8)
    lines = []
    going = False
    for job in jobs:
        status = job.poll()
        going = going or status["state"] in ("queued", "running")
        state = t(f"st_{status['state']}", lang) if status["state"] in ("queued", "running") else status["state"]
        if status["state"] == "finished":
            res = status["result"] or {}
            detail = localize(payload_message(res, "summary") or "", lang)
        elif status["error"]:
            detail = localize(status["error"], lang)
        else:
            detail = localize(status["detail"], lang)
        lines.append(f"- `{status['run_id']}` **{status['repo']}** · {state} · {detail}")
    for job in gguf_imports.list_imports(limit=4):  # GGUF imports follow on the same list and timer
        status = job.poll()
        going = going or status["state"] in ("queued", "running")
        state = t(f"st_{status['state']}", lang) if status["state"] in ("queued", "running") else status["state"]
        said = (status["result"] or {}).get("summary") or status["error"] or status["detail"]
        name = f"{Path(status['gguf']).name} → models/{Path(status['out_dir']).name}"
        lines.append(f"- `{status['run_id']}` **{name}** · {state} · {localize(said or '', lang)}")
    return "\n".join(lines) or t("m_no_downloads", lang), going


def hub_text(lang: str = "en") -> str:
    """Which hub downloads come from: the default one, a mirror (HF_ENDPOINT), or none (HF_HUB_OFFLINE)."""
    return localize(reach.where(), lang)


def modelscope_text(lang: str = "en") -> str:
    """Where a ModelScope download comes from and goes (MODELSCOPE_ENDPOINT, MODELSCOPE_CACHE)."""
    return localize(ms_models.where(), lang)


def start_download(name: str, lang: str = "en", modelscope: bool = False) -> str:
    try:
        run_id = downloads.submit_download((name or "").strip(), modelscope=bool(modelscope))
    except Exception as exc:  # noqa: BLE001 - a bad id: its message, in the page's language
        return localize_error(exc, lang)
    return t("m_queued_as", lang, id=run_id)


def start_gguf_import(path: str, name: str, lang: str = "en") -> str:
    """Queue the import of a GGUF file on this machine; a file or name refused is said in one line."""
    try:
        job = gguf_imports.start_import((path or "").strip(), (name or "").strip() or None)
    except Exception as exc:  # noqa: BLE001 - not GGUF, an architecture or quantization refused, a folder that exists
        return localize_error(exc, lang)
    return t("m_import_queued", lang, id=job.run_id, out=job.out_dir)


def cancel_downloads(lang: str = "en") -> str:
    jobs = downloads.list_downloads(limit=50)
    active = [j for j in jobs if j.poll()["state"] in ("queued", "running")]
    for job in active:
        job.cancel()
    return t("m_cancelled", lang, n=len(active))


def delete_model(name: str, lang: str = "en") -> str:
    try:
        return localize(downloads.delete_local((name or "").strip()), lang)
    except Exception as exc:  # noqa: BLE001 - unknown, or in use by a run: its message
        return localize_error(exc, lang)


def build(ctx: Any) -> None:
    import gradio as gr

    lang = ctx.lang_value
    table = gr.Dataframe(
        headers=[t(f"m_{c}", lang) for c in COLUMNS], interactive=False, wrap=True, elem_id="models-table"
    )  # its real header while empty (issue 45 item 20); the rows come when the tab opens
    refresh = ctx.texts.add(gr.Button(t("m_refresh", lang), elem_id="models-refresh"), "m_refresh", "value")
    with gr.Row():
        repo = ctx.texts.add(gr.Textbox(label=t("m_repo", lang), elem_id="models-repo", scale=3), "m_repo")
        download = ctx.texts.add(gr.Button(t("m_download", lang), elem_id="models-download"), "m_download", "value")
        cancel = ctx.texts.add(gr.Button(t("m_cancel", lang), elem_id="models-cancel"), "m_cancel", "value")
    modelscope = ctx.texts.add(
        gr.Checkbox(ms_models.use_modelscope(), label=t("m_modelscope", lang), elem_id="models-modelscope"),
        "m_modelscope",
    )
    with gr.Row():
        gguf = ctx.texts.add(gr.Textbox(label=t("m_gguf", lang), elem_id="models-gguf", scale=3), "m_gguf")
        gguf_name = ctx.texts.add(
            gr.Textbox(label=t("m_gguf_name", lang), elem_id="models-gguf-name", scale=2), "m_gguf_name"
        )
        gguf_import = ctx.texts.add(
            gr.Button(t("m_gguf_import", lang), elem_id="models-gguf-import"), "m_gguf_import", "value"
        )
    hub = gr.Markdown(hub_text(lang), elem_id="models-hub")
    ms_hub = gr.Markdown(modelscope_text(lang), elem_id="models-modelscope-hub")
    note = gr.Markdown(elem_id="models-note")
    progress = gr.Markdown(elem_id="models-downloads")
    with gr.Row():
        target = ctx.texts.add(gr.Textbox(label=t("m_target", lang), elem_id="models-target", scale=3), "m_target")
        delete = ctx.texts.add(gr.Button(t("m_delete", lang), elem_id="models-delete"), "m_delete", "value")
    sharing = share.build(ctx, "models") if accounts.team_mode() else None  # the model named above, read-only
    seen = gr.State({})  # what the list shows and the timer's interval (poll_downloads)
    timer = gr.Timer(FOLLOW_S)
    refresh.click(models_frame, [ctx.lang], [table])
    download.click(start_download, [repo, ctx.lang, modelscope], [note]).then(
        poll_downloads, [ctx.lang, seen], [progress, seen, timer]
    )
    gguf_import.click(start_gguf_import, [gguf, gguf_name, ctx.lang], [note]).then(
        poll_downloads, [ctx.lang, seen], [progress, seen, timer]
    )
    cancel.click(cancel_downloads, [ctx.lang], [note]).then(poll_downloads, [ctx.lang, seen], [progress, seen, timer])
    delete.click(delete_model, [target, ctx.lang], [note]).then(models_frame, [ctx.lang], [table])
    if sharing is not None:
        share.wire(ctx, sharing, target, note, share.share_model)
    timer.tick(poll_downloads, [ctx.lang, seen], [progress, seen, timer], queue=False, show_progress="hidden")
    ctx.tab.select(models_frame, [ctx.lang], [table])
    ctx.tab.select(hub_text, [ctx.lang], [hub])
    ctx.on_lang.append((hub_text, [ctx.lang], [hub]))
    ctx.tab.select(modelscope_text, [ctx.lang], [ms_hub])
    ctx.on_lang.append((modelscope_text, [ctx.lang], [ms_hub]))
