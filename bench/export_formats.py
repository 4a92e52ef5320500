"""Export formats bench: for the demo model and a ~20M-parameter Llama of the same tokenizer, the time of a verified
export (``engine.trainer.convert``, in process: convert or quantize, read back, compare) and the size of what it
writes, per format, and what llama.cpp (llama-cpp-python) read back from each GGUF; then the served model's tokens/s
(``engine.trainer.serve`` over HTTP, non-streamed, greedy) and llama.cpp's on the F16 GGUF against transformers'
``generate`` on the same prompts and token counts, in the same run.

    .venv/bin/python bench/export_formats.py [--out bench/results/export_formats.md]

CPU, one thread (OMP_NUM_THREADS=1), on whatever else the machine is doing: the figures are this machine's, the
ratios are what carries over. The baseline of the served figure is generate() in this process on the same model.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

FORMATS = ["gguf-f16", "gguf-bf16", "gguf-q8_0", "gguf-q5_k_m", "gguf-q4_k_m", "bnb-8bit", "bnb-4bit"]
PROMPTS = ["Hello, how are you?", "Write a short poem about the sea.", "用一句话介绍你自己。"]
NEW_TOKENS = 32


def build_20m(demo: Path, out: Path) -> Path:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = json.loads((demo / "config.json").read_text())
    cfg.update(hidden_size=512, intermediate_size=1376, num_hidden_layers=6, num_attention_heads=8,
               num_key_value_heads=4)  # fmt: skip
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**{k: v for k, v in cfg.items() if k != "model_type"}))
    model.save_pretrained(str(out))
    for f in demo.iterdir():
        if f.name.startswith(("tokenizer", "special_tokens", "chat_template", "generation_config")):
            shutil.copy2(f, out / f.name)
    return out


def export_row(model: Path, fmt: str, work: Path) -> dict:
    from engine.export import convert_plan as cp
    from engine.trainer import convert

    out = work / f"{model.name}-{fmt}"
    plan = cp.plan_convert(str(model), fmt, str(out))
    argv = cp.convert_argv(plan, work / f".{out.name}.tmp", str(work / f"{out.name}.jsonl"), overwrite=False,
                           force=False)  # fmt: skip
    t0 = time.perf_counter()
    code = convert.main(argv[3:])
    seconds = time.perf_counter() - t0
    report = json.loads((out / "verify.json").read_text()) if code == 0 else {}
    main = [f for f in out.iterdir() if f.suffix in (".gguf", ".safetensors")] if code == 0 else []
    return {
        "model": model.name,
        "format": fmt,
        "seconds": seconds,
        "bytes": sum(f.stat().st_size for f in main),
        "diff": report.get("max_abs_diff"),
        "tol": report.get("tolerance"),
        "cpp": report.get("llama_cpp"),
        "ok": code == 0,
        "path": next((f for f in main if f.suffix == ".gguf"), None),
    }


def llama_cpp_tps(gguf: Path, model: Path) -> float | None:
    """llama.cpp's greedy tokens/s on the chat prompts (one thread, the same ids transformers gets), or None."""
    try:
        from llama_cpp import Llama
    except ImportError:
        return None
    import numpy as np
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model))
    llm = Llama(model_path=str(gguf), n_ctx=512, verbose=False, n_threads=1, logits_all=False)
    made, t0 = 0, time.perf_counter()
    for p in PROMPTS:
        ids = tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True,
                                      return_dict=True)["input_ids"]  # fmt: skip
        llm.reset()
        llm.eval(ids)
        for _ in range(NEW_TOKENS):  # held to NEW_TOKENS, as generate is (min_new_tokens)
            nxt = int(np.argmax(llm.eval_logits[-1]))
            llm.eval([nxt])
            made += 1
    return made / (time.perf_counter() - t0)


