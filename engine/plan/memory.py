"""Byte formulas behind engine.plan.planner: weights by dtype/quantization, optimizer states, activations, loss
buffers.

Light: stdlib only. Each formula mirrors what the libraries allocate (see the comments for the why), so the
planner can be calibrated term by term against a GPU (bench/plan_calibration.py).
"""

from __future__ import annotations

import math

from engine.plan.model_shape import ModelShape, Shape, Trainable, oft_blocks

NF4_BLOCK = 64  # bitsandbytes 4-bit blocksize: one absmax per 64 weights
DQ_BLOCK = 256  # double quantization: absmax quantized to uint8 in blocks of 256, fp32 second-level absmax
ADAM8_BLOCK = 256  # bitsandbytes blockwise 8-bit optimizer
ADAM8_MIN_SIZE = 4096  # smaller tensors keep 32-bit states (min_8bit_size)


def quant_linear_bytes(p: Shape, bits: int, double_quant: bool) -> int:
    n = p.numel
    if bits == 8:
        return n + 4 * p.shape[0]  # int8 weight + one fp32 scale (SCB) per output row
    blocks = math.ceil(n / NF4_BLOCK)
    if double_quant:
        # packed nibbles + uint8 absmax + fp32 absmax per 256 blocks + offset + the two code books
        return math.ceil(n / 2) + blocks + 4 * math.ceil(blocks / DQ_BLOCK) + 4 + 4 * 16 + 4 * 256
    return math.ceil(n / 2) + 4 * blocks + 4 * 16


def weight_bytes(spec, shape: ModelShape, tr: Trainable, dt: dict) -> tuple[int, int]:
    """(frozen base bytes, trainable base bytes) on one GPU before sharding. Adapters are counted by the caller."""
    m = spec.method
    if m.finetuning == "full":
        return 0, shape.total * dt["trainable"]
    if m.finetuning == "freeze":
        return (shape.total - tr.base_numel) * dt["base"], tr.base_numel * dt["trainable"]
    bits = m.quantization.bits
    if not bits:
        return shape.total * dt["base"], 0
    # bitsandbytes quantizes the Linear layers of the decoder; embeddings, lm_head, norms and biases stay 16-bit.
    total = 0
    for p in shape.params:
        if p.linear and p.linear != "lm_head" and len(p.shape) == 2:
            total += quant_linear_bytes(p, bits, m.quantization.double_quant)
        else:
            total += p.numel * dt["base"]  # fp32 after prepare_model_for_kbit_training
    return total, 0


