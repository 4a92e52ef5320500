"""The vision tower and multimodal projector of a vision-language model, from its ``config.json`` alone (no weights,
no torch): every parameter tensor, named as transformers names it, and the tokens one image becomes.

Light: stdlib only. Families, as transformers 5 builds them (``AutoModelForImageTextToText``):
- ``llava`` (a CLIP or SigLIP tower, a two-layer projector; LLaVA 1.5 and its kin);
- ``qwen2_vl``, ``qwen2_5_vl``, ``qwen3_vl`` (a ViT over 14- or 16-pixel patches whose 2 x 2 neighbours are merged
  into one language-model token; Qwen3-VL adds learned positions and its deep-stack mergers);
- ``gemma3`` (a SigLIP tower, an average pool to ``mm_tokens_per_image`` and one projection matrix).
Another config with a ``vision_config`` is counted from its generic fields (width, depth, MLP width) and flagged
approximate. The tensors carry ``part`` "vision" or "projector" (the language model's are ""), so the planner applies
``model.vision``'s freeze switches as the trainer does (engine.trainer.vision).

Tokens per image: a Qwen image is shrunk to ``image_max_pixels`` (LLaMA-Factory's preprocessing, as the trainer does)
and then sized by the processor's ``smart_resize`` to a multiple of patch x merge pixels on each side; planned for a
square image of that many pixels, the largest an image can be. LLaVA and Gemma 3 resize every image to the tower's
``image_size``: a fixed count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from engine.data.images import fixed_tokens, sized_grid
from engine.plan.shapes import Shape

QWEN_FAMILIES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl")
FAMILIES = ("llava", *QWEN_FAMILIES, "gemma3")


@dataclass
class VisionShape:
    family: str
    hidden: int  # the tower's width
    intermediate: int
    layers: int
    heads: int
    params: list[Shape] = field(default_factory=list)  # part "vision" / "projector"
    approximate: bool = False

    def numel(self, part: str) -> int:
        return sum(p.numel for p in self.params if p.part == part)


def _shape(name: str, dims: tuple[int, ...], linear: str = "", part: str = "vision"):
    """A tower / projector tensor: outside the decoder's layers (``layer`` None), its part named."""
    return Shape(name, dims, linear, None, part)


def family(config: dict[str, Any]) -> str | None:
    """The vision family of a config, None for a text-only model."""
    if not isinstance(config.get("vision_config"), dict):
        return None
    mtype = str(config.get("model_type", ""))
    return mtype if mtype in FAMILIES else "other"


def _vit_block(pre: str, h: int, inter: int) -> list:
    """A CLIP / SigLIP encoder layer: q, k, v, out projections, two LayerNorms and fc1 / fc2, all with biases."""
    out = []
    for lin in ("q_proj", "k_proj", "v_proj", "out_proj"):
        out += _linear(f"{pre}self_attn.{lin}", h, h, "vision")
    out += _norm(f"{pre}layer_norm1", h, "vision") + _norm(f"{pre}layer_norm2", h, "vision")
    return out + _linear(f"{pre}mlp.fc1", inter, h, "vision") + _linear(f"{pre}mlp.fc2", h, inter, "vision")


