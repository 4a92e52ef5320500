"""Parameter shapes and counts of a decoder model from its ``config.json`` alone (no weights, no torch).

Light: stdlib only. Covers Llama-shaped decoders (Llama, Mistral, Qwen2/Qwen3, Gemma/Gemma2/Gemma3 text) with
grouped-query attention, tied embeddings and explicit ``head_dim``; mixture-of-experts configs (``num_local_experts`` /
``num_experts``) are counted as dense experts and flagged approximate. Which tensors a spec trains
(full / freeze / LoRA incl. DoRA) is decided here too, so the planner and the tests share one definition.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.plan.messages import message

# Linear modules inside one decoder layer, by group, for LoRA 'all' and freeze module filters.
ATTN_LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP_LINEARS = ("gate_proj", "up_proj", "down_proj")


@dataclass
class Shape:
    """One parameter tensor: full name (as in the HF module tree), shape, and whether it belongs to a Linear."""

    name: str
    shape: tuple[int, ...]
    linear: str = ""  # the Linear's short name (q_proj, ...) for weights of linear layers, else ""
    layer: int | None = None  # decoder layer index, None outside the layers

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


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

    @property
    def approximate(self) -> bool:
        return self.experts > 0

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


def model_shape(config: dict[str, Any]) -> ModelShape:
    """Every parameter tensor of the model, named as transformers names them."""
    cfg = text_config(config)
    mtype = str(cfg.get("model_type", "llama"))
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


def lora_target_shapes(spec, shape: ModelShape, targets: list[str] | None = None) -> list[Shape]:
    """Linear weights PEFT wraps: 'all' = every Linear in the decoder layers (PEFT's all-linear, lm_head excluded).
    ``targets``: another adapter's list (OFT's); LoRA's by default."""
    targets = spec.method.lora.targets if targets is None else targets
    linears = [p for p in shape.params if p.linear and p.linear != "lm_head"]
    if "all" in targets:
        return linears
    wanted = set(targets)
    return [p for p in linears if p.linear in wanted]


def trainable(spec, shape: ModelShape) -> Trainable:
    """Trainable tensors under ``spec.method`` (the rules engine.trainer.model applies)."""
    m = spec.method
    out = Trainable()
    if m.finetuning == "full":
        out.base_numel = shape.total
        out.base_tensors = len(shape.params)
        return out
    if m.finetuning == "freeze":
        first = max(shape.layers - m.freeze.trainable_layers, 0)
        mods = m.freeze.trainable_modules
        extra = m.freeze.extra_modules
        for p in shape.params:
            # same matching as engine.trainer.model.apply_freeze: ".name." inside ".<parameter name>"
            in_layer = (
                p.layer is not None and p.layer >= first and (not mods or any(f".{x}." in f".{p.name}" for x in mods))
            )
            if in_layer or any(f".{x}." in f".{p.name}" for x in extra):
                out.base_numel += p.numel
                out.base_tensors += 1
        return out
    if m.finetuning == "oft":
        # peft's OFT: per targeted Linear, in_features / b blocks of b x b skew-symmetric generators stored as their
        # b (b - 1) / 2 free entries (b the block size, or in_features / r); counted like LoRA's A/B otherwise
        out.lora_targets = lora_target_shapes(spec, shape, m.oft.targets)
        for p in out.lora_targets:
            blocks, size = oft_blocks(m.oft, p.shape[1])
            out.adapter_numel += blocks * size * (size - 1) // 2
            out.adapter_tensors += 1
        return out
    r = m.lora.rank
    out.lora_targets = lora_target_shapes(spec, shape)
    for p in out.lora_targets:
        fan_out, fan_in = p.shape
        out.adapter_numel += r * (fan_in + fan_out) + (fan_out if m.lora.use_dora else 0)
        out.adapter_tensors += 3 if m.lora.use_dora else 2
    return out


def trainable_param_count(spec, config: dict[str, Any]) -> int:
    """Number of trainable parameters for ``spec`` on the model described by ``config``."""
    return trainable(spec, model_shape(config)).numel
