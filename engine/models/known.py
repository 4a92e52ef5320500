"""The published architecture figures of popular open models, so a hub id plans and validates offline.

Light: stdlib only. Each entry is the part of the model's ``config.json`` that planning and validation read (model
type, sizes, heads, vocabulary, positions, tied embeddings, experts), copied from the config the model's authors
publish on the Hugging Face hub (``SOURCE`` gives the file). Only figures: no weights, no tokenizer. A model that is
local, in the Hugging Face cache or reachable on the hub is read from there first (``engine.models.resolve``); this
table is the last resort, and the page says when a plan comes from it.

Vision-language models carry their ``vision_config`` too (the tower's width, depth, patch and image sizes), as
their configs do, so the planner counts the vision tower, the projector and the tokens an image becomes
(engine.plan.vision_shape).
"""

from __future__ import annotations

SOURCE = "https://huggingface.co/{id}/blob/main/config.json"


def _dec(model_type: str, hidden: int, inter: int, layers: int, heads: int, kv: int, vocab: int, positions: int,
         *, tied: bool = False, head_dim: int | None = None, **extra) -> dict:  # fmt: skip
    cfg = {
        "model_type": model_type,
        "hidden_size": hidden,
        "intermediate_size": inter,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "vocab_size": vocab,
        "max_position_embeddings": positions,
        "tie_word_embeddings": tied,
    }
    if head_dim is not None:
        cfg["head_dim"] = head_dim
    cfg.update(extra)
    return cfg


_LLAMA32_1B = _dec("llama", 2048, 8192, 16, 32, 8, 128256, 131072, tied=True, head_dim=64)
_LLAMA32_3B = _dec("llama", 3072, 8192, 28, 24, 8, 128256, 131072, tied=True, head_dim=128)
_LLAMA31_8B = _dec("llama", 4096, 14336, 32, 32, 8, 128256, 131072)
_LLAMA3_8B = _dec("llama", 4096, 14336, 32, 32, 8, 128256, 8192)
_LLAMA31_70B = _dec("llama", 8192, 28672, 80, 64, 8, 128256, 131072)
_LLAMA3_70B = _dec("llama", 8192, 28672, 80, 64, 8, 128256, 8192)

_QWEN25 = {
    "0.5B": _dec("qwen2", 896, 4864, 24, 14, 2, 151936, 32768, tied=True),
    "1.5B": _dec("qwen2", 1536, 8960, 28, 12, 2, 151936, 32768, tied=True),
    "3B": _dec("qwen2", 2048, 11008, 36, 16, 2, 151936, 32768, tied=True),
    "7B": _dec("qwen2", 3584, 18944, 28, 28, 4, 152064, 32768),
    "14B": _dec("qwen2", 5120, 13824, 48, 40, 8, 152064, 32768),
    "32B": _dec("qwen2", 5120, 27648, 64, 40, 8, 152064, 32768),
    "72B": _dec("qwen2", 8192, 29568, 80, 64, 8, 152064, 32768),
}
_QWEN3 = {
    "0.6B": _dec("qwen3", 1024, 3072, 28, 16, 8, 151936, 40960, tied=True, head_dim=128),
    "1.7B": _dec("qwen3", 2048, 6144, 28, 16, 8, 151936, 40960, tied=True, head_dim=128),
    "4B": _dec("qwen3", 2560, 9728, 36, 32, 8, 151936, 40960, tied=True, head_dim=128),
    "8B": _dec("qwen3", 4096, 12288, 36, 32, 8, 151936, 40960, head_dim=128),
    "14B": _dec("qwen3", 5120, 17408, 40, 40, 8, 151936, 40960, head_dim=128),
    "32B": _dec("qwen3", 5120, 25600, 64, 64, 8, 151936, 40960, head_dim=128),
    "30B-A3B": _dec(
        "qwen3_moe",
        2048,
        6144,
        48,
        32,
        4,
        151936,
        40960,
        head_dim=128,
        num_experts=128,
        num_experts_per_tok=8,
        moe_intermediate_size=768,
    ),  # fmt: skip
    "235B-A22B": _dec(
        "qwen3_moe",
        4096,
        12288,
        94,
        64,
        4,
        151936,
        40960,
        head_dim=128,
        num_experts=128,
        num_experts_per_tok=8,
        moe_intermediate_size=1536,
    ),  # fmt: skip
}
_GEMMA2 = {
    "2b": _dec("gemma2", 2304, 9216, 26, 8, 4, 256000, 8192, tied=True, head_dim=256),
    "9b": _dec("gemma2", 3584, 14336, 42, 16, 8, 256000, 8192, tied=True, head_dim=256),
    "27b": _dec("gemma2", 4608, 36864, 46, 32, 16, 256000, 8192, tied=True, head_dim=128),
}
_GEMMA3 = {
    "1b": _dec("gemma3_text", 1152, 6912, 26, 4, 1, 262144, 32768, tied=True, head_dim=256),
    "4b": _dec("gemma3", 2560, 10240, 34, 8, 4, 262208, 131072, tied=True, head_dim=256),
    "12b": _dec("gemma3", 3840, 15360, 48, 16, 8, 262208, 131072, tied=True, head_dim=256),
    "27b": _dec("gemma3", 5376, 21504, 62, 32, 16, 262208, 131072, tied=True, head_dim=128),
}
_SIGLIP_896 = {  # Gemma 3's SigLIP tower (4B, 12B, 27B alike)
    "model_type": "siglip_vision_model",
    "hidden_size": 1152,
    "intermediate_size": 4304,
    "num_hidden_layers": 27,
    "num_attention_heads": 16,
    "image_size": 896,
    "patch_size": 14,
    "vision_use_head": False,
}
for _cfg in (_GEMMA3["4b"], _GEMMA3["12b"], _GEMMA3["27b"]):
    _cfg.update(vision_config=dict(_SIGLIP_896), mm_tokens_per_image=256)


