"""Kernel choices a run makes, decided without torch: Liger kernels (fused linear cross-entropy, RMSNorm, RoPE,
SwiGLU; the ``liger-kernel`` package, applied by transformers' ``use_liger_kernel``), and per-sample sdpa inside
rows that hold several samples (engine.trainer.attention; ``model.packed_attention``).

Light: stdlib only (``importlib.util.find_spec`` tells whether the package is installed without importing it). The
planner (its logits/loss term), the spec's rules and the trainer take the decision from ``liger_decision``, so what
the plan assumes is what the run does.
"""

from __future__ import annotations

import importlib.util

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


def liger_decision(mode: str, device: str, model_type: str | None) -> tuple[bool, str]:
    """(use Liger kernels, why) for ``train.liger_kernel`` ``mode`` (auto / on / off) on ``device`` (cpu / cuda)
    for a model of ``model_type`` (None: unknown). ``on`` where it cannot work is refused by the spec's rules
    before launch; here it reads as off with the reason."""
    if mode == "off":
        return False, "off in the spec"
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


def packed_attention_decision(
    mode: str, attn: str, config: dict, device: str, rows_hold_samples: bool
) -> tuple[bool, str]:
    """(attend per sample, why) for ``model.packed_attention`` ``mode`` (auto / per_sample / mask). An explicit
    per_sample that cannot run is refused by the spec's rules before launch (``per_sample_refusal``); here it reads
    as the mask with the reason."""
    refusal, params = per_sample_refusal(attn, config)
    if not rows_hold_samples:
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
        return False, "block-diagonal mask (auto: per-sample attention is measured on the CPU only so far)"
    return True, "per sample: sdpa on each sample's own tokens, no mask across the row"
