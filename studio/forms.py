"""The single mapping between widgets and run-spec field paths. Light: gradio, pydantic, engine.spec.schema.

Every widget is generated from the ``Field`` metadata of ``engine.spec.schema.RunSpec``: label (its Chinese in
``studio.i18n.labels``), description (help), range (ge/gt/le/lt -> minimum/maximum), choices (``Literal``),
``advanced`` (collapsed accordion) and ``step``. Sections follow the spec's nesting (model, method, method.lora, ...).
``FieldInfo.path`` is the dotted spec path; ``values_to_dict`` turns widget values back into a spec dict,
``spec_to_values`` does the reverse. No rule is checked here: ``engine.spec.schema.validate_spec`` is the judge and
its messages are shown next to the fields they name.
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from engine.spec import schema as spec_mod
from studio.i18n.choices import choices_for
from studio.i18n.labels import LABELS_ZH
from studio.i18n.page import SECTION_TITLES

# Fields whose value is picked from a list the page fills at run time (models, datasets, templates, GPUs).
PICKERS = {
    "model.name_or_path",
    "data.datasets",
    "data.eval_datasets",
    "data.template",
    "launch.gpus",
    "method.lora.targets",
    "method.oft.targets",
    "train.low_rank.targets",
}
LINE_LISTS = {"launch.slurm.extra_sbatch"}  # text lists of one item per line (an sbatch option may hold a comma)
TEMPLATES = ["auto", "llama3", "chatml", "qwen", "mistral", "gemma", "alpaca", "default", "empty"]


@dataclass
class FieldInfo:
    path: str
    kind: str  # bool | choice | int | float | str | list_str | list_choice | list_int | list_float | optional_model
    label: str
    label_zh: str
    help: str
    default: Any = None
    choices: list = field(default_factory=list)
    minimum: float | None = None
    maximum: float | None = None
    exclusive: tuple[bool, bool] = (False, False)  # (gt instead of ge, lt instead of le)
    step: float | None = None
    optional: bool = False
    advanced: bool = False
    section: str = ""

    def label_for(self, lang: str) -> str:
        return self.label_zh if lang == "zh" and self.label_zh else self.label

    def help_for(self, lang: str) -> str:
        if lang == "zh":
            from studio.i18n.help import HELP_ZH

            return HELP_ZH.get(self.path, self.help)
        return self.help

    def range_for(self, lang: str) -> str:
        """The allowed range as the user reads it ("1 – 1024", "> 0, ≤ 1"), or '' for a field without one."""
        lo, hi = self.minimum, self.maximum
        if lo is None and hi is None:
            return ""
        if lo is not None and hi is not None and self.exclusive == (False, False):
            text = f"{number_text(lo)} – {number_text(hi)}"
        else:
            parts = []
            if lo is not None:
                parts.append(f"{'>' if self.exclusive[0] else '≥'} {number_text(lo)}")
            if hi is not None:
                parts.append(f"{'<' if self.exclusive[1] else '≤'} {number_text(hi)}")
            text = ", ".join(parts)
        return f"范围 {text}" if lang == "zh" else f"range {text}"

    def info_for(self, lang: str) -> str:
        """What the widget shows under its label: the help, then the range it accepts."""
        help_, range_ = self.help_for(lang), self.range_for(lang)
        if not range_:
            return help_
        return f"{help_}（{range_}）" if lang == "zh" else f"{help_} ({range_})"


def number_text(value: Any) -> str:
    """A bound as people write it: 10000000 rather than 1e+07, 0 rather than 0.0, 1e-06 for small ones."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:g}"


def _unwrap_optional(ann: Any) -> tuple[Any, bool]:
    origin = typing.get_origin(ann)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(ann) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return ann, False


def _is_model(ann: Any) -> bool:
    return isinstance(ann, type) and issubclass(ann, BaseModel)


def _kind(ann: Any) -> tuple[str, list]:
    origin = typing.get_origin(ann)
    if origin is typing.Literal:
        return "choice", list(typing.get_args(ann))
    if origin is dict or ann is dict:
        return "dict", []
    if origin is list:
        (inner,) = typing.get_args(ann) or (str,)
        if _is_model(inner):  # GRPO's reward functions: one YAML flow mapping per line
            return "list_model", []
        if typing.get_origin(inner) is typing.Literal:
            return "list_choice", list(typing.get_args(inner))
        return {int: "list_int", float: "list_float"}.get(inner, "list_str"), []
    return {bool: "bool", int: "int", float: "float"}.get(ann, "str"), []