def _qwen2_vl(text: dict) -> dict:
    vision = {"depth": 32, "embed_dim": 1280, "mlp_ratio": 4, "num_heads": 16, "in_chans": 3, "patch_size": 14}
    vision.update(hidden_size=text["hidden_size"], spatial_merge_size=2, temporal_patch_size=2)
    return {**text, "model_type": "qwen2_vl", "vision_config": vision}


def _qwen2_5_vl(text: dict) -> dict:
    vision = {"depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16, "in_chans": 3}
    vision.update(out_hidden_size=text["hidden_size"], patch_size=14, spatial_merge_size=2, temporal_patch_size=2)
    vision.update(window_size=112, fullatt_block_indexes=[7, 15, 23, 31])
    return {**text, "model_type": "qwen2_5_vl", "vision_config": vision}


def _qwen3_vl(text: dict, depth: int, width: int, inter: int, deepstack: list[int]) -> dict:
    vision = {"depth": depth, "hidden_size": width, "intermediate_size": inter, "num_heads": 16, "in_channels": 3}
    vision.update(out_hidden_size=text["hidden_size"], patch_size=16, spatial_merge_size=2, temporal_patch_size=2)
    vision.update(num_position_embeddings=2304, deepstack_visual_indexes=deepstack)
    return {"model_type": "qwen3_vl", "text_config": {**text, "model_type": "qwen3_vl_text"}, "vision_config": vision}


def _llava(text: dict) -> dict:
    vision = {"model_type": "clip_vision_model", "hidden_size": 1024, "intermediate_size": 4096}
    vision.update(num_hidden_layers=24, num_attention_heads=16, image_size=336, patch_size=14)
    return {
        "model_type": "llava",
        "text_config": text,
        "vision_config": vision,
        "vision_feature_layer": -2,
        "vision_feature_select_strategy": "default",
    }


_VLM = {
    "Qwen/Qwen2-VL-2B-Instruct": _qwen2_vl(_dec("qwen2", 1536, 8960, 28, 12, 2, 151936, 32768, tied=True)),
    "Qwen/Qwen2-VL-7B-Instruct": _qwen2_vl(_dec("qwen2", 3584, 18944, 28, 28, 4, 152064, 32768)),
    "Qwen/Qwen2-VL-72B-Instruct": _qwen2_vl(_dec("qwen2", 8192, 29568, 80, 64, 8, 152064, 32768)),
    "Qwen/Qwen2.5-VL-3B-Instruct": _qwen2_5_vl(_dec("qwen2", 2048, 11008, 36, 16, 2, 151936, 128000, tied=True)),
    "Qwen/Qwen2.5-VL-7B-Instruct": _qwen2_5_vl(_dec("qwen2", 3584, 18944, 28, 28, 4, 152064, 128000)),
    "Qwen/Qwen2.5-VL-32B-Instruct": _qwen2_5_vl(_dec("qwen2", 5120, 27648, 64, 40, 8, 152064, 128000)),
    "Qwen/Qwen2.5-VL-72B-Instruct": _qwen2_5_vl(_dec("qwen2", 8192, 29568, 80, 64, 8, 152064, 128000)),
    "Qwen/Qwen3-VL-2B-Instruct": _qwen3_vl(
        _dec("qwen3", 2048, 6144, 28, 16, 8, 151936, 262144, tied=True, head_dim=128), 24, 1024, 4096, [5, 11, 17]
    ),
    "Qwen/Qwen3-VL-4B-Instruct": _qwen3_vl(
        _dec("qwen3", 2560, 9728, 36, 32, 8, 151936, 262144, tied=True, head_dim=128), 24, 1024, 4096, [5, 11, 17]
    ),
    "Qwen/Qwen3-VL-8B-Instruct": _qwen3_vl(
        _dec("qwen3", 4096, 12288, 36, 32, 8, 151936, 262144, head_dim=128), 27, 1152, 4304, [8, 16, 24]
    ),
    "Qwen/Qwen3-VL-32B-Instruct": _qwen3_vl(
        _dec("qwen3", 5120, 25600, 64, 64, 8, 151936, 262144, head_dim=128), 27, 1152, 4304, [8, 16, 24]
    ),
    "llava-hf/llava-1.5-7b-hf": _llava(_dec("llama", 4096, 11008, 32, 32, 32, 32064, 4096)),
    "llava-hf/llava-1.5-13b-hf": _llava(_dec("llama", 5120, 13824, 40, 40, 40, 32064, 4096)),
}
_MISTRAL_7B = _dec("mistral", 4096, 14336, 32, 32, 8, 32768, 32768)
_MISTRAL_NEMO = _dec("mistral", 5120, 14336, 40, 32, 8, 131072, 1024000, head_dim=128)
_PHI3_MINI = _dec("phi3", 3072, 8192, 32, 32, 32, 32064, 4096)
_PHI3_MEDIUM = _dec("phi3", 5120, 17920, 40, 40, 10, 32064, 4096)
_PHI4 = _dec("phi3", 5120, 17920, 40, 40, 10, 100352, 16384)
_PHI4_MINI = _dec("phi3", 3072, 8192, 32, 24, 8, 200064, 131072, tied=True)
# DeepSeek-R1's distilled models keep their base models' shapes (Qwen2.5-Math 1.5B/7B, Qwen2.5 14B/32B, Llama 3.1
# 8B, Llama 3.3 70B) with a 128k context.
_R1_QWEN_1_5B = _dec("qwen2", 1536, 8960, 28, 12, 2, 151936, 131072)
_R1_QWEN_7B = _dec("qwen2", 3584, 18944, 28, 28, 4, 152064, 131072)
_R1_QWEN_14B = _dec("qwen2", 5120, 13824, 48, 40, 8, 152064, 131072)
_R1_QWEN_32B = _dec("qwen2", 5120, 27648, 64, 40, 8, 152064, 131072)

KNOWN: dict[str, dict] = {
    # Llama 3.x
    "meta-llama/Llama-3.2-1B": _LLAMA32_1B,
    "meta-llama/Llama-3.2-1B-Instruct": _LLAMA32_1B,
    "meta-llama/Llama-3.2-3B": _LLAMA32_3B,
    "meta-llama/Llama-3.2-3B-Instruct": _LLAMA32_3B,
    "meta-llama/Meta-Llama-3-8B": _LLAMA3_8B,
    "meta-llama/Meta-Llama-3-8B-Instruct": _LLAMA3_8B,
    "meta-llama/Llama-3.1-8B": _LLAMA31_8B,
    "meta-llama/Llama-3.1-8B-Instruct": _LLAMA31_8B,
    "meta-llama/Meta-Llama-3-70B": _LLAMA3_70B,
    "meta-llama/Meta-Llama-3-70B-Instruct": _LLAMA3_70B,
    "meta-llama/Llama-3.1-70B": _LLAMA31_70B,
    "meta-llama/Llama-3.1-70B-Instruct": _LLAMA31_70B,
    "meta-llama/Llama-3.3-70B-Instruct": _LLAMA31_70B,
    # Qwen2.5 and Qwen3 (dense and mixture of experts)
    **{f"Qwen/Qwen2.5-{size}": cfg for size, cfg in _QWEN25.items()},
    **{f"Qwen/Qwen2.5-{size}-Instruct": cfg for size, cfg in _QWEN25.items()},
    **{f"Qwen/Qwen3-{size}": cfg for size, cfg in _QWEN3.items()},
    **{f"Qwen/Qwen3-{size}-Base": cfg for size, cfg in _QWEN3.items()},
    # Gemma 2 and 3
    **{f"google/gemma-2-{size}": cfg for size, cfg in _GEMMA2.items()},
    **{f"google/gemma-2-{size}-it": cfg for size, cfg in _GEMMA2.items()},
    **{f"google/gemma-3-{size}-pt": cfg for size, cfg in _GEMMA3.items()},
    **{f"google/gemma-3-{size}-it": cfg for size, cfg in _GEMMA3.items()},
    # Mistral
    "mistralai/Mistral-7B-v0.3": _MISTRAL_7B,
    "mistralai/Mistral-7B-Instruct-v0.3": _MISTRAL_7B,
    "mistralai/Mistral-Nemo-Base-2407": _MISTRAL_NEMO,
    "mistralai/Mistral-Nemo-Instruct-2407": _MISTRAL_NEMO,
    # Phi-3 / Phi-4
    "microsoft/Phi-3-mini-4k-instruct": _PHI3_MINI,
    "microsoft/Phi-3-medium-4k-instruct": _PHI3_MEDIUM,
    "microsoft/phi-4": _PHI4,
    "microsoft/Phi-4-mini-instruct": _PHI4_MINI,
    # DeepSeek-R1 distilled
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B": _R1_QWEN_1_5B,
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B": _R1_QWEN_7B,
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B": _R1_QWEN_14B,
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B": _R1_QWEN_32B,
    "deepseek-ai/DeepSeek-R1-Distill-Llama-8B": _LLAMA31_8B,
    "deepseek-ai/DeepSeek-R1-Distill-Llama-70B": _LLAMA31_70B,
    # vision-language (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, LLaVA 1.5; Gemma 3 above)
    **_VLM,
}


# Each model's terms as its model card on the hub states them: the licence (the card's ``license``, or its
# ``license_name`` where that says "other") and whether the hub gates its files ("manual": Meta reviews each request
# for Llama; "auto": Google's and Mistral AI's terms are accepted with a click; "no"). The first prefix that starts
# an id answers.
TERMS: list[tuple[str, str, str]] = [
    ("meta-llama/Llama-3.2-", "llama3.2", "manual"),
    ("meta-llama/Llama-3.3-", "llama3.3", "manual"),
    ("meta-llama/Llama-3.1-", "llama3.1", "manual"),
    ("meta-llama/Meta-Llama-3-", "llama3", "manual"),
    ("Qwen/Qwen2.5-3B", "qwen-research", "no"),
    ("Qwen/Qwen2.5-72B", "qwen", "no"),
    ("Qwen/Qwen2.5-VL-3B", "qwen-research", "no"),
    ("Qwen/Qwen2.5-VL-72B", "qwen", "no"),
    ("Qwen/Qwen2-VL-72B", "tongyi-qianwen", "no"),
    ("Qwen/", "apache-2.0", "no"),
    ("google/gemma-", "gemma", "auto"),
    ("mistralai/", "apache-2.0", "auto"),
    ("microsoft/", "mit", "no"),
    ("deepseek-ai/DeepSeek-R1-Distill-", "mit", "no"),
    ("llava-hf/llava-1.5-", "llama2", "no"),
]


def terms(repo_id: str) -> tuple[str, str]:
    """(licence, gating) of a model in the table, ("", "") for an id it does not hold."""
    name = canonical(repo_id)
    if name is None:
        return "", ""
    return next(((licence, gated) for prefix, licence, gated in TERMS if name.startswith(prefix)), ("", ""))


def lookup(repo_id: str) -> dict | None:
    """The table's figures for a hub id (case-insensitive, as the hub matches names), a copy; None when unknown."""
    want = repo_id.strip().lower()
    for key, cfg in KNOWN.items():
        if key.lower() == want:
            return dict(cfg)
    return None


def canonical(repo_id: str) -> str | None:
    want = repo_id.strip().lower()
    return next((key for key in KNOWN if key.lower() == want), None)
