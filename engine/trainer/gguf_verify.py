"""Verify a written GGUF against the model it was made from, with readers independent of the writer.

Heavy: torch, transformers, numpy; ``llama_cpp`` (llama-cpp-python) where it is installed. Used by
``engine.trainer.convert`` after ``engine.trainer.gguf_write``.

The reference is the merged (or given) model in float32 through transformers. The GGUF is read back by
transformers' GGUF loader (``from_pretrained(dir, gguf_file=...)``, which parses the file and dequantizes every tensor
through the ``gguf`` package, undoing llama.cpp's rotary permutation) and, where installed, by llama.cpp itself. On the
same token ids (the model's tokenizer on a few prompts) the largest logit difference must stay within a tolerance of
the format: 16 units of roundoff of the largest reference logit (F16: 2**-11, BF16: 2**-8; Q8_0 stores each block of
32 weights as int8 with one scale, up to 1/254 of the block's largest weight per value: 2**-7), floored at 16 units of
1. Greedy continuations (12 tokens) are compared token for token and reported; a tiny random model's near-ties may
legitimately flip one, so they are reported, not required.
"""

from __future__ import annotations

from pathlib import Path

PROMPTS = ["Hello, how are you?", "Write a short poem about the sea.", "用一句话介绍你自己。"]
NEW_TOKENS = 12
ULPS = 16
EPS = {"gguf-f16": 2.0**-11, "gguf-bf16": 2.0**-8, "gguf-q8_0": 2.0**-7}
EPS.update({"gguf-q5_k_m": 2.0**-4, "gguf-q4_k_m": 2.0**-3})


def tolerance(fmt: str, ref_max_abs: float, eps: float | None = None) -> float:
    """16 units of roundoff ``eps`` (the format's, from ``EPS``, unless given) of the largest reference logit."""
    return ULPS * (EPS[fmt] if eps is None else eps) * max(1.0, ref_max_abs)


def _greedy(model, ids, pad_id, eos_id) -> list[int]:
    import torch

    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=NEW_TOKENS, do_sample=False, pad_token_id=pad_id, eos_token_id=eos_id)
    return out[0, ids.shape[1] :].tolist()


def llama_cpp_check(gguf_path: Path, prompts_ids: list[list[int]], ref_logits: list, tok) -> dict | None:
    """Logits and greedy text from llama.cpp (llama-cpp-python) on the same ids; None when it is not installed."""
    try:
        import llama_cpp  # noqa: F401
    except Exception:  # noqa: BLE001 - not installed or its library does not load: said in the report
        return None
    import numpy as np
    from llama_cpp import Llama

    llm = Llama(model_path=str(gguf_path), n_ctx=256, logits_all=True, verbose=False, n_threads=1, seed=0)
    diff, rows = 0.0, []
    for ids, ref in zip(prompts_ids, ref_logits):
        llm.reset()
        llm.eval(ids)
        got = np.array(llm.scores[: len(ids)], dtype=np.float32)
        diff = max(diff, float(np.abs(got - ref.numpy()).max()))
        new: list[int] = []
        for _ in range(NEW_TOKENS):
            nxt = int(np.argmax(llm.scores[llm.n_tokens - 1]))
            if nxt == llm.token_eos():
                break
            new.append(nxt)
            llm.eval([nxt])
        rows.append({"ids": new, "text": tok.decode(new)})
    text_ids = [llm.tokenize(p.encode(), add_bos=False, special=True) for p in PROMPTS]
    llm.close()  # now, not in its __del__ at the interpreter's exit, where llama_cpp's own globals are gone
    return {"max_abs_diff": diff, "greedy": rows, "tokenizer_ids": text_ids}


def verify(
    model_dir: Path,
    gguf_path: Path,
    fmt: str,
    *,
    got=None,
    eps: float | None = None,
    cpp_eps: float | None = None,
) -> dict:
    """The folder ``model_dir`` against the GGUF read back by transformers (``got``: that model when the caller has it
    loaded already) and by llama.cpp. ``eps`` / ``cpp_eps``: the roundoff each reader's tolerance counts in (default:
    the format's, ``EPS``; an imported GGUF's folder holds the GGUF's own values, engine.trainer.gguf_import)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    ref = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    if got is None:
        got = AutoModelForCausalLM.from_pretrained(
            str(gguf_path.parent), gguf_file=gguf_path.name, dtype=torch.float32
        ).eval()
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    diff, ref_max, ref_logits, prompts_ids, greedy = 0.0, 0.0, [], [], []
    for prompt in PROMPTS:
        ids = tok(prompt, return_tensors="pt").input_ids
        with torch.no_grad():
            a = ref(input_ids=ids).logits[0].float()
            b = got(input_ids=ids).logits[0].float()
        diff = max(diff, float((a - b).abs().max()))
        ref_max = max(ref_max, float(a.abs().max()))
        ref_logits.append(a)
        prompts_ids.append(ids[0].tolist())
        ra, rb = _greedy(ref, ids, pad, tok.eos_token_id), _greedy(got, ids, pad, tok.eos_token_id)
        greedy.append(
            {"prompt": prompt, "reference": tok.decode(ra), "gguf": tok.decode(rb), "same": ra == rb, "ids": ra}
        )
    tol = tolerance(fmt, ref_max, eps)
    cpp_tol = tol if cpp_eps is None else tolerance(fmt, ref_max, cpp_eps)
    report = {
        "format": fmt,
        "reader": "transformers GGUF loader (gguf dequantization)",
        "reference": f"{model_dir} (float32, transformers)",
        "max_abs_diff": diff,
        "tolerance": tol,
        "reference_max_abs": ref_max,
        "passed": diff <= tol,
        "greedy": greedy,
        "greedy_same": sum(g["same"] for g in greedy),
        "prompts": len(PROMPTS),
    }
    cpp = llama_cpp_check(gguf_path, prompts_ids, ref_logits, tok)
    if cpp is not None:
        for row, g in zip(cpp["greedy"], greedy):
            # transformers' ids end with the end-of-sequence token when it came; llama.cpp's loop stops before it
            ended = g["ids"][-1:] == [tok.eos_token_id]
            row["same"] = row["ids"] == (g["ids"][:-1] if ended else g["ids"])
        cpp["greedy_same"] = sum(r["same"] for r in cpp["greedy"])
        cpp["tolerance"] = cpp_tol
        cpp["passed"] = cpp["max_abs_diff"] <= cpp_tol
        hf_ids = [tok(p, add_special_tokens=False).input_ids for p in PROMPTS]
        cpp["tokenizer_same"] = cpp.pop("tokenizer_ids") == hf_ids
        report["passed"] = report["passed"] and cpp["passed"]
    report["llama_cpp"] = cpp
    return report
