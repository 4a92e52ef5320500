"""LLaMA-Factory compatibility: a training YAML (+ accelerate config) read as our RunSpec, from a file or the page.

Light: yaml, engine.lf.keys / messages / to_spec and engine.spec only (never torch). ``studio train`` / ``studio
validate`` call ``load_any`` (``load_any_spec``) so a LLaMA-Factory user's ``train_args.yaml`` and
``accelerate_config.yaml`` work unchanged on the features we support; every key refused is named at once, as the LF
key the user wrote next to our field path. The conversion of the keys is engine.lf.to_spec; the way back (spec -> LF
YAML, ``spec_to_lf_text``) engine.lf.to_lf; LLaMA-Factory's export YAML as a merge (``lf_export_to_merge``,
``studio merge --lf-yaml``) engine.lf.merge_yaml.

Commands (argv[0] is the command name):
  studio import-lf FILE [--accelerate-config F] -o SPEC
  (studio export-lf, which resolves what Studio decides at launch first, is engine.commands.export_lf)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

from engine.lf.keys import _CONVERTED, _DIRECT, _LF_MARKERS, _STAGE_DIRECT
from engine.lf.messages import message
from engine.lf.to_spec import _lf_import
from engine.spec.rules import HERE_ONLY
from engine.spec.schema import (
    RunSpec,
    SpecError,
    load_spec,
    parse_spec,
    read_yaml_file,
    safe_load_yaml,
    save_spec,
)

_REVERSE = {path: key for key, path in {**_DIRECT, **_CONVERTED}.items() if path} | {
    path: key for keys in _STAGE_DIRECT.values() for key, path in keys.items()
}


def _read_yaml(path: Path, what: str) -> Any:
    try:
        return read_yaml_file(path)
    except OSError as exc:
        raise SpecError([(what, message("lf.cannot_read", path=path, error=exc.strerror or exc))], str(path)) from None
    except yaml.YAMLError as exc:
        raise SpecError([(what, message("lf.bad_yaml_file", path=path, error=exc))], str(path)) from None


def is_lf_args(data: Any) -> bool:
    """True for a LLaMA-Factory flat training-args mapping; False for our spec (``model:`` mapping, schema_version)."""
    if not isinstance(data, dict) or isinstance(data.get("model"), dict) or "schema_version" in data:
        return False
    return bool(_LF_MARKERS & set(data))


def load_any(
    path: str | Path,
    accelerate_config_path: str | Path | None = None,
    *,
    context: bool = True,
    notes: list[str] | None = None,
) -> RunSpec:
    """Load our spec or a LLaMA-Factory training YAML (+ accelerate config); raise SpecError listing every problem."""
    path = Path(path)
    data = _read_yaml(path, "spec")
    if not is_lf_args(data):
        if accelerate_config_path is not None:
            raise SpecError([("accelerate_config", message("lf.accelerate_for_lf"))], str(path))
        return load_spec(path, context=context)
    acc = None
    if accelerate_config_path is not None:
        acc = _read_yaml(Path(accelerate_config_path), "accelerate_config")
        if not isinstance(acc, dict):
            problem = ("accelerate_config", message("lf.not_mapping_file", path=accelerate_config_path))
            raise SpecError([problem], str(path))
    return _lf_spec(data, acc, path.resolve().parent, f"{path} (LLaMA-Factory)", context, notes)


def _lf_spec(
    data: dict, acc: dict | None, base_dir: Path | None, source: str, context: bool, notes: list[str] | None
) -> RunSpec:
    imp = _lf_import(data, acc, base_dir)
    if notes is not None:
        notes.extend(imp.notes)
    problems = dict(imp.unsupported)
    if context:
        problems.update({k: why for k, why in imp.missing.items() if k not in problems})
    if problems:  # every key named at once: the spec's own rules on the keys it took, too (use_galore with LoRA)
        try:
            parse_spec(imp.data, source=source, context=False)
        except SpecError as exc:
            for p, msg in exc.problems:
                problems.setdefault(_lf_name(p, imp.names), msg)
        raise SpecError(list(problems.items()), source)
    try:
        return parse_spec(imp.data, source=source, context=context)
    except SpecError as exc:  # name the LF key the user wrote next to our field path
        raise SpecError([(_lf_name(p, imp.names), msg) for p, msg in exc.problems], exc.source) from None


def lf_text_to_spec(text: str, accelerate_text: str | None = None, *, notes: list[str] | None = None) -> RunSpec:
    """A LLaMA-Factory training YAML (+ accelerate config) given as text (pasted or uploaded in the page): the spec,
    its files not checked (the form checks them), or SpecError naming each key refused. Relative paths resolve from
    the working directory, as LF's would with no YAML folder."""
    source = "LLaMA-Factory YAML"
    try:
        data = safe_load_yaml(text or "")
    except yaml.YAMLError as exc:
        raise SpecError([("lf_yaml", message("lf.bad_yaml", error=exc))], source) from None
    if not is_lf_args(data):
        raise SpecError([("lf_yaml", message("lf.not_lf_yaml"))], source)
    acc = None
    if accelerate_text and accelerate_text.strip():
        try:
            acc = safe_load_yaml(accelerate_text)
        except yaml.YAMLError as exc:
            raise SpecError([("accelerate_config", message("lf.bad_yaml", error=exc))], source) from None
        if not isinstance(acc, dict):
            raise SpecError([("accelerate_config", message("lf.accelerate_not_mapping"))], source)
    return _lf_spec(data, acc, None, source, False, notes)


