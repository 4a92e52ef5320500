"""GPTQ 4-bit / 8-bit export of a run's model with gptqmodel (the GPTQ library transformers 5 loads GPTQ folders
with): calibrated on the run's own training rows, tokenized as the trainer tokenized them (the first
``CALIBRATION_ROWS``), quantized layer by layer on the GPU in groups of ``GROUP_SIZE``, saved in the GPTQ layout
(transformers and vLLM load it), then read back by two loaders and compared: transformers' against gptqmodel's
own (the saved folder means the same model to both: bounded, as the bitsandbytes export's round trip is), and
transformers' against the float model (the quantization's own error and the greedy text on ``gguf_verify.PROMPTS``:
reported, not bounded).

Heavy: torch, transformers, gptqmodel; CUDA only: ``engine.export.gguf_checks.gptq_missing`` refuses a machine
without an NVIDIA GPU or the package before any work, and a model folder that is not a run is refused by the plan.
Used by ``engine.trainer.gguf_export`` for ``--format gptq-4bit|gptq-8bit``; run for real by ``bench/gpu_check.sh``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from engine.export import sizes

CALIBRATION_ROWS = 128
GROUP_SIZE = 128
ROUNDTRIP_TOL = 1e-3  # relative to the logits' largest magnitude: fp16 kernels on both sides


def bits_of(fmt: str) -> int:
    return int(fmt.removeprefix("gptq-").removesuffix("bit"))


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


def export(model_dir: Path, tmp: Path, fmt: str, run_dir: str | Path, progress=None) -> dict:
    import torch
    from gptqmodel import GPTQModel, QuantizeConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from engine.trainer.gguf_verify import PROMPTS, _greedy

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    rows = calibration_rows(run_dir, tok)
    if progress:
        progress(len(rows))
    quant = GPTQModel.load(str(model_dir), QuantizeConfig(bits=bits_of(fmt), group_size=GROUP_SIZE))
    quant.quantize(rows, batch_size=1)
    quant.save(str(tmp))
    for name in (*sizes.TOKENIZER_FILES, "generation_config.json"):
        if (model_dir / name).is_file() and not (tmp / name).exists():
            shutil.copy2(model_dir / name, tmp / name)
    del quant
    torch.cuda.empty_cache()

    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    ref = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float16, device_map="cuda").eval()
    saved = AutoModelForCausalLM.from_pretrained(str(tmp), device_map="cuda").eval()  # as users load the folder
    again = GPTQModel.load(str(tmp))  # the same files through gptqmodel's own loader
    qerr, roundtrip, ref_max, greedy = 0.0, 0.0, 0.0, []
    for prompt in PROMPTS:
        ids = tok(prompt, return_tensors="pt").input_ids.to("cuda")
        with torch.no_grad():
            a = ref(input_ids=ids).logits.float()
            b = saved(input_ids=ids).logits.float()
            c = again.model(input_ids=ids).logits.float()
        qerr, ref_max = max(qerr, float((b - a).abs().max())), max(ref_max, float(a.abs().max()))
        roundtrip = max(roundtrip, float((b - c).abs().max()))
        ra, rb = _greedy(ref, ids, pad, tok.eos_token_id), _greedy(saved, ids, pad, tok.eos_token_id)
        greedy.append({"prompt": prompt, "reference": tok.decode(ra), "gptq": tok.decode(rb), "same": ra == rb})
    tol = ROUNDTRIP_TOL * max(1.0, ref_max)
    return {
        "format": fmt,
        "reader": "transformers from_pretrained (GPTQ, gptqmodel kernels) and GPTQModel.load",
        "reference": f"{model_dir} (float16, transformers)",
        "max_abs_diff": roundtrip,
        "tolerance": tol,
        "passed": roundtrip <= tol,
        "quantization_error_max_abs": qerr,
        "calibration_rows": len(rows),
        "quantization_config": saved.config.quantization_config.to_dict(),
        "greedy": greedy,
        "greedy_same": sum(g["same"] for g in greedy),
        "prompts": len(PROMPTS),
        "llama_cpp": None,
    }
