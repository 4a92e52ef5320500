"""bitsandbytes 4-bit (NF4, double quantization) / 8-bit export of a model folder: quantize, save with
``save_pretrained`` (transformers' bnb serialization), reload the saved folder and compare. Heavy: torch,
transformers, bitsandbytes. Used by ``engine.trainer.convert`` for ``--format bnb-4bit|bnb-8bit``.

bitsandbytes runs on this machine's CPU (STACK-NOTES: 4-bit and 8-bit load and run there). Two checks: the saved
folder, reloaded, computes the same logits as the quantized model in memory (the round trip through the files
loses nothing: float32 roundoff only, ``ROUNDTRIP_TOL``); and the quantization's own error against the float32 model
is measured and reported (not bounded: it is what 4 / 8 bits cost).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from engine.export import sizes

ROUNDTRIP_TOL = 1e-4


def quant_config(fmt: str):
    import torch
    from transformers import BitsAndBytesConfig

    if fmt == "bnb-4bit":
        return BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=torch.float32,
        )
    return BitsAndBytesConfig(load_in_8bit=True)


def export(model_dir: Path, tmp: Path, fmt: str) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    ids = AutoTokenizer.from_pretrained(str(model_dir))("The sea is calm tonight. 你好", return_tensors="pt").input_ids
    with torch.no_grad():
        ref = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()(input_ids=ids).logits
        quant = AutoModelForCausalLM.from_pretrained(
            str(model_dir), quantization_config=quant_config(fmt), device_map="cpu", dtype=torch.float32
        ).eval()
        # Saved before its first forward: on a CPU, bitsandbytes (0.50) repacks a 4-bit layer's weights for its CPU
        # kernel at the first forward, and a save after that wrote weights that reload 0.007 off (0.58 without
        # double quantization), which the check below caught.
        quant.save_pretrained(str(tmp))
        before = quant(input_ids=ids).logits.float()
        for name in (*sizes.TOKENIZER_FILES, "generation_config.json"):
            if (model_dir / name).is_file() and not (tmp / name).exists():
                shutil.copy2(model_dir / name, tmp / name)
        del quant
        reloaded = AutoModelForCausalLM.from_pretrained(str(tmp), device_map="cpu").eval()
        after = reloaded(input_ids=ids).logits.float()
    roundtrip = float((after - before).abs().max())
    tol = ROUNDTRIP_TOL * max(1.0, float(before.abs().max()))
    return {
        "format": fmt,
        "reader": "transformers from_pretrained (bitsandbytes)",
        "reference": f"{model_dir} quantized in memory",
        "max_abs_diff": roundtrip,
        "tolerance": tol,
        "passed": roundtrip <= tol,
        "quantization_error_max_abs": float((before - ref.float()).abs().max()),
        "quantization_config": reloaded.config.quantization_config.to_dict(),
        "greedy": [],
        "greedy_same": 0,
        "prompts": 1,
        "llama_cpp": None,
    }
