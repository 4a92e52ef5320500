"""What converts to GGUF, read from a model folder's files without loading weights: the architecture, the tokenizer,
the rope settings, the chat template, and the size of the file each format writes. Light: stdlib and engine's light
modules only; ``engine.trainer.gguf_write`` (heavy) follows these decisions, so a refusal comes here, before any work.

Formats: ``gguf-f16``, ``gguf-bf16``, ``gguf-q8_0`` are written by the ``gguf`` package; ``gguf-q4_k_m`` /
``gguf-q5_k_m`` need llama.cpp's ``llama-quantize`` binary (on PATH, or ``STUDIO_LLAMA_QUANTIZE``); ``bnb-4bit`` /
``bnb-8bit`` are bitsandbytes-quantized Hugging Face folders; ``gptq-4bit`` / ``gptq-8bit`` / ``awq-4bit`` are
calibrated on a run's training rows by gptqmodel (``engine.trainer.gptq_export``), on the GPU or the CPU.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path

from engine.export.checks import ExportError
from engine.export.messages import message
from engine.export.sizes import model_tensors
from engine.machine import kernels

GGUF_FORMATS = ("gguf-f16", "gguf-bf16", "gguf-q8_0", "gguf-q4_k_m", "gguf-q5_k_m")
BNB_FORMATS = ("bnb-4bit", "bnb-8bit")
# calibrated by gptqmodel on a run's training rows (engine.trainer.gptq_export): GPTQ, and AWQ (GEMM layout)
GPTQ_FORMATS = ("gptq-4bit", "gptq-8bit")
AWQ_FORMATS = ("awq-4bit",)
CALIBRATED_FORMATS = GPTQ_FORMATS + AWQ_FORMATS
FORMATS = GGUF_FORMATS + BNB_FORMATS + CALIBRATED_FORMATS
NEEDS_QUANTIZER = ("gguf-q4_k_m", "gguf-q5_k_m")
# Studio's model_type -> GGUF architecture (llama.cpp's convert_hf_to_gguf writes Mistral as llama)
GGUF_ARCH = {"llama": "llama", "mistral": "llama", "qwen2": "qwen2", "qwen3": "qwen3"}
# bytes per value of a 2-D weight in each format (Q8_0: 32 int8 + one f16 scale per block; K-quants: llama.cpp's)
BYTES_PER_WEIGHT = {
    "gguf-f16": 2.0,
    "gguf-bf16": 2.0,
    "gguf-q8_0": 34 / 32,
    "gguf-q4_k_m": 4.85 / 8,
    "gguf-q5_k_m": 5.7 / 8,
    "bnb-4bit": 0.5 + 4 / 64,
    "bnb-8bit": 1.0 + 4 / 128,
    # GPTQ and AWQ, groups of 128: the packed weights plus an fp16 scale and a packed zero point per group and column
    "gptq-4bit": 0.5 + 2.5 / 128,
    "gptq-8bit": 1.0 + 3 / 128,
    "awq-4bit": 0.5 + 2.5 / 128,
}
# Pre-tokenizer split patterns llama.cpp knows by name (its ``tokenizer.ggml.pre``), as tokenizer.json writes them.
_WORDS = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|"
_REST = r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
PRE_TOKENIZERS = {_WORDS + r"\p{N}{1,3}" + _REST: "llama-bpe", _WORDS + r"\p{N}" + _REST: "qwen2"}
ROPE_TYPES = (None, "default", "linear", "llama3")


class GgufError(ExportError):
    """A model folder or format that cannot become a GGUF here; the message names what and why."""


def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def rope_scaling(cfg: dict) -> dict | None:
    """transformers 5 writes rope settings as ``rope_parameters``; older configs as ``rope_scaling``."""
    params = cfg.get("rope_parameters") or cfg.get("rope_scaling")
    return params if isinstance(params, dict) else None


def rope_kind(cfg: dict) -> str | None:
    sc = rope_scaling(cfg) or {}
    kind = sc.get("rope_type", sc.get("type"))
    return None if kind in (None, "default") else str(kind)


def rope_theta(cfg: dict) -> float:
    return float(cfg.get("rope_theta") or (rope_scaling(cfg) or {}).get("rope_theta") or 10000.0)


def tokenizer_kind(tj: dict) -> str:
    """``gpt2`` (byte-level BPE: Llama 3, Qwen, the demo model) or ``llama`` (SentencePiece BPE with byte fallback:
    Llama 2, Mistral 7B), llama.cpp's ``tokenizer.ggml.model``; raises GgufError for any other tokenizer."""
    model = tj.get("model") or {}
    decoder = (tj.get("decoder") or {}).get("type")
    if model.get("type") == "BPE" and not model.get("byte_fallback") and decoder == "ByteLevel":
        return "gpt2"
    if model.get("type") == "BPE" and model.get("byte_fallback"):
        return "llama"
    raise GgufError(message("export.gguf_tokenizer", kind=f"{model.get('type')} (decoder {decoder})"))


