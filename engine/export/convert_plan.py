"""``studio export``'s light half: check a source and a format before any work, estimate the disk it needs, and build
the export subprocess's argv. Light: stdlib and engine's light modules (never torch).

A source is what ``studio merge`` takes (a run id or folder, a PEFT adapter folder: merged first, in float32, as one
job) or a model folder (config.json + safetensors: a merged model or a full fine-tune, exported as it is). Every
problem is found here, the architecture first (``engine.export.gguf_checks``): an unknown format, a format whose tool
is missing, an architecture or tokenizer that does not convert, the merge's own checks (``engine.export.checks``:
memory, shapes, ownership of the target), the target's place under the workspace's rule (engine.core.folders), too
little disk for the file plus the merge's temporary float32 copy.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from engine.core import workspace
from engine.core.messages import message as core_message
from engine.export import checks as xp
from engine.export import gguf_checks as gc
from engine.export import sizes, written
from engine.export import sources as sources_mod
from engine.export.checks import ExportError, ExportPlan
from engine.export.messages import message
from engine.runs import registry as runs


@dataclass
class ConvertPlan:
    source: str
    fmt: str
    out_dir: str
    model_dir: str  # the folder converted: the base an adapter is merged into, or the model folder itself
    needs_merge: bool
    merge: ExportPlan | None
    bytes_needed: int  # the exported file(s)
    merge_bytes: int  # the float32 merge the job holds in its temp folder while it runs (0: no merge)
    bytes_free: int
    calibration: Calibration | None = None  # GPTQ / AWQ: a text file to calibrate on (None: the run's training rows)


@dataclass(frozen=True)
class Calibration:
    """GPTQ / AWQ calibration on a text file (LLaMA-Factory's ``export_quantization_dataset``, ``_nsamples``,
    ``_maxlen``): ``samples`` windows of at most ``maxlen`` tokens out of the rows' ``text``."""

    file: str
    samples: int = 128
    maxlen: int = 1024


CALIBRATION_TYPES = (".json", ".jsonl", ".csv", ".parquet", ".arrow", ".txt")


