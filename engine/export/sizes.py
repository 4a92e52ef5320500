"""What a merge or export weighs, read without torch: the tensors of a model or adapter folder from its safetensors
headers, the bytes an export writes, the peak memory of the merge process (and the memory a new process can use
here), and sizes typed as text ("2GB"). ``engine.export.checks`` compares them with the disk and memory there are.

Light: stdlib and engine.machine.hardware only.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import TYPE_CHECKING

from engine.export.messages import ExportError, message
from engine.machine import hardware

if TYPE_CHECKING:
    from engine.export.sources import Source

DTYPES = {"bf16": ("bfloat16", 2), "fp16": ("float16", 2), "fp32": ("float32", 4)}


_CONFIG_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


_ST_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}


TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "tokenizer.model",
    "vocab.json",
    "merges.txt",
    "added_tokens.json",
    "chat_template.jinja",
    "chat_template.json",
    "vocab.txt",
    "spiece.model",
    "processor_config.json",  # a vision-language model's processor (image processor settings, its chat template)
    "preprocessor_config.json",
)


DISK_MARGIN = 1.05  # config, card, tokenizer and filesystem slack on top of the tensor bytes


# Resident memory of the merge process beyond the weights: Python + torch + transformers + peft (the demo model's
# merge peaked at 0.44 GB, nearly all of it this), and on a GPU the CUDA libraries and context on the host.
PROCESS_RAM = {"cpu": 1_000_000_000, "cuda": 3_000_000_000}


ADAPTER_ONLY_RAM = 200_000_000  # --adapter-only copies files and never imports torch


MEM_MARGIN = 1.15  # allocator slack and fragmentation on top of the summed tensors


def safetensors_header(path: str | Path) -> dict:
    """Tensor names -> {dtype, shape, data_offsets} from a .safetensors file, reading only its JSON header."""
    with open(path, "rb") as fh:
        (size,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(size))
    header.pop("__metadata__", None)
    return header


def model_tensors(model_dir: str | Path) -> dict[str, dict]:
    """Every tensor of a model folder's safetensors files (empty when it only has .bin files)."""
    out: dict[str, dict] = {}
    for f in sorted(Path(model_dir).glob("*.safetensors")):
        out.update(safetensors_header(f))
    return out


def default_dtype(base_dir: str | Path) -> str:
    cfg = read_json(Path(base_dir) / "config.json")
    return _CONFIG_DTYPES.get(
        str(cfg.get("dtype") or cfg.get("torch_dtype") or ""), "bf16" if cfg.get("quantization_config") else "fp32"
    )


def weight_bytes(model_dir: str | Path, dtype: str) -> tuple[int, int]:
    """(all tensors, the largest tensor) of a model or adapter folder in bytes, its floating-point tensors held in
    ``dtype`` (others as stored). Read from the safetensors headers; .bin-only folders from their file sizes."""
    tensors = model_tensors(model_dir)
    width = DTYPES[dtype][1]
    if tensors:
        floats = ("F32", "F16", "BF16", "F64")
        sizes = [
            _numel(m["shape"]) * (width if m["dtype"] in floats else _ST_BYTES.get(m["dtype"], 4))
            for m in tensors.values()
        ]
        return sum(sizes), max(sizes)
    stored = DTYPES.get(default_dtype(model_dir), ("", 4))[1]  # .bin only: file sizes scaled from the stored dtype
    files = [f.stat().st_size * width // stored for f in Path(model_dir).glob("*.bin")]
    return sum(files), max(files, default=0)


def estimate_bytes(plan_sources: list[Source], base_dir: str, dtype: str, adapter_only: bool) -> int:
    """Bytes the export writes: the base's tensors re-stored in ``dtype`` (or the adapter folder) plus a margin."""
    if adapter_only:
        total = sum(f.stat().st_size for f in Path(plan_sources[0].weights_dir).rglob("*") if f.is_file())
    else:
        total = weight_bytes(base_dir, dtype)[0]
    total += sum((Path(base_dir) / n).stat().st_size for n in TOKENIZER_FILES if (Path(base_dir) / n).is_file())
    return int(total * DISK_MARGIN)


def estimate_memory(
    plan_sources: list[Source], base_dir: str, dtype: str, device: str, adapter_only: bool, max_shard: int
) -> int:
    """Peak resident memory (bytes) of the merge process on this machine, from the safetensors headers.

    Follows engine/trainer/merge.py step by step. On ``cpu``: the base is loaded in float32 and the adapters beside it,
    while the base's files are mapped and read (their pages count as resident until the kernel drops them);
    merging a module (``safe_merge``) holds its weight twice more (a clone and the B @ A delta) -- that is the peak.
    The cast to ``dtype`` goes tensor by tensor, saving writes from the tensors in place, and the reload for
    verification holds the model in ``dtype`` once the float32 one is freed: never more than the float32 phase,
    so a narrower ``dtype`` does not lower the estimate on CPU. On ``cuda``: weights load straight into GPU memory;
    the host holds the process, one shard on its way to disk and one tensor. Logits of the fixed prompts are added
    for large vocabularies. The result is an upper bound for merges that run alone, not a prediction (tests compare
    it with the measured peak of real merges).
    """
    if adapter_only:
        return ADAPTER_ONLY_RAM
    base32, largest32 = weight_bytes(base_dir, "fp32")
    vocab = int(read_json(Path(base_dir) / "config.json").get("vocab_size") or 0)
    logits = 4 * 4 * 96 * vocab  # 4 prompts x 24 tokens x vocab in float32, four copies (reference, base, merged)
    if device == "cuda":
        weights = min(max_shard, weight_bytes(base_dir, dtype)[0]) + largest32
    else:
        mapped = sum(f.stat().st_size for pat in ("*.safetensors", "*.bin") for f in Path(base_dir).glob(pat))
        adapters = sum(weight_bytes(s.weights_dir, "fp32")[0] for s in plan_sources if s.kind == "adapter")
        weights = base32 + mapped + adapters + 2 * largest32
    return int(PROCESS_RAM[device] + (weights + logits) * MEM_MARGIN)


def available_memory() -> tuple[int, str]:
    """(bytes a new process can use, where that was read): engine.machine.hardware.available_memory (MemAvailable and
    the cgroup limit); ``STUDIO_MEM_AVAILABLE`` (e.g. ``8GB``) replaces the reading: to state a figure, or in tests."""
    given = os.environ.get("STUDIO_MEM_AVAILABLE", "").strip()
    if given:
        return parse_size(given, "STUDIO_MEM_AVAILABLE"), message("export.mem_given")
    found = hardware.available_memory()
    if found is None:
        raise ExportError(message("export.no_meminfo"))
    return found


def parse_size(text: str | int, what: str = "--max-shard-size") -> int:
    """'2GB' -> 2e9 bytes, '500MiB' -> 500 * 2**20, like transformers' max_shard_size."""
    if isinstance(text, int):
        return text
    s = str(text).strip().upper()
    units = {"KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "KB": 10**3, "MB": 10**6, "GB": 10**9, "B": 1}
    for unit, mult in units.items():
        if s.endswith(unit):
            try:
                value = float(s[: -len(unit)])
            except ValueError:
                break
            if value > 0:
                return int(value * mult)
    if s.isdigit() and int(s) > 0:
        return int(s)
    raise ExportError(message("export.bad_size", what=what, text=text))


def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _numel(shape: list[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"
