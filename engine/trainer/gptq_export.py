"""GPTQ 4-bit / 8-bit and AWQ 4-bit export of a run's model with gptqmodel (the library transformers 5 loads GPTQ
and AWQ folders with): calibrated on the run's own training rows, tokenized as the trainer tokenized them (the first
``CALIBRATION_ROWS``) or on a text file's rows as LLaMA-Factory samples them (``file_rows``), quantized layer by layer
in groups of ``GROUP_SIZE`` on the NVIDIA GPU when there is one and on the CPU otherwise (slower, the same files),
saved in the GPTQ layout or AWQ's GEMM layout with zero points (the layouts transformers and vLLM load), then read
back by two loaders and compared: transformers' against gptqmodel's own (the saved folder means the same model to
both: bounded, as the bitsandbytes export's round trip is), and transformers' against the float model (the
quantization's own error and the greedy text on ``gguf_verify.PROMPTS``: reported, not bounded).

Heavy: torch, transformers, gptqmodel (and optimum, through which transformers reads GPTQ).
``engine.export.gguf_checks.gptq_missing`` refuses a machine without them before any work, and a model folder that
is not a run, without a calibration file, is refused by the plan. Used by ``engine.trainer.convert`` for
``--format gptq-4bit|gptq-8bit|awq-4bit``; run here on the CPU by tests/engine/test_gptq_export.py and on a GPU by
``bench/gpu_check.sh``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

from engine.export import sizes

CALIBRATION_ROWS = 128
GROUP_SIZE = 128
ROUNDTRIP_TOL = 1e-3  # relative to the logits' largest magnitude: fp16 kernels on both sides


def bits_of(fmt: str) -> int:
    return int(fmt.split("-", 1)[1].removesuffix("bit"))


def method_of(fmt: str) -> str:
    return "AWQ" if fmt.startswith("awq-") else "GPTQ"


def quantize_config(fmt: str, offload: Path):
    """gptqmodel's settings for ``fmt``: AWQ in the GEMM layout with zero points (asymmetric, as AutoAWQ wrote it and
    vLLM's AWQ kernels read it); GPTQ symmetric. Layers waiting their turn are kept in ``offload`` (inside the
    export's temporary folder, removed with it)."""
    from gptqmodel import QuantizeConfig
    from gptqmodel.quantization import FORMAT, METHOD

    common = {"bits": bits_of(fmt), "group_size": GROUP_SIZE, "offload_to_disk_path": str(offload)}
    if method_of(fmt) == "AWQ":
        return QuantizeConfig(**common, quant_method=METHOD.AWQ, format=FORMAT.GEMM, sym=False)
    return QuantizeConfig(**common)