def _range(finfo: Any) -> tuple[float | None, float | None, tuple[bool, bool]]:
    """(lower, upper, (lower exclusive, upper exclusive)) from the field's ge/gt/le/lt."""
    lo = hi = None
    lo_ex = hi_ex = False
    for m in finfo.metadata:
        for name in ("ge", "gt"):
            if getattr(m, name, None) is not None:
                lo, lo_ex = getattr(m, name), name == "gt"
        for name in ("le", "lt"):
            if getattr(m, name, None) is not None:
                hi, hi_ex = getattr(m, name), name == "lt"
    return lo, hi, (lo_ex, hi_ex)


def walk(model: type[BaseModel] = spec_mod.RunSpec, prefix: str = "") -> list[FieldInfo]:
    """Every editable leaf field of the spec, in declaration order, with its metadata."""
    out: list[FieldInfo] = []
    for name, finfo in model.model_fields.items():
        if name == "schema_version":
            continue
        path = f"{prefix}{name}"
        ann, optional = _unwrap_optional(finfo.annotation)
        extra = finfo.json_schema_extra if isinstance(finfo.json_schema_extra, dict) else {}
        if _is_model(ann):
            if optional:  # an optional block (rope_scaling): a switch plus its fields
                out.append(
                    FieldInfo(
                        path,
                        "optional_model",
                        str(extra.get("label", name)),
                        LABELS_ZH.get(path, str(extra.get("label", name))),
                        finfo.description or "",
                        False,
                        advanced=bool(extra.get("advanced")),
                        section=prefix.rstrip("."),
                    )
                )
            out += walk(ann, path + ".")
            continue
        kind, choices = _kind(ann)
        default = None if finfo.is_required() else finfo.get_default(call_default_factory=True)
        lo, hi, exclusive = _range(finfo)
        step = extra.get("step")
        if step is None and kind in ("int", "float"):
            step = 1 if kind == "int" else _float_step(default)
        out.append(
            FieldInfo(
                path=path,
                kind=kind,
                label=str(extra.get("label", name.replace("_", " "))),
                label_zh=LABELS_ZH.get(path, str(extra.get("label", name.replace("_", " ")))),
                help=finfo.description or "",
                default=default,
                choices=choices,
                minimum=lo,
                maximum=hi,
                exclusive=exclusive,
                step=step,
                optional=optional,
                advanced=bool(extra.get("advanced")),
                section=prefix.rstrip("."),
            )
        )
    return out


def _float_step(default: Any) -> float:
    if isinstance(default, (int, float)) and default:
        mag = abs(float(default))
        for step in (1.0, 0.1, 0.01, 0.001, 1e-4, 1e-5, 1e-6):
            if mag >= step * 10 or step == 1e-6:
                return step
    return 0.01


FIELDS: list[FieldInfo] = walk()
BY_PATH: dict[str, FieldInfo] = {f.path: f for f in FIELDS}


def sections() -> list[str]:
    seen: list[str] = []
    for f in FIELDS:
        if f.section not in seen:
            seen.append(f.section)
    return seen


# ----------------------------------------------------------------------------------------------- values
def to_widget_value(info: FieldInfo, value: Any) -> Any:
    if info.kind == "optional_model":
        return value is not None
    if info.kind in ("list_float", "list_int") and info.path not in PICKERS:
        return ", ".join(str(v) for v in value) if value else ""
    if info.kind == "list_str" and info.path not in PICKERS:  # a textbox: an empty list is empty text, not "[]"
        return ("\n" if info.path in LINE_LISTS else ", ").join(str(v) for v in value or [])
    if info.kind in ("list_str", "list_choice", "list_int"):
        return [str(v) if info.kind == "list_int" else v for v in (value or [])]
    if info.kind in ("str",) and value is None:
        return ""
    if info.kind == "list_model":  # one item per line, each a YAML flow mapping: {kind: math, weight: 1.0}
        import yaml

        return "\n".join(
            yaml.safe_dump(v, default_flow_style=True, sort_keys=False, width=10**6).strip() for v in value or []
        )
    if info.kind == "dict":  # one YAML flow mapping per line of text: {adam_beta2: 0.95, tf32: true}
        if not value:
            return ""
        import yaml

        return yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=10**6).strip()
    return value


