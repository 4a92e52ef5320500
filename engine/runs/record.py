"""Fingerprints of a run's inputs for its replayable record: package versions, dataset file hashes and the
tokenizer's hash. The trainer writes them into ``record.json``; ``studio replay`` computes them again the same way
and lists what changed. Light: stdlib only.
"""

from __future__ import annotations

import hashlib
import json
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from engine.spec.schema import RunSpec, resolve_dataset_dir

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
