"""Export tab, second part: GGUF / bitsandbytes exports of the chosen source, a push of the result to the hub, and an
OpenAI-compatible server for the source. Light: gradio + engine.export.convert_jobs / convert_plan / push_jobs /
serve_jobs (form values in, the engine's own checks and messages out; nothing heavy here).

Each is a registry run, so the page keeps only run ids; the tab's timer follows them. A token typed in the password
field reaches the push's process through its environment for the start of that push only, never a file or a log.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from engine.core import accounts, member_secrets
from engine.core.units import file_size
from engine.export import convert_jobs, convert_plan, gguf_checks, push_jobs, serve_jobs
from studio import file_offers, follow
from studio.i18n.localize import localize, localize_error
from studio.i18n.page import t

FORMATS = ["gguf-q8_0", *(f for f in gguf_checks.FORMATS if f != "gguf-q8_0")]  # the engine's, its default first
_TOKEN_LOCK = threading.Lock()


def _src(source: str, resolve) -> str:
    """The source as the Export tab resolves it (``studio.tabs.export``: a registered run's folder, or a path inside
    the workspace), passed in by that tab."""
    return str(resolve(source)) if resolve else source


# ----------------------------------------------------------------------------------------------- export
def start_export(source: str, fmt: str, lang: str = "en", resolve=None) -> tuple[str | None, str]:
    if not source:
        return None, "❌ " + t("export_source", lang)
    try:
        src = _src(source, resolve)
        plan = convert_plan.plan_convert(src, fmt)
        job = convert_jobs.start_export(src, fmt)
    except Exception as exc:  # ExportError / a path outside the workspace: the message names the fix
        return None, f"❌ {localize_error(exc, lang)}"
    size = convert_plan.describe(plan)["estimated"]
    return job.run_id, "⏳ " + t("xf_started", lang, out=plan.out_dir, id=job.run_id, size=size)


def describe_export(status: dict, lang: str = "en") -> str:
    state = status.get("state")
    if state == "queued":
        return "⏳ " + t("export_queued", lang, id=status.get("run_id"))
    if state == "running":
        prog = status.get("progress") or {}
        count = f" {prog.get('i')}/{prog.get('n')}" if prog.get("n") else ""
        stage = t(f"mstage_{prog.get('stage')}", lang) if prog.get("stage") else ""
        return f"⏳ {stage}{count} {localize(prog.get('detail') or '', lang)}".rstrip()
    if state != "finished":
        error = localize(status.get("error") or "", lang)
        return f"❌ {state}: {error.splitlines()[0] if error else ''}"
    res = status.get("result") or {}
    rep = res.get("report") or {}
    lines = ["✅ " + t("xf_done", lang, path=f"<span id='gguf-path'>{res.get('out_dir')}</span>"), ""]
    lines += [f"| {t('xf_files', lang)} | {t('xf_size', lang)} |", "|---|---|"]
    lines += [f"| `{f['name']}` | {file_size(f['bytes'])} |" for f in res.get("files") or []]
    lines += ["", f"**{t('xf_verify', lang)}**: {localize(res.get('summary') or '', lang)}"]
    if res.get("llama_cpp_summary"):
        lines.append(f"  \n{localize(res['llama_cpp_summary'], lang)}")
    for g in rep.get("greedy") or []:
        same = t("xf_same" if g["same"] else "xf_differs", lang)
        lines.append(f"  \n{t('xf_greedy', lang)} «{g['prompt']}» → «{convert_jobs.exported_text(g)}» ({same})")
    mfile = rep.get("modelfile") or {}
    if mfile.get("written"):
        lines.append(f"\n{t('xf_ollama', lang)}: `{mfile['command']}`")
    return "\n".join(lines)


def take_home(status: dict, run_id: str | None) -> tuple[Any, Any]:
    """A finished export's files as downloads (studio.file_offers: only files inside the workspace) and its Ollama
    Modelfile's text; both hidden for anything else."""
    import gradio as gr

    res = status.get("result") or {} if status.get("state") == "finished" else {}
    folder = Path(res.get("out_dir") or status.get("out_dir") or "")
    names = [f["name"] for f in res.get("files") or []]
    offered = file_offers.offer_all(folder, names, str(run_id)) if res and folder.name else []
    modelfile = file_offers.inside_workspace(folder / "Modelfile") if "Modelfile" in names else None
    text = modelfile.read_text(encoding="utf-8", errors="replace") if modelfile else ""
    return (
        gr.update(value=offered or None, visible=bool(offered)),
        gr.update(value=text, visible=bool(text)),
    )


