"""Train tab: the generated spec form, validation next to fields, start/stop, presets, command preview, memory plan.

Light: gradio, yaml, engine.spec.schema and (lazily, through studio.backend) engine.runs.launch / runs / plan /
templates. Handlers are plain functions of widget values so tests call them without a browser.
"""

from __future__ import annotations

import html
import re
import time
from pathlib import Path
from typing import Any

import yaml

from engine.core import workspace
from engine.spec import schema as spec_mod
from studio import backend, forms
from studio.i18n.localize import localize, localize_error, localize_problems
from studio.i18n.page import t
from studio.tabs import train_estimate

PRESET_NAME = re.compile(r"^[A-Za-z0-9._\-\u4e00-\u9fff ]{1,80}$")


# ----------------------------------------------------------------------------------------------- handlers
def to_values(args: list[Any]) -> dict[str, Any]:
    return dict(zip([f.path for f in forms.FIELDS], args))


def check(values: dict[str, Any]) -> tuple[spec_mod.RunSpec | None, list, list]:
    return spec_mod.validate_spec(forms.values_to_dict(values))


_DATA_CHECKS: dict[tuple, list] = {}  # the data check of a form state, by its datasets' files as they are now


def form_check(values: dict[str, Any]) -> tuple[spec_mod.RunSpec | None, list, list]:
    """``check`` plus the output-folder and dataset checks Start runs (engine.runs.registry.output_problems,
    data_problems): the form says what Start would refuse. The rows are read again only when a dataset, the stage
    or a file changes."""
    spec, errors, warnings = check(values)
    if spec is None:
        return spec, errors, warnings
    runs = backend.engine_module("runs.registry")
    outs = runs.output_problems(spec)  # the one output-folder check (another run's folder, exports/, files there)
    if outs:
        return None, outs, warnings
    try:
        key = _data_key(spec)
        if key not in _DATA_CHECKS:
            if len(_DATA_CHECKS) > 64:
                _DATA_CHECKS.clear()
            _DATA_CHECKS[key] = runs.data_problems(spec)
        problems = _DATA_CHECKS[key]
    except Exception:  # noqa: BLE001 - the check is advice here; Start runs it again and names any failure
        problems = []
    return (None, problems, warnings) if problems else (spec, errors, warnings)


def _data_key(spec: spec_mod.RunSpec) -> tuple:
    """The datasets, stage and folder of a spec with the size and time of the registry and of each dataset file."""
    import json

    ddir = spec_mod.resolve_dataset_dir(spec)

    def stamp(path: Path) -> tuple:
        try:
            st = path.stat()
            return (str(path), st.st_size, st.st_mtime_ns)
        except OSError:
            return (str(path), None, None)

    files = [stamp(ddir / "dataset_info.json")]
    try:
        info = json.loads((ddir / "dataset_info.json").read_text(encoding="utf-8"))
        for name in spec.data.datasets:
            path = Path(str((info.get(name) or {}).get("file_name", ""))).expanduser()
            files.append(stamp(path if path.is_absolute() else ddir / path))
    except (OSError, ValueError, AttributeError):
        pass
    return (tuple(spec.data.datasets), spec.method.stage, str(ddir), tuple(files))


def problems_markdown(errors: list, warnings: list, lang: str = "en") -> str:
    """The list beside Start: every error and warning with the field it names, in the page's language."""
    lines = [f"✅ {t('spec_ok', lang)}"] if not errors else [f"❌ {t('spec_bad', lang)}"]
    lines += [f"- {_where(path, lang)}{_colon(lang)}{msg}" for path, msg in localize_problems(errors, lang)]
    if warnings:
        lines.append(f"\n**{t('warnings', lang)}**")
        lines += [f"- ⚠ {_where(path, lang)}{_colon(lang)}{msg}" for path, msg in localize_problems(warnings, lang)]
    return "\n".join(lines)


def _where(path: str, lang: str) -> str:
    """The field's label as the form shows it, then its `path` (for the YAML and the CLI)."""
    field = forms.field_for_error(path)
    if field:
        return f"**{forms.BY_PATH[field].label_for(lang)}** `{path}`"
    return f"`{path}`"


def _colon(lang: str) -> str:
    return "：" if lang == "zh" else ": "