def check_calibration(cal: Calibration) -> Calibration:
    """The calibration file, checked before any work: a file of a type the data reader takes, whose first rows each
    hold a non-empty ``text`` string (a .txt file: one row per line), and positive counts. ExportError naming the
    file and the row."""
    from engine.data.files import read_head

    path = Path(cal.file).expanduser().resolve()
    for name, value in (("samples", cal.samples), ("maxlen", cal.maxlen)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ExportError(message("export.calibration_count", what=name, value=value))
    if not path.is_file():
        raise ExportError(message("export.calibration_missing", path=path))
    if path.suffix.lower() not in CALIBRATION_TYPES:
        raise ExportError(message("export.calibration_type", path=path, types=", ".join(CALIBRATION_TYPES)))
    rows, problems, _ = read_head(path, max_rows=min(cal.samples, 1000))
    if problems:
        raise ExportError(message("export.calibration_bad", problem=problems[0].located()))
    for n, row in rows:
        if not (isinstance(row, dict) and isinstance(row.get("text"), str) and row["text"].strip()):
            raise ExportError(message("export.calibration_no_text", path=path, row=n))
    if not rows:
        raise ExportError(message("export.calibration_empty", path=path))
    return Calibration(str(path), cal.samples, cal.maxlen)


def is_model_folder(source: str) -> bool:
    p = Path(source).expanduser()
    return (
        p.is_dir()
        and (p / "config.json").is_file()
        and not (p / "adapter_config.json").is_file()
        and not (p / "spec.yaml").is_file()
    )


def tokenizer_dir(*dirs: str) -> Path:
    """Where the export's tokenizer comes from: an adapter's own copy first (as the merge copies it), then the
    model's."""
    return next((Path(d) for d in dirs if (Path(d) / "tokenizer.json").is_file()), Path(dirs[-1]))


def default_out(source: str, fmt: str) -> Path:
    name = Path(str(source).rstrip("/")).name or "model"
    if name in ("adapter", "model"):
        name = Path(str(source).rstrip("/")).parent.name
    return workspace.exports_dir() / f"{name}-{fmt}"


def plan_convert(
    source: str,
    fmt: str,
    out_dir: str | None = None,
    *,
    overwrite: bool = False,
    force: bool = False,
    calibration: Calibration | None = None,
) -> ConvertPlan:
    """Check everything without loading weights; ExportError (GgufError) with the first problem."""
    gc.check_format(fmt)
    out = Path(out_dir).expanduser().resolve() if out_dir else default_out(source, fmt).resolve()
    if calibration is not None:
        if fmt not in gc.CALIBRATED_FORMATS:
            raise ExportError(message("export.calibration_not_used", fmt=fmt))
        calibration = check_calibration(calibration)
    if is_model_folder(source):
        if fmt in gc.CALIBRATED_FORMATS and calibration is None:  # no run: no training rows to calibrate on
            raise ExportError(message("export.gptq_no_rows", fmt=fmt, source=source))
        model_dir = str(Path(source).expanduser().resolve())
        merge_plan = None
        _check_model(model_dir, fmt, tokenizer_dir(model_dir))
        owners = [(Path(model_dir), core_message("workspace.owner_model", path=Path(model_dir)), True)]
        problem = runs.folder_problem(out, owners)
        if problem is not None:
            raise ExportError(problem)
        if out == Path(model_dir) or Path(model_dir).is_relative_to(out):
            raise ExportError(message("export.would_replace", out=out, path=model_dir))
        if out.exists() and not overwrite:
            raise ExportError(message("export.out_exists", out=out))
        problem = written.overwrite_problem(out)  # --overwrite replaces only what an earlier export wrote
        if problem is not None:
            raise ExportError(problem)
        merge_bytes = 0
    else:
        src = sources_mod.resolve_source(source)  # the architecture and the tokenizer first, before the merge's checks
        model_dir = src.base if src.kind == "adapter" else src.weights_dir
        _check_model(str(model_dir), fmt, tokenizer_dir(src.weights_dir, model_dir))
        merge_plan = xp.plan_export([source], str(out), dtype="fp32", overwrite=overwrite, force=force)
        if merge_plan.sources[0].kind == "model":
            merge_plan, merge_bytes = None, 0  # a full fine-tune's model: converted as it is
        else:
            merge_bytes = merge_plan.bytes_needed
    need = gc.estimate_bytes(model_dir, fmt)
    if fmt in gc.NEEDS_QUANTIZER:
        need += gc.estimate_bytes(model_dir, "gguf-f16")  # the F16 file llama-quantize reads, while it runs
    free = xp.free_bytes(out.parent)
    if need + merge_bytes > free:
        merged = message("export.merge_part", merged=sizes.gb(merge_bytes)) if merge_bytes else ""
        raise ExportError(
            message(
                "export.no_gguf_disk",
                out=out,
                fmt=fmt,
                need=sizes.gb(need + merge_bytes),
                file=sizes.gb(need),
                merge=merged,
                free=sizes.gb(free),
            )
        )
    merging = merge_plan is not None
    return ConvertPlan(
        source, fmt, str(out), str(model_dir), merging, merge_plan, need, merge_bytes, free, calibration=calibration
    )


def _check_model(model_dir: str, fmt: str, tok_dir: Path) -> None:
    cfg = gc.read_json(Path(model_dir) / "config.json")
    if fmt in gc.GGUF_FORMATS:
        gc.check_architecture(str(cfg.get("model_type") or "?"), cfg.get("architectures"))
        if gc.rope_kind(cfg) not in gc.ROPE_TYPES:
            raise gc.GgufError(message("export.gguf_rope", arch=cfg.get("model_type"), rope=gc.rope_kind(cfg)))
        tj = gc.read_json(tok_dir / "tokenizer.json")
        if not tj:
            raise gc.GgufError(message("export.gguf_no_tokenizer", path=tok_dir / "tokenizer.json"))
        gc.tokenizer_kind(tj)


def describe(plan: ConvertPlan) -> dict:
    """What the page and the CLI show before the job starts."""
    return {
        "format": plan.fmt,
        "out_dir": plan.out_dir,
        "estimated_bytes": plan.bytes_needed,
        "estimated": sizes.gb(plan.bytes_needed),
        "merge": plan.needs_merge,
        "merge_bytes": plan.merge_bytes,
        "free": sizes.gb(plan.bytes_free),
    }


# ----------------------------------------------------------------------------------------------- the subprocess
def convert_arg_parser() -> argparse.ArgumentParser:
    """Arguments of ``python -m engine.trainer.convert``; engine.export.convert_jobs reads them back."""
    ap = argparse.ArgumentParser(prog="python -m engine.trainer.convert")
    ap.add_argument("source")
    ap.add_argument("--format", required=True, choices=list(gc.FORMATS))
    ap.add_argument("--out", required=True)
    ap.add_argument("--tmp-dir", required=True)
    ap.add_argument("--events", required=True)
    ap.add_argument("--overwrite", action="store_true")
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--calibration", default=None)
    ap.add_argument("--calibration-samples", type=int, default=128)
    ap.add_argument("--calibration-maxlen", type=int, default=1024)
    return ap


def calibration_of(args: argparse.Namespace) -> Calibration | None:
    """The calibration ``studio export`` (or the job's argv) names; None: the run's training rows."""
    if not getattr(args, "calibration", None):
        return None
    return Calibration(args.calibration, args.calibration_samples, args.calibration_maxlen)


def convert_argv(plan: ConvertPlan, tmp_dir: Path, events_path: str, *, overwrite: bool, force: bool) -> list[str]:
    argv = [sys.executable, "-m", "engine.trainer.convert", plan.source, "--format", plan.fmt]
    argv += ["--out", plan.out_dir, "--tmp-dir", str(tmp_dir), "--events", events_path]
    argv += ["--overwrite"] if overwrite else []
    argv += ["--force"] if force else []
    if plan.calibration is not None:
        c = plan.calibration
        argv += ["--calibration", c.file, "--calibration-samples", str(c.samples)]
        argv += ["--calibration-maxlen", str(c.maxlen)]
    return argv


def files_of(folder: Path) -> list[dict]:
    """[{name, bytes}] of a finished export's folder, largest first."""
    found = [{"name": f.name, "bytes": f.stat().st_size} for f in Path(folder).iterdir() if f.is_file()]
    return sorted(found, key=lambda f: -f["bytes"])


def read_report(folder: Path) -> dict:
    try:
        return json.loads((Path(folder) / "verify.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
