"""The memory plan of stage grpo (engine.plan.grpo_memory): the generation KV cache computed by hand from the model's
shape, the reference model only with beta > 0 and without LoRA, the sequence of prompt + completion, and the fit
ladder's GRPO steps."""

from __future__ import annotations

from engine.plan import fit as fit_lib
from engine.plan.planner import plan
from engine.spec.schema import parse_spec

# A 7B-like Llama: 32 layers, 8 KV heads of 128 dims
CONFIG = {
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
    "torch_dtype": "bfloat16",
}


def grpo(finetuning="full", train=None, **g):
    grpo = {"num_generations": 8, "max_prompt_length": 512, "max_completion_length": 1024, "beta": 0.04}
    return parse_spec(
        {
            "model": {"name_or_path": "org/llama"},
            "method": {
                "stage": "grpo",
                "finetuning": finetuning,
                "grpo": {**grpo, "rewards": [{"kind": "math"}], **g},
            },
            "data": {"datasets": ["x"]},
            "train": {"per_device_batch_size": 8, "gradient_accumulation": 2, "precision": "bf16", **(train or {})},
            "launch": {"device": "cuda"},
        }
    )


def test_kv_cache_and_reference():
    mp = plan(grpo(), gpu_mem_gib=80, model_config=CONFIG)
    assert mp.details["seq_len"] == 512 + 1024
    # by hand: 2 (k, v) x 32 layers x 8 heads x 128 dims x 2 bytes = 131072 bytes a token; 16 completions of 1536
    kv = 2 * 32 * 8 * 128 * 2 * 1536 * 16
    assert kv == 3 * 1024**3
    assert any("generating 16 completions" in n and "3.00 GiB" in n for n in mp.notes), mp.notes
    assert mp.components["reference_model"] > 0  # full fine-tuning with beta 0.04: TRL loads a frozen copy
    assert plan(grpo(beta=0.0), gpu_mem_gib=80, model_config=CONFIG).components["reference_model"] == 0
    assert plan(grpo("lora"), gpu_mem_gib=80, model_config=CONFIG).components["reference_model"] == 0


def test_generation_can_be_the_peak():
    """One completion per micro-step with checkpointing, but 64 generated at once: the KV cache is the peak."""
    few = {"per_device_batch_size": 1, "gradient_accumulation": 64, "gradient_checkpointing": "on"}
    mp = plan(grpo("lora", train=few, num_generations=8), gpu_mem_gib=80, model_config=CONFIG)
    assert mp.peak_phase == "generation"
    assert mp.components["activations"] == 2 * 32 * 8 * 128 * 2 * 1536 * 64  # the KV cache, 12 GiB


def test_fit_ladder_has_grpo_steps():
    steps = [str(s) for s, _ in fit_lib._ladder(grpo(), CONFIG)]
    assert any("GRPO beta 0.04 -> 0" in s for s in steps)
    assert any("max completion length 1024 -> 512" in s for s in steps)
    assert any("GRPO group 8 -> 4" in s for s in steps)
    result = fit_lib.fit(grpo(), 40, model_config=CONFIG)
    assert result.spec.method.stage == "grpo" and result.steps