def serve_vs_generate(model: Path, work: Path) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model))
    ref = AutoModelForCausalLM.from_pretrained(str(model), dtype=torch.float32).eval()
    gen_tokens, t0 = 0, time.perf_counter()
    for p in PROMPTS:
        ids = tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True,
                                      return_tensors="pt", return_dict=True)["input_ids"]  # fmt: skip
        with torch.no_grad():
            out = ref.generate(ids, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False)
        gen_tokens += out.shape[1] - ids.shape[1]
    gen_s = time.perf_counter() - t0
    events = work / f"serve-{model.name}.jsonl"
    from engine.export.serve_jobs import free_port

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "engine.trainer.serve", str(model), "--port", str(port),
                             "--events", str(events)], cwd=ROOT)  # fmt: skip
    try:
        while not events.is_file():
            if proc.poll() is not None:
                raise RuntimeError("the server exited")
            time.sleep(0.2)
        served, t0 = 0, time.perf_counter()
        for p in PROMPTS:
            body = {"messages": [{"role": "user", "content": p}], "max_tokens": NEW_TOKENS, "temperature": 0}
            req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions",
                                         data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})  # fmt: skip
            with urllib.request.urlopen(req, timeout=600) as r:
                served += json.loads(r.read())["usage"]["completion_tokens"]
        serve_s = time.perf_counter() - t0
    finally:
        proc.terminate()
        proc.wait(30)
    return {
        "model": model.name,
        "generate_tps": gen_tokens / gen_s,
        "served_tps": served / serve_s,
        "generate_tokens": gen_tokens,
        "served_tokens": served,
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "export_formats.md"))
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="studio-export-bench-"))
    os.environ["STUDIO_HOME"] = str(work / "home")
    os.environ["STUDIO_OUTPUT_ROOTS"] = str(work)
    from engine.trainer import demo

    demo_dir = Path(demo.build_demo()["model_dir"])
    models = [demo_dir, build_20m(demo_dir, work / "llama-20m")]
    rows = [export_row(m, fmt, work) for m in models for fmt in FORMATS]
    served = [serve_vs_generate(m, work) for m in models]
    for s_row, m in zip(served, models):
        f16 = next((r["path"] for r in rows if r["model"] == m.name and r["format"] == "gguf-f16" and r["ok"]), None)
        s_row["cpp_tps"] = llama_cpp_tps(f16, m) if f16 else None
    src_bytes = {m.name: sum(f.stat().st_size for f in m.glob("*.safetensors")) for m in models}
    lines = [
        "# Export formats: time, size, served tokens/s",
        "",
        f"`bench/export_formats.py` on {time.strftime('%Y-%m-%d')}, CPU, OMP_NUM_THREADS=1, a shared 2-core machine.",
        "Export time is a whole verified export in process (convert or quantize, read back, compare logits and",
        "greedy text); size is the model file(s) written. Source sizes (float32 safetensors): "
        + ", ".join(f"{k} {v / 1e6:.2f} MB" for k, v in src_bytes.items())
        + ".",
        "",
        "| model | format | export s | size MB | size / fp32 | max logit diff (tolerance) |"
        " llama.cpp: diff, greedy same |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = r["bytes"] / src_bytes[r["model"]] if r["ok"] else 0
        diff = f"{r['diff']:.3g} ({r['tol']:.3g})" if r["ok"] else "failed"
        cpp = r["cpp"]
        cpp_text = f"{cpp['max_abs_diff']:.3g}, {cpp['greedy_same']}/{len(cpp['greedy'])}" if cpp else "-"
        lines.append(f"| {r['model']} | {r['format']} | {r['seconds']:.1f} | {r['bytes'] / 1e6:.2f} | {ratio:.2f} |"
                     f" {diff} | {cpp_text} |")  # fmt: skip
    lines += [
        "",
        "bnb rows: the difference is the saved folder's reload against the quantized model in memory.",
        "",
        f"## Served tokens/s vs generate ({len(PROMPTS)} chat prompts x {NEW_TOKENS} new tokens, greedy, float32)",
        "",
        "| model | transformers generate tok/s | studio serve tok/s (HTTP, non-streamed) | served / generate |"
        " llama.cpp tok/s (F16 GGUF) | llama.cpp / generate |",
        "|---|---|---|---|---|---|",
    ]
    for s in served:
        ratio = s["served_tps"] / s["generate_tps"]
        cpp = f"{s['cpp_tps']:.1f} | {s['cpp_tps'] / s['generate_tps']:.2f}" if s["cpp_tps"] else "- | -"
        lines.append(f"| {s['model']} | {s['generate_tps']:.1f} | {s['served_tps']:.1f} | {ratio:.2f} | {cpp} |")
    lines += ["", "The served figure stops at the end-of-sequence token where the model emits it; generate is held to",
              f"{NEW_TOKENS} tokens (min_new_tokens), so tokens/s, not totals, compare."]  # fmt: skip
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
