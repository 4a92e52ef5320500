"""Export tab: merge a finished run's adapter (or an adapter folder) into its base with one click.

Light: gradio + engine.exporting (which starts ``python -m engine.merge`` in its own process session). Jobs live in
this process (``JOBS``); the page keeps only a job id and polls with a timer. Paths typed here must stay inside the
workspace (no reaching outside the allowed roots).
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from engine import workspace
from studio import backend
from studio.i18n import t

JOBS: dict[str, Any] = {}  # job id -> exporting.MergeJob


def inside_workspace(path: str | Path) -> Path:
    """Resolve ``path`` (relative paths are taken from the workspace) and refuse anything outside the workspace."""
    root = workspace.home().resolve()
    p = Path(path).expanduser()
    p = (p if p.is_absolute() else root / p).resolve()
    if p != root and not p.is_relative_to(root):
        raise ValueError(f"{path}: only folders inside the workspace ({root}) can be used here")
    return p


def source_choices() -> list[tuple[str, str]]:
    """Completed runs (newest first) as (label, run folder)."""
    out = []
    for r in backend.list_runs():
        if getattr(r, "status", "") == "completed" and getattr(r, "kind", "train") == "train":
            out.append((f"{r.id} · {r.name}" if r.name and r.name != r.id else r.id, r.run_dir))
    return out


def default_out(source: str) -> str:
    if not source:
        return ""
    try:
        return str(backend.engine_module("exporting").default_export_dir(Path(source).name))
    except backend.Unavailable:
        return str(workspace.exports_dir() / Path(source).name)


def start(source: str, out_dir: str, lang: str = "en") -> tuple[str | None, str]:
    """(job id or None, message). Every input problem comes back as the exporter's own message."""
    if not source:
        return None, "❌ " + t("export_source", lang)
    try:
        src = inside_workspace(source)
        default = Path(default_out(str(src)))
        out = inside_workspace(out_dir) if out_dir else default
        if out.exists() and out == default.resolve():  # a second merge of the same run gets its own folder
            out = out.with_name(f"{out.name}-{secrets.token_hex(2)}")
        exporting = backend.engine_module("exporting")
        job = exporting.start_merge([str(src)], str(out))
    except (ValueError, backend.Unavailable) as exc:
        return None, f"❌ {exc}"
    except Exception as exc:  # ExportError and friends: the message names the folder and the fix
        return None, f"❌ {exc}"
    job_id = secrets.token_hex(6)
    JOBS[job_id] = job
    return job_id, f"merging into `{out}` …"


def folder_size(path: str | Path) -> int:
    p = Path(path)
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.is_dir() else 0


def describe(status: dict) -> str:
    """Markdown for one poll: progress, then output path, size and the verification result."""
    state = status.get("state")
    if state == "running":
        prog = status.get("progress") or {}
        count = f" {prog.get('i')}/{prog.get('n')}" if prog.get("n") else ""
        return f"⏳ {prog.get('stage', 'starting')}{count} {prog.get('detail', '')}".rstrip()
    if state == "finished":
        result = status.get("result") or {}
        out = result.get("out_dir") or status.get("out_dir")
        report = result.get("report") or {}
        verify = report.get("summary") or ("passed" if report.get("ok") else report or "n/a")
        size = folder_size(out) / 2**20
        return (
            f"✅ merged model: <span id='merged-path'>{out}</span>  \nsize: {size:.1f} MiB  \nverification: {verify}"
        )
    return f"❌ {state}: {status.get('error', '')}"


def poll(job_id: str | None) -> tuple[str | None, Any]:
    """(job id still running or None, markdown or gr.skip())."""
    import gradio as gr

    job = JOBS.get(job_id or "")
    if job is None:
        return None, gr.skip()
    status = job.poll()
    if status["state"] != "running":
        JOBS.pop(job_id, None)
        return None, describe(status)
    return job_id, describe(status)


def cancel(job_id: str | None) -> tuple[None, str]:
    job = JOBS.pop(job_id or "", None)
    if job is None:
        return None, "nothing to cancel"
    return None, describe(job.cancel())


def build(ctx: Any) -> None:
    import gradio as gr

    texts, lang = ctx.texts, ctx.lang_value
    with gr.Row(equal_height=False):
        source = texts.add(
            gr.Dropdown(
                choices=source_choices(),
                label=t("export_source", lang),
                allow_custom_value=True,
                scale=3,
                elem_id="export-source",
            ),
            "export_source",
        )
        refresh = texts.add(gr.Button(t("refresh", lang), size="sm", scale=0, min_width=90), "refresh", "value")
    out_dir = texts.add(gr.Textbox(label=t("export_out", lang), max_lines=1, elem_id="export-out"), "export_out")
    with gr.Row():
        merge_btn = texts.add(gr.Button(t("merge", lang), variant="primary", elem_id="merge-btn"), "merge", "value")
        cancel_btn = texts.add(gr.Button(t("cancel", lang), variant="stop", elem_id="merge-cancel"), "cancel", "value")
    result = gr.Markdown(elem_id="export-result")
    job = gr.State(None)
    timer = gr.Timer(1.0)
    refresh.click(lambda: gr.update(choices=source_choices()), None, [source])
    ctx.tab.select(lambda: gr.update(choices=source_choices()), None, [source], queue=False)
    source.change(default_out, [source], [out_dir], queue=False)
    merge_btn.click(start, [source, out_dir, ctx.lang], [job, result])
    cancel_btn.click(cancel, [job], [job, result])
    timer.tick(poll, [job], [job, result], show_progress="hidden", queue=False)