def from_widget_value(info: FieldInfo, value: Any) -> Any:
    """Widget value -> spec value. Malformed text is passed through so the spec reports it on this field."""
    if info.kind in ("int", "float"):
        if value is None or value == "":
            return None
        below = info.minimum is not None and (info.minimum > 0 or (info.minimum == 0 and info.exclusive[0]))
        if info.optional and value == 0 and below:
            return None  # gradio sends an emptied optional number as 0: outside the field's range means "none"
        if info.kind == "int" and isinstance(value, float) and value.is_integer():
            return int(value)
        return value
    if info.kind in ("list_float", "list_int"):
        if isinstance(value, list):
            items = value
        else:
            items = [p.strip() for p in str(value or "").replace(";", ",").split(",") if p.strip()]
        if not items:
            return None if info.optional else []
        cast = int if info.kind == "list_int" else float
        try:
            return [cast(v) for v in items]
        except ValueError:
            return items
    if info.kind in ("list_str", "list_choice"):
        if isinstance(value, str):
            parts = value.splitlines() if info.path in LINE_LISTS else value.split(",")
            value = [p.strip() for p in parts if p.strip()]
        return list(value or [])
    if info.kind == "str" and info.optional and (value is None or str(value).strip() == ""):
        return None
    if info.kind == "list_model" and isinstance(value, str):
        import yaml

        items = []
        for line in value.splitlines():
            if not line.strip():
                continue
            try:
                items.append(spec_mod.safe_load_yaml(line))
            except yaml.YAMLError:
                items.append(line)  # the spec reports it on this field
        return items
    if info.kind == "dict" and isinstance(value, str):
        if not value.strip():
            return {}
        import yaml

        try:
            parsed = spec_mod.safe_load_yaml(value)
        except yaml.YAMLError:
            return value  # the spec reports it on this field
        return parsed if isinstance(parsed, dict) else value
    return value


def values_to_dict(values: dict[str, Any]) -> dict:
    """{path: widget value} -> nested spec dict; disabled optional blocks become None."""
    data: dict = {}
    off = {p for p, f in BY_PATH.items() if f.kind == "optional_model" and not values.get(p)}
    for path, raw in values.items():
        info = BY_PATH.get(path)
        if info is None or info.kind == "optional_model":
            continue
        if any(path.startswith(o + ".") for o in off):
            continue
        _set(data, path, from_widget_value(info, raw))
    for path in off:
        _set(data, path, None)
    return data


def spec_to_values(spec_dict: dict) -> dict[str, Any]:
    """Nested spec dict (e.g. a loaded preset) -> {path: widget value}; missing fields take their defaults."""
    out: dict[str, Any] = {}
    for f in FIELDS:
        if f.kind == "optional_model":  # on only when the block is given (its switch's default, False, is no block)
            out[f.path] = _get(spec_dict, f.path, None) is not None
            continue
        value = _get(spec_dict, f.path, f.default)
        if f.kind != "optional_model" and any(
            o.kind == "optional_model" and f.path.startswith(o.path + ".") and _get(spec_dict, o.path, None) is None
            for o in FIELDS
        ):
            value = f.default
        out[f.path] = to_widget_value(f, value)
    return out


def _set(data: dict, path: str, value: Any) -> None:
    *parents, leaf = path.split(".")
    node = data
    for p in parents:
        node = node.setdefault(p, {})
    node[leaf] = value


_MISSING = object()


def _get(data: dict, path: str, default: Any) -> Any:
    node: Any = data
    for p in path.split("."):
        if not isinstance(node, dict) or p not in node:
            return default
        node = node[p]
    return node


def field_for_error(path: str) -> str | None:
    """The widget path an error path belongs to: 'method.lora.targets.0' -> 'method.lora.targets'."""
    parts = path.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in BY_PATH:
            return candidate
        parts.pop()
    return None


def group_problems(problems: list[tuple[str, str]]) -> tuple[dict[str, list[str]], list[str]]:
    """({widget path: [messages]}, [messages naming no widget])."""
    by_field: dict[str, list[str]] = {}
    general: list[str] = []
    for path, msg in problems:
        target = field_for_error(path)
        if target is None:
            general.append(f"{path}: {msg}" if path else msg)
        else:
            by_field.setdefault(target, []).append(msg)
    return by_field, general


# ----------------------------------------------------------------------------------------------- widgets
OPEN_SECTIONS = {"model", "method", "method.lora", "data", "train"}


