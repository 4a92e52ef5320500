"""The Train tab's presets: the form saved under a name (``<workspace>/presets/<name>.yaml``) and loaded back. A name
with path separators or ".." is refused, so a preset cannot be written outside presets/.

Light: re, yaml, engine.core.workspace, engine.spec.schema, studio.forms.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from engine.core import workspace
from engine.spec import schema as spec_mod
from studio import forms
from studio.i18n.page import t

PRESET_NAME = re.compile(r"^[A-Za-z0-9._\-\u4e00-\u9fff ]{1,80}$")


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
