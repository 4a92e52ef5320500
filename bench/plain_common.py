"""What bench/plain_lora_sft.py and bench/plain_grpo.py, the plain baselines the benchmarks race Studio against,
share: the options every training script of the docs has (model, data, steps, optimizer, LoRA, seed, saving), the
tokenizer with its pad token, the LoRA model of peft's docs, and ``--timing-file``'s marks. Like the baselines it
imports nothing of Studio, and the training stack only inside its functions; each baseline imports it by name from
its own folder (a script's folder is on its path).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable


def add_common_args(p: argparse.ArgumentParser, *, max_steps: int, batch_size: int) -> None:
    """The options both baselines take, with each one's defaults for the steps and the batch."""
    p.add_argument("--model", required=True)
    p.add_argument("--output-dir", required=True)
    p.add_argument("--max-steps", type=int, default=max_steps)
    p.add_argument("--batch-size", type=int, default=batch_size)
    p.add_argument("--grad-accum", type=int, default=1)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--lr-scheduler", default="cosine")
    p.add_argument("--warmup-steps", type=int, default=0)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--max-grad-norm", type=float, default=1.0)
    p.add_argument("--lora-r", type=int, default=8)
    p.add_argument("--lora-alpha", type=float, default=16)
    p.add_argument("--lora-dropout", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--save-steps", type=int, default=500)
    p.add_argument("--report-to", default="none")
    p.add_argument("--timing-file", default="")


def marker(timing_file: str) -> Callable[[dict], None]:
    """``mark(record)``: one JSON line with the time appended to ``--timing-file`` (nothing without one)."""

    def mark(record: dict) -> None:
        if timing_file:
            with open(timing_file, "a") as fh:
                fh.write(json.dumps({**record, "ts": time.time()}) + "\n")

    return mark


def tokenizer_for(model: str):
    """The model's tokenizer, its eos as the pad token when it has none."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def lora_model(args: argparse.Namespace, *, use_cache: bool = True):
    """The model in float32 with peft's LoRA on every linear layer, of the options' rank, alpha and dropout."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(args.model, dtype="float32")
    if not use_cache:
        model.config.use_cache = False
    config = LoraConfig(
        r=args.lora_r,
        lora_alpha=args.lora_alpha,
        lora_dropout=args.lora_dropout,
        target_modules="all-linear",
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, config)