def _export_job(run_id: str | None):
    if not run_id:
        return None
    try:
        return convert_jobs.ExportJob(run_id)
    except Exception:  # noqa: BLE001 - deleted meanwhile
        return None


def cancel_export(run_id: str | None, lang: str = "en") -> tuple[None, str]:
    job = _export_job(run_id)
    if job is None:
        return None, t("xf_nothing", lang)
    return None, describe_export(job.cancel(), lang)


# ----------------------------------------------------------------------------------------------- push
def start_push(export_id: str | None, repo: str, private: bool, token: str, lang: str = "en"):
    """Push the finished export (its output folder). A typed token goes to the push process's environment only."""
    job = _export_job(export_id)
    folder = job.out_dir if job is not None else ""
    try:
        if token and accounts.owner_of_new():  # team mode: kept as the account's own HF_TOKEN, for its runs only
            member_secrets.put("HF_TOKEN", token)
            token = ""
        with _TOKEN_LOCK:
            old = os.environ.get("HF_TOKEN")
            if token:
                os.environ["HF_TOKEN"] = token
            try:
                push = push_jobs.start_push(folder or "", (repo or "").strip(), private=bool(private))
            finally:
                if token:
                    if old is None:
                        os.environ.pop("HF_TOKEN", None)
                    else:
                        os.environ["HF_TOKEN"] = old
    except Exception as exc:  # noqa: BLE001 - offline, no token, a bad repo id: said before any work
        return None, f"❌ {localize_error(exc, lang)}"
    return push.run_id, describe_push(push.poll(), lang)


def describe_push(status: dict, lang: str = "en") -> str:
    if status["state"] == "finished":
        return "✅ " + t("xf_pushed", lang, url=status["url"])
    if status["state"] in ("queued", "running"):
        args = {"repo": status["repo"], "i": status["files_done"], "n": status["files"]}
        return "⏳ " + t(
            "xf_push_progress", lang, done=file_size(status["done"]), total=file_size(status["total"]), **args
        )
    return f"❌ {status['state']}: {localize(status.get('error') or '', lang)}"


# ----------------------------------------------------------------------------------------------- serve
def start_serve(source: str, lang: str = "en", resolve=None) -> tuple[str | None, str]:
    if not source:
        return None, "❌ " + t("export_source", lang)
    try:
        job = serve_jobs.start_serve(_src(source, resolve), 0)
    except Exception as exc:  # noqa: BLE001
        return None, f"❌ {localize_error(exc, lang)}"
    return job.run_id, "⏳ " + t("xf_loading", lang, id=job.run_id)


def describe_serve(status: dict, lang: str = "en") -> str:
    if status["state"] == "serving":
        curl = serve_jobs.curl_example(status["url"], status["model"], status.get("key_env"))
        url = f"<span id='serve-url'>{status['url']}</span>"
        return "🟢 " + t("xf_serving", lang, model=status["model"], url=url) + f"\n```\n{curl}\n```"
    if status["state"] in ("queued", "running"):
        return "⏳ " + t("xf_loading", lang, id=status["run_id"])
    if status["state"] == "stopped":
        return t("xf_stopped", lang)
    return f"❌ {status['state']}: {status.get('error') or ''}"


def _serve_job(run_id: str | None):
    if not run_id:
        return None
    try:
        return serve_jobs.ServeJob(run_id)
    except Exception:  # noqa: BLE001
        return None


def stop_serve(run_id: str | None, lang: str = "en") -> tuple[None, str]:
    job = _serve_job(run_id)
    return None, (describe_serve(job.stop(grace=5), lang) if job else t("xf_stopped", lang))


