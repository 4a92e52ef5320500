"""Fingerprints of a run's inputs for its replayable record: package versions, dataset file hashes and the
tokenizer's hash. The trainer writes them into ``record.json``; ``studio replay`` computes them again the same way
and lists what changed. Also the time estimate made before launch (``engine.plan.estimate``) and, when the run ends,
the measured duration beside it. Light: stdlib and engine's light modules.
"""

from __future__ import annotations

import hashlib
import json
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from engine.spec.rules import resolve_dataset_dir
from engine.spec.schema import RunSpec

PACKAGES = ("torch", "transformers", "peft", "accelerate", "datasets", "trl", "deepspeed", "bitsandbytes")


def package_versions(packages: tuple[str, ...] | list[str] = PACKAGES) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for pkg in packages:
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


def hash_path(path: Path) -> str:
    """sha256 of a file, or of a folder's files in name order."""
    h = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for f in files:
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def dataset_hashes(spec: RunSpec) -> dict[str, str | None]:
    """Hash of each dataset's file (or saved-dataset folder) as the registry names it; None where it is missing."""
    ddir = resolve_dataset_dir(spec)
    try:
        info = json.loads((ddir / "dataset_info.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        info = {}
    out: dict[str, str | None] = {}
    for name in spec.data.datasets:
        entry = info.get(name) if isinstance(info, dict) else None
        file_name = entry.get("file_name") if isinstance(entry, dict) else None
        path = ddir / file_name if file_name else None
        out[name] = hash_path(path) if path is not None and path.exists() else None
    return out


def tokenizer_hash(name_or_path: str) -> str | None:
    """Hash of a local model folder's tokenizer files; None for hub ids."""
    folder = Path(name_or_path)
    files = sorted(folder.glob("tokenizer*")) if folder.is_dir() else []
    return hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest() if files else None


def version_differences(record: dict) -> list[str]:
    """Packages whose version is not the one ``record`` was written with."""
    was_versions = record.get("versions") or {}
    now_versions = package_versions(list(was_versions))
    return [
        f"{pkg} was {was}, now {now_versions.get(pkg)}"
        for pkg, was in was_versions.items()
        if now_versions.get(pkg) != was
    ]


def file_differences(record: dict, spec: RunSpec) -> list[str]:
    """Dataset and tokenizer files that are not the ones ``record`` was written with."""
    out = []
    now_hashes = dataset_hashes(spec)
    for name, was in (record.get("dataset_hashes") or {}).items():
        now = now_hashes.get(name)
        if now != was:
            out.append(f"dataset {name} changed (hash {str(was)[:12]} -> {str(now)[:12]})")
    if record.get("tokenizer_hash") != tokenizer_hash(spec.model.name_or_path):
        out.append("the model's tokenizer files changed")
    return out


def record_estimate(spec: RunSpec, run_dir: Path, device: str) -> None:
    """The time estimate the plan panel showed before launch (engine.plan.estimate, for this run's device and
    resolved checkpointing) into record.json, to set beside the measured duration when the run ends."""
    try:
        from engine.machine.hardware import cpu_only, detect
        from engine.plan.estimate import estimate

        planned = spec.model_copy(deep=True)
        planned.launch.device = device
        est = estimate(planned, hardware=detect() if device != "cpu" else cpu_only()).to_dict()
    except Exception as exc:  # the estimate is advisory: never fail a run over it
        print(f"[studio] time estimate unavailable: {exc}", flush=True)
        return
    path = run_dir / "record.json"
    record = json.loads(path.read_text())
    record["estimate"] = {k: est[k] for k in ("target", "devices", "steps", "seconds", "minutes", "cost", "counts")}
    record["estimate"]["notes"] = [str(n) for n in est["notes"]]
    path.write_text(json.dumps(record, indent=2))


def record_duration(run_dir: Path, runtime: float, steps: int, cpu_seconds: float | None = None) -> None:
    """The measured training-loop duration beside the estimate in record.json, and the estimate's error. On the CPU
    the loop's process CPU time too: what one idle core would take, which the CPU estimate is calibrated against
    (a shared machine stretches the wall time, not the CPU time)."""
    path = run_dir / "record.json"
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    estimate = record.get("estimate") or {}
    est = estimate.get("seconds")
    record["duration"] = {
        "measured_seconds": round(runtime, 2),
        "estimated_seconds": None if est is None else round(est, 2),
        "error_pct": None if not est or runtime <= 0 else round(100.0 * (est - runtime) / runtime, 1),
        "steps": steps,
    }
    if cpu_seconds is not None and estimate.get("target") == "cpu":
        record["duration"]["cpu_seconds"] = round(cpu_seconds, 2)
        record["duration"]["cpu_error_pct"] = (
            None if not est or cpu_seconds <= 0 else round(100.0 * (est - cpu_seconds) / cpu_seconds, 1)
        )
    path.write_text(json.dumps(record, indent=2))
