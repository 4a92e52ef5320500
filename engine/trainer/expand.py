"""LLaMA Pro's block expansion (``studio expand-model``; LLaMA-Factory's scripts/llama_pro.py): after every
``layers / num_expand``-th decoder layer a copy of it is inserted whose attention output projection (o_proj) and MLP
down projection (down_proj) are zero, so the new block adds nothing to the residual stream and the expanded model
computes exactly what the base did. Training with ``method.freeze.use_llama_pro`` then trains only those copies.

Run as ``python -m engine.trainer.expand SRC --out DIR --num-expand N``; writes into a temporary sibling folder and
renames it to DIR at the end, so DIR is either complete or absent. Heavy: torch and transformers.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

# The two projections that write into the residual stream in Llama-style blocks (LLaMA Pro's zeroed pair).
ZEROED = ("o_proj", "down_proj")
_LAYER = re.compile(r"(^|\.)layers\.(\d+)\.")


def expanded_positions(num_layers: int, num_expand: int) -> list[int]:
    """Indices of the inserted blocks in the expanded model: one after every ``num_layers // num_expand`` layers.
    The same indices LF's use_llama_pro trains (stride = total // num_expand, from stride - 1)."""
    stride = num_layers // num_expand + 1
    return [stride * (k + 1) - 1 for k in range(num_expand)]


def expand_state(state: dict, num_layers: int, num_expand: int) -> dict:
    """The expanded model's weights: layer i of the base keeps its tensors under its new index; each inserted block
    is a copy of the layer before it with o_proj and down_proj zeroed. Keys outside the layers stay as they are."""
    split = num_layers // num_expand
    new_index: dict[int, list[int]] = {}
    j = 0
    for i in range(num_layers):
        new_index[i] = [j]
        j += 1
        if (i + 1) % split == 0:
            new_index[i].append(j)
            j += 1
    out: dict = {}
    for key, tensor in state.items():
        match = _LAYER.search(key)
        if match is None:
            out[key] = tensor
            continue
        old = int(match.group(2))
        for n, idx in enumerate(new_index[old]):
            renamed = f"{key[: match.start(2)]}{idx}{key[match.end(2) :]}"
            copy = n > 0
            if copy and any(f".{z}." in f".{key}" for z in ZEROED):
                out[renamed] = tensor.new_zeros(tensor.shape)
            else:
                out[renamed] = tensor.clone() if copy else tensor
    return out


def expand(src: str, out: Path, num_expand: int) -> list[int]:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    config = AutoConfig.from_pretrained(src)
    text = config.get_text_config()
    num_layers = text.num_hidden_layers
    if num_expand < 1 or num_layers % num_expand:
        raise ValueError(f"--num-expand {num_expand} must divide the model's {num_layers} layers")
    model = AutoModelForCausalLM.from_pretrained(src, dtype="auto")
    state = expand_state(model.state_dict(), num_layers, num_expand)
    new_config = AutoConfig.from_pretrained(src)
    new_text = new_config.get_text_config()
    new_text.num_hidden_layers = num_layers + num_expand
    kinds = getattr(text, "layer_types", None)  # per-layer attention kinds (sliding / full): the copy keeps its own
    if isinstance(kinds, list) and len(kinds) == num_layers:
        split = num_layers // num_expand
        new_text.layer_types = [k for i, kind in enumerate(kinds) for k in [kind] * (2 if (i + 1) % split == 0 else 1)]
    with torch.device("meta"):
        grown = AutoModelForCausalLM.from_config(new_config, dtype=model.dtype)
    unexpected = grown.load_state_dict(state, strict=False, assign=True).unexpected_keys
    missing = [n for n, p in grown.named_parameters() if p.is_meta]  # non-persistent buffers are rebuilt on load
    if missing or unexpected:
        raise ValueError(f"the expanded model's weights do not match its layers ({(missing + unexpected)[:3]})")
    grown.tie_weights()
    tmp = out.with_name(f".{out.name}.expanding")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        grown.save_pretrained(tmp)
        AutoTokenizer.from_pretrained(src).save_pretrained(tmp)
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return expanded_positions(num_layers, num_expand)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m engine.trainer.expand")
    ap.add_argument("src")
    ap.add_argument("--out", required=True)
    ap.add_argument("--num-expand", type=int, required=True)
    args = ap.parse_args(argv)
    try:
        added = expand(args.src, Path(args.out), args.num_expand)
    except (ValueError, OSError) as exc:
        print(f"expand: {exc}", file=sys.stderr)
        return 1
    print(f"added blocks at layers {added}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
