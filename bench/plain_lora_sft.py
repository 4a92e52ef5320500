"""A plain LoRA SFT script, written the way a user writes one from the transformers + PEFT docs: the baseline that
bench/throughput.py races the engine against.

Heavy (torch, transformers, peft, datasets); run as a subprocess. Alpaca rows (instruction/input/output, system,
history) -> chat messages -> the tokenizer's chat template; prompt tokens masked with -100 (only the final answer
is trained, as most tutorials do); DataCollatorForSeq2Seq pads each batch; Trainer + LoraConfig. No packing.

The one addition a user would not write is ``--timing-file``: a callback that appends (step, time, tokens seen,
loss) at every log, so the benchmark measures the training steps only, exactly as it does from the engine's events;
it also records when the data is ready.

Options, off by default: ``--train-all-turns`` trains every assistant turn and tokenises each prompt / answer
segment on its own (what LLaMA-Factory and the engine do; bench/throughput.py and bench/lf_defaults.py set it and
``--data-seed``, so the script sees the engine's tokens in the engine's order); for bench/lf_defaults.py:
``--gradient-checkpointing`` (reentrant, LLaMA-Factory's use_reentrant_gc default); ``--pad-to-multiple-of``
(LLaMA-Factory pads sft batches to a multiple of 8); ``--collator flatten`` (transformers'
DataCollatorWithFlattening: padding-free batches); ``--no-cache`` (model.config.use_cache = False, as LLaMA-Factory
sets for training; without it a flattened batch's samples would attend to each other, see
engine/trainer/dataset.py PackingCollator); ``--warmup-ratio``.
"""

from __future__ import annotations

import argparse
import json

from plain_common import add_common_args, lora_model, marker, tokenizer_for


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(p, max_steps=30, batch_size=4)
    p.add_argument("--data", required=True, help="alpaca-format JSON file")
    p.add_argument("--max-samples", type=int, default=0)
    p.add_argument("--cutoff-len", type=int, default=256)
    p.add_argument("--logging-steps", type=int, default=1)
    p.add_argument("--warmup-ratio", type=float, default=0.0, help="used when --warmup-steps is 0")
    p.add_argument("--data-seed", type=int, default=None)
    p.add_argument("--train-all-turns", action="store_true")
    p.add_argument("--gradient-checkpointing", action="store_true")
    p.add_argument("--collator", choices=["pad", "flatten"], default="pad")
    p.add_argument("--pad-to-multiple-of", type=int, default=None)
    p.add_argument("--no-cache", action="store_true")
    args = p.parse_args()

    mark = marker(args.timing_file)

    from datasets import Dataset
    from transformers import (
        DataCollatorForSeq2Seq,
        DataCollatorWithFlattening,
        Trainer,
        TrainerCallback,
        TrainingArguments,
        set_seed,
    )

    set_seed(args.seed)

    tokenizer = tokenizer_for(args.model)

    with open(args.data, encoding="utf-8") as fh:
        rows = json.load(fh)
    if args.max_samples:
        rows = rows[: args.max_samples]

    def to_messages(row: dict) -> list[dict]:
        messages = [{"role": "system", "content": row["system"]}] if row.get("system") else []
        for user, assistant in row.get("history") or []:
            messages += [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
        prompt = row["instruction"] + ("\n" + row["input"] if row.get("input") else "")
        return messages + [{"role": "user", "content": prompt}, {"role": "assistant", "content": row["output"]}]

    def tokenize(row: dict) -> dict:
        messages = to_messages(row)
        prompt = tokenizer.apply_chat_template(messages[:-1], tokenize=False, add_generation_prompt=True)
        full = tokenizer.apply_chat_template(messages, tokenize=False)
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        input_ids = tokenizer(full, add_special_tokens=False)["input_ids"][: args.cutoff_len]
        labels = [-100] * min(len(prompt_ids), len(input_ids)) + input_ids[len(prompt_ids) :]
        return {"input_ids": input_ids, "attention_mask": [1] * len(input_ids), "labels": labels}

    def render(messages: list[dict], **kwargs) -> str:
        return tokenizer.apply_chat_template(messages, tokenize=False, **kwargs)

    def tokenize_all_turns(row: dict) -> dict:
        """Every assistant turn trained; each prompt / answer segment tokenised on its own."""
        messages = to_messages(row)
        input_ids: list[int] = []
        labels: list[int] = []
        done = ""
        for k, message in enumerate(messages):
            if message["role"] != "assistant":
                continue
            prompt = render(messages[:k], add_generation_prompt=True)
            full = render(messages[: k + 1])
            for text, trained in ((prompt[len(done) :], False), (full[len(prompt) :], True)):
                ids = tokenizer(text, add_special_tokens=False)["input_ids"]
                input_ids += ids
                labels += ids if trained else [-100] * len(ids)
            done = full
        input_ids, labels = input_ids[: args.cutoff_len], labels[: args.cutoff_len]
        return {"input_ids": input_ids, "attention_mask": [1] * len(input_ids), "labels": labels}

    dataset = Dataset.from_list(rows).map(
        tokenize_all_turns if args.train_all_turns else tokenize, remove_columns=list(rows[0].keys())
    )
    mark({"event": "data_ready", "samples": len(dataset)})

    model = lora_model(args, use_cache=not args.no_cache)

    class Timing(TrainerCallback):
        def on_log(self, _args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                mark({"step": state.global_step, "tokens_seen": state.num_input_tokens_seen, "loss": logs["loss"]})

    training_args = TrainingArguments(
        output_dir=args.output_dir,
        max_steps=args.max_steps,
        per_device_train_batch_size=args.batch_size,
        gradient_accumulation_steps=args.grad_accum,
        learning_rate=args.lr,
        lr_scheduler_type=args.lr_scheduler,
        warmup_steps=args.warmup_steps if args.warmup_steps > 0 else args.warmup_ratio,
        weight_decay=args.weight_decay,
        max_grad_norm=args.max_grad_norm,
        logging_steps=args.logging_steps,
        save_steps=args.save_steps,
        seed=args.seed,
        data_seed=args.data_seed,
        gradient_checkpointing=args.gradient_checkpointing,
        gradient_checkpointing_kwargs={"use_reentrant": True} if args.gradient_checkpointing else None,
        report_to=args.report_to,
        use_cpu=True,
        include_num_input_tokens_seen="non_padding",
        disable_tqdm=True,
    )
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=dataset,
        data_collator=(
            DataCollatorWithFlattening()
            if args.collator == "flatten"
            else DataCollatorForSeq2Seq(tokenizer, padding=True, pad_to_multiple_of=args.pad_to_multiple_of)
        ),
        processing_class=tokenizer,
        callbacks=[Timing()],
    )
    result = trainer.train()
    trainer.save_model(args.output_dir + "/adapter")
    print(json.dumps(result.metrics))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
