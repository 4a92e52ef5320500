"""A run's checkpoints without the training stack: the list, newest first, and whether one is complete enough to
resume from. Light: stdlib only.

``complete`` reads what a resume needs without torch: ``trainer_state.json`` parses, the weights are there (every
shard an index names) and each safetensors file is as long as its header says, the optimizer state is there (or
DeepSpeed's ``global_step*`` folder). ``engine.trainer.train.checkpoint_ok`` adds opening the weights;
``engine.runs.registry.resume`` picks the checkpoint a resumed run starts from with it.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path


def step(ckpt: Path) -> int:
    try:
        return int(ckpt.name.rsplit("-", 1)[-1])
    except ValueError:
        return -1


def newest_first(folder: str | Path) -> list[Path]:
    """The ``checkpoint-<step>`` folders of ``folder`` (a run's ``checkpoints/``), the highest step first."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found = [p for p in folder.glob("checkpoint-*") if p.is_dir() and step(p) >= 0]
    return sorted(found, key=step, reverse=True)


def _safetensors_whole(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            (size,) = struct.unpack("<Q", fh.read(8))
            if size > path.stat().st_size:
                return False
            header = json.loads(fh.read(size))
    except (OSError, struct.error, ValueError):
        return False
    header.pop("__metadata__", None)
    end = max((int(m["data_offsets"][1]) for m in header.values() if isinstance(m, dict)), default=0)
    return path.stat().st_size >= 8 + size + end


def complete(ckpt: str | Path) -> bool:
    """Whether ``ckpt`` holds everything a resume loads (see the module's docstring)."""
    ckpt = Path(ckpt)
    try:
        json.loads((ckpt / "trainer_state.json").read_text())
        weights = list(ckpt.glob("*.safetensors")) + [b for b in ckpt.glob("*.bin") if b.name != "training_args.bin"]
        for index in ckpt.glob("*.index.json"):  # sharded weights: every shard the index names must be there
            shards = set(json.loads(index.read_text()).get("weight_map", {}).values())
            if any(not (ckpt / s).is_file() for s in shards):
                return False
    except (OSError, ValueError, AttributeError):
        return False
    deepspeed = any(ckpt.glob("global_step*"))
    if not weights and not deepspeed:
        return False
    if not all(_safetensors_whole(w) for w in weights if w.suffix == ".safetensors"):
        return False
    return (ckpt / "optimizer.pt").exists() or deepspeed
