"""Where Studio keeps its files: the workspace folder (``STUDIO_HOME``) and its layout. Light: stdlib only.

Layout::

    $STUDIO_HOME/                 default ~/.studio
        models/demo-tiny-llama/   the demo model (``studio demo``)
        models/demo-tiny-llava/   the demo vision-language model
        data/dataset_info.json    the default dataset registry (LLaMA-Factory schema) and its files
        runs/<run id>/            one folder per run: spec.yaml, events.jsonl, train.log, checkpoints, adapter
        exports/                  merged models
        uploads/                  datasets uploaded through the page
        registry.db               the run registry (SQLite, WAL)
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

DEMO_MODEL_NAME = "demo-tiny-llama"
DEMO_SPEC_NAME = "demo_spec.yaml"
DEMO_VLM_NAME = "demo-tiny-llava"  # the demo's vision-language model (engine.trainer.demo_vlm)
DEMO_VLM_DATASET = "demo_vlm"
DEMO_VLM_DPO_DATASET = "demo_vlm_dpo"  # its image preference pairs (stage dpo)
# The demo's datasets and their dataset_info.json, shipped with the code; ``studio demo`` copies them into data/.
ASSETS_DATA = Path(__file__).resolve().parents[2] / "assets" / "data"


def home() -> Path:
    """The workspace root, from ``STUDIO_HOME`` (default ``~/.studio``); created on first use."""
    root = Path(os.environ.get("STUDIO_HOME") or Path.home() / ".studio").expanduser().resolve()
    root.mkdir(parents=True, exist_ok=True)
    return root


def models_dir() -> Path:
    return _sub("models")


def data_dir() -> Path:
    return _sub("data")


def runs_dir() -> Path:
    return _sub("runs")


def exports_dir() -> Path:
    return _sub("exports")


def uploads_dir() -> Path:
    return _sub("uploads")


def rewards_dir() -> Path:
    """The reward folder: the only place the page takes reward code from (engine.core.page_trust)."""
    return _sub("rewards")


def demo_model_dir() -> Path:
    return models_dir() / DEMO_MODEL_NAME


def demo_vlm_model_dir() -> Path:
    return models_dir() / DEMO_VLM_NAME


def registry_path() -> Path:
    return home() / "registry.db"


def _sub(name: str) -> Path:
    path = home() / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def demo_paths() -> dict:
    """Where the demo lives: model_dir, data_dir, datasets (names), example_spec (a LoRA SFT spec YAML). The demo is
    built by ``engine.trainer.demo`` (``studio demo``)."""
    info = json.loads((ASSETS_DATA / "dataset_info.json").read_text(encoding="utf-8"))
    return {
        "model_dir": str(demo_model_dir()),
        "data_dir": str(data_dir()),
        "datasets": list(info),
        "example_spec": str(home() / DEMO_SPEC_NAME),
        "vlm_model_dir": str(demo_vlm_model_dir()),
        "vlm_dataset": DEMO_VLM_DATASET,
        "vlm_dpo_dataset": DEMO_VLM_DPO_DATASET,
    }


def write_private_json(target: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``target``, file mode 600, whole or not at all (a temporary file renamed into place):
    the accounts, their secrets and tokens, who owns what."""
    import tempfile

    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.stem}-", dir=target.parent)  # created 600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.chmod(tmp, 0o600)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