def trainable_shapes(spec, shape: ModelShape, tr: Trainable) -> list[tuple[int, ...]]:
    """Shapes of the trainable tensors (needed by factored / size-thresholded optimizers)."""
    m = spec.method
    if m.finetuning == "oft":
        blocks = [oft_blocks(m.oft, p.shape[1]) for p in tr.lora_targets]
        return [(r, b * (b - 1) // 2) for r, b in blocks]
    if m.finetuning == "lora":
        out: list[tuple[int, ...]] = []
        for p in tr.lora_targets:
            fan_out, fan_in = p.shape
            out += [(m.lora.rank, fan_in), (fan_out, m.lora.rank)] + ([(fan_out,)] if m.lora.use_dora else [])
        return out
    if m.finetuning == "full":
        return [p.shape for p in shape.params]
    # freeze: approximate by scaling the layer shapes to the counted numel
    per = [p.shape for p in shape.params if p.layer == shape.layers - 1]
    return per * max(1, tr.base_tensors // max(len(per), 1))


def optimizer_bytes(spec, shape: ModelShape, tr: Trainable, param_bytes: int, precision: str) -> tuple[int, int, int]:
    """(optimizer state bytes on the GPU, unused CPU part, step temporaries) before sharding."""
    n = tr.numel
    opt = spec.train.optimizer
    ds = spec.launch.deepspeed if spec.launch.backend == "deepspeed" and spec.launch.deepspeed.zero_stage else None
    if ds is not None:
        # ZeRO keeps fp32 master weights + Adam m and v (fp32) whatever the client optimizer; with 16-bit training
        # the fp32 gradient partition is materialised for the step.
        if precision in ("bf16", "fp16"):
            return 12 * n, 0, 4 * n
        return 8 * n, 0, 0
    if opt == "adamw_torch":
        # torch AdamW: exp_avg + exp_avg_sq in the parameter's dtype; foreach makes one sqrt copy during step
        return 2 * n * param_bytes, 0, n * param_bytes
    if opt in ("adamw_8bit", "paged_adamw_8bit"):
        total = 0
        for s in trainable_shapes(spec, shape, tr):
            k = math.prod(s)
            total += 8 * k if k < ADAM8_MIN_SIZE else 2 * (k + 4 * math.ceil(k / ADAM8_BLOCK))
        return total, 0, 0
    if opt == "adafactor":
        total = 0
        for s in trainable_shapes(spec, shape, tr):
            total += (s[0] + s[1]) * param_bytes if len(s) == 2 else math.prod(s) * param_bytes
        # HF Adafactor upcasts a 16-bit parameter and its grad to fp32 during its update (one tensor at a time)
        biggest = max((math.prod(s) for s in trainable_shapes(spec, shape, tr)), default=0)
        return total, 0, 3 * 4 * biggest
    shapes = trainable_shapes(spec, shape, tr)
    if opt in ("galore_adamw", "galore_adamw_8bit", "galore_adafactor", "apollo_adamw"):
        # Adam's two moments of each projected 2-D gradient (rank x the longer side) and its projector (the shorter
        # side x rank); other tensors keep full moments. An estimate: the projected modules are taken to be all 2-D.
        rank = spec.train.low_rank.rank
        total = sum(
            (2 * rank * max(s) + rank * min(s)) if len(s) == 2 and min(s) > rank else 2 * math.prod(s) for s in shapes
        )
        return total * param_bytes, 0, 0
    if opt == "adam_mini":  # first moment per element, one second moment per block
        return n * param_bytes, 0, 0
    if opt == "muon":  # momentum for 2-D weights (Muon), both Adam moments for the rest
        return sum(math.prod(s) * (1 if len(s) == 2 else 2) for s in shapes) * param_bytes, 0, n * param_bytes // 8
    if opt == "badam":  # Adam's moments for the active block only: about one decoder layer's share
        return 2 * n * param_bytes // max(shape.layers, 1), 0, 0
    return 0, 0, 0  # sgd without momentum keeps no state


def _saves_input(spec, tr: Trainable, p: Shape, first_trainable: int) -> bool:
    """Does autograd keep this Linear's input? Only when its weight (or its adapter) needs a gradient."""
    m = spec.method
    if m.finetuning == "full":
        return True
    if m.adapter:
        return any(t is p for t in tr.lora_targets)
    mods = m.freeze.trainable_modules
    return p.layer is not None and p.layer >= first_trainable and (not mods or any(f".{x}." in p.name for x in mods))


def layer_saved_bytes(spec, shape: ModelShape, tr: Trainable, dt: dict, layer: int, seq: int) -> float:
    """Bytes autograd keeps per token for one decoder layer (no checkpointing)."""
    m = spec.method
    h, hd, i = shape.hidden, shape.head_dim, shape.intermediate
    qd, kvd = shape.heads * hd, shape.kv_heads * hd
    a, r = dt["compute"], dt["residual"]
    first = shape.layers - m.freeze.trainable_layers if m.finetuning == "freeze" else 0
    if layer < first:
        return 0.0  # nothing below the first trainable layer needs a gradient
    lin = {p.linear: p for p in shape.params if p.layer == layer and p.linear and "experts" not in p.name}
    norm_trainable = m.finetuning == "full" or (m.finetuning == "freeze" and not m.freeze.trainable_modules)
    lora = m.adapter  # OFT: counted like LoRA, its rotated input in place of LoRA's rank-sized A output
    oft = m.finetuning == "oft"
    # A 16-bit compute copy of the input is made per call when the stream or the adapter is fp32 under autocast;
    # otherwise all linears reading one tensor share it.
    per_call_copy = (r != a) or (lora and dt["adapter"] != a)
    rank = m.lora.rank

    def inputs(names: tuple[str, ...]) -> float:
        saving = [n for n in names if n in lin and _saves_input(spec, tr, lin[n], first)]
        if not saving:
            return 0.0
        own_copy = per_call_copy or (lora and m.lora.dropout > 0)  # dropout output is a new tensor per target
        total = (len(saving) if own_copy else 1) * a * lin[saving[0]].shape[1]
        if oft:
            return total + sum(a * lin[n].shape[1] for n in saving)  # the rotated input, kept by the base Linear
        if lora:
            for n in saving:
                fan_out, fan_in = lin[n].shape
                total += a * rank  # lora_A output, kept by lora_B
                total += fan_in if m.lora.dropout > 0 else 0  # dropout mask (1 byte each)
                total += 2 * a * fan_out if m.lora.use_dora else 0  # base output and scaled adapter output
        return total

    norm = 4 * h + (r * h if norm_trainable else 0)
    n_norms = 4 if shape.model_type.startswith(("gemma2", "gemma3")) else 2
    kv_eff = kvd
    impl = spec.model.attn_implementation
    if impl != "flash_attention_2" and shape.kv_heads < shape.heads:
        kv_eff = qd  # repeat_kv materialises the expanded keys/values when a padding mask is passed
    if impl == "eager":
        attn = a * (qd + 2 * kv_eff) + shape.heads * seq * (4 + a)
    else:
        attn = a * (qd + 2 * kv_eff) + a * qd + 4 * shape.heads  # q, k, v, out, logsumexp
    attn += inputs(("q_proj", "k_proj", "v_proj")) + inputs(("o_proj",))
    mlp_i = i * (shape.experts_per_token if shape.experts else 1)
    bits = m.quantization.bits if m.adapter else 0
    # A bitsandbytes Linear returns its input's dtype (Linear4bit casts back, MatMul8bitLt computes in it), and a
    # k-bit model's norms feed it fp32 (prepare_model_for_kbit_training): the MLP's products are then fp32 tensors.
    o = r if bits else a
    # gate output (kept by the activation), activation output and up output (kept by their product)
    mlp = 3 * o * mlp_i + inputs(("gate_proj", "up_proj")) + inputs(("down_proj",))
    if bits == 8:
        # MatMul8bitLt keeps its input A for backward as passed (fp32 norm outputs, the attention output, the fp32
        # gate x up product), once per distinct input tensor
        mlp += r * h + r * mlp_i
        attn += r * h + a * qd
    return n_norms * norm + attn + mlp


def sequences_per_sample(spec) -> int:
    """Sequences one sample puts through the model with gradients: a pair's chosen and rejected answer (dpo, rm),
    else one (kto's KL pass and every reference pass run without gradients, keeping no activations)."""
    return 2 if spec.method.stage in ("dpo", "rm") else 1


def reference_bytes(spec, shape: ModelShape, dt: dict) -> int:
    """TRL's frozen reference model (dpo, kto), and sft's with ``train.loss`` asft (engine.trainer.sft_losses): a
    copy of the base in the policy's dtype, unless LoRA (whose reference is the base with the adapter off, so no
    copy; asft turns off OFT's adapter too)."""
    if spec.method.stage == "sft" and spec.train.loss == "asft":
        return 0 if spec.method.adapter else shape.total * dt["base"]
    if spec.method.stage == "grpo":  # TRL loads a reference only with beta > 0 (engine.plan.grpo_memory)
        from engine.plan.grpo_memory import needs_reference

        return shape.total * dt["base"] if needs_reference(spec) else 0
    if spec.method.stage not in ("dpo", "kto") or spec.method.finetuning == "lora":
        return 0
    if spec.method.stage == "dpo" and spec.method.dpo.loss_type in ("orpo", "simpo"):  # reference-free losses
        return 0
    return shape.total * dt["base"]


def activation_bytes(spec, shape: ModelShape, tr: Trainable, dt: dict, batch: int, seq: int, loss: int = 0) -> int:
    """Saved activations at the peak of forward + backward, beside the ``loss`` buffers (logits_bytes).

    Without checkpointing every layer's tensors are alive with the loss buffers at the start of backward. With it,
    the layer being recomputed comes after the loss buffers are freed (lm_head's backward is done first), so its
    tensors count only where they outgrow them."""
    tokens = batch * seq * sequences_per_sample(spec)
    per_layer = [layer_saved_bytes(spec, shape, tr, dt, k, seq) for k in range(shape.layers)]
    final = 4 * shape.hidden + dt["residual"] * shape.hidden  # final norm + lm_head input
    # A frozen fp32 lm_head (a k-bit model's, after prepare_model_for_kbit_training) under 16-bit autocast: autocast
    # caches casts of trainable leaves only, so its 16-bit copy is made in forward and kept for the input gradient.
    frozen_head = spec.method.adapter or spec.method.finetuning == "freeze"
    head = shape.vocab * shape.hidden * dt["compute"] if frozen_head and dt["base"] > dt["compute"] else 0
    if spec.train.gradient_checkpointing == "on":  # the planner resolves auto before it gets here
        # Each layer keeps its input; backward recomputes one layer at a time and holds its gradient buffers.
        kept = sum(dt["residual"] * shape.hidden for p in per_layer if p)
        work = max(per_layer, default=0) + 2 * dt["residual"] * shape.hidden
        return int(tokens * (kept + final) + head + max(0, tokens * work - loss))
    return int(tokens * (sum(per_layer) + final) + head)


def logits_bytes(spec, shape: ModelShape, dt: dict, batch: int, seq: int, *, fused: bool = False) -> int:
    """Loss buffers at the start of backward: fp32 log-softmax output (saved), its grad and the logits' grad.

    transformers upcasts logits to fp32 for the loss; forward holds 16-bit logits + fp32 copy + log-softmax
    (a + 8 bytes per vocab entry), backward 12: the larger one is the peak. With Liger's fused linear cross-entropy
    (``fused``) the logits never exist whole: it works through the tokens in chunks of about tokens x hidden / vocab,
    so its buffers are about one chunk of fp32 logits (tokens x hidden x 4) plus the fp32 gradient of the hidden
    states (tokens x hidden x 4).
    """
    tokens = batch * seq * sequences_per_sample(spec)
    if spec.method.stage == "rm":  # one fp32 score per token from the score head (the last one is the reward)
        return int(tokens * 3 * 4)
    if fused:
        return int(tokens * shape.hidden * 8)
    return int(tokens * shape.vocab * max(dt["compute"] + 8, 12))
