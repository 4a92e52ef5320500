"""Export tab: merge a finished run's adapter (or an adapter folder) into its base with one click.

Light: gradio + engine.export.checks / jobs. A merge is a run of the registry (engine.export.merge_jobs), so the page
keeps only its run id: a reload or a restarted studio attaches to the merge in progress (or shows the newest one),
and Cancel works on it from any page. The memory and disk the merge needs are shown before the click; a merge that
will not fit is refused unless "merge anyway" is ticked. Sources typed here must be inside the workspace (and a
member's own: engine.runs.owners); the target follows the workspace's rule for output folders (engine.core.folders).
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from engine.core import folders, workspace
from engine.export import checks as xp
from engine.export import merge_jobs as merge_jobs
from engine.export import sizes
from engine.export.messages import message
from engine.runs import owners
from studio import backend
from studio.follow import from_tick, with_timer
from studio.i18n.localize import localize, localize_error
from studio.i18n.page import STRINGS, t


def dtype_choices(lang: str = "en") -> list[tuple[str, str]]:
    return [(t("export_dtype_base", lang), ""), ("bf16", "bf16"), ("fp16", "fp16"), ("fp32", "fp32")]


def inside_workspace(path: str | Path) -> Path:
    """A source typed here (or in Chat): resolved like every path (engine.core.folders.resolve: relative ones from
    the workspace) and refused outside the workspace, and in team mode inside another member's run or job folder
    (engine.runs.owners)."""
    root = workspace.home().resolve()
    p = folders.resolve(path)
    if p != root and not p.is_relative_to(root):
        raise ValueError(message("export.outside_workspace", path=path, root=root))
    problem = owners.path_problem(p, field="source")
    if problem is not None:
        raise ValueError(problem)
    return p


TRAINED_KINDS = ("train", "slurm")  # runs that train (here, or as a Slurm job in the shared run folder)


def source_choices() -> list[tuple[str, str]]:
    """Completed training runs (newest first) as (label, run folder)."""
    out = []
    for r in backend.list_runs():
        if getattr(r, "status", "") == "completed" and getattr(r, "kind", "train") in TRAINED_KINDS:
            out.append((f"{r.id} · {r.name}" if r.name and r.name != r.id else r.id, r.run_dir))
    return out


def _run_folder(source: str) -> Path | None:
    """``source`` when it is a registered training run's folder: a Slurm run's lives in the shared run folder
    (STUDIO_SLURM_SHARED), outside the workspace, and the registry vouches for it."""
    try:
        wanted = Path(source).expanduser().resolve()
        for r in backend.list_runs():
            if getattr(r, "kind", "train") in TRAINED_KINDS and Path(r.run_dir).resolve() == wanted:
                return wanted
    except Exception:  # noqa: BLE001 - an unreadable registry: the workspace rule decides
        return None
    return None


def default_out(source: str) -> str:
    if not source:
        return ""
    return str(xp.default_export_dir(Path(source).name))


def _paths(source: str, out_dir: str) -> tuple[Path, Path]:
    """(source inside the workspace, target where the workspace's rule allows: engine.core.folders, the same rule as
    the Train form's output folder and ``studio merge --out``); an existing default target gets a fresh suffix."""
    src = _run_folder(source) or inside_workspace(source)
    default = Path(default_out(str(src)))
    out = folders.output_path(out_dir) if out_dir else default
    if out.exists() and out == default.resolve():  # a second merge of the same run gets its own folder
        out = out.with_name(f"{out.name}-{secrets.token_hex(2)}")
    return src, out


def estimate(source: str, out_dir: str, dtype: str = "", device: str = "cpu", lang: str = "en") -> str:
    """What the merge needs (RAM, disk) against what this machine has, before anything starts."""
    if not source:
        return ""
    try:
        src, out = _paths(source, out_dir)
        plan = xp.plan_export([str(src)], str(out), dtype=dtype or None, device=device or "cpu", force=True)
    except Exception as exc:  # ExportError, a path outside the workspace: the message names the fix
        return f"❌ {localize_error(exc, lang)}"
    gb = lambda n: f"{n / 1e9:.1f} GB"  # noqa: E731
    line = t(
        "export_needs",
        lang,
        ram=gb(plan.ram_needed),
        ram_free=gb(plan.ram_available),
        disk=gb(plan.bytes_needed),
        disk_free=gb(plan.bytes_free),
        dtype=plan.dtype,
        device=plan.device,
    )
    problem = xp.memory_problem(plan, plan.sources, sizes.parse_size("2GB"))
    return f"⚠️ {localize(problem, lang)}  \n{line}" if problem else f"✅ {line}"


def start(
    source: str, out_dir: str, dtype: str = "", device: str = "cpu", force: bool = False, lang: str = "en"
) -> tuple[str | None, str]:
    """(merge run id or None, message). Every input problem comes back as the exporter's own message."""
    if not source:
        return None, "❌ " + t("export_source", lang)
    try:
        src, out = _paths(source, out_dir)
        job = merge_jobs.start_merge(
            [str(src)], str(out), dtype=dtype or None, device=device or "cpu", force=bool(force)
        )
    except Exception as exc:  # ExportError, a path outside the workspace: the message names the folder and the fix
        return None, f"❌ {localize_error(exc, lang)}"
    return job.run_id, t("export_merging", lang, out=out, id=job.run_id)


def folder_size(path: str | Path) -> int:
    p = Path(path)
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.is_dir() else 0


def state_text(state: str, lang: str = "en") -> str:
    """A merge's state (queued, running, finished, failed, cancelled) in the page's language."""
    key = next((k for k in (f"mstate_{state}", f"st_{state}") if k in STRINGS), None)
    return t(key, lang) if key else str(state)


def _stage_text(stage: str, lang: str) -> str:
    return t(f"mstage_{stage}", lang) if f"mstage_{stage}" in STRINGS else str(stage)


def _verification(report: dict, lang: str) -> str:
    if report.get("summary"):
        return localize(report["summary"], lang)
    return t("export_passed", lang) if report.get("passed") else t("export_na", lang)


def describe(status: dict, lang: str = "en") -> str:
    """Markdown for one poll: progress, then output path, size and the verification result."""
    state = status.get("state")
    colon = "：" if lang == "zh" else ": "
    if state == "queued":
        return "⏳ " + t("export_queued", lang, id=status.get("run_id"))
    if state == "running":
        prog = status.get("progress") or {}
        count = f" {prog.get('i')}/{prog.get('n')}" if prog.get("n") else ""
        detail = localize(prog.get("detail") or "", lang)
        return f"⏳ {_stage_text(prog.get('stage', 'starting'), lang)}{count} {detail}".rstrip()
    if state == "finished":
        result = status.get("result") or {}
        out = result.get("out_dir") or status.get("out_dir")
        verify = _verification(result.get("report") or {}, lang)
        size = f"{folder_size(out) / 2**20:.1f}"
        path = f"<span id='merged-path'>{out}</span>"
        return "✅ " + t("export_merged", lang, path=path, size=size, verify=verify)
    # the merge's own message (a catalog key when it wrote one), then the log's tail as it is
    first, _, rest = localize(status.get("error") or "", lang).partition("\n")
    text = f"❌ {state_text(state, lang)}{colon}{first}"
    if status.get("cleaned"):
        text += f"  \n{localize(status['cleaned'], lang)}"
    return text + (f"\n```\n{rest.strip()}\n```" if rest.strip() else "")


def _clip(text: str, n: int) -> str:
    """At most ``n`` characters, the middle left out: a long path at the start must not cut off the reason at the
    end ("<path>: no such file or folder")."""
    if len(text) <= n:
        return text
    return text[: n // 2 - 1] + "…" + text[-(n - n // 2) :]


def recent(limit: int = 8, lang: str = "en") -> str:
    """The newest merges: state, output folder, size and verification."""
    jobs = merge_jobs.list_merges(limit)
    rows = []
    for job in jobs:
        st = job.poll()
        report = (st.get("result") or {}).get("report") or {}
        size = f"{folder_size(st['out_dir']) / 2**20:.1f} MiB" if st["state"] == "finished" else ""
        verify = localize(report["summary"], lang) if report.get("summary") else ""
        if not verify and st["error"]:
            verify = _clip(localize(st["error"], lang).split("\n")[0], 100)
        verify = verify.replace("|", "\\|")  # "max |logit diff|" inside a table cell
        rows.append(f"| {job.run_id} | {state_text(st['state'], lang)} | `{st['out_dir']}` | {size} | {verify} |")
    if not rows:
        return ""
    head = " | ".join(t(f"mh_{c}", lang) for c in ("run", "state", "output", "size", "verification"))
    return f"| {head} |\n|---|---|---|---|---|\n" + "\n".join(rows)


def _job(job_id: str | None):
    if not job_id:
        return None
    try:
        return merge_jobs.MergeJob(job_id)
    except Exception:  # noqa: BLE001 -- deleted from the registry meanwhile: nothing to follow
        return None


def attach(lang: str = "en") -> tuple[str | None, Any, str]:
    """On page load: the merge in progress (followed by the timer) or the newest one's result, and the list. With no
    merge yet the result box is left as it is: a load that ends late (a busy server) must not wipe out what a click
    made meanwhile, a refusal among them."""
    import gradio as gr

    jobs = merge_jobs.list_merges(1)
    if not jobs:
        return None, gr.skip(), recent(lang=lang)
    status = jobs[0].poll()
    active = status["state"] in ("queued", "running")
    return (jobs[0].run_id if active else None), describe(status, lang), recent(lang=lang)


def poll(job_id: str | None, lang: str = "en") -> tuple[str | None, Any, Any]:
    """(run id still going or None, markdown or gr.skip(), recent merges when one ended or gr.skip())."""
    import gradio as gr

    job = _job(job_id)
    if job is None:
        return None, gr.skip(), gr.skip()
    status = job.poll()
    if status["state"] not in ("queued", "running"):
        return None, describe(status, lang), recent(lang=lang)
    return job_id, describe(status, lang), gr.skip()


def cancel(job_id: str | None, lang: str = "en") -> tuple[None, str, str]:
    job = _job(job_id)
    if job is None:
        return None, t("export_nothing", lang), recent(lang=lang)
    return None, describe(job.cancel(), lang), recent(lang=lang)


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
        dtype = texts.add(
            gr.Dropdown(dtype_choices(lang), value="", label=t("export_dtype", lang), elem_id="export-dtype"),
            "export_dtype",
        )
        device = texts.add(
            gr.Dropdown(["cpu", "cuda"], value="cpu", label=t("export_device", lang), elem_id="export-device"),
            "export_device",
        )
    needs = gr.Markdown(elem_id="export-estimate")
    force = texts.add(gr.Checkbox(False, label=t("export_force", lang), elem_id="export-force"), "export_force")
    with gr.Row():
        merge_btn = texts.add(gr.Button(t("merge", lang), variant="primary", elem_id="merge-btn"), "merge", "value")
        cancel_btn = texts.add(gr.Button(t("cancel", lang), variant="stop", elem_id="merge-cancel"), "cancel", "value")
    result = gr.Markdown(elem_id="export-result")
    recent_md = gr.Markdown(elem_id="export-recent")
    job = gr.State(None)
    timer = gr.Timer(1.0, active=False)  # on while a merge is followed (studio.follow)
    refresh.click(lambda: gr.update(choices=source_choices()), None, [source])
    ctx.tab.select(lambda: gr.update(choices=source_choices()), None, [source], queue=False)
    ctx.on_load.append((lambda: gr.update(choices=source_choices()), None, [source]))
    source.change(default_out, [source], [out_dir], queue=False)
    for comp in (out_dir, dtype, device):
        comp.change(estimate, [source, out_dir, dtype, device, ctx.lang], [needs], queue=False, show_progress="hidden")
    merge_btn.click(
        lambda *a: with_timer(start(*a)), [source, out_dir, dtype, device, force, ctx.lang], [job, result, timer]
    )
    cancel_btn.click(lambda *a: with_timer(cancel(*a)), [job, ctx.lang], [job, result, recent_md, timer])
    timer.tick(
        lambda *a: from_tick(poll(*a)),
        [job, ctx.lang],
        [job, result, recent_md, timer],
        show_progress="hidden",
        queue=False,
    )
    ctx.on_load.append((lambda *a: with_timer(attach(*a)), [ctx.lang], [job, result, recent_md, timer]))

    def _relabel(lang_, source_, out_, dtype_, device_):
        """A language switch: the dtype choices, the estimate and the list of merges in the new language."""
        shown = estimate(source_, out_, dtype_, device_, lang_)
        return gr.update(choices=dtype_choices(lang_)), shown, recent(lang=lang_)

    ctx.on_lang.append((_relabel, [ctx.lang, source, out_dir, dtype, device], [dtype, needs, recent_md]))
    from studio.tabs import export_formats  # GGUF / bitsandbytes exports, push and serve of the same source

    export_formats.build(ctx, source, lambda s: _run_folder(s) or inside_workspace(s))