def pre_tokenizer_name(tj: dict) -> str:
    """llama.cpp's name for a byte-level BPE tokenizer's split rule (``tokenizer.ggml.pre``, as llama.cpp's
    llama-vocab.cpp spells it: ``gpt-2`` for plain ByteLevel splitting; llama.cpp refuses a name it does not know)."""
    pre = tj.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers") if pre.get("type") == "Sequence" else [pre]
    for step in steps or []:
        if step.get("type") == "Split":
            pattern = (step.get("pattern") or {}).get("Regex")
            return PRE_TOKENIZERS.get(pattern, "default")
        if step.get("type") == "ByteLevel" and step.get("use_regex", True):
            return "gpt-2"
    return "default"


def chat_template_of(model_dir: Path) -> str:
    """The tokenizer's chat template: ``chat_template.jinja``, else tokenizer_config.json's (a named list: its
    ``default``)."""
    jinja = Path(model_dir) / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8")
    tpl = read_json(Path(model_dir) / "tokenizer_config.json").get("chat_template")
    if isinstance(tpl, list):
        tpl = next((t.get("template") for t in tpl if t.get("name") == "default"), None)
    return tpl or ""


def architecture(model_dir: Path) -> str:
    return str(read_json(Path(model_dir) / "config.json").get("model_type") or "?")


def check_architecture(arch: str, archs: list[str] | None = None) -> None:
    if arch not in GGUF_ARCH:
        raise GgufError(message("export.gguf_arch", arch=arch, known=", ".join(sorted(GGUF_ARCH))))
    if archs and not any(str(a).endswith("ForCausalLM") for a in archs):
        raise GgufError(message("export.gguf_head", archs=", ".join(archs)))


def check_convertible(model_dir: str | Path) -> str:
    """The model_type of a folder that converts; GgufError naming the architecture, rope or tokenizer otherwise."""
    model_dir = Path(model_dir)
    cfg = read_json(model_dir / "config.json")
    arch = str(cfg.get("model_type") or "?")
    check_architecture(arch, cfg.get("architectures"))
    if rope_kind(cfg) not in ROPE_TYPES:
        raise GgufError(message("export.gguf_rope", arch=arch, rope=rope_kind(cfg)))
    tj = read_json(model_dir / "tokenizer.json")
    if not tj:
        raise GgufError(message("export.gguf_no_tokenizer", path=model_dir / "tokenizer.json"))
    tokenizer_kind(tj)
    return arch


def estimate_bytes(model_dir: str | Path, fmt: str) -> int:
    """Bytes of the file ``fmt`` writes for this folder, from its safetensors headers: 2-D weights at the format's
    width, 1-D tensors in float32, a tied output head stored once, plus the vocabulary."""
    model_dir = Path(model_dir)
    cfg = read_json(model_dir / "config.json")
    tensors = model_tensors(model_dir)
    total = 0.0
    for name, meta in tensors.items():
        if name == "lm_head.weight" and cfg.get("tie_word_embeddings"):
            continue
        n = 1
        for d in meta["shape"]:
            n *= d
        total += n * (BYTES_PER_WEIGHT[fmt] if len(meta["shape"]) >= 2 else 4)
    tok = model_dir / "tokenizer.json"
    total += tok.stat().st_size if tok.is_file() else 0
    return int(total * 1.02) + 65536


IN_PROCESS = "llama_cpp"  # quantizer(): llama.cpp's own llama_model_quantize, through llama-cpp-python


def quantizer() -> str | None:
    """What makes Q4_K_M / Q5_K_M: llama.cpp's ``llama-quantize`` (``STUDIO_LLAMA_QUANTIZE``, else on PATH), else
    ``IN_PROCESS`` when llama-cpp-python is installed (the same llama.cpp function the binary calls); None without
    either. Looked up without importing llama-cpp-python (this module is light)."""
    given = os.environ.get("STUDIO_LLAMA_QUANTIZE", "").strip()
    if given:
        return given if Path(given).is_file() and os.access(given, os.X_OK) else None
    found = shutil.which("llama-quantize")
    if found:
        return found
    return IN_PROCESS if llama_cpp_installed() else None


def llama_cpp_installed() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None


def gptq_missing(fmt: str = "gptq-4bit") -> str | None:
    """What this machine lacks for a GPTQ or AWQ export: "gptqmodel" (the package that quantizes, on the GPU or the
    CPU), "optimum" (transformers reads a GPTQ folder through it), or None. Light: the packages found by their
    specs; nothing imported. gptqmodel counts where the set-up keeps it apart (``machine.kernels.gptq_folder``): the
    export's process gets that folder on its path."""
    if not kernels.gptqmodel_installed():
        return "gptqmodel"
    if fmt in GPTQ_FORMATS and importlib.util.find_spec("optimum") is None:
        return "optimum"
    return None


def check_format(fmt: str) -> None:
    """Refuse a format unknown, or one whose tool this machine lacks, in one line saying how to get it."""
    if fmt not in FORMATS:
        raise GgufError(message("export.bad_format", fmt=fmt, choices=", ".join(FORMATS)))
    if fmt in NEEDS_QUANTIZER and quantizer() is None:
        raise GgufError(message("export.no_quantizer", fmt=fmt))
    if fmt in CALIBRATED_FORMATS and (missing := gptq_missing(fmt)):
        raise GgufError(message(f"export.no_gptq_{missing}", fmt=fmt, folder=str(kernels.gptq_folder())))
