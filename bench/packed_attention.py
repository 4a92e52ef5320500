"""Per-sample sdpa against transformers' block-diagonal mask, on rows that hold several samples.

Run:  .venv/bin/python bench/packed_attention.py [--device cpu|cuda] [--hidden 512 --layers 7] [--samples 8]
      [--min-len 12 --max-len 40] [--steps 30] [--out bench/results/packed_attention_<device>.md]

One process, one model (a Llama built from config, LoRA r8 on every linear layer as a Studio LoRA run), two
attention implementations loaded from the same weights: ``sdpa`` (transformers builds the row's block-diagonal mask
from the position ids) and engine.trainer.attention's per-sample sdpa. Each step is one padding-free row of
``--samples`` samples of random lengths, forward + backward + AdamW, the two alternating on the same rows. Prints
the time per step of each, the ratio, the largest difference of the losses, and the memory autograd keeps for
backward after one forward of a row (each saved storage counted once: the mask path keeps a row-length-squared
attention bias per layer); writes a small table. This is the
measurement ``model.packed_attention: auto`` waits for on GPUs (bench/gpu_check.sh runs it with --device cuda).
"""

from __future__ import annotations

import argparse
import copy
import datetime
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--layers", type=int, default=7)
    p.add_argument("--vocab", type=int, default=1561, help="the demo tokenizer's size by default")
    p.add_argument("--samples", type=int, default=8, help="samples per padding-free row")
    p.add_argument("--min-len", type=int, default=12)
    p.add_argument("--max-len", type=int, default=40)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--dtype", default="auto", help="auto: float32 on the CPU, bfloat16 on a GPU")
    p.add_argument("--threads", type=int, default=1, help="CPU threads (the Studio CPU default per process)")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)

    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, LlamaConfig

    from engine.trainer import attention
    from engine.trainer.collators import FlatteningCollator, TrainedLogitsCollator, trained_logits_supported

    torch.set_num_threads(args.threads)
    dtype = {"auto": torch.float32 if args.device == "cpu" else torch.bfloat16}.get(args.dtype) or getattr(
        torch, args.dtype
    )
    attention.register()
    h = args.hidden
    config = LlamaConfig(
        vocab_size=args.vocab,
        hidden_size=h,
        intermediate_size=h * 8 // 3 // 64 * 64 or 2 * h,
        num_hidden_layers=args.layers,
        num_attention_heads=max(1, h // 64),
        num_key_value_heads=max(1, h // 128),
        max_position_embeddings=max(4096, args.samples * args.max_len),
        use_cache=False,
    )
    models, opts = {}, {}
    for impl in ("sdpa", attention.NAME):
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(copy.deepcopy(config), attn_implementation=impl)
        model = model.to(device=args.device, dtype=dtype)
        torch.manual_seed(1)
        models[impl] = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules="all-linear"))
        opts[impl] = torch.optim.AdamW([q for q in models[impl].parameters() if q.requires_grad], lr=1e-4)
    g = torch.Generator().manual_seed(0)
    # as the trainer decides it: a transformers whose Llama forward cannot take a position mask gets the plain batch
    # (transformers 5.17 on a GPU machine: an IndexError at the output layer otherwise)
    trained_only, _why = trained_logits_supported(next(iter(models.values())))
    collate = TrainedLogitsCollator(FlatteningCollator()) if trained_only else FlatteningCollator()

    def row():
        feats = []
        for _ in range(args.samples):
            n = int(torch.randint(args.min_len, args.max_len + 1, (1,), generator=g))
            ids = torch.randint(3, args.vocab, (n,), generator=g).tolist()
            feats.append({"input_ids": ids, "labels": [-100] * (n // 2) + ids[n // 2 :]})
        batch = collate(feats)
        return {k: v.to(args.device) if hasattr(v, "to") else v for k, v in batch.items()}

    def items(batch) -> int:
        if "shift_labels" in batch:
            return len(batch["shift_labels"])
        return int((batch["labels"][..., 1:] != -100).sum())

    def sync():
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()

    def saved_mib(model, batch) -> float:
        """MiB autograd keeps for backward after one forward (each storage once): the activation memory."""
        seen: dict = {}

        def pack(t):
            storage = t.untyped_storage()
            seen[(storage.data_ptr(), t.device)] = storage.nbytes()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = model(**batch, num_items_in_batch=items(batch))
        del out
        return sum(seen.values()) / 2**20

    probe = row()
    saved = {impl: saved_mib(m, probe) for impl, m in models.items()}
    times: dict[str, list[float]] = {k: [] for k in models}
    worst = 0.0
    for i in range(args.steps + args.warmup):
        batch = row()
        losses = {}
        for impl in list(models) if i % 2 else list(models)[::-1]:
            sync()
            t0 = time.perf_counter()
            out = models[impl](**batch, num_items_in_batch=items(batch))
            out.loss.backward()
            opts[impl].step()
            opts[impl].zero_grad()
            sync()
            if i >= args.warmup:
                times[impl].append(time.perf_counter() - t0)
            losses[impl] = out.loss.item()
        worst = max(worst, abs(losses["sdpa"] - losses[attention.NAME]))
    mask_ms = 1000 * statistics.median(times["sdpa"])
    per_ms = 1000 * statistics.median(times[attention.NAME])
    device_name = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else f"CPU, {args.threads} thread"
    lines = [
        f"# Per-sample sdpa vs block-diagonal mask ({datetime.datetime.now().isoformat(timespec='minutes')})",
        "",
        f"- device: {device_name}; torch {torch.__version__}; {str(dtype).removeprefix('torch.')}",
        f"- command: `.venv/bin/python bench/packed_attention.py {' '.join(argv or sys.argv[1:])}`",
        f"- model: Llama hidden {h}, {args.layers} layers, vocabulary {args.vocab}, LoRA r8 all-linear; one "
        f"padding-free row of {args.samples} samples of {args.min_len}-{args.max_len} tokens per step (logits at "
        f"{'trained' if trained_only else 'all'} positions); forward + backward + AdamW; median over {args.steps} "
        f"steps after {args.warmup}",
        "",
        "| attention | ms / step | activations kept for backward, MiB (one row) |",
        "|---|---:|---:|",
        f"| block-diagonal mask (transformers' sdpa) | {mask_ms:.1f} | {saved['sdpa']:,.0f} |",
        f"| per sample | {per_ms:.1f} | {saved[attention.NAME]:,.0f} |",
        "",
        f"- per sample / mask speed: **{mask_ms / per_ms:.3f}x**; max |loss difference| per step {worst:.2e}",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