def _clip_like(vc: dict, pre: str, *, siglip: bool) -> tuple[list, int, int, int, int]:
    h, inter = int(vc.get("hidden_size", 768)), int(vc.get("intermediate_size", 3072))
    layers, heads = int(vc.get("num_hidden_layers", 12)), int(vc.get("num_attention_heads", 12))
    p, size, ch = int(vc.get("patch_size", 16)), int(vc.get("image_size", 224)), int(vc.get("num_channels", 3))
    n = (size // p) ** 2
    ps = [_shape(f"{pre}embeddings.patch_embedding.weight", (h, ch, p, p))]
    if siglip:
        ps += [_shape(f"{pre}embeddings.patch_embedding.bias", (h,))]
        ps += [_shape(f"{pre}embeddings.position_embedding.weight", (n, h))]
    else:
        ps += [_shape(f"{pre}embeddings.class_embedding", (h,))]
        ps += [_shape(f"{pre}embeddings.position_embedding.weight", (n + 1, h))]
        ps += [_shape(f"{pre}pre_layrnorm.weight", (h,)), _shape(f"{pre}pre_layrnorm.bias", (h,))]
    for i in range(layers):
        ps += _vit_block(f"{pre}encoder.layers.{i}.", h, inter)
    ps += [_shape(f"{pre}post_layernorm.weight", (h,)), _shape(f"{pre}post_layernorm.bias", (h,))]
    if siglip and vc.get("vision_use_head", True):  # SigLIP's attention-pooling head (Gemma 3 turns it off)
        ps += [_shape(f"{pre}head.probe", (1, 1, h))]
        ps += [_shape(f"{pre}head.attention.in_proj_weight", (3 * h, h))]
        ps += [_shape(f"{pre}head.attention.in_proj_bias", (3 * h,))]
        ps += _linear(f"{pre}head.attention.out_proj", h, h, "vision") + _norm(f"{pre}head.layernorm", h, "vision")
        ps += _linear(f"{pre}head.mlp.fc1", inter, h, "vision") + _linear(f"{pre}head.mlp.fc2", h, inter, "vision")
    return ps, h, inter, layers, heads


def _linear(name: str, out: int, inp: int, part: str, bias: bool = True) -> list:
    """A Linear's weight (its short name, as LoRA targets name it) and bias."""
    ps = [_shape(f"{name}.weight", (out, inp), name.rsplit(".", 1)[-1], part)]
    return ps + ([_shape(f"{name}.bias", (out,), "", part)] if bias else [])


def _norm(name: str, dim: int, part: str, bias: bool = True) -> list:
    return [_shape(f"{name}.weight", (dim,), "", part)] + ([_shape(f"{name}.bias", (dim,), "", part)] if bias else [])


def _qwen(config: dict, text_hidden: int) -> tuple[list, int, int, int, int]:
    vc, fam = config["vision_config"], config["model_type"]
    pre, p = "model.visual.", int(vc.get("patch_size", 14))
    t, ch, m = int(vc.get("temporal_patch_size", 2)), int(vc.get("in_channels", vc.get("in_chans", 3))), merge(config)
    depth, heads = int(vc.get("depth", 32)), int(vc.get("num_heads", 16))
    if fam == "qwen2_vl":
        h = int(vc.get("embed_dim", 1280))
        inter = int(h * float(vc.get("mlp_ratio", 4)))
        out_h = int(vc.get("hidden_size", text_hidden))
    else:
        h, inter = int(vc.get("hidden_size", 1280)), int(vc.get("intermediate_size", 3420))
        out_h = int(vc.get("out_hidden_size", text_hidden))
    ps = [_shape(f"{pre}patch_embed.proj.weight", (h, ch, t, p, p))]
    if fam == "qwen3_vl":
        ps += [_shape(f"{pre}patch_embed.proj.bias", (h,))]
        ps += [_shape(f"{pre}pos_embed.weight", (int(vc.get("num_position_embeddings", 2304)), h))]
    rms = fam == "qwen2_5_vl"  # Qwen2.5-VL's blocks use RMSNorm (no bias)
    for i in range(depth):
        b = f"{pre}blocks.{i}."
        ps += _norm(f"{b}norm1", h, "vision", not rms) + _norm(f"{b}norm2", h, "vision", not rms)
        ps += _linear(f"{b}attn.qkv", 3 * h, h, "vision") + _linear(f"{b}attn.proj", h, h, "vision")
        if fam == "qwen2_vl":
            ps += _linear(f"{b}mlp.fc1", inter, h, "vision") + _linear(f"{b}mlp.fc2", h, inter, "vision")
        elif fam == "qwen2_5_vl":
            ps += _linear(f"{b}mlp.gate_proj", inter, h, "vision") + _linear(f"{b}mlp.up_proj", inter, h, "vision")
            ps += _linear(f"{b}mlp.down_proj", h, inter, "vision")
        else:
            ps += _linear(f"{b}mlp.linear_fc1", inter, h, "vision") + _linear(f"{b}mlp.linear_fc2", h, inter, "vision")
    wide = h * m * m  # 2 x 2 neighbouring patches side by side
    if fam == "qwen3_vl":
        stacked = len(vc.get("deepstack_visual_indexes") or [])
        mergers = [("merger", False)] + [(f"deepstack_merger_list.{k}", True) for k in range(stacked)]
        for name, post in mergers:  # the deep-stack mergers belong to the tower (LLaMA-Factory's vision keys)
            part = "vision" if post else "projector"
            ps += _norm(f"{pre}{name}.norm", wide if post else h, part)
            ps += _linear(f"{pre}{name}.linear_fc1", wide, wide, part)
            ps += _linear(f"{pre}{name}.linear_fc2", out_h, wide, part)
    else:
        ps += _norm(f"{pre}merger.ln_q", h, "projector", fam == "qwen2_vl")
        ps += _linear(f"{pre}merger.mlp.0", wide, wide, "projector")
        ps += _linear(f"{pre}merger.mlp.2", out_h, wide, "projector")
    return ps, h, inter, depth, heads


def vision_shape(config: dict[str, Any], text_hidden: int) -> VisionShape | None:
    """The tower and projector tensors of ``config`` (a vision-language model's whole config), None for text-only."""
    fam = family(config)
    if fam is None:
        return None
    vc = config["vision_config"]
    approx = False
    if fam in QWEN_FAMILIES:
        ps, h, inter, layers, heads = _qwen(config, text_hidden)
    else:
        siglip = fam == "gemma3" or "siglip" in str(vc.get("model_type", ""))
        approx = fam == "other"
        ps, h, inter, layers, heads = _clip_like(vc, "model.vision_tower.", siglip=siglip)
        if fam == "gemma3":
            ps += [_shape("model.multi_modal_projector.mm_input_projection_weight", (h, text_hidden), "", "projector")]
            ps += _norm("model.multi_modal_projector.mm_soft_emb_norm", h, "projector", bias=False)
        else:  # LLaVA's two linears (their inputs: the chosen feature layers side by side)
            feats = config.get("vision_feature_layer", -2)
            n = len(feats) if isinstance(feats, list) else 1
            bias = bool(config.get("multimodal_projector_bias", True))
            ps += _linear("model.multi_modal_projector.linear_1", text_hidden, h * n, "projector", bias)
            ps += _linear("model.multi_modal_projector.linear_2", text_hidden, text_hidden, "projector", bias)
    return VisionShape(fam, h, inter, layers, heads, ps, approx)


def merge(config: dict) -> int:
    return int(config["vision_config"].get("spatial_merge_size", 2))


def image_grid(config: dict[str, Any], max_pixels: int) -> tuple[int, int]:
    """(patches through the tower, tokens in the language model) for one image of at most ``max_pixels`` pixels."""
    vc, fam = config["vision_config"], family(config)
    if fam in QWEN_FAMILIES:  # a square image of max_pixels (the largest an image becomes), as the processor sizes it
        side = math.isqrt(max_pixels)
        return sized_grid(config, side, side, max_pixels, 1)
    p, size = int(vc.get("patch_size", 16)), int(vc.get("image_size", 224))
    n = (size // p) ** 2
    fixed = fixed_tokens(config)  # the count the Datasets tab uses too (LLaVA's image_seq_length first)
    if fam == "gemma3":
        return n, fixed or 256
    if fam == "llava":  # the tower also sees the class token
        return n + 1, fixed if fixed is not None else n
    return n, n


def tower_saved_bytes(vs: VisionShape, a: int) -> float:
    """Bytes autograd keeps per patch for one tower block when the tower trains: the LayerNorm outputs read by the
    projections, q / k / v and the attention output, the MLP's two activations, and the norms' statistics."""
    h, i = vs.hidden, vs.intermediate
    mlp = 3 * i if vs.family == "qwen2_5_vl" else 2 * i  # gated MLP: gate, up and their product
    return a * (h + 3 * h + h + h + mlp) + 2 * 8


def activation_bytes(spec, shape, tr, dt: dict, samples: int, per) -> int:
    """Bytes autograd keeps for the images of ``samples`` samples, each holding ``per``'s images
    (``engine.plan.vision_data.SampleImages``: the data's heaviest sample): the tower's blocks when the tower
    learns (only each block's input under gradient checkpointing, plus the block being recomputed), the projector's
    inputs and hidden layer when it learns or the tower below it does. Nothing when only the language model learns:
    the frozen tower's output enters the language model as its embeddings, counted with the sequence there."""
    vs = shape.vision
    if vs is None or not ({"vision", "projector"} & tr.parts):
        return 0
    patches, tokens = per.patches, per.tokens
    a = dt["compute"]
    total = 0.0
    if "vision" in tr.parts:
        block = tower_saved_bytes(vs, a)
        if spec.train.gradient_checkpointing == "on":
            total += patches * (vs.layers * a * vs.hidden + block)
        else:
            total += patches * vs.layers * block
    wide = vs.hidden * (merge(shape.config) ** 2 if vs.family in QWEN_FAMILIES else 1)
    total += tokens * a * (wide + 2 * shape.hidden)  # the projector's input, its hidden layer and activation
    return int(samples * total)


def notes(spec, shape, tr, seq: int, per) -> list:
    """What the plan counted for the images, said once: the tower's and projector's sizes and what learns, the
    tokens one image becomes, the images of the data's heaviest sample (``per``) and how much of the cutoff they
    are."""
    from engine.plan.messages import message

    vs = shape.vision
    pixels = spec.model.vision.image_max_pixels
    patches, tokens = image_grid(shape.config, pixels)
    learns = ", ".join(sorted(p for p in ("vision", "projector") if p in tr.parts)) or "-"
    out = [
        message(
            "plan.vision",
            tower=_millions(vs.numel("vision")),
            projector=_millions(vs.numel("projector")),
            learns=learns,
            patches=patches,
            tokens=tokens,
            pixels=pixels,
            per_image=("image_max_pixels" if vs.family in QWEN_FAMILIES else "image_size"),
        )
    ]
    if per.read:
        out.append(message("plan.vision_sample", rows=per.rows, images=per.images, tokens=per.tokens))
    else:
        out.append(message("plan.vision_unread"))
    if per.tokens >= seq:
        out.append(message("plan.vision_over_cutoff", images=per.images, tokens=per.tokens, cutoff=seq))
    return out


def _millions(n: int) -> str:
    return f"{n / 1e6:.1f}M" if n >= 1e5 else f"{n:,}"


def details(spec, shape, tr, per) -> dict:
    """The plan's figures for the images (``MemoryPlan.details["vision"]``)."""
    patches, tokens = image_grid(shape.config, spec.model.vision.image_max_pixels)
    return {
        "family": shape.vision.family,
        "tower_params": shape.vision.numel("vision"),
        "projector_params": shape.vision.numel("projector"),
        "patches_per_image": patches,
        "tokens_per_image": tokens,
        "images_per_sample": per.images,
        "image_patches_per_sample": per.patches,
        "image_tokens_per_sample": per.tokens,
        "image_rows_read": per.rows,
        "learning_parts": sorted(x or "language_model" for x in tr.parts),
    }
