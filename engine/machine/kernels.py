"""Fused GPU kernels a run can use, decided without torch: Liger kernels (fused linear cross-entropy, RMSNorm, RoPE,
SwiGLU; the ``liger-kernel`` package, applied by transformers' ``use_liger_kernel``).

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