def cpu_workers() -> None:
    """gptqmodel 7.6 sizes its CPU pool at half the cores and its model loader's at 2, and refuses to start when the
    second is larger (any machine with 1-2 cores): at least 2 CPU workers, unless GPTQMODEL_CPU_WORKERS says."""
    os.environ.setdefault("GPTQMODEL_CPU_WORKERS", str(max(2, ((os.cpu_count() or 1) + 1) // 2)))


def calibration_rows(run_dir: str | Path, tokenizer, log=print) -> list[dict]:
    """{input_ids, attention_mask} of the run's first training rows, built as the trainer builds them (the spec's
    datasets, template, cutoff and packing: ``engine.trainer.dataset.build_train_data``)."""
    from engine.spec.schema import load_spec
    from engine.trainer.dataset import build_train_data

    spec = load_spec(Path(run_dir) / "spec.yaml", context=False)
    data = build_train_data(spec, tokenizer, log=log).train_dataset
    rows = []
    for row in data.select(range(min(CALIBRATION_ROWS, len(data)))):
        ids = [int(t) for t in row["input_ids"]]
        rows.append({"input_ids": ids, "attention_mask": [1] * len(ids)})
    return rows


def file_rows(cal, tokenizer, seed: int = 0) -> list[dict]:
    """{input_ids, attention_mask} from a calibration file (``engine.export.convert_plan.Calibration``), sampled as
    LLaMA-Factory samples its ``export_quantization_dataset``: ``samples`` times a random row (with replacement) and,
    in a row longer than ``maxlen`` tokens, a random window of ``maxlen``. A shorter row is taken whole, where
    LLaMA-Factory would draw again (and give up after 100 draws). Seeded: the same file gives the same rows."""
    import random

    from engine.data.files import read_file

    rows, problems = read_file(cal.file)
    texts = [r["text"] for _, r in rows if isinstance(r, dict) and isinstance(r.get("text"), str)]
    texts = [t for t in texts if t.strip()]
    if problems or not texts:
        raise ValueError(f"calibration file {cal.file}: {problems[0].located() if problems else 'no text rows'}")
    rng = random.Random(seed)
    out = []
    for _ in range(cal.samples):
        ids = [int(t) for t in tokenizer(rng.choice(texts))["input_ids"]]
        if len(ids) > cal.maxlen:
            start = rng.randint(0, len(ids) - cal.maxlen)
            ids = ids[start : start + cal.maxlen]
        out.append({"input_ids": ids, "attention_mask": [1] * len(ids)})
    return out


def export(model_dir: Path, tmp: Path, fmt: str, run_dir: str | Path | None, progress=None, calibration=None) -> dict:
    cpu_workers()
    model_dir, tmp = Path(model_dir).resolve(), Path(tmp).resolve()
    import torch
    from gptqmodel import BACKEND, GPTQModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from engine.trainer.gguf_verify import PROMPTS, _greedy

    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.float16 if device == "cuda" else torch.float32  # the float reference, as each device runs it
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    rows = file_rows(calibration, tok) if calibration is not None else calibration_rows(run_dir, tok)
    if progress:
        progress(len(rows), device)
    work = tmp / "offload"  # gptqmodel's layers on disk, and the logs/ it writes into the current folder
    work.mkdir(parents=True, exist_ok=True)
    with contextlib.chdir(work):
        quant = GPTQModel.load(str(model_dir), quantize_config(fmt, work), device=device)
        # AWQ's default packing kernel is CUDA's GEMM; on the CPU its torch kernel packs the same GEMM layout
        backend = BACKEND.AWQ_TORCH if method_of(fmt) == "AWQ" and device == "cpu" else BACKEND.AUTO
        quant.quantize(rows, batch_size=1, backend=backend)
        quant.save(str(tmp))
    shutil.rmtree(work, ignore_errors=True)
    for name in (*sizes.TOKENIZER_FILES, "generation_config.json"):
        if (model_dir / name).is_file() and not (tmp / name).exists():
            shutil.copy2(model_dir / name, tmp / name)
    del quant
    if device == "cuda":
        torch.cuda.empty_cache()

    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    ref = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=dtype, device_map=device).eval()
    saved = AutoModelForCausalLM.from_pretrained(str(tmp), device_map=device).eval()  # as users load the folder
    again = GPTQModel.load(str(tmp), device=device)  # the same files through gptqmodel's own loader
    qerr, roundtrip, ref_max, greedy = 0.0, 0.0, 0.0, []
    for prompt in PROMPTS:
        ids = tok(prompt, return_tensors="pt").input_ids.to(device)
        with torch.no_grad():
            a = ref(input_ids=ids).logits.float()
            b = saved(input_ids=ids).logits.float()
            c = again.model(input_ids=ids).logits.float()
        qerr, ref_max = max(qerr, float((b - a).abs().max())), max(ref_max, float(a.abs().max()))
        roundtrip = max(roundtrip, float((b - c).abs().max()))
        ra, rb = _greedy(ref, ids, pad, tok.eos_token_id), _greedy(saved, ids, pad, tok.eos_token_id)
        greedy.append({"prompt": prompt, "reference": tok.decode(ra), "quantized": tok.decode(rb), "same": ra == rb})
    tol = ROUNDTRIP_TOL * max(1.0, ref_max)
    return {
        "format": fmt,
        "method": method_of(fmt),
        "device": device,
        "reader": f"transformers from_pretrained ({method_of(fmt)}, gptqmodel kernels) and GPTQModel.load",
        "reference": f"{model_dir} ({str(dtype).removeprefix('torch.')}, transformers)",
        "max_abs_diff": roundtrip,
        "tolerance": tol,
        "passed": roundtrip <= tol,
        "quantization_error_max_abs": qerr,
        "calibration_rows": len(rows),
        "calibration": (
            {"file": calibration.file, "samples": calibration.samples, "maxlen": calibration.maxlen}
            if calibration is not None
            else {"run": str(run_dir)}
        ),
        "quantization_config": {k: v for k, v in saved.config.quantization_config.to_dict().items() if k != "meta"},
        "greedy": greedy,
        "greedy_same": sum(g["same"] for g in greedy),
        "prompts": len(PROMPTS),
        "llama_cpp": None,
    }