def field_updates(
    errors: list, warnings: list, flagged: dict[str, str], lang: str = "en"
) -> tuple[list[Any], dict[str, str]]:
    """One update per form widget: the message under the field it names (before its help), red frame while invalid.

    ``flagged`` is what the page shows now ({path: message, "": language}); unchanged fields get a no-op update,
    and a language switch redraws every field's help."""
    import gradio as gr

    by_err, _ = forms.group_problems(localize_problems(errors, lang))
    by_warn, _ = forms.group_problems(localize_problems(warnings, lang))
    now: dict[str, str] = {"": lang}
    relabel = flagged.get("", "en") != lang
    sep = "；" if lang == "zh" else "; "
    for path, msgs in by_err.items():
        now[path] = "❌ " + sep.join(msgs)
    for path, msgs in by_warn.items():
        now.setdefault(path, "⚠ " + sep.join(msgs))
    updates = []
    for f in forms.FIELDS:
        msg = now.get(f.path)
        if msg == flagged.get(f.path) and not relabel:
            updates.append(gr.update())
            continue
        classes = ["spec-field"] + (
            ["field-error"] if msg and msg.startswith("❌") else ["field-warning"] if msg else []
        )
        help_ = f.info_for(lang)
        updates.append(gr.update(info=f"{msg} — {help_}" if msg else (help_ or None), elem_classes=classes))
    return updates, now


def validate_form(*args: Any) -> list[Any]:
    """gradio handler: (*field values, flagged, lang) -> (*field updates, problems markdown, start button, flagged)."""
    import gradio as gr

    *field_args, flagged, lang = args
    spec, errors, warnings = form_check(to_values(field_args))
    updates, now = field_updates(errors, warnings, flagged or {}, lang)
    return [*updates, problems_markdown(errors, warnings, lang), gr.update(interactive=spec is not None), now]


