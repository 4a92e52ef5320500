"""The catalog of the memory planner's notes (``engine.plan.planner``, ``engine.plan.model_shape``), the auto-fit steps
(``engine.plan.fit``) and the speed advice (``engine.plan.advice``): a stable key and an English template, made into
``engine.core.messages.Message`` by ``message``. Light: stdlib only; ``studio.i18n`` holds the Chinese.
"""

from __future__ import annotations

from typing import Any

from engine.core.messages import Message, make

MESSAGES: dict[str, str] = {
    # plan notes
    "plan.no_config": "model.name_or_path: no model figures for {path}: {why}",
    "plan.moe": "mixture of experts ({experts} experts, {per_token} per token): expert weights are counted dense and "
    "activations per routed token, so the plan is approximate",
    "plan.vision": "vision-language model: vision tower {tower} and projector {projector} parameters (learning: "
    "{learns}); one image is {patches} patches in the tower and {tokens} tokens of the sequence (set by its "
    "{per_image}; image_max_pixels {pixels})",
    "plan.vision_sample": "images per sample read from the first {rows} rows of the data: planned for the heaviest "
    "sample, {images} image(s) making {tokens} tokens",
    "plan.vision_unread": "the data's images cannot be read before launch: planned for one image of the largest size "
    "per sample",
    "plan.vision_over_cutoff": "one sample's images ({images}) alone are {tokens} tokens, at least data.cutoff_len "
    "({cutoff}): raise cutoff_len or lower model.vision.image_max_pixels",
    "plan.vision_approx": "model_type {model_type!r}: its vision tower is counted from the generic fields of "
    "vision_config (width, depth, MLP width); the figures are approximate",
    "plan.unknown_arch": "model_type {model_type!r} is planned as a Llama-shaped decoder; check the numbers",
    "plan.sharded": "parameters sharded over {n} ranks (+ two gathered layers in flight)",
    "plan.offload_optimizer": "optimizer states offloaded to CPU RAM (DeepSpeed CPU Adam)",
    "plan.offload_params": "parameters offloaded to CPU RAM: large slowdown",
    "plan.eager": "eager attention materialises batch x heads x seq^2 scores: use sdpa or flash_attention_2",
    "plan.cpu": "device is cpu: the numbers are host memory for one process",
    "plan.oft": "OFT is planned like LoRA: r x b(b-1)/2 rotation parameters per targeted layer (r blocks of size b) "
    "and one rotated copy of each targeted layer's input kept for backward; the temporaries of building the rotation "
    "(Cayley transform) are not counted",
    "plan.optimizer_estimate": "{optimizer}: its optimizer state is an estimate (low-rank projections of every 2-D "
    "weight for GaLore / APOLLO, one moment per element for Adam-mini and Muon), not a calibrated figure",
    "plan.badam": "BAdam: Adam's state for one block of layers at a time (about one layer's share); the gradients of "
    "the whole model are still counted",
    "plan.mask_bias": "rows of several samples under the block-diagonal mask: sdpa keeps a row x row attention bias "
    "per layer for backward ({size} counted in activations): model.packed_attention auto or per_sample keeps none",
    "plan.liger": "Liger's fused linear cross-entropy: the logits are computed in chunks and never held whole",
    "plan.reference_model": "stage {stage} without LoRA keeps a frozen reference copy of the model (TRL's ref_model); "
    "LoRA needs none (its reference is the base with the adapter off)",
    "plan.reward_models": "stage grpo: the reward models score completions in the training process ({size}, "
    "in the reference / reward models row)",
    "plan.reward_head": "stage rm: a one-output score head replaces the LM head, so there are no vocabulary-sized "
    "logits; chosen and rejected answers run in one batch",
    # gradient checkpointing, as planned
    "plan.ckpt_on": "set on in the spec",
    "plan.ckpt_off": "set off in the spec",
    "plan.ckpt_auto_off": "auto: without it the run needs {need}, within {limit} (the {where} memory less a 10% "
    "margin for the plan's error), so activations are kept and nothing is recomputed",
    "plan.ckpt_auto_on": "auto: without it the run would need {need}, more than {limit} (the {where} memory less a "
    "10% margin), so activations are recomputed in backward",
    "plan.ckpt_auto_unknown": "auto: the memory of the target GPUs is unknown (no GPU here, none given), so it is on",
    # auto-fit steps
    "fit.batch": "per-device batch {b} -> {nb}, gradient accumulation {ga} -> {nga} (effective batch {effective} "
    "kept)",
    "fit.per_sample": "attention per sample in the padding-free / packed rows (model.packed_attention per_sample: "
    "the same results without the mask's row x row bias per layer)",
    "fit.grpo_beta": "GRPO beta {beta} -> 0 (no reference model is loaded; the policy is no longer held to it)",
    "fit.grpo_completion": "GRPO max completion length {n} -> {nn} tokens (a smaller generation KV cache)",
    "fit.grpo_group": "GRPO group {n} -> {nn} completions per prompt (method.grpo.num_generations)",
    "plan.grpo_kv": "stage grpo: generating {n} completions at once keeps a KV cache of {tokens} tokens each "
    "({size}, counted as activations while generating)",
    "fit.checkpointing": "gradient checkpointing on (activations recomputed in backward, ~30% slower)",
    "fit.zero1": "DeepSpeed ZeRO-1 (shards optimizer states over {n} GPUs)",
    "fit.zero2": "DeepSpeed ZeRO-2 (shards + gradients over {n} GPUs)",
    "fit.zero3": "DeepSpeed ZeRO-3 (shards + parameters over {n} GPUs)",
    "fit.offload_optimizer": "offload optimizer states to CPU (DeepSpeed ZeRO-{stage} + CPU Adam; slower steps)",
    "fit.offload_params": "offload parameters to CPU (ZeRO-3; large slowdown)",
    "fit.fsdp_offload": "FSDP parameter offload to CPU (large slowdown)",
    "fit.lora_rank": "LoRA rank {r} -> {nr}",
    "fit.freeze_vision_tower": "freeze the vision tower (model.vision.freeze_vision_tower, LLaMA-Factory's default): "
    "it keeps what it learned in pre-training",
    "fit.qlora_short": "4-bit QLoRA",
    "fit.qlora": "4-bit QLoRA (NF4 base, double quantization, LoRA adapters)",
    "fit.qlora_switch": "4-bit QLoRA (NF4 base, double quantization, LoRA adapters); switches {finetuning} "
    "fine-tuning to LoRA rank {rank}",
    "fit.keeping_offload": "{step} (keeping the offload steps)",
    "fit.instead_of_offload": "{step}, instead of the offload steps above (undone: 4-bit weights fit without them)",
    "fit.step": "{step}: {size} per GPU",
    "fit.refused": "{step}: refused ({reason})",
    # speed advice
    "advice.low_util": "GPU utilisation averages {util:.0f}%: the GPU waits. Check the items below (data loading, "
    "offload, batch size) and watch `nvidia-smi dmon -s u`.",
    "advice.fp32": "no mixed precision: set train.precision to bf16 (or fp16 on GPUs without bf16): ~2x faster, "
    "half the activation memory.",
    "advice.eager": "eager attention: set model.attn_implementation to sdpa or flash_attention_2.",
    "advice.ds_offload": "DeepSpeed offload moves states over PCIe every step: if memory allows, set offload_param "
    "and offload_optimizer to none (engine.plan.planner shows whether it still fits).",
    "advice.fsdp_offload": "FSDP parameter offload is slow: turn launch.fsdp.offload_params off if it fits.",
    "advice.small_batch": "per-device batch {batch} is small: raise train.per_device_batch_size toward the memory "
    "limit and lower gradient_accumulation to keep the effective batch.",
    "advice.checkpointing": "gradient checkpointing recomputes activations (~30% slower): turn it off if the plan "
    "still fits.",
    "advice.cpu_bound": "CPU is busy ({cpu:.0f}%) while the GPU idles: data loading is the bottleneck; raise "
    "data.preprocessing_workers, pre-tokenise, or turn on data.packing for short samples.",
    "advice.throughput_drop": "throughput dropped from {peak:.0f} to {now:.0f} tokens/s: look for another process on "
    "the GPU, thermal throttling, or checkpoint saves in the middle of steps.",
    "advice.packing_off": "packing is off: with many short samples, data.packing avoids computing on padding.",
    # time and cost (engine.plan.estimate, engine.plan.counts)
    "estimate.no_tokenizer": "tokens and steps unknown: {path} has no local tokenizer.json to count the data with",
    "estimate.approx_tokens": "tokens estimated at about 4 characters (or one CJK character) a token: {path} has no "
    "local tokenizer.json yet; the steps follow from the rows, the duration is approximate",
    "estimate.no_data": "tokens and steps unknown: the data cannot be read here ({why})",
    "estimate.approximate": "counted on an even sample of the rows, or a mix / held-out split taken in proportion: "
    "the token and step counts are approximate",
    "estimate.split": "{held} samples held out for evaluation (data.val_size): the training share is counted",
    "estimate.unknown_gpu": "GPU {gpu!r} is not in the throughput table ({known}): the duration is unknown",
    "estimate.grpo": "stage grpo: {generated} completions generated per process in {rounds} rounds ({steps} decode "
    "steps, one token at a time), each of {prompt} prompt + up to {tokens} completion tokens, counted at full length: "
    "completions that end sooner take less",
    "estimate.grpo_no_bandwidth": "the memory bandwidth of {gpu!r} is not in the table: decoding is counted by its "
    "FLOPs only, which underestimates it",
    "estimate.cpu": "CPU: the time one idle core takes, from a per-step cost and a FLOP rate measured on Studio's "
    "build machine (bench/results/estimate_calibration.md); a busy machine or another CPU takes its own time",
}


def message(key: str, /, **params: Any) -> Message:
    return make(MESSAGES, key, **params)
