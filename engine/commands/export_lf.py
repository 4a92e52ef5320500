"""``studio export-lf`` and the Train tab's LLaMA-Factory download: a spec, or a run as it ran, as a LLaMA-Factory
YAML that runs in LF the way Studio runs it.

Light: yaml, engine.lf.compat / to_lf (the key mapping), engine.spec / data.templates / models.resolve /
machine.hardware and engine.runs.launch (the launcher's precision rule); never torch. What Studio decides at launch,
or reads from its workspace, has no LF meaning and is written as it resolved:

- ``model.name_or_path``: a local model (``models/...`` is the workspace's) as an absolute folder; a hub id as is.
- ``data.dataset_dir``: the folder Studio reads (empty: the workspace's data folder; LF's default would be ./data).
- ``data.template: auto`` (the tokenizer's own chat template, or ``default`` without one): the named LF template that
  renders like the model's own one (engine.data.templates.differs_from_tokenizer), ``default`` when the model has
  none; else left out, so LF parses the tokenizer's chat template (what LF does with no template).
- ``train.precision: auto``: what the run trained with (its record.json), or what the launcher picks on this machine.
Each resolution is a note (engine.lf.messages), printed by the command and written as comments at the top of the
downloaded file.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from engine.core.messages import Message
from engine.lf.compat import load_any
from engine.lf.messages import message
from engine.lf.to_lf import spec_to_lf_text
from engine.spec.schema import RunSpec, SpecError, parse_spec, spec_to_dict


def run_folder(given: str) -> Path | None:
    """The run folder ``given`` names: a folder with spec.yaml, or a run id (the workspace's runs/<id>)."""
    path = Path(given).expanduser()
    if path.is_dir() and (path / "spec.yaml").is_file():
        return path
    if "/" in given or given.endswith((".yaml", ".yml")):
        return None
    from engine.core import workspace

    folder = workspace.runs_dir() / given
    return folder if (folder / "spec.yaml").is_file() else None


# data.template auto resolved to "no template key": LF then parses the tokenizer's own chat template.
LEAVE_OUT = ""


def as_ran(spec: RunSpec, run_dir: Path | None = None) -> tuple[RunSpec, bool, list[Message]]:
    """(the spec with what Studio resolves written out, whether LF's template key is left out, notes)."""
    from engine.models.resolve import looks_local, model_path
    from engine.spec.rules import resolve_dataset_dir

    data = spec_to_dict(spec)
    notes: list[Message] = []
    name = spec.model.name_or_path
    if looks_local(name):
        data["model"]["name_or_path"] = str(model_path(name).expanduser().resolve())
    data["data"]["dataset_dir"] = str(resolve_dataset_dir(spec).expanduser().resolve())
    if spec.train.precision == "auto":
        precision, why = _precision(spec, run_dir)
        data["train"]["precision"] = precision
        notes.append(message("lf.export_precision", precision=precision, why=why))
    leave_out = False
    if spec.data.template == "auto":
        template, note = _template(data["model"]["name_or_path"], spec.model.revision)
        notes.append(note)
        leave_out = template == LEAVE_OUT
        data["data"]["template"] = template or "auto"
    return RunSpec.model_validate(data), leave_out, notes


def _precision(spec: RunSpec, run_dir: Path | None) -> tuple[str, Message]:
    if run_dir is not None:
        try:
            used = json.loads((run_dir / "record.json").read_text(encoding="utf-8"))["hardware"]["precision"]
        except (OSError, ValueError, KeyError, TypeError):
            used = None
        if used in ("bf16", "fp16", "fp32"):
            return used, message("lf.export_precision_run", run=run_dir.name)
    from engine.machine.hardware import detect
    from engine.runs.launch import resolve_device, resolve_precision

    hw = detect()
    try:
        device = resolve_device(spec, hw)
    except SpecError:  # launch.device cuda on a machine without one: what it would use there
        device = "cuda"
    return resolve_precision(spec, hw, device), message("lf.export_precision_here", device=device.upper())


def _template(model: str, revision: str) -> tuple[str, Message]:
    """The LF template for ``auto`` on this model (LEAVE_OUT: LF parses the model's chat template)."""
    from engine.data import templates
    from engine.data.template_table import NAMED, TemplateError

    folder = Path(model)
    if not folder.is_dir():
        from engine.models.resolve import from_cache

        _, hit = from_cache(model, None if revision == "main" else revision)
        folder = Path(hit).parent if hit else folder
    if not (folder / "tokenizer_config.json").is_file():
        return LEAVE_OUT, message("lf.export_template_unknown", model=model)
    info = templates.tokenizer_info(folder)
    if not info.chat_template:
        return "default", message("lf.export_template_default")
    for name in NAMED:
        try:
            same = name not in ("empty", "fewshot") and templates.differs_from_tokenizer(name, info) is None
        except TemplateError:  # a template that cannot render the probe conversations is not it
            same = False
        if same:
            return name, message("lf.export_template_named", name=name)
    return LEAVE_OUT, message("lf.export_template_parsed")


def lf_text(spec: RunSpec, run_dir: Path | None = None) -> tuple[str, str | None, list[Message]]:
    """(the LF training YAML as Studio runs the spec, its accelerate config or None, the notes)."""
    resolved, leave_out, notes = as_ran(spec, run_dir)
    header = [f"{message('lf.export_written_as_ran')}:", *(f"- {n}" for n in notes)] if notes else []
    text, acc = spec_to_lf_text(resolved, no_template=leave_out, header=header)
    return text, acc, notes


def cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="studio export-lf", description="write a spec, or a run as it ran, as LLaMA-Factory YAML"
    )
    parser.add_argument("spec", help="a spec (ours or LLaMA-Factory's), or a run id / run folder")
    parser.add_argument("-o", "--output", required=True, help="LLaMA-Factory train_args YAML to write")
    parser.add_argument("--accelerate-config-out", default=None, help="also write the accelerate config here")
    ns = parser.parse_args(argv)
    run_dir = run_folder(ns.spec)
    try:
        if run_dir is not None:
            spec = parse_spec(yaml.safe_load((run_dir / "spec.yaml").read_text(encoding="utf-8")), source=ns.spec)
        else:
            spec = load_any(ns.spec, context=False)
    except SpecError as exc:
        print(exc, file=sys.stderr)
        return 1
    text, acc, notes = lf_text(spec, run_dir)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    _write(Path(ns.output), text)
    print(f"wrote {ns.output}")
    if ns.accelerate_config_out:
        from engine.lf.to_lf import spec_to_lf

        acc = acc or yaml.safe_dump(spec_to_lf(spec)[1], sort_keys=False, allow_unicode=True)
        _write(Path(ns.accelerate_config_out), acc)
        print(f"wrote {ns.accelerate_config_out}")
    return 0


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
