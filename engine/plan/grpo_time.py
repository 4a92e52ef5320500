"""Stage grpo in the time estimate (engine.plan.estimate): TRL's GRPOTrainer generates its completions before it
trains on them, and generating is sequential.

Light: stdlib only. Per process, as TRL's GRPOTrainer works (``per_device_train_batch_size`` counts completions, one
generation batch of per-device batch x accumulation completions per optimizer step, reused ``num_iterations`` times):
- completions trained = steps x per-device batch x accumulation; generated = trained / num_iterations;
- a completion's sequence = its prompt (the data's mean prompt tokens, at most ``max_prompt_length``) + up to
  ``max_completion_length`` tokens. The full length is assumed: a completion that ends at its EOS costs less, so the
  estimate is an upper bound for a model that answers short;
- FLOPs: forward and backward of every trained completion (``flops_per_token`` at the sequence's span), and one
  forward per generated completion for the generation itself (prompt and completion tokens), one for the reference
  model's log-probabilities (``beta`` > 0) and one for the old log-probabilities (``num_iterations`` > 1). The output
  layer runs on the completion's tokens only: TRL asks the model for their logits alone (``logits_to_keep``), and
  generate() for the last position's;
- decoding: each generation round decodes ``max_completion_length`` tokens one after the other, each step over the
  whole batch. On a GPU a step reads every weight once, so it takes at least the weights' bytes over the memory
  bandwidth (a roofline), and at least a fitted cost per layer (generate()'s kernel launches and Python, which is
  what a model of a few billion weights or fewer waits on): the larger of the two, added to the FLOPs' time. On the
  CPU the FLOPs
  are counted at the measured rate and two fitted costs are added: per generation round (scoring the rewards, the
  completions' bookkeeping) and per decode step (generate()'s sampling and cache, Python).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# Memory bandwidth per GPU in bytes/s, by the shown name of engine.plan.estimate.GPUS (datasheets).
BANDWIDTH = {
    "H200": 4.8e12,  # H200 datasheet: 4.8 TB/s HBM3e
    "H100 PCIe": 2.0e12,  # H100 datasheet, PCIe: 2 TB/s
    "H100 NVL": 3.9e12,  # H100 datasheet, NVL: 3.9 TB/s
    "H100": 3.35e12,  # H100 datasheet, SXM: 3.35 TB/s
    "GH200": 4.0e12,  # GH200 datasheet: 4 TB/s HBM3 (96 GB)
    "B200": 8.0e12,  # HGX B200 datasheet: 8 TB/s per GPU
    "A100": 2.039e12,  # A100 80GB SXM datasheet: 2,039 GB/s (the 40GB: 1,555)
    "A10G": 600e9,  # A10G (AWS G5): 600 GB/s GDDR6
    "A10": 600e9,  # A10 datasheet: 600 GB/s
    "L40S": 864e9,  # L40S datasheet: 864 GB/s
    "L40": 864e9,  # L40 datasheet: 864 GB/s
    "L4": 300e9,  # L4 datasheet: 300 GB/s
    "RTX A6000": 768e9,  # RTX A6000 datasheet: 768 GB/s
    "RTX 4090": 1008e9,  # Ada whitepaper: 4090 1,008 GB/s
    "RTX 3090": 936e9,  # GA102 whitepaper: 3090 936 GB/s
    "V100": 900e9,  # V100 SXM2 datasheet: 900 GB/s
    "T4": 320e9,  # T4 datasheet: 320 GB/s
    "MI300X": 5.3e12,  # AMD Instinct MI300X datasheet: 5.3 TB/s
    "MI250X": 3.2e12,  # AMD Instinct MI250X datasheet: 3.2 TB/s
}
# CPU, fitted by least squares on four demo GRPO runs (completions of 8 to 96 tokens, 4 to 30 steps; 2026-12-04,
# load 1.5-2) as their measured CPU time less the estimate of everything else (engine.plan.estimate's CPU model):
# within 1% of each; bench/results/estimate_error.md checks them with runs outside the fit too.
CPU_ROUND_SECONDS = 0.0286
CPU_DECODE_SECONDS = 0.00349
# GPU, per layer per decode step: one GRPO run on a lent H200 (bench/results/gpu_efficiency.md, 2026-12-04: ~0.5B,
# 24 layers, LoRA r16, 8 steps, 512 decode steps, 46.9 s measured) less the estimate of everything else. The
# bandwidth floor alone had said 0.2 ms a decode step; generate() took 1,000 times that. One run: a calibration,
# not yet a check.
GPU_DECODE_LAYER_SECONDS = 0.0037


@dataclass
class GrpoWork:
    prompt_tokens: float  # mean prompt tokens per completion
    sequence_tokens: float  # prompt + max_completion_length
    trained: int  # completions trained on, per process
    generated: int  # completions generated, per process
    rounds: int  # generation rounds per process
    decode_steps: int  # sequential decode steps per process (rounds x max_completion_length)
    flops: float  # per process, training and generation
    weight_bytes: float  # what one decode step reads


def prompt_tokens(spec, counts) -> float:
    """Mean prompt tokens of a row: its tokens less the answer's (the answer column is the rewards', never the
    model's input), at most ``max_prompt_length`` (TRL cuts longer prompts)."""
    per_row = (counts.tokens - counts.trained_tokens) / max(1, counts.samples)
    return min(float(spec.method.grpo.max_prompt_length), max(1.0, per_row))