def make_widget(info: FieldInfo, value: Any, lang: str = "en", choices: list | None = None) -> Any:
    """One gradio component for one field, labelled from the spec's metadata, its range stated in the info text."""
    import gradio as gr

    common = {
        "label": info.label_for(lang),
        "info": info.info_for(lang) or None,
        "elem_id": widget_id(info.path),
        "elem_classes": ["spec-field"],
        "min_width": 160,
    }
    if info.kind in ("bool", "optional_model"):
        return gr.Checkbox(value=bool(value), **common)
    if info.kind == "choice":
        return gr.Dropdown(choices=choices_for(info.path, info.choices, lang), value=value, **common)
    if info.kind in ("int", "float"):
        # No minimum/maximum here: gradio would refuse an out-of-range number with a popup before our validation
        # sees it. The spec judges the range, its message goes next to the field and Start stays disabled.
        return gr.Number(
            value=value,
            step=info.step,
            precision=0 if info.kind == "int" else None,
            **common,
        )
    if info.kind == "list_choice":
        return gr.Dropdown(choices=choices_for(info.path, info.choices, lang), value=value, multiselect=True, **common)
    if info.path in PICKERS and info.kind in ("list_str", "list_int"):
        options = [str(c) for c in (choices or [])]
        return gr.Dropdown(choices=options, value=value, multiselect=True, allow_custom_value=True, **common)
    if info.path in PICKERS:
        return gr.Dropdown(choices=list(choices or []), value=value, allow_custom_value=True, **common)
    if info.kind == "dict":
        return gr.Textbox(value=value or "", lines=2, max_lines=8, placeholder="{adam_beta2: 0.95}", **common)
    if info.kind == "list_model":
        return gr.Textbox(value=value or "", lines=3, max_lines=12, placeholder="{kind: math, weight: 1.0}", **common)
    if info.path in LINE_LISTS:
        return gr.Textbox(value=value or "", lines=2, max_lines=8, **common)
    return gr.Textbox(value="" if value is None else value, max_lines=1, **common)


def widget_id(path: str) -> str:
    return "f-" + path.replace(".", "-").replace("_", "-")


def build_form(
    values: dict[str, Any],
    lang: str = "en",
    choices: dict[str, list] | None = None,
    texts: Any = None,
    after: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Lay out every field, grouped by spec section, advanced ones in a collapsed accordion. ``after`` maps a section
    to a function that lays out more inside it, below its basic fields (the Train tab's model and reward pickers).

    Must run inside a gradio Blocks context; returns {path: component} in FIELDS order."""
    import gradio as gr

    choices = choices or {}
    widgets: dict[str, Any] = {}
    by_section: dict[str, list[FieldInfo]] = {}
    for f in FIELDS:
        by_section.setdefault(f.section, []).append(f)
    for top in [s for s in sections() if "." not in s]:
        title = SECTION_TITLES.get(top, (top, top))
        with gr.Accordion(
            title[1] if lang == "zh" else title[0], open=top in OPEN_SECTIONS, elem_id=f"sec-{top}"
        ) as acc:
            if texts is not None:
                texts.add_section(acc, title)
            _fields(by_section.get(top, []), values, lang, choices, widgets, texts, (after or {}).get(top))
            for sub in [s for s in sections() if s.startswith(top + ".")]:
                stitle = SECTION_TITLES.get(sub, (sub, sub))
                with gr.Accordion(
                    stitle[1] if lang == "zh" else stitle[0],
                    open=sub in OPEN_SECTIONS,
                    elem_id=f"sec-{sub.replace('.', '-')}",
                ) as sacc:
                    if texts is not None:
                        texts.add_section(sacc, stitle)
                    _fields(by_section.get(sub, []), values, lang, choices, widgets, texts, (after or {}).get(sub))
    return {f.path: widgets[f.path] for f in FIELDS}


def _fields(
    infos: list[FieldInfo], values: dict, lang: str, choices: dict, widgets: dict, texts: Any, after: Any = None
) -> None:
    import gradio as gr

    basic = [f for f in infos if not f.advanced]
    advanced = [f for f in infos if f.advanced]
    for chunk in [basic[i : i + 3] for i in range(0, len(basic), 3)]:
        with gr.Row(equal_height=False):
            for f in chunk:
                widgets[f.path] = _made(f, values, lang, choices, texts)
    if after is not None:
        after()
    if advanced:
        from studio.i18n.page import t

        with gr.Accordion(t("advanced", lang), open=False) as acc:
            if texts is not None:
                texts.add(acc, "advanced")
            for chunk in [advanced[i : i + 3] for i in range(0, len(advanced), 3)]:
                with gr.Row(equal_height=False):
                    for f in chunk:
                        widgets[f.path] = _made(f, values, lang, choices, texts)


def _made(f: FieldInfo, values: dict, lang: str, choices: dict, texts: Any) -> Any:
    w = make_widget(f, values.get(f.path, to_widget_value(f, f.default)), lang, choices.get(f.path))
    if texts is not None:
        texts.add_field(w, f)
    return w
