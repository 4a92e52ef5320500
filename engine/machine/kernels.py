"""Kernel choices a run makes, decided without torch: Liger kernels (fused linear cross-entropy, RMSNorm, RoPE,
SwiGLU; the ``liger-kernel`` package, applied by transformers' ``use_liger_kernel``), and per-sample sdpa inside
rows that hold several samples (engine.trainer.attention; ``model.packed_attention``), and where gptqmodel lies when
the set-up kept it apart from the venv (``gptq_folder``).

Light: stdlib only (``importlib.util.find_spec`` tells whether the package is installed without importing it). The
planner (its logits/loss term), the spec's rules and the trainer take the decision from ``liger_decision``, so what
the plan assumes is what the run does.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

# model_type values transformers' use_liger_kernel patches (liger_kernel.transformers' apply_liger_kernel_to_*)
LIGER_ARCHS = frozenset(
    {
        "llama",
        "mistral",
        "mixtral",
        "qwen2",
        "qwen2_moe",
        "qwen3",
        "qwen3_moe",
        "gemma",
        "gemma2",
        "gemma3",
        "gemma3_text",
        "phi3",
        "granite",
        "olmo2",
    }
)


def liger_installed() -> bool:
    return importlib.util.find_spec("liger_kernel") is not None


def liger_decision(mode: str, device: str, model_type: str | None, loss: str = "cross_entropy") -> tuple[bool, str]:
    """(use Liger kernels, why) for ``train.liger_kernel`` ``mode`` (auto / on / off) on ``device`` (cpu / cuda)
    for a model of ``model_type`` (None: unknown), training with ``train.loss``. ``on`` where it cannot work is
    refused by the spec's rules before launch; here it reads as off with the reason."""
    if mode == "off":
        return False, "off in the spec"
    if loss != "cross_entropy":
        return False, f"train.loss {loss} weights each token from the logits, which Liger's fused loss never makes"
    if device == "cpu":
        return False, "Liger kernels run on CUDA GPUs only"
    if not liger_installed():
        return False, "the liger-kernel package is not installed (pip install liger-kernel)"
    if model_type is not None and model_type not in LIGER_ARCHS:
        return False, f"Liger kernels do not support model_type {model_type!r}"
    return True, "on in the spec" if mode == "on" else "auto: installed and supported on this GPU run"


# model_type values whose decoder attention is plain causal attention over the whole context, so per-sample sdpa
# (engine.trainer.attention) computes what transformers' block-diagonal mask does (tests/engine/test_attention.py
# checks each on a tiny model). Their sliding-window variants are refused by ``per_sample_refusal``.
PER_SAMPLE_ARCHS = ("llama", "mistral", "qwen2", "qwen3")


def _sliding(config: dict) -> bool:
    if any(t != "full_attention" for t in config.get("layer_types") or []):
        return True
    window = config.get("sliding_window")
    return window not in (None, 0) and config.get("use_sliding_window", True) is not False


def per_sample_refusal(attn: str, config: dict) -> tuple[str, dict]:
    """Why per-sample attention cannot run with ``attn`` on a model of this config.json: ("", {}) when it can, else
    a catalog key of engine.spec.messages and its parameters (the spec's rules word it; the trainer logs it)."""
    model_type = config.get("model_type") or (config.get("text_config") or {}).get("model_type")
    if attn != "sdpa":
        return "packed_attention_sdpa", {"attn": attn}
    if model_type not in PER_SAMPLE_ARCHS:
        return "packed_attention_model", {"model_type": model_type or "unknown", "known": ", ".join(PER_SAMPLE_ARCHS)}
    if _sliding(config):
        return "packed_attention_sliding", {"model_type": model_type}
    return "", {}


# Under the block-diagonal mask, sdpa turns the row's boolean mask into an attention bias of row x row entries in the
# compute dtype and keeps it for backward in every layer: 512 MiB per layer in bf16 for a row of 16384 tokens
# (bench/packed_attention.py measures what autograd keeps: on the CPU, 454 MiB more over 7 layers for rows of about
# 4,600 tokens); per-sample attention keeps none. auto still keeps the mask
# on GPUs until bench/gpu_check.sh has measured per-sample speed there (many short samples mean many small kernels);
# the plan counts the bias and, from this size, says how to drop it.
MASK_BIAS_NOTE_BYTES = 64 * 2**20


def packed_row_tokens(spec) -> int:
    """The longest row of several samples a run's batches can hold: padding-free (sft / pt without packing) joins
    a micro-batch into one row of up to batch x cutoff tokens, packing fills rows of the cutoff; 0 when every row
    is one sample (padded batches; dpo / kto / rm, whose collators are TRL's)."""
    from engine.data.rows import PREFERENCE_STAGES

    d = spec.data
    if spec.method.stage in PREFERENCE_STAGES:
        return 0
    if d.packing:
        return d.cutoff_len
    if d.padding_free in ("auto", "on"):
        return spec.train.per_device_batch_size * d.cutoff_len
    return 0