def weight_bytes(spec, total_params: int) -> float:
    bits = spec.method.quantization.bits
    per = bits / 8 if bits else (4 if spec.train.precision == "fp32" else 2)
    return total_params * per


def head_training_flops(spec, head: int) -> float:
    """Training FLOPs per token of an output layer of ``head`` weights: its forward and its activations' gradient,
    its weights' gradient when it trains (full fine-tuning), its forward again when checkpointing recomputes."""
    per = 2.0 * head * (3 if spec.method.finetuning == "full" else 2)
    return per + (2.0 * head if spec.train.gradient_checkpointing == "on" else 0.0)


def work(
    spec, shape, counts, steps: int, *, flops_per_token, forward_per_token, total_params: int, head: int
) -> GrpoWork:
    """GRPO's work per process for ``steps`` optimizer steps. ``flops_per_token(span)``: training FLOPs per token;
    ``forward_per_token(span)``: one forward's; ``head``: the output layer's weights (vocabulary x hidden)."""
    g = spec.method.grpo
    batch = spec.train.per_device_batch_size * spec.train.gradient_accumulation
    prompt = prompt_tokens(spec, counts)
    seq = prompt + g.max_completion_length
    trained = steps * batch
    generated = math.ceil(trained / max(1, g.num_iterations))
    rounds = math.ceil(generated / max(1, batch))
    forwards = 1 + (g.beta > 0) + (g.num_iterations > 1)  # generating, the reference, the old log-probabilities
    train = seq * flops_per_token(seq) - prompt * head_training_flops(spec, head)
    forward = seq * forward_per_token(seq) - prompt * 2.0 * head
    flops = trained * train + forwards * generated * forward
    return GrpoWork(
        prompt, seq, trained, generated, rounds, rounds * g.max_completion_length, flops,
        weight_bytes(spec, total_params),
    )  # fmt: skip


def decode_seconds(w: GrpoWork, target: str, layers: int) -> float | None:
    """Generating's time beyond its FLOPs, per process: on a GPU each decode step's larger floor, the bandwidth's or
    the layers' (None when the GPU's bandwidth is not in the table); on the CPU the fitted costs per round and per
    decode step."""
    if target == "cpu":
        return w.rounds * CPU_ROUND_SECONDS + w.decode_steps * CPU_DECODE_SECONDS
    bw = BANDWIDTH.get(target)
    return None if bw is None else w.decode_steps * max(w.weight_bytes / bw, layers * GPU_DECODE_LAYER_SECONDS)
