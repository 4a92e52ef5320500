"""Whether a model folder holds a usable copy of a model: its ``config.json`` and its weights (every shard an index
names, or at least one weights file). Shared by the Hugging Face cache (``engine.models.hub_cache``) and ModelScope's
(``engine.models.ms_models``): a snapshot whose ``config.json`` alone was fetched to plan the model is not complete.

Light: stdlib only.
"""

from __future__ import annotations

import json
from pathlib import Path

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


def complete(folder: Path) -> bool:
    if not (folder / "config.json").is_file():
        return False
    for index_name in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        index = folder / index_name
        if index.is_file():
            try:
                shards = set(json.loads(index.read_text(encoding="utf-8")).get("weight_map", {}).values())
            except (OSError, ValueError, AttributeError):
                return False
            return bool(shards) and all((folder / s).is_file() for s in shards)
    return any(p.is_file() and p.name.endswith(WEIGHT_SUFFIXES) for p in folder.iterdir())