def load_any_spec(
    path: str | Path, accelerate_config: str | Path | None = None, *, elsewhere: bool = False
) -> RunSpec:
    """What the CLI commands (train, validate, preview) load: our spec or a LLaMA-Factory training YAML (+ its
    accelerate config), validated with its files; the import's notes go to stderr. ``elsewhere`` (validate and
    preview: the spec is judged, not run here): what only this machine's cache and network decide (``HERE_ONLY``: a
    hub model it could not download) is a warning, not a refusal; ``studio train`` refuses it before launch."""
    notes: list[str] = []
    try:
        spec = load_any(path, accelerate_config, notes=notes)
    except SpecError as exc:
        here = [(p, m) for p, m in exc.problems if getattr(m, "key", "") in HERE_ONLY]
        if not elsewhere or not here:
            raise
        rest = [(p, m) for p, m in exc.problems if (p, m) not in here]
        if rest:
            raise SpecError(rest, exc.source) from None
        notes = []
        spec = load_any(path, accelerate_config, context=False, notes=notes)
        for p, m in here:
            print(f"warning: {p}: {m} (on this machine; where it runs, it needs the model)", file=sys.stderr)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    return spec


def _lf_name(path: str, names: dict[str, str] | None = None) -> str:
    """The LF key the user wrote for a spec path: ``names`` (the keys this import read, e.g. use_badam for
    train.optimizer), else the key tables."""
    reverse = {**_REVERSE, **(names or {})}
    for prefix in sorted(reverse, key=len, reverse=True):
        if path == prefix or path.startswith(prefix + "."):
            return f"{reverse[prefix]} ({path})"
    return path


def cli(argv: list[str]) -> int:
    """``studio import-lf`` (``studio export-lf`` is engine.commands.export_lf)."""
    rest = argv[1:] if argv[:1] == ["import-lf"] else argv
    parser = argparse.ArgumentParser(
        prog="studio import-lf",
        description="convert a LLaMA-Factory training YAML (+ accelerate config) to a Studio spec",
    )
    parser.add_argument("file")
    parser.add_argument("--accelerate-config", default=None)
    parser.add_argument("-o", "--output", required=True, help="spec YAML to write")
    ns = parser.parse_args(rest)
    notes: list[str] = []
    try:
        spec = load_any(ns.file, ns.accelerate_config, context=False, notes=notes)
    except SpecError as exc:
        print(exc, file=sys.stderr)
        return 1
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    save_spec(spec, ns.output)
    print(f"wrote {ns.output}")
    return 0
