"""Studio's batched evaluation generation against a one-row-at-a-time ``generate`` loop, same rows, same greedy
outputs.

Run:  .venv/bin/python bench/eval_throughput.py [--device cpu|cuda] [--rows 48] [--max-new-tokens 32]
      [--batch-size 16] [--model DIR] [--out bench/results/eval_throughput.md]

One process, one model (the demo's by default, built into $STUDIO_HOME when missing), the demo_alpaca rows rendered
by the template as an evaluation renders them (engine.trainer.evaluate.prepare_rows). Studio's path is
``engine.trainer.evaluate.generate_batch``: rows sorted by prompt length, batches padded on the left, the KV cache,
cut at the template's stop token. The baseline is what a plain loop does: ``model.generate`` on one row at a time
(KV cache too), the same greedy settings and stop token. Both run on the same rows in the same process, the baseline
first and Studio second, then again in the other order; the faster of each is kept. The answers are asserted
identical row by row (decoded text); the table gives rows/s and the ratio.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--rows", type=int, default=48)
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--model", default=None, help="a model folder (default: the demo model)")
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "eval_throughput.md"))
    args = p.parse_args(argv)

    import torch

    from engine.core import workspace
    from engine.trainer import demo
    from engine.trainer.evaluate import generate_batch, load_model, load_tokenizer, prepare_rows, stop_ids

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1") or 1))
    paths = demo.build_demo()
    model_dir = args.model or paths["model_dir"]
    tok = load_tokenizer(model_dir)
    model = load_model(model_dir, args.device)
    plan = {
        "device": args.device,
        "generation": {
            "max_new_tokens": args.max_new_tokens,
            "temperature": 0.0,
            "top_p": 1.0,
            "top_k": 0,
            "batch_size": args.batch_size,
            "seed": 0,
        },  # fmt: skip
        "data": {
            "dataset_dir": str(workspace.data_dir()),
            "datasets": ["demo_alpaca"],
            "held_out": None,
            "limit": args.rows,
            "template": "auto",
            "cutoff_len": 1024,
            "train_on_prompt": False,
            "mask_history": False,
            "enable_thinking": True,
            "tool_format": None,
            "max_samples": None,
            "text": False,
        },  # fmt: skip
    }
    rows = prepare_rows(plan, tok)
    prompts = [r["prompt_ids"] for r in rows]
    eos, _ = stop_ids(tok, "auto")

    def one_by_one() -> list[str]:
        out = []
        for ids in prompts:
            x = torch.tensor([ids], device=args.device)
            with torch.no_grad():
                y = model.generate(input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=args.max_new_tokens,
                                   do_sample=False, temperature=None, top_p=None, top_k=None, eos_token_id=eos,
                                   pad_token_id=tok.pad_token_id, use_cache=True)  # fmt: skip
            new = y[0, len(ids) :].tolist()
            cut = next((j for j, t in enumerate(new) if t in eos), len(new))
            out.append(tok.decode(new[:cut], skip_special_tokens=True))
        return out

    def studio() -> list[str]:
        order = sorted(range(len(prompts)), key=lambda k: len(prompts[k]))
        texts: list[str] = [""] * len(prompts)
        for s in range(0, len(order), args.batch_size):
            idx = order[s : s + args.batch_size]
            for k, t in zip(idx, generate_batch(model, tok, [prompts[k] for k in idx], plan)):
                texts[k] = t
        return texts

    def timed(fn):
        if args.device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = fn()
        if args.device == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t0, out

    studio()  # warm-up (allocator, kernels)
    base_s1, base_out = timed(one_by_one)
    ours_s1, ours_out = timed(studio)
    ours_s2, _ = timed(studio)
    base_s2, _ = timed(one_by_one)
    base_s, ours_s = min(base_s1, base_s2), min(ours_s1, ours_s2)
    differ = [k for k, (a, b) in enumerate(zip(base_out, ours_out)) if a != b]
    n = len(rows)
    ratio = base_s / ours_s
    lines = [
        "# Evaluation throughput: batched (Studio) vs one row at a time",
        "",
        f"{datetime.date.today()} · `bench/eval_throughput.py --device {args.device} --rows {n} "
        f"--max-new-tokens {args.max_new_tokens} --batch-size {args.batch_size}` · model {Path(model_dir).name} · "
        f"torch threads {torch.get_num_threads()}",
        "",
        "| path | rows | seconds | rows/s |",
        "|---|---|---|---|",
        f"| one-row `generate` loop | {n} | {base_s:.2f} | {n / base_s:.2f} |",
        f"| Studio batched (left padding, KV cache, length-sorted) | {n} | {ours_s:.2f} | {n / ours_s:.2f} |",
        "",
        f"Speed-up: **{ratio:.2f}×**. Greedy answers identical: **{'yes' if not differ else 'NO'}** "
        f"({n - len(differ)}/{n} rows).",
        "",
        "Both paths ran in one process on the same rows, each twice in alternating order; the faster run of each "
        "is kept. The machine is shared, so absolute figures vary between runs; the ratio is the result.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text, encoding="utf-8")
    if differ:
        print(f"rows whose answers differ: {differ[:10]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