def poll(export_id, push_id, serve_id, shown=None, lang: str = "en"):
    """One timer tick: each followed run's text (gr.skip() where nothing is followed); ended runs are let go. A
    finished export's downloads and Modelfile are handed over once (``shown``: the export whose files are on the
    page): gradio caches a file it is handed by reading it whole, which each tick of a push or a server followed
    after a multi-GB export would repeat."""
    import gradio as gr

    out: list[Any] = []
    job = _export_job(export_id)
    if job is None:
        out += [gr.skip()]
    else:
        st = job.poll()
        out += [describe_export(st, lang)]
    took, now_shown = [gr.skip(), gr.skip()], gr.skip()
    if job is not None and st["state"] not in ("queued", "running") and shown != export_id:
        took, now_shown = list(take_home(st, export_id)), export_id
    push = None
    if push_id:
        try:
            push = push_jobs.PushJob(push_id)
        except Exception:  # noqa: BLE001
            push = None
    pst = push.poll() if push else None
    out += [describe_push(pst, lang) if pst else gr.skip()]
    serve = _serve_job(serve_id)
    sst = serve.poll() if serve else None
    out += [describe_serve(sst, lang) if sst else gr.skip()]
    push_keep = push_id if pst and pst["state"] in ("queued", "running") else None
    serve_keep = serve_id if sst and sst["state"] in ("queued", "running", "serving") else None
    going = (job is not None and st["state"] in ("queued", "running")) or push_keep or serve_keep
    # the timer follows while one of them goes (studio.follow); the export's id stays for a push after it
    return [export_id, push_keep, serve_keep, now_shown, *out, *took, gr.skip() if going else follow.timer(False)]


def build(ctx: Any, source: Any, resolve) -> None:
    import gradio as gr

    texts, lang = ctx.texts, ctx.lang_value
    with texts.add_section(gr.Accordion(t("xf_section", lang), open=True), (t("xf_section"), t("xf_section", "zh"))):
        with gr.Row():
            fmt = texts.add(gr.Dropdown(FORMATS, value="gguf-q8_0", label=t("xf_format", lang), elem_id="xf-format"),
                            "xf_format")  # fmt: skip
            go = gr.Button(t("xf_export", lang), variant="primary", elem_id="xf-export")
            stop = gr.Button(t("xf_cancel", lang), variant="stop", elem_id="xf-cancel")
            texts.add(go, "xf_export", "value")
            texts.add(stop, "xf_cancel", "value")
        result = gr.Markdown(elem_id="xf-result")
        with gr.Row():
            files = texts.add(
                gr.File(label=t("xf_download", lang), file_count="multiple", interactive=False, visible=False,
                        elem_id="xf-files"),
                "xf_download",
            )  # fmt: skip
            modelfile = texts.add(
                gr.Code(
                    label=t("xf_modelfile", lang),
                    language=None,
                    interactive=False,
                    visible=False,
                    elem_id="xf-modelfile",
                ),
                "xf_modelfile",
            )
        with gr.Row():
            repo = texts.add(gr.Textbox(label=t("xf_repo", lang), max_lines=1, elem_id="xf-repo"), "xf_repo")
            private = texts.add(gr.Checkbox(True, label=t("xf_private", lang), elem_id="xf-private"), "xf_private")
            token = texts.add(gr.Textbox(label=t("xf_token", lang), type="password", max_lines=1, elem_id="xf-token"),
                              "xf_token")  # fmt: skip
            push_btn = texts.add(gr.Button(t("xf_push", lang), elem_id="xf-push"), "xf_push", "value")
        push_md = gr.Markdown(elem_id="xf-push-status")
        with gr.Row():
            serve_btn = texts.add(gr.Button(t("xf_serve", lang), elem_id="xf-serve"), "xf_serve", "value")
            unserve = texts.add(gr.Button(t("xf_serve_stop", lang), elem_id="xf-serve-stop"), "xf_serve_stop", "value")
        serve_md = gr.Markdown(elem_id="xf-serve-status")
    export_id, push_id, serve_id = gr.State(None), gr.State(None), gr.State(None)
    shown = gr.State(None)  # the export whose files and Modelfile the page shows
    timer = gr.Timer(1.0, active=False)  # on while an export, a push or a server is followed (studio.follow)
    go.click(
        lambda s, f, lg: (*follow.started(start_export(s, f, lg, resolve)), None, *take_home({}, None)),
        [source, fmt, ctx.lang],
        [export_id, result, timer, shown, files, modelfile],
    )
    stop.click(cancel_export, [export_id, ctx.lang], [export_id, result])
    push_btn.click(
        lambda *a: follow.started(start_push(*a)),
        [export_id, repo, private, token, ctx.lang],
        [push_id, push_md, timer],
    )
    serve_btn.click(
        lambda s, lg: follow.started(start_serve(s, lg, resolve)), [source, ctx.lang], [serve_id, serve_md, timer]
    )
    unserve.click(stop_serve, [serve_id, ctx.lang], [serve_id, serve_md])
    states = [export_id, push_id, serve_id, shown]
    timer.tick(
        poll,
        [*states, ctx.lang],
        [*states, result, push_md, serve_md, files, modelfile, timer],
        show_progress="hidden",
        queue=False,
    )
