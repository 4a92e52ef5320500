"""The Train form's validation: its values to a checked spec (the spec's own checks, then the output-folder and
dataset checks Start runs), the problems in the page's words (each named by the field's label as the form shows it
and its path, for the YAML and the CLI) and the message under each field.

Shared by the Train tab's parts (the form, its plan panel, its LLaMA-Factory section). Light: engine.spec.schema,
engine.runs.registry (its checks only), studio.forms and studio.i18n; gradio only inside the handlers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.core import page_trust
from engine.runs import submit_checks
from engine.spec import rules
from engine.spec import schema as spec_mod
from studio import forms
from studio.i18n.localize import localize_problems
from studio.i18n.page import t


def to_values(args: list[Any]) -> dict[str, Any]:
    return dict(zip([f.path for f in forms.FIELDS], args))


def check(values: dict[str, Any]) -> tuple[spec_mod.RunSpec | None, list, list]:
    """The form's values as a checked spec. A dataset folder outside the workspace is refused first, before its
    registry is read (engine.core.page_trust): the page reads only the workspace's datasets."""
    data = forms.values_to_dict(values)
    folder = (data.get("data") or {}).get("dataset_dir") if isinstance(data.get("data"), dict) else None
    outside = page_trust.dataset_dir_problem(folder) if folder else None
    if outside is not None:
        return None, [("data.dataset_dir", outside)], []
    return spec_mod.validate_spec(data)


def problems_markdown(errors: list, warnings: list, lang: str = "en") -> str:
    """The list beside Start: every error and warning with the field it names, in the page's language."""
    lines = [f"✅ {t('spec_ok', lang)}"] if not errors else [f"❌ {t('spec_bad', lang)}"]
    lines += [f"- {where(path, lang)}{colon(lang)}{msg}" for path, msg in localize_problems(errors, lang)]
    if warnings:
        lines.append(f"\n**{t('warnings', lang)}**")
        lines += [f"- ⚠ {where(path, lang)}{colon(lang)}{msg}" for path, msg in localize_problems(warnings, lang)]
    return "\n".join(lines)


def where(path: str, lang: str) -> str:
    """The field's label as the form shows it, then its `path` (for the YAML and the CLI)."""
    field = forms.field_for_error(path)
    if field:
        return f"**{forms.BY_PATH[field].label_for(lang)}** `{path}`"
    return f"`{path}`"


def colon(lang: str) -> str:
    return "：" if lang == "zh" else ": "


_DATA_CHECKS: dict[tuple, list] = {}  # the data check of a form state, by its datasets' files as they are now


def form_check(values: dict[str, Any]) -> tuple[spec_mod.RunSpec | None, list, list]:
    """``check`` plus the output-folder, sending and dataset checks Start runs (engine.runs.registry's
    output_problems, page_problems, data_problems): the form says what Start would refuse. The rows are read
    again only when a dataset, the stage or a file changes."""
    spec, errors, warnings = check(values)
    if spec is None:
        return spec, errors, warnings
    # the one output-folder check (another run's folder, exports/, files there); what the page may not send
    outs = submit_checks.output_problems(spec) + submit_checks.page_problems(spec) + submit_checks.owner_problems(spec)
    if outs:
        return None, outs, warnings
    try:
        key = _data_key(spec)
        if key not in _DATA_CHECKS:
            if len(_DATA_CHECKS) > 64:
                _DATA_CHECKS.clear()
            _DATA_CHECKS[key] = submit_checks.data_problems(spec)
        problems = _DATA_CHECKS[key]
    except Exception:  # noqa: BLE001 - the check is advice here; Start runs it again and names any failure
        problems = []
    return (None, problems, warnings) if problems else (spec, errors, warnings)


def _data_key(spec: spec_mod.RunSpec) -> tuple:
    """The datasets, stage and folder of a spec with the size and time of the registry and of each dataset file."""
    import json

    ddir = rules.resolve_dataset_dir(spec)

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
