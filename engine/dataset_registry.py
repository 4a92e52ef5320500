"""The dataset registry: ``dataset_info.json`` in LLaMA-Factory's schema, row loading, checks and normalisation.

Light: stdlib, plus pyarrow for Parquet / saved HF datasets (imported only when such a file is read). Never
torch, transformers or datasets.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

INFO_NAME = "dataset_info.json"


def read_dataset_info(dataset_dir: str | Path) -> dict:
    """The registry as a dict; raises ValueError naming the file when it is not a JSON object."""
    path = Path(dataset_dir) / INFO_NAME
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    if not isinstance(info, dict):
        raise ValueError(f"{path}: expected a JSON object of dataset entries, got {type(info).__name__}")  # noqa: TRY004 (callers catch ValueError)
    return info


def save_dataset_info(dataset_dir: str | Path, info: dict) -> Path:
    """Write the registry atomically (temp file + rename), so a reader never sees half a file."""
    ddir = Path(dataset_dir)
    ddir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".dataset_info.", suffix=".tmp", dir=ddir)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(info, fh, ensure_ascii=False, indent=2)
        fh.write("\n")
    os.chmod(tmp, 0o644)  # mkstemp creates 0600; the registry is an ordinary shared file
    os.replace(tmp, ddir / INFO_NAME)
    return ddir / INFO_NAME