def attention_bias_bytes(row_tokens: int, rows: int, layers: int, compute_bytes: int) -> int:
    """What the mask path keeps for backward: a row x row bias per row and layer (see MASK_BIAS_NOTE_BYTES)."""
    return rows * row_tokens * row_tokens * layers * compute_bytes


def packed_attention_decision(mode: str, attn: str, config: dict, device: str, row_tokens: int) -> tuple[bool, str]:
    """(attend per sample, why) for ``model.packed_attention`` ``mode`` (auto / per_sample / mask) on rows of up to
    ``row_tokens`` tokens (``packed_row_tokens``; 0: one sample per row). An explicit per_sample that cannot run is
    refused by the spec's rules before launch (``per_sample_refusal``); here it reads as the mask with the reason."""
    refusal, params = per_sample_refusal(attn, config)
    if not row_tokens:
        return False, "one sample per row (no padding-free or packed rows): plain sdpa"
    if refusal:
        if refusal == "packed_attention_sdpa":
            why = f"{attn} attention (flash_attention_2 attends per sample by itself)"
        elif refusal == "packed_attention_model":
            why = f"model type {params['model_type']} (per sample covers {params['known']})"
        else:
            why = "sliding-window attention"
        return False, f"block-diagonal mask: per-sample attention does not cover {why}"
    if mode == "mask":
        return False, "block-diagonal mask (model.packed_attention: mask)"
    if mode == "auto" and device != "cpu":
        return False, "block-diagonal mask (auto on a GPU: per-sample speed is not measured on GPUs yet)"
    return True, "per sample: sdpa on each sample's own tokens, no mask across the row"


# FP8 training (``train.fp8``): accelerate's mixed_precision "fp8" casts the linear layers' matmuls to FP8 through one
# of two backends; the rest runs in bf16. backend -> (module, what to install). accelerate 1.16 has no MS-AMP backend.
FP8_PACKAGES = {
    "torchao": ("torchao", "pip install torchao"),
    "te": ("transformer_engine", "pip install transformer-engine[pytorch]"),
}
# FP8 tensor cores: Ada (8.9) and Hopper (9.0) on; accelerate's own check, which falls back to fp16 below it
FP8_MIN_CAPABILITY = (8, 9)


def module_installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def gptq_folder() -> Path:
    """Where ``scripts/bootstrap.sh --test`` (and the image) install gptqmodel, apart from the venv's site-packages:
    ``pip install --no-deps --target .venv/gptq``. Its own pins (numpy==2.2.6, maturin, torchao) would replace the
    tested stack or fail ``pip check``; no tool scans a --target folder, so the venv stays consistent. The processes
    that may load it (runs, exports, Chat's worker) get the folder on their ``PYTHONPATH`` (``gptq_path``)."""
    return Path(sys.prefix) / "gptq"


def gptq_path() -> list[str]:
    """``[gptq_folder()]`` when gptqmodel is installed there, else ``[]``: what a process's path adds for it."""
    folder = gptq_folder()
    return [str(folder)] if (folder / "gptqmodel" / "__init__.py").is_file() else []


def gptqmodel_installed() -> bool:
    """gptqmodel importable here or in a process given ``gptq_path``: pip-installed (by the user) or in the folder."""
    return module_installed("gptqmodel") or bool(gptq_path())


def with_gptq_path(pythonpath: str) -> str:
    """A ``PYTHONPATH`` value with ``gptq_path`` after what it already holds (the user's entries come first)."""
    parts = [p for p in pythonpath.split(os.pathsep) if p]
    return os.pathsep.join(parts + [p for p in gptq_path() if p not in parts])


def fp8_backend_missing(backend: str) -> str | None:
    """What to install for ``train.fp8_backend`` when its package is missing, else None (auto: either backend,
    torchao first as accelerate picks it)."""
    names = list(FP8_PACKAGES) if backend == "auto" else [backend]
    if any(module_installed(FP8_PACKAGES[n][0]) for n in names):
        return None
    return " or ".join(FP8_PACKAGES[n][1] for n in names)


def fp8_device_refusal(device: str, gpus: list) -> tuple[str, dict] | None:
    """(catalog key of engine.machine.messages, parameters) of why FP8 cannot train on ``device`` with these GPUs
    (objects with ``name`` and ``compute_capability``, "9.0"; "" where unknown, as on a target machine described by
    its size), else None."""
    if device != "cuda":
        return "fp8.cpu", {}
    for g in gpus:
        cap = str(getattr(g, "compute_capability", "") or "")
        try:
            major, minor = (int(x) for x in cap.split(".")[:2])
        except ValueError:
            continue  # unknown: the trainer's own check decides on the machine
        if (major, minor) < FP8_MIN_CAPABILITY:
            return "fp8.capability", {"name": g.name, "capability": cap}
    return None
