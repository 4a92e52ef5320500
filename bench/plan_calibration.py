"""Calibrate engine.plan.planner against a real GPU: predicted vs measured peak (torch.cuda.max_memory_allocated).

Run on a CUDA machine:  .venv/bin/python bench/plan_calibration.py [--quick]
Builds a ~0.5B Llama-shaped model from config (random init, no hub), then for each configuration of MATRIX
(full / LoRA / QLoRA x batch x sequence length x gradient checkpointing) runs, in a fresh subprocess, a few training
steps the way engine.trainer.train does (engine.trainer.model.load_model, bf16 autocast, torch AdamW over the
trainable params, gradient accumulation, clipping) and compares the peak with engine.plan.planner's
``allocated_bytes``. Writes bench/results/plan_calibration.md. Target: |error| <= 10% on every row. Without CUDA it
exits 2.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 1280,
    "intermediate_size": 3584,
    "num_hidden_layers": 24,
    "num_attention_heads": 10,
    "num_key_value_heads": 2,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": False,
    "rms_norm_eps": 1e-6,
    "torch_dtype": "bfloat16",
}

MATRIX = [  # (name, method dict, batch, seq, gradient checkpointing)
    ("full b1 s512", {"finetuning": "full"}, 1, 512, False),
    ("full b2 s1024", {"finetuning": "full"}, 2, 1024, False),
    ("full b4 s1024 ckpt", {"finetuning": "full"}, 4, 1024, True),
    ("full b2 s2048 ckpt", {"finetuning": "full"}, 2, 2048, True),
    ("lora-all r16 b1 s512", {"finetuning": "lora", "lora": {"rank": 16}}, 1, 512, False),
    ("lora-all r16 b4 s1024", {"finetuning": "lora", "lora": {"rank": 16}}, 4, 1024, False),
    ("lora-all r64 b4 s2048 ckpt", {"finetuning": "lora", "lora": {"rank": 64}}, 4, 2048, True),
    (
        "lora-qv r8 b8 s512",
        {"finetuning": "lora", "lora": {"rank": 8, "targets": ["q_proj", "v_proj"]}},
        8,
        512,
        False,
    ),
    ("dora r16 b2 s1024", {"finetuning": "lora", "lora": {"rank": 16, "use_dora": True}}, 2, 1024, False),
    ("qlora r16 b1 s512", {"finetuning": "lora", "lora": {"rank": 16}, "quantization": {"bits": 4}}, 1, 512, False),
    ("qlora r16 b4 s1024", {"finetuning": "lora", "lora": {"rank": 16}, "quantization": {"bits": 4}}, 4, 1024, False),
    (
        "qlora r64 b4 s2048 ckpt",
        {"finetuning": "lora", "lora": {"rank": 64}, "quantization": {"bits": 4}},
        4,
        2048,
        True,
    ),
    (
        "qlora-8bit r16 b2 s1024",
        {"finetuning": "lora", "lora": {"rank": 16}, "quantization": {"bits": 8}},
        2,
        1024,
        False,
    ),
    ("freeze last4 b2 s1024", {"finetuning": "freeze", "freeze": {"trainable_layers": 4}}, 2, 1024, False),
]


def spec_for(model_dir: str, method: dict, batch: int, seq: int, ckpt: bool):
    from engine.spec.schema import parse_spec

    return parse_spec(
        {
            "model": {"name_or_path": model_dir},
            "data": {"datasets": ["calib"], "cutoff_len": seq},
            "method": method,
            "launch": {"device": "cuda"},
            "train": {
                "per_device_batch_size": batch,
                "gradient_accumulation": 2,
                "precision": "bf16",
                "gradient_checkpointing": ckpt,
                "max_steps": 3,
            },
        }
    )


def build_model(model_dir: Path) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**CONFIG), dtype=torch.bfloat16)
    model.save_pretrained(str(model_dir))


def measure(spec_json: str) -> dict:
    """One configuration, in this (fresh) process: a few optimizer steps as engine.trainer.train runs them."""
    import torch

    from engine.spec.schema import parse_spec
    from engine.trainer.model import load_model

    spec = parse_spec(json.loads(spec_json))
    model = load_model(spec, device="cuda", precision="bf16")
    if not spec.method.quantization.bits:
        model.to("cuda")
    if spec.train.gradient_checkpointing == "on":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-5)
    t = spec.train
    for _ in range(t.max_steps):
        for _ in range(t.gradient_accumulation):
            ids = torch.randint(
                0, CONFIG["vocab_size"], (t.per_device_batch_size, spec.data.cutoff_len), device="cuda"
            )
            mask = torch.ones_like(ids)
            mask[0, -8:] = 0  # a padded row: transformers then passes a mask (as with real batches)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(input_ids=ids, attention_mask=mask, labels=ids).loss
            (loss / t.gradient_accumulation).backward()
        torch.nn.utils.clip_grad_norm_(params, t.max_grad_norm)
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    return {"allocated": torch.cuda.max_memory_allocated(), "reserved": torch.cuda.max_memory_reserved()}


def _write(out: Path, device: str, rows: list) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    head = [
        "| config | predicted MiB | measured alloc MiB | reserved MiB | error % | note |",
        "|---|---|---|---|---|---|",
    ]
    lines = [f"# Plan calibration on {device}", "", f"model: {json.dumps(CONFIG)}", ""] + head
    out.write_text("\n".join(lines + [_fmt(r) for r in rows]) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="first 4 rows only")
    ap.add_argument("--measure", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        print("RESULT " + json.dumps(measure(args.measure)))
        return 0
    try:
        import torch
    except ImportError:
        print("plan_calibration: torch is not installed")
        return 2
    if not torch.cuda.is_available():
        print("plan_calibration: no CUDA GPU here; run this on a GPU machine (it measures real peak memory).")
        return 2
    from engine.plan.planner import plan
    from engine.spec.schema import spec_to_dict

    rows = []
    out = ROOT / "bench" / "results" / "plan_calibration.md"
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(tmp) / "llama-0.5b"
        build_model(model_dir)
        for name, method, batch, seq, ckpt in MATRIX[:4] if args.quick else MATRIX:
            spec = spec_for(str(model_dir), method, batch, seq, ckpt)
            pred = plan(spec, gpu_mem_gib=torch.cuda.get_device_properties(0).total_memory / 2**30)
            r = subprocess.run(
                [sys.executable, __file__, "--measure", json.dumps(spec_to_dict(spec))],
                capture_output=True,
                text=True,
                timeout=900,
                check=False,
                cwd=str(ROOT),
                env=dict(os.environ, PYTHONPATH=str(ROOT)),
            )
            line = next((ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")), None)
            if line is None:
                rows.append(
                    (name, pred.allocated_bytes, None, None, (r.stderr.strip().splitlines() or ["?"])[-1][:80])
                )
            else:
                m = json.loads(line[7:])
                rows.append((name, pred.allocated_bytes, m["allocated"], m["reserved"], pred.peak_phase))
            print(_fmt(rows[-1]), flush=True)
            _write(out, torch.cuda.get_device_name(0), rows)  # row by row: a run stopped by its time limit keeps them
    errs = [abs(_err(r)) for r in rows if _err(r) is not None]
    print(f"wrote {out}; max |error| {max(errs, default=float('nan')):.1f}% (target 10%)")
    return 0 if errs and max(errs) <= 10 and len(errs) == len(rows) else 1


def _err(row) -> float | None:
    return None if not row[2] else 100.0 * (row[1] - row[2]) / row[2]


def _fmt(row) -> str:
    name, pred, alloc, res, note = row
    e = _err(row)
    mib = 2**20
    return (
        f"| {name} | {pred / mib:.0f} | {alloc / mib if alloc else float('nan'):.0f} | "
        f"{res / mib if res else float('nan'):.0f} | {'' if e is None else f'{e:+.1f}'} | {note} |"
    )


if __name__ == "__main__":
    sys.exit(main())