def fingerprint(spec: spec_mod.RunSpec) -> str:
    """A short hash of a valid spec: a second Start of the same form state confirms a duplicate run."""
    import hashlib
    import json

    text = json.dumps(_comparable(spec_mod.spec_to_dict(spec)), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _comparable(data: dict) -> dict:
    """A spec as a dict with what submit changes made the same: the model's local folder resolved (submit stores it
    absolute) and the run name left out (it does not change what is trained)."""
    import copy

    from engine.models.resolve import looks_local, model_path

    data = copy.deepcopy(data)
    model = data.get("model") or {}
    name = str(model.get("name_or_path") or "")
    if name and looks_local(name):
        model["name_or_path"] = str(model_path(name).resolve())
    (data.get("output") or {}).pop("run_name", None)
    return data


def identical_active_run(spec: spec_mod.RunSpec) -> Any:
    """A queued or running training run (here or a Slurm job) whose spec is this one (a double click, a second
    tab), or None."""
    runs = backend.engine_module("runs.registry")
    mine = _comparable(spec_mod.spec_to_dict(spec))
    for rec in runs.list_runs(runs.ACTIVE):
        if getattr(rec, "kind", "train") not in ("train", "slurm") or not rec.spec:
            continue
        try:
            theirs = spec_mod.spec_to_dict(spec_mod.parse_spec(yaml.safe_load(rec.spec)))
        except Exception:  # a spec from an older schema: not the same as this one
            continue
        if _comparable(theirs) == mine:
            return rec
    return None


def queue_position(run_id: str) -> int:
    """1 for the next queued run to start (submission order, as the scheduler takes them)."""
    runs = backend.engine_module("runs.registry")
    queued = sorted(runs.list_runs("queued", refresh_status=False), key=lambda r: (r.created, r.id))
    ids = [str(r.id) for r in queued]
    return ids.index(str(run_id)) + 1 if str(run_id) in ids else 0


def _status_word(status: str, lang: str) -> str:
    from studio.i18n.page import STRINGS

    return t(f"st_{status}", lang) if f"st_{status}" in STRINGS else status


def start_run(values: dict[str, Any], lang: str = "en", confirm: str = "") -> tuple[str, str | None, str]:
    """Validate and submit; (message, run id or None, the fingerprint a second click confirms or "").

    A queued or running run with this very spec is reported first; the next Start of the same form state
    (``confirm`` = the fingerprint returned) submits it anyway."""
    spec, errors, _ = check(values)
    if spec is None:
        return problems_markdown(errors, [], lang), None, ""
    try:
        runs = backend.engine_module("runs.registry")
        fp = fingerprint(spec)
        if confirm != fp:
            twin = identical_active_run(spec)
            if twin is not None:
                return "⚠ " + t("start_twin", lang, id=twin.id, status=_status_word(twin.status, lang)), None, fp
        run_id = runs.submit(spec, name=spec.output.run_name or None)
        status = str(getattr(runs.get(run_id), "status", ""))
    except backend.Unavailable as exc:
        return t("unavailable", lang, what=str(exc)), None, ""
    except spec_mod.SpecError as exc:  # submit's own checks: the output folder, the rows of the data
        lines = [f"- {_where(p, lang)}{_colon(lang)}{m}" for p, m in localize_problems(exc.problems, lang)]
        return "\n".join([f"❌ {t('spec_invalid', lang)}", *lines]), None, ""
    except Exception as exc:  # the registry refuses (queue full, GPUs busy): show its message
        return f"❌ {localize_error(exc, lang)}", None, ""
    if status == "queued":
        return t("queued_run", lang, id=run_id, pos=queue_position(run_id)), str(run_id), ""
    return t("started", lang, id=run_id), str(run_id), ""


def stop_begin(run_id: str | None, lang: str = "en") -> tuple[str, str | None]:
    """What Stop says at once: (message, the run to stop or None). A run that has ended is not stopped again."""
    if not run_id:
        return t("no_run", lang), None
    try:
        rec = backend.engine_module("runs.registry").get(run_id)
    except backend.Unavailable as exc:
        return t("unavailable", lang, what=str(exc)), None
    except Exception as exc:  # an unknown id
        return f"❌ {localize_error(exc, lang)}", None
    status = str(getattr(rec, "status", ""))
    if status == "queued":
        return t("stopping_queued", lang, id=run_id), str(run_id)
    if status != "running":
        return t("stop_ended", lang, id=run_id, status=_status_word(status, lang)), None
    return t("stopping", lang, id=run_id), str(run_id)


def stop_now(run_id: str | None, lang: str = "en") -> tuple[str, str | None]:
    """Stop's click: ``stop_begin`` and the signals in the click's own request (a second request, sent once the
    browser has drawn the first answer, reached the trainer 18 s late on a loaded machine: issue 27 item 14)."""
    msg, target = stop_begin(run_id, lang)
    if target:
        backend.engine_module("runs.registry").stop(target, wait=False)
    return msg, target


def stop_finish(run_id: str | None, lang: str = "en") -> str:
    """Stop the run and say how it ended: the step it stopped at and where its checkpoint is. The stop itself never
    holds the page: signals go out at once and a run that does not end within the grace period is killed in the
    background (engine.runs.scheduler); this waits for the end, at most the grace period and a little more."""
    if not run_id:
        return gr_skip()
    runs = backend.engine_module("runs.registry")
    try:
        if not getattr(runs.get(run_id, refresh_status=False), "stop_requested", None):  # stop_now has signalled it
            runs.stop(run_id, wait=False)
        deadline = time.time() + backend.engine_module("runs.scheduler").stop_grace_s() + 15.0
        rec = runs.get(run_id)
        while str(getattr(rec, "status", "")) in ("running", "queued") and time.time() < deadline:
            time.sleep(0.5)
            rec = runs.get(run_id)
    except Exception as exc:
        return f"❌ {localize_error(exc, lang)}"
    return stop_report(rec, lang)


def stop_report(rec: Any, lang: str = "en") -> str:
    """How a stopped (or meanwhile ended) run ended, from its terminal event."""
    from engine.core import events as events_mod

    status = str(getattr(rec, "status", ""))
    term = events_mod.last_event(Path(rec.run_dir) / "events.jsonl", events_mod.TERMINAL_TYPES) or {}
    if status != "stopped" or term.get("type") not in (None, "stopped"):
        return t("stop_ended", lang, id=rec.id, status=_status_word(status, lang))
    if term.get("type") is None and not getattr(rec, "started", None):
        return t("stopped_dequeued", lang, id=rec.id)
    if term.get("type") is None or term.get("step") is None:  # ended before it reported a step
        return t("stopped_early", lang, id=rec.id)
    checkpoint = (term.get("payload") or {}).get("checkpoint")
    if checkpoint:
        return "✅ " + t("stopped_saved", lang, id=rec.id, step=term["step"], path=checkpoint)
    return "⚠ " + t("stopped_unsaved", lang, id=rec.id, step=term["step"])


def gr_skip() -> Any:
    import gradio as gr

    return gr.skip()


def stop_run(run_id: str | None, lang: str = "en") -> str:
    """Stop in one call (tests, scripts): the final report, or why nothing was stopped."""
    msg, target = stop_begin(run_id, lang)
    return stop_finish(target, lang) if target else msg


def preview(values: dict[str, Any], lang: str = "en") -> str:
    """The exact command(s) and generated configs, as the launcher would write them."""
    spec, errors, _ = check(values)
    if spec is None:
        return "\n".join(f"{p}{_colon(lang)}{m}" for p, m in localize_problems(errors, lang))
    try:
        launch = backend.engine_module("runs.launch")
    except backend.Unavailable as exc:
        return str(exc)
    if hasattr(launch, "preview_text"):
        return launch.preview_text(spec)
    plan = launch.build_command(spec, workspace.runs_dir() / "<run id>")
    parts = ["$ " + " ".join(plan.argv)] + [f"# --- {name}\n{body}" for name, body in plan.files.items()]
    return "\n\n".join(parts)


def presets_dir() -> Path:
    path = workspace.home() / "presets"
    path.mkdir(parents=True, exist_ok=True)
    return path


def list_presets() -> list[str]:
    return sorted(p.stem for p in presets_dir().glob("*.yaml"))


def preset_path(name: str) -> Path:
    """The file of a preset; a name with separators or '..' is refused so it cannot leave presets/."""
    name = (name or "").strip()
    if not PRESET_NAME.match(name) or name.startswith(".") or ".." in name:
        raise ValueError(f"preset name {name!r}: use letters, digits, spaces, . _ - (1-80 characters)")
    return presets_dir() / f"{name}.yaml"


def save_preset(name: str, values: dict[str, Any], lang: str = "en") -> str:
    try:
        path = preset_path(name)
    except ValueError:
        return "❌ " + t("preset_bad_name", lang, name=repr((name or "").strip()))
    data = forms.values_to_dict(values)
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return "✅ " + t("preset_saved", lang, path=path)


def load_preset(name: str, lang: str = "en") -> tuple[dict[str, Any] | None, str]:
    if not (name or "").strip():  # the picker emptied (a language switch redraws it): nothing to load, nothing to say
        return None, ""
    try:
        path = preset_path(name)
    except ValueError:
        return None, "❌ " + t("preset_bad_name", lang, name=repr((name or "").strip()))
    try:
        data = spec_mod.safe_load_yaml(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        return None, f"❌ {exc}"
    return forms.spec_to_values(data), "✅ " + t("preset_loaded", lang, name=path.name)


def import_lf(text: str, acc_text: str = "", lang: str = "en") -> tuple[dict[str, Any] | None, str]:
    """A LLaMA-Factory training YAML (+ its accelerate config) as form values, with the import's notes; or None and
    every key refused, one line each (the form is left as it was). engine.lf.compat converts."""
    if not (text or "").strip():
        return None, t("lf_empty", lang)
    notes: list[str] = []
    try:
        compat = backend.engine_module("lf.compat")
        spec = compat.lf_text_to_spec(text, acc_text or None, notes=notes)
    except backend.Unavailable as exc:
        return None, t("unavailable", lang, what=str(exc))
    except spec_mod.SpecError as exc:
        lines = [f"- `{p}`{_colon(lang)}{m}" for p, m in localize_problems(exc.problems, lang)]
        return None, "\n".join([f"❌ {t('lf_refused', lang)}", *lines])
    msg = [f"✅ {t('lf_filled', lang)}"]
    if notes:
        msg += ["", t("lf_notes", lang), *(f"- {localize(n, lang)}" for n in notes)]
    return forms.spec_to_values(spec_mod.spec_to_dict(spec)), "\n".join(msg)


def read_upload(path: Any) -> str:
    """The text of an uploaded YAML file (gradio gives its temporary path)."""
    if not path:
        return ""
    name = path if isinstance(path, str) else getattr(path, "name", "")
    try:
        return Path(name).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return f"# cannot read {Path(name).name}: {exc}"


def save_lf_yaml(values: dict[str, Any], lang: str = "en") -> tuple[list[str] | None, str]:
    """The form as LLaMA-Factory YAML files to download: the training args (fields LF has no key for as comments
    at the end) and, for a launch other than the default, the accelerate config."""
    import tempfile

    spec, errors, _ = check(values)
    if spec is None:
        return None, problems_markdown(errors, [], lang)
    try:
        text, acc = backend.engine_module("lf.compat").spec_to_lf_text(spec)
    except backend.Unavailable as exc:
        return None, t("unavailable", lang, what=str(exc))
    folder = Path(tempfile.mkdtemp(prefix="studio-lf-"))
    files = [folder / "lf_train.yaml"]
    files[0].write_text(text, encoding="utf-8")
    if acc is not None:
        files.append(folder / "accelerate_config.yaml")
        files[1].write_text(acc, encoding="utf-8")
    return [str(f) for f in files], "✅ " + t("lf_saved", lang, files=", ".join(f.name for f in files))


def propose_template(model: str, lang: str = "en") -> tuple[str | None, str]:
    """(template name or None, hint) from the model folder's tokenizer / config."""
    if not model:
        return None, ""
    try:
        name = backend.engine_module("data.templates").suggest_template(model)
    except backend.Unavailable as exc:
        return None, str(exc)
    except Exception as exc:
        return None, t("no_template", lang, error=exc)
    name = getattr(name, "name", name)
    return (str(name), f"{t('model_hint', lang)}{_colon(lang)}**{name}**") if name else (None, "")


def plan_html(
    values: dict[str, Any], gpu_mem: float | None, lang: str = "en", gpu: str | None = None, price: float | None = None
) -> str:
    """The memory plan, then the time and cost estimate (studio.tabs.train_estimate) for ``gpu`` at ``price``."""
    spec, _errors, _ = check(values)
    if spec is None:
        return f"<p>{html.escape(t('spec_bad', lang))}</p>"
    hw = _hardware()
    try:  # the detected GPUs decide auto precision as they do for the trainer
        plan = backend.engine_module("plan.planner").plan(spec, gpu_mem_gib=gpu_mem or None, hardware=hw)
    except backend.Unavailable as exc:
        return f"<p>{html.escape(str(exc))}</p>"
    except Exception as exc:
        return f"<p>❌ {html.escape(localize_error(exc, lang))}</p>"
    d = plan.to_dict() if hasattr(plan, "to_dict") else dict(plan)
    memory = render_plan(d, lang, assumptions(spec, d, gpu_mem, lang, bool(hw and hw.gpus)))
    return memory + train_estimate.estimate_html(spec, d, gpu, price, hw, lang)


def _hardware() -> Any:
    try:
        from engine.machine import hardware

        return hardware.detect()
    except Exception:  # noqa: BLE001 - detection must never break the page
        return None


def assumptions(
    spec: spec_mod.RunSpec, d: dict, gpu_mem: float | None, lang: str = "en", detected: bool = False
) -> str:
    """What the plan assumed, in words: the precision (and why, when the spec leaves it to auto), the batch, the
    sequence length and the processes. A GPU size typed above changes auto's precision, so the page says so."""
    details = d.get("details") or {}
    precision = str(details.get("precision") or spec.train.precision)
    if spec.train.precision != "auto":
        why = t("prec_set", lang)
    elif spec.launch.device == "cpu":
        why = t("prec_auto_cpu", lang)
    elif detected:
        why = t("prec_auto_detected", lang)
    elif gpu_mem:
        why = t("prec_auto_typed", lang)
    else:
        why = t("prec_auto_none", lang)
    return t(
        "plan_assumes",
        lang,
        precision=precision,
        why=why,
        batch=details.get("batch", spec.train.per_device_batch_size),
        seq=details.get("seq_len", spec.data.cutoff_len),
        world=details.get("world_size", 1),
    )


def render_plan(d: dict, lang: str = "en", assumed: str = "") -> str:
    """The verdict, a bar per GPU of this machine (predicted peak vs its memory), the breakdown and what the plan
    assumed (``assumed``: precision, batch, sequence length, processes)."""
    fits = d.get("fits")
    total, avail = d.get("total_gib") or 0.0, d.get("gpu_mem_gib")
    verdict = (t("fits", lang) if fits else t("no_fit", lang)) if fits is not None else t("plan_no_gpu", lang)
    n_gpus = max(1, int((d.get("details") or {}).get("world_size") or 1))
    frac = min(1.0, total / avail) if avail else 0.0
    cls = "ok" if fits else "over" if fits is False else "unknown"
    label = f"{total:.2f} GiB" + (f" / {avail:.1f} GiB" if avail else "")
    rows = [
        f'<div class="plan-row"><span>GPU {i}: {html.escape(label)}</span><div class="plan-bar">'
        f'<div class="{cls}" style="width:{frac * 100:.0f}%"></div></div></div>'
        for i in range(min(n_gpus, 8))
    ]
    parts = [f'<div class="plan" id="plan-verdict"><b class="{cls}">{html.escape(verdict)}</b>', *rows]
    if assumed:
        parts.append(f'<small id="plan-assumes">{html.escape(assumed)}</small>')
    comps = d.get("components") or {}
    if comps:
        items = ("，" if lang == "zh" else ", ").join(
            f"{_plan_word('pc_', k, lang)} {v / 2**20:.0f} MiB"
            for k, v in comps.items()
            if isinstance(v, (int, float)) and v
        )
        peak = t("plan_peak", lang, phase=_plan_word("ph_", str(d.get("peak_phase", "")), lang))
        peak = f"（{peak}）" if lang == "zh" else f" ({peak})"
        parts.append(f"<small>{html.escape(items)}{html.escape(peak)}</small>")
    if d.get("checkpointing") is not None:
        head = t("plan_ckpt_on" if d["checkpointing"] else "plan_ckpt_off", lang)
        why = localize(d.get("checkpointing_reason") or "", lang)
        parts.append(f'<small id="plan-checkpointing">{html.escape(head)}{_colon(lang)}{html.escape(why)}</small>')
    for note in d.get("notes") or []:
        parts.append(f"<small>• {html.escape(localize(note, lang))}</small>")
    return "<br>".join(parts) + "</div>"


def _plan_word(prefix: str, key: str, lang: str) -> str:
    """A plan component or phase name in the page's language (an unknown one as the planner wrote it)."""
    from studio.i18n.page import STRINGS

    return t(prefix + key, lang) if prefix + key in STRINGS else key.replace("_", " ")


def autofit(values: dict[str, Any], gpu_mem: float | None, lang: str = "en") -> tuple[dict[str, Any] | None, str]:
    spec, errors, _ = check(values)
    if spec is None:
        return None, "\n".join(f"{p}{_colon(lang)}{m}" for p, m in localize_problems(errors, lang))
    if not gpu_mem:
        from engine.machine import hardware

        gpus = hardware.detect().gpus
        if not gpus:
            return None, t("fit_no_gpu", lang)
        gpu_mem = min(g.memory_total_mib for g in gpus) / 1024
    try:
        plan_mod = backend.engine_module("plan.planner")
        fit = getattr(plan_mod, "fit", None) or backend.engine_module("plan.fit").fit
        result = fit(spec, gpu_mem or 80.0)
    except backend.Unavailable as exc:
        return None, str(exc)
    steps = [localize(s, lang) for s in getattr(result, "steps", []) or []]
    listed = "".join(f"\n{i}. {s}" for i, s in enumerate(steps, 1))
    gib = f"{gpu_mem:g}"
    if not getattr(result, "fits", False):  # the form stays as the user left it
        return None, "❌ " + t("fit_none", lang, gib=gib) + (f"\n\n{t('fit_tried', lang)}{listed}" if steps else "")
    if not steps:
        return None, "✅ " + t("fit_already", lang, gib=gib)
    return forms.spec_to_values(spec_mod.spec_to_dict(result.spec)), "✅ " + t("fit_found", lang, gib=gib) + listed


# ----------------------------------------------------------------------------------------------- layout
def initial_values() -> dict[str, Any]:
    return forms.spec_to_values(backend.demo_defaults())


def model_choices() -> list[str]:
    """The workspace's models, then merged exports (full models): the Chat tab's list of base models."""
    from studio.tabs import chat

    return chat.model_choices()


def picker_choices() -> dict[str, list]:
    from engine.machine import hardware

    arch = sorted({m for mods in spec_mod.ARCH_LINEAR_MODULES.values() for m in mods})
    try:
        gpus = [str(g.index) for g in hardware.detect().gpus]
    except Exception:  # detection must never break the page
        gpus = []
    return {
        "model.name_or_path": model_choices(),
        "data.datasets": backend.registered_datasets(),
        "data.eval_datasets": backend.registered_datasets(),
        "data.template": forms.TEMPLATES,
        "launch.gpus": gpus,
        "method.lora.targets": ["all", *arch],
        "method.oft.targets": ["all", *arch],
        "train.low_rank.targets": ["all", *arch],
    }


def build(ctx: Any) -> None:
    """Lay out the Train tab inside the current Blocks; stores widgets on ``ctx``."""
    import gradio as gr

    texts, lang = ctx.texts, ctx.lang_value
    values = initial_values()
    with gr.Row(equal_height=False):
        with gr.Column(scale=3, min_width=420, elem_id="train-form"):
            widgets = forms.build_form(values, lang, picker_choices(), texts)
            template_hint = gr.Markdown(elem_id="template-hint")
        with gr.Column(scale=2, min_width=320, elem_id="train-actions"):
            problems = gr.Markdown(elem_id="spec-problems")
            with gr.Row():
                start = texts.add(
                    gr.Button(t("start", lang), variant="primary", interactive=False, elem_id="start-btn"),
                    "start",
                    "value",
                )
                stop = texts.add(gr.Button(t("stop", lang), variant="stop", elem_id="stop-btn"), "stop", "value")
            action_msg = gr.Markdown(elem_id="action-msg")
            with gr.Accordion(t("plan", lang), open=True) as plan_acc:
                texts.add(plan_acc, "plan")
                gpu_mem = texts.add(
                    gr.Number(
                        value=None,
                        label=t("plan_gpu_mem", lang),
                        minimum=0,
                        maximum=4096,
                        step=1,
                        elem_id="plan-gpu-mem",
                    ),
                    "plan_gpu_mem",
                )
                with gr.Row():
                    est_gpu = texts.add(
                        gr.Dropdown(
                            choices=train_estimate.gpu_choices(),
                            value=train_estimate.AUTO,
                            label=t("est_gpu", lang),
                            elem_id="est-gpu",
                        ),
                        "est_gpu",
                    )
                    est_price = texts.add(
                        gr.Number(value=None, label=t("est_price", lang), minimum=0, elem_id="est-price"), "est_price"
                    )
                plan_out = gr.HTML(elem_id="plan-panel")
                fit_btn = texts.add(
                    gr.Button(t("autofit", lang), size="sm", elem_id="autofit-btn"), "autofit", "value"
                )
                fit_msg = gr.Markdown()
            with gr.Accordion(t("presets", lang), open=False, elem_id="presets") as preset_acc:
                texts.add(preset_acc, "presets")
                preset_name = texts.add(
                    gr.Textbox(label=t("preset_name", lang), max_lines=1, elem_id="preset-name"), "preset_name"
                )
                with gr.Row():
                    save_btn = texts.add(
                        gr.Button(t("preset_save", lang), size="sm", elem_id="preset-save"), "preset_save", "value"
                    )
                    preset_pick = texts.add(
                        gr.Dropdown(
                            choices=list_presets(),
                            label=t("preset_load", lang),
                            allow_custom_value=False,
                            elem_id="preset-pick",
                        ),
                        "preset_load",
                    )
                preset_msg = gr.Markdown(elem_id="preset-msg")
            with gr.Accordion(t("lf_section", lang), open=False, elem_id="lf-yaml") as lf_acc:
                texts.add(lf_acc, "lf_section")
                lf_text = texts.add(
                    gr.Textbox(label=t("lf_text", lang), lines=8, max_lines=30, elem_id="lf-text"), "lf_text"
                )
                lf_acc_text = texts.add(
                    gr.Textbox(label=t("lf_acc_text", lang), lines=3, max_lines=20, elem_id="lf-acc-text"),
                    "lf_acc_text",
                )
                with gr.Row():  # gr.File, not UploadButton: a language switch cannot relabel an UploadButton
                    lf_upload = texts.add(
                        gr.File(
                            label=t("lf_upload", lang),
                            file_types=[".yaml", ".yml"],
                            type="filepath",
                            height=90,
                            elem_id="lf-upload",
                        ),
                        "lf_upload",
                    )
                    lf_acc_upload = texts.add(
                        gr.File(
                            label=t("lf_acc_upload", lang),
                            file_types=[".yaml", ".yml"],
                            type="filepath",
                            height=90,
                            elem_id="lf-acc-upload",
                        ),
                        "lf_acc_upload",
                    )
                lf_import = texts.add(
                    gr.Button(t("lf_import", lang), size="sm", variant="secondary", elem_id="lf-import"),
                    "lf_import",
                    "value",
                )
                lf_msg = gr.Markdown(elem_id="lf-msg")
            with gr.Accordion(t("preview", lang), open=False) as prev_acc:
                texts.add(prev_acc, "preview")
                with gr.Row():
                    prev_btn = texts.add(
                        gr.Button(t("preview", lang), size="sm", elem_id="preview-btn"), "preview", "value"
                    )
                    lf_save = texts.add(
                        gr.Button(t("lf_save", lang), size="sm", elem_id="lf-save"), "lf_save", "value"
                    )
                lf_save_msg = gr.Markdown(elem_id="lf-save-msg")
                lf_file = texts.add(
                    gr.File(label=t("lf_file", lang), file_count="multiple", interactive=False, elem_id="lf-file"),
                    "lf_file",
                )
                prev_out = gr.Code(label=t("preview_out", lang), language="shell", elem_id="preview-out")

    fields = list(widgets.values())
    flagged = gr.State({"": lang})
    ctx.form = widgets
    ctx.start_btn = start

    validate_outputs = [*fields, problems, start, flagged]
    gr.on(
        [w.change for w in fields] + [ctx.lang.change],
        validate_form,
        inputs=[*fields, flagged, ctx.lang],
        outputs=validate_outputs,
        show_progress="hidden",
        queue=False,
    )
    ctx.on_load.append((validate_form, [*fields, flagged, ctx.lang], validate_outputs))

    confirm = gr.State("")  # the fingerprint of a spec whose identical run was reported: the next Start confirms

    def _start(*args):
        *field_args, confirm_, lang_ = args
        msg, run_id, pending = start_run(to_values(field_args), lang_, confirm_)
        if run_id is None:
            return msg, gr.update(), pending
        return msg, gr.update(choices=ctx.run_choices(lang_), value=run_id), pending

    start.click(_start, [*fields, confirm, ctx.lang], [action_msg, ctx.run_picker, confirm])
    # Stop answers at once, then waits while the trainer saves its checkpoint and says where it went.
    stopping = gr.State(None)
    stop.click(stop_now, [ctx.run_picker, ctx.lang], [action_msg, stopping], queue=False).then(
        stop_finish, [stopping, ctx.lang], [action_msg]
    ).then(lambda lang_: gr.update(choices=ctx.run_choices(lang_)), [ctx.lang], [ctx.run_picker], queue=False)

    # The run picker's labels carry each run's status: they follow the runs (checked every few seconds, sent only
    # when a label changed, so an open list is not redrawn for nothing).
    labels = gr.State([])
    watch = gr.Timer(3.0)

    def _follow(shown, lang_):
        now = [list(c) for c in ctx.run_choices(lang_)]
        if now == shown:
            return gr.skip(), shown
        return gr.update(choices=[tuple(c) for c in now]), now

    watch.tick(_follow, [labels, ctx.lang], [ctx.run_picker, labels], show_progress="hidden", queue=False)

    # Lists that change outside this form (an upload, a merge, a preset saved in another tab): fresh on page load
    # and whenever the list is opened. Choices only: the value is the user's.
    model_box, data_box = widgets["model.name_or_path"], widgets["data.datasets"]
    model_box.focus(lambda: gr.update(choices=model_choices()), None, [model_box], queue=False)
    data_box.focus(lambda: gr.update(choices=backend.registered_datasets()), None, [data_box], queue=False)
    preset_pick.focus(lambda: gr.update(choices=list_presets()), None, [preset_pick], queue=False)

    def _lists():
        return (
            gr.update(choices=model_choices()),
            gr.update(choices=backend.registered_datasets()),
            gr.update(choices=list_presets()),
        )

    ctx.on_load.append((_lists, None, [model_box, data_box, preset_pick]))

    widgets["model.name_or_path"].change(
        _on_model,
        [widgets["model.name_or_path"], widgets["data.template"], ctx.lang],
        [widgets["data.template"], template_hint],
        queue=False,
    )
    plan_inputs = [*fields, gpu_mem, est_gpu, est_price, ctx.lang]

    def _plan(*a):
        return plan_html(to_values(a[:-4]), a[-4], a[-1], a[-3], a[-2])

    gr.on(
        [
            start.click,
            gpu_mem.change,
            est_gpu.change,
            est_price.change,
            plan_acc.expand,
            ctx.lang.change,
            *(widgets[p].change for p in _PLAN_PATHS + _ESTIMATE_PATHS if p in widgets),
        ],
        _plan,
        plan_inputs,
        [plan_out],
        show_progress="hidden",
    )
    ctx.on_load.append((_plan, plan_inputs, [plan_out]))
    fit_btn.click(
        lambda *a: _apply(autofit(to_values(a[:-2]), a[-2], a[-1])), [*fields, gpu_mem, ctx.lang], [*fields, fit_msg]
    )
    prev_btn.click(lambda *a: preview(to_values(a[:-1]), a[-1]), [*fields, ctx.lang], [prev_out])
    lf_save.click(lambda *a: save_lf_yaml(to_values(a[:-1]), a[-1]), [*fields, ctx.lang], [lf_file, lf_save_msg])

    def _import(text, acc, lang_):
        return _apply(import_lf(text, acc, lang_))

    lf_inputs = [lf_text, lf_acc_text, ctx.lang]
    lf_upload.upload(read_upload, [lf_upload], [lf_text], queue=False).then(_import, lf_inputs, [*fields, lf_msg])
    lf_acc_upload.upload(read_upload, [lf_acc_upload], [lf_acc_text], queue=False)
    lf_import.click(_import, lf_inputs, [*fields, lf_msg])
    save_btn.click(
        lambda name, lang_, *a: (save_preset(name, to_values(a), lang_), gr.update(choices=list_presets())),
        [preset_name, ctx.lang, *fields],
        [preset_msg, preset_pick],
    )
    preset_pick.input(
        lambda name, lang_: _apply(load_preset(name, lang_)), [preset_pick, ctx.lang], [*fields, preset_msg]
    )


_PLAN_PATHS = [
    "model.name_or_path",
    "method.finetuning",
    "method.lora.rank",
    "method.oft.rank",
    "method.oft.block_size",
    "method.quantization.bits",
    "data.cutoff_len",
    "train.per_device_batch_size",
    "train.precision",
    "train.gradient_checkpointing",
    "launch.backend",
    "launch.num_processes",
    "launch.deepspeed.zero_stage",
]

# what the token and step counts and the time estimate also depend on (studio.tabs.train_estimate)
_ESTIMATE_PATHS = [
    "method.stage",
    "data.datasets",
    "data.template",
    "data.max_samples",
    "data.val_size",
    "data.packing",
    "train.num_epochs",
    "train.max_steps",
    "train.gradient_accumulation",
]


def _on_model(model: str, current_template: str, lang: str = "en") -> tuple[Any, str]:
    import gradio as gr

    name, hint = propose_template(model, lang)
    if name and name in forms.TEMPLATES and current_template in ("auto", "", None):
        return gr.update(value=name), hint
    return gr.update(), hint


def _apply(result: tuple[dict[str, Any] | None, str]) -> list[Any]:
    import gradio as gr

    values, msg = result
    if values is None:
        return [gr.update() for _ in forms.FIELDS] + [msg]
    return [gr.update(value=values[f.path]) for f in forms.FIELDS] + [msg]
