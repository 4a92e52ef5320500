"""Parameter shapes and counts of a decoder model from its ``config.json`` alone (no weights, no torch).

Light: stdlib only. Covers Llama-shaped decoders (Llama, Mistral, Qwen2/Qwen3, Gemma/Gemma2/Gemma3 text) with
grouped-query attention, tied embeddings and explicit ``head_dim``; mixture-of-experts configs (``num_local_experts`` /
``num_experts``) are counted as dense experts and flagged approximate. Which tensors a spec trains
(full / freeze / LoRA incl. DoRA) is decided here too, so the planner and the tests share one definition.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from engine.plan.messages import message
from engine.plan.shapes import Shape
from engine.plan.vision_shape import vision_shape

# Linear modules inside one decoder layer, by group, for LoRA 'all' and freeze module filters.
ATTN_LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP_LINEARS = ("gate_proj", "up_proj", "down_proj")


@dataclass
class ModelShape:
    model_type: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied: bool
    experts: int = 0  # 0 = dense
    experts_per_token: int = 0
    params: list[Shape] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    vision: Any = None  # engine.plan.vision_shape.VisionShape of a vision-language model (its tensors are in params)
    config: dict = field(default_factory=dict)  # the whole config.json (image tokens are read from it)

    @property
    def approximate(self) -> bool:
        return self.experts > 0 or bool(self.vision is not None and self.vision.approximate)

    @property
    def total(self) -> int:
        return sum(p.numel for p in self.params)


def text_config(config: dict) -> dict:
    """Multimodal wrappers (Gemma3, Qwen2-VL ...) keep the decoder's fields under ``text_config``."""
    inner = config.get("text_config")
    if isinstance(inner, dict) and "hidden_size" not in config:
        merged = dict(inner)
        merged.setdefault("model_type", config.get("model_type", ""))
        return merged
    return config


def _int(cfg: dict, *keys: str, default: int | None = None) -> int:
    for key in keys:
        value = cfg.get(key)
        if isinstance(value, int) and value > 0:
            return value
    if default is None:
        raise ValueError(f"model config.json has no {' / '.join(keys)}: cannot plan memory for it")
    return default


# The language models inside vision-language families, as the text families they are built like
TEXT_OF = {
    "qwen2_vl": "qwen2",
    "qwen2_vl_text": "qwen2",
    "qwen2_5_vl": "qwen2",
    "qwen2_5_vl_text": "qwen2",
    "qwen3_vl": "qwen3",
    "qwen3_vl_text": "qwen3",
}


