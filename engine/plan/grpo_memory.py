"""Stage grpo in the memory plan: the generation phase's KV cache and TRL's reference model, and the fit ladder's
GRPO steps.

Light: stdlib only. TRL's GRPOTrainer generates a whole generation batch per process at once (per-device batch x
gradient accumulation completions, ``steps_per_generation`` = accumulation), each up to ``max_prompt_length +
max_completion_length`` tokens, keeping keys and values of every layer: 2 x layers x kv_heads x head_dim x tokens x
completions elements in the compute dtype. The training phase then runs forward / backward on prompt + completion
sequences. A reference model is loaded only with ``beta > 0``, and with LoRA it is the base with the adapter off.
Each reward model (a reward of kind ``model``, engine.trainer.rewards.RewardModel) is a frozen sequence classifier in
the process: its parameters (the base's, from its config.json, without an lm_head, plus the one-score head) in bf16
on a GPU that has it, else float32.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from engine.core import weights


def sequence_tokens(spec) -> int:
    g = spec.method.grpo
    return g.max_prompt_length + g.max_completion_length


def generation_batch(spec) -> int:
    """Completions one process generates at once (TRL's generation batch / processes)."""
    return spec.train.per_device_batch_size * spec.train.gradient_accumulation


def kv_cache_bytes(spec, shape, dt: dict) -> int:
    per_token = 2 * shape.layers * shape.kv_heads * shape.head_dim * dt["compute"]
    return int(per_token * sequence_tokens(spec) * generation_batch(spec))


def needs_reference(spec) -> bool:
    return spec.method.grpo.beta > 0 and not spec.method.adapter


def ladder(spec) -> Iterator[tuple[str, dict, Callable[[dict], None]]]:
    """GRPO's own steps (catalog key, its parameters, change): no reference model (beta 0), shorter completions,
    a smaller group; each keeps the generation batch a multiple of the group."""
    g = spec.method.grpo
    if needs_reference(spec):
        yield "fit.grpo_beta", {"beta": g.beta}, lambda d: d["method"]["grpo"].update(beta=0.0)
    if g.max_completion_length >= 64:
        n = g.max_completion_length // 2
        change = {"max_completion_length": n}
        yield (
            "fit.grpo_completion",
            {"n": g.max_completion_length, "nn": n},
            lambda d: d["method"]["grpo"].update(change),
        )
    if g.num_generations >= 4 and g.num_generations % 2 == 0:
        n = g.num_generations // 2
        yield (
            "fit.grpo_group",
            {"n": g.num_generations, "nn": n},
            lambda d: d["method"]["grpo"].update(num_generations=n),
        )


def reward_model_params(given: str) -> int | None:
    """Parameters of the reward model ``given`` (a run, adapter or model folder), from its config.json (an adapter's
    base), or None when its weights or config cannot be read here (the spec's rules say why)."""
    from engine.plan.model_shape import model_shape

    try:
        found = weights.find(given)
    except weights.WeightsNotFound:
        return None
    folder = found.folder
    if found.kind == "adapter":
        folder = Path(found.base).expanduser()
    config = weights.read_json(folder / "config.json")
    try:
        shape = model_shape(config)
    except (ValueError, KeyError, TypeError):
        return None
    return sum(p.numel for p in shape.params if p.linear != "lm_head") + shape.hidden


def reward_models_bytes(spec, precision: str) -> int:
    """The reward models' weights in the training process (bf16 on a GPU run in bf16, else float32)."""
    if spec.method.stage != "grpo":
        return 0
    each = 2 if precision == "bf16" else 4
    total = 0
    for r in spec.method.grpo.rewards:
        if r.kind == "model" and r.model.strip():
            total += (reward_model_params(r.model.strip()) or 0) * each
    return total
