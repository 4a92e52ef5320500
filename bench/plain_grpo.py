"""A plain GRPO script, written the way a user writes one from the TRL and PEFT docs: the baseline that
bench/grpo_throughput.py races Studio's stage grpo against.

Heavy (torch, transformers, peft, datasets, trl, math-verify); run as a subprocess. Alpaca rows (instruction /
output) -> one user turn rendered by the tokenizer's chat template up to the assistant header (a text prompt, as
TRL takes one) with the row's output as the ``answer`` column; three reward functions written here with TRL's reward
signature (a math-verify answer check, a "the number only" regex and the share of digits); TRL's GRPOConfig /
GRPOTrainer with peft's LoraConfig. Nothing of Studio is imported. ``--gradient-checkpointing`` defaults to off and
``--precision`` to fp32, where TRL's own defaults are on and bf16 (autocast, also on a CPU); the benchmark passes
what Studio's run chose.

The one addition a user would not write is ``--timing-file``: a callback that appends (time, step, loss, the
reward means TRL logs) at every log, so the benchmark measures the training steps only and compares the rewards
step by step; it also records when the data is ready.
"""

from __future__ import annotations

import argparse
import json
import re

from plain_common import add_common_args, lora_model, marker, tokenizer_for

COMPARED = ("reward", "kl", "completions/mean_length", "entropy", "step_time")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(p, max_steps=20, batch_size=8)
    p.add_argument("--data", required=True, help="alpaca-format JSON file (instruction, output)")
    p.add_argument("--num-generations", type=int, default=4)
    p.add_argument("--max-completion-length", type=int, default=8)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--beta", type=float, default=0.04)
    p.add_argument("--loss-type", default="dapo")
    p.add_argument("--epsilon", type=float, default=0.2)
    p.add_argument("--scale-rewards", default="group")
    p.add_argument("--math-weight", type=float, default=1.0)
    p.add_argument("--number-weight", type=float, default=0.5)
    p.add_argument("--digits-weight", type=float, default=0.5)
    p.add_argument("--gradient-checkpointing", choices=["on", "off"], default="off", help="TRL's default is on")
    p.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32", help="TRL's default is bf16")
    args = p.parse_args()

    mark = marker(args.timing_file)

    from datasets import Dataset
    from math_verify import parse, verify
    from transformers import TrainerCallback, set_seed
    from trl import GRPOConfig, GRPOTrainer

    set_seed(args.seed)
    tokenizer = tokenizer_for(args.model)

    with open(args.data, encoding="utf-8") as fh:
        rows = json.load(fh)
    prompts = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": r["instruction"]}], tokenize=False, add_generation_prompt=True
        )
        for r in rows
    ]
    dataset = Dataset.from_dict({"prompt": prompts, "answer": [r["output"] for r in rows]})
    mark({"event": "data_ready", "samples": len(dataset), "prompts": prompts})

    def math(prompts, completions, answer, **kwargs):
        scores = []
        for completion, gold in zip(completions, answer):
            parsed = parse(gold)
            scores.append(float(verify(parsed, parse(completion))) if parsed else None)
        return scores

    number = re.compile(r"\s*-?\d+\s*", re.DOTALL)

    def number_only(prompts, completions, **kwargs):
        return [1.0 if number.fullmatch(c.strip()) else 0.0 for c in completions]

    def digits(prompts, completions, **kwargs):
        return [sum(ch.isdigit() for ch in c) / max(1, len(c)) for c in completions]

    model = lora_model(args)

    class Timing(TrainerCallback):
        def on_log(self, _args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                keep = {k: v for k, v in logs.items() if k in COMPARED or k.startswith("rewards/")}
                mark({"step": state.global_step, "loss": logs["loss"], **keep})

    config = GRPOConfig(
        output_dir=args.output_dir,
        max_steps=args.max_steps,
        per_device_train_batch_size=args.batch_size,
        gradient_accumulation_steps=args.grad_accum,
        num_generations=args.num_generations,
        max_completion_length=args.max_completion_length,
        temperature=args.temperature,
        top_p=args.top_p,
        beta=args.beta,
        loss_type=args.loss_type,
        epsilon=args.epsilon,
        scale_rewards=args.scale_rewards,
        reward_weights=[args.math_weight, args.number_weight, args.digits_weight],
        learning_rate=args.lr,
        lr_scheduler_type=args.lr_scheduler,
        warmup_steps=args.warmup_steps,
        weight_decay=args.weight_decay,
        max_grad_norm=args.max_grad_norm,
        gradient_checkpointing=args.gradient_checkpointing == "on",
        bf16=args.precision == "bf16",
        fp16=args.precision == "fp16",
        seed=args.seed,
        logging_steps=1,
        save_steps=args.save_steps,
        report_to=args.report_to,
        use_cpu=True,
        disable_tqdm=True,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[math, number_only, digits],
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[Timing()],
    )
    trainer.train()
    trainer.save_model(args.output_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