def model_shape(config: dict[str, Any]) -> ModelShape:
    """Every parameter tensor of the model, named as transformers names them; a vision-language model's vision tower
    and projector too (engine.plan.vision_shape), after the language model's."""
    cfg = text_config(config)
    mtype = str(cfg.get("model_type", "llama"))
    if mtype == "llava":  # a flat LLaVA config: its language model is a Llama
        mtype = "llama"
    mtype = TEXT_OF.get(mtype, mtype)
    h = _int(cfg, "hidden_size", "n_embd", "d_model")
    n_layers = _int(cfg, "num_hidden_layers", "n_layer")
    heads = _int(cfg, "num_attention_heads", "n_head")
    kv = _int(cfg, "num_key_value_heads", default=heads)
    hd = _int(cfg, "head_dim", default=h // heads)
    inter = _int(cfg, "intermediate_size", "ffn_dim", default=4 * h)
    vocab = _int(cfg, "vocab_size")
    tied = bool(cfg.get("tie_word_embeddings", mtype.startswith("gemma")))
    experts = _int(cfg, "num_local_experts", "num_experts", default=0)
    # Qwen-MoE experts are narrower than the dense intermediate_size (moe_intermediate_size); Mixtral's are not
    e_inter = _int(cfg, "moe_intermediate_size", default=inter)
    shape = ModelShape(
        mtype,
        h,
        n_layers,
        heads,
        kv,
        hd,
        inter,
        vocab,
        tied,
        experts,
        _int(cfg, "num_experts_per_tok", default=2 if experts else 0),
    )
    qkv_bias = bool(cfg.get("attention_bias", False)) or mtype in ("qwen2", "qwen2_moe")
    o_bias = bool(cfg.get("attention_bias", False)) and mtype not in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe")
    mlp_bias = bool(cfg.get("mlp_bias", False))
    ps = shape.params
    ps.append(Shape("model.embed_tokens.weight", (vocab, h)))
    for i in range(n_layers):
        pre = f"model.layers.{i}."
        for name, out, inp, bias in (
            ("q_proj", heads * hd, h, qkv_bias),
            ("k_proj", kv * hd, h, qkv_bias),
            ("v_proj", kv * hd, h, qkv_bias),
            ("o_proj", h, heads * hd, o_bias),
        ):
            ps.append(Shape(f"{pre}self_attn.{name}.weight", (out, inp), name, i))
            if bias:
                ps.append(Shape(f"{pre}self_attn.{name}.bias", (out,), "", i))
        if mtype in ("qwen3", "qwen3_moe", "gemma3", "gemma3_text", "olmo2"):
            ps.append(Shape(f"{pre}self_attn.q_norm.weight", (hd,), "", i))
            ps.append(Shape(f"{pre}self_attn.k_norm.weight", (hd,), "", i))
        if experts:
            ps.append(Shape(f"{pre}mlp.gate.weight", (experts, h), "gate", i))
            for e in range(experts):
                for name, out, inp in (("gate_proj", e_inter, h), ("up_proj", e_inter, h), ("down_proj", h, e_inter)):
                    ps.append(Shape(f"{pre}mlp.experts.{e}.{name}.weight", (out, inp), name, i))
        else:
            for name, out, inp in (("gate_proj", inter, h), ("up_proj", inter, h), ("down_proj", h, inter)):
                ps.append(Shape(f"{pre}mlp.{name}.weight", (out, inp), name, i))
                if mlp_bias:
                    ps.append(Shape(f"{pre}mlp.{name}.bias", (out,), "", i))
        norms = ["input_layernorm", "post_attention_layernorm"]
        if mtype.startswith(("gemma2", "gemma3")):
            norms += ["pre_feedforward_layernorm", "post_feedforward_layernorm"]
        for norm in norms:
            ps.append(Shape(f"{pre}{norm}.weight", (h,), "", i))
    ps.append(Shape("model.norm.weight", (h,)))
    if not tied:
        ps.append(Shape("lm_head.weight", (vocab, h), "lm_head"))
    shape.config = config
    shape.vision = vision_shape(config, h)
    if shape.vision is not None:
        ps += shape.vision.params
        if shape.vision.approximate:
            shape.notes.append(message("plan.vision_approx", model_type=str(config.get("model_type", ""))))
    if experts:
        shape.notes.append(message("plan.moe", experts=experts, per_token=shape.experts_per_token))
    if mtype not in (
        "llama",
        "mistral",
        "qwen2",
        "qwen3",
        "gemma",
        "gemma2",
        "gemma3",
        "gemma3_text",
        "mixtral",
        "qwen2_moe",
        "qwen3_moe",
    ):
        shape.notes.append(message("plan.unknown_arch", model_type=mtype))
    return shape


def param_counts(config: dict[str, Any]) -> dict:
    """Total parameter count and the shape of every tensor (tied embeddings counted once)."""
    shape = model_shape(config)
    return {
        "total": shape.total,
        "shapes": {p.name: list(p.shape) for p in shape.params},
        "approximate": shape.approximate,
    }


@dataclass
class Trainable:
    """What one spec trains: full-size trainable tensors and the LoRA/DoRA adapter tensors added by PEFT."""

    base_numel: int = 0  # trainable parameters of the base model
    base_tensors: int = 0
    adapter_numel: int = 0  # LoRA A/B (+ DoRA magnitude) parameters
    adapter_tensors: int = 0
    lora_targets: list[Shape] = field(default_factory=list)  # base Linear weights that got an adapter
    parts: set[str] = field(default_factory=set)  # the parts that learn: "" language model, "vision", "projector"

    @property
    def numel(self) -> int:
        return self.base_numel + self.adapter_numel

    @property
    def tensors(self) -> int:
        return self.base_tensors + self.adapter_tensors


def oft_blocks(oft, fan_in: int) -> tuple[int, int]:
    """(blocks, block size) of an OFT layer with ``fan_in`` inputs: one of rank / block size is given (the spec's
    rule), the other follows from r x b = fan_in."""
    if oft.block_size:
        return max(1, fan_in // oft.block_size), oft.block_size
    return oft.rank, max(1, fan_in // max(oft.rank, 1))


def frozen_parts(spec, shape: ModelShape) -> set[str]:
    """The parts of a vision-language model that ``model.vision``'s switches keep frozen (engine.trainer.vision's
    ``frozen_prefixes``); none for a text model."""
    if shape.vision is None:
        return set()
    v = spec.model.vision
    return {
        part
        for part, frozen in (
            ("vision", v.freeze_vision_tower),
            ("projector", v.freeze_multi_modal_projector),
            ("", v.freeze_language_model),
        )
        if frozen
    }


LAYER_RE = re.compile(r"\.layers\.(\d+)\.")


def lora_target_shapes(spec, shape: ModelShape, targets: list[str] | None = None) -> list[Shape]:
    """Linear weights PEFT wraps: 'all' = every Linear in the decoder layers (PEFT's all-linear, lm_head excluded);
    on a vision-language model, the Linears outside the frozen parts (engine.trainer.vision's ``lora_targets``).
    ``targets``: another adapter's list (OFT's); LoRA's by default."""
    targets = spec.method.lora.targets if targets is None else targets
    frozen = frozen_parts(spec, shape)
    linears = [p for p in shape.params if p.linear and p.linear != "lm_head" and p.part not in frozen]
    if "all" in targets:
        return linears
    wanted = set(targets)
    return [p for p in linears if p.linear in wanted]


def trainable(spec, shape: ModelShape) -> Trainable:
    """Trainable tensors under ``spec.method`` (the rules engine.trainer.model applies)."""
    m = spec.method
    out = Trainable()
    frozen = frozen_parts(spec, shape)
    if m.finetuning == "full":
        for p in shape.params:
            if p.part not in frozen:
                out.base_numel += p.numel
                out.parts.add(p.part)
                out.base_tensors += 1
        return out
    if m.finetuning == "freeze":
        first = max(shape.layers - m.freeze.trainable_layers, 0)
        mods = m.freeze.trainable_modules
        extra = m.freeze.extra_modules
        for p in shape.params:
            if p.part in frozen:
                continue
            # same matching as engine.trainer.model.apply_freeze: ".layers.N." in the name (a CLIP / SigLIP tower's
            # encoder layers match it too), ".name." inside ".<parameter name>"
            layer = p.layer
            if p.part and (hit := LAYER_RE.search(p.name)):
                layer = int(hit.group(1))
            named = not mods or any(f".{x}." in f".{p.name}" for x in mods)
            in_layer = layer is not None and layer >= first and named
            if in_layer or any(f".{x}." in f".{p.name}" for x in extra):
                out.base_numel += p.numel
                out.parts.add(p.part)
                out.base_tensors += 1
        return out
    if m.finetuning == "oft":
        # peft's OFT: per targeted Linear, in_features / b blocks of b x b skew-symmetric generators stored as their
        # b (b - 1) / 2 free entries (b the block size, or in_features / r); counted like LoRA's A/B otherwise
        out.lora_targets = lora_target_shapes(spec, shape, m.oft.targets)
        for p in out.lora_targets:
            blocks, size = oft_blocks(m.oft, p.shape[1])
            out.adapter_numel += blocks * size * (size - 1) // 2
            out.parts.add(p.part)
            out.adapter_tensors += 1
        return out
    r = m.lora.rank
    out.lora_targets = lora_target_shapes(spec, shape)
    for p in out.lora_targets:
        fan_out, fan_in = p.shape
        out.adapter_numel += r * (fan_in + fan_out) + (fan_out if m.lora.use_dora else 0)
        out.parts.add(p.part)
        out.adapter_tensors += 3 if m.lora.use_dora else 2
    return out


def trainable_param_count(spec, config: dict[str, Any]) -> int:
    """Number of trainable parameters for ``spec`` on the model described by ``config``."""
    return trainable(spec, model_shape(config)).numel
