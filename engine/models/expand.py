"""``studio expand-model``: LLaMA Pro's block expansion of a local model into ``$STUDIO_HOME/models/NAME``. Light:
checks the source's config.json, the layer count and the target folder here (one line each, before anything runs),
then runs ``python -m engine.trainer.expand`` (torch) as a subprocess and waits for it. Train the result with
``method.finetuning: freeze``, ``method.freeze.trainable_layers: N`` and ``method.freeze.use_llama_pro: true``
(LF: ``finetuning_type: freeze``, ``freeze_trainable_layers: N``, ``use_llama_pro: true``)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from engine.models import gguf_file as gf
from engine.models.messages import message
from engine.models.resolve import model_path

MODULE = "engine.trainer.expand"


class ExpandError(ValueError):
    """A source, a count or a target refused in one line before the expansion runs."""


def check(src: str, num_expand: int, name: str | None) -> tuple[Path, Path, int]:
    """(source folder, target folder, the source's layer count), or ExpandError naming what is wrong."""
    folder = model_path(src)
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise ExpandError(str(message("models.no_config", path=folder))) from None
    text = config.get("text_config") or config
    layers = text.get("num_hidden_layers")
    if not isinstance(layers, int) or num_expand < 1 or layers % num_expand:
        raise ExpandError(str(message("models.expand_count", n=num_expand, layers=layers, path=folder)))
    name = name or f"{folder.name}-pro"
    try:
        out = gf.target_dir(name)  # a plain folder name under models/, never an existing folder
    except gf.GgufError as exc:
        raise ExpandError(str(exc)) from None
    return folder, out, layers


def cli(argv: list[str]) -> int:
    """0 expanded, 1 the expansion failed, 2 refused before it ran."""
    ap = argparse.ArgumentParser(
        prog="studio expand-model",
        description="LLaMA Pro block expansion (LLaMA-Factory's scripts/llama_pro.py): insert N identity copies of "
        "decoder layers (one after every layers/N; their o_proj and down_proj zero, so the model's outputs do not "
        "change) into $STUDIO_HOME/models/NAME. Train only the new blocks with method.freeze.use_llama_pro and "
        "trainable_layers N.",
    )
    ap.add_argument("src", metavar="SRC", help="a local model folder (models/NAME for the workspace's)")
    ap.add_argument("--num-expand", type=int, required=True, help="blocks to add; it must divide the layer count")
    ap.add_argument("--name", default=None, help="the new model folder's name (default: SRC's name + '-pro')")
    args = ap.parse_args(argv)
    try:
        src, out, layers = check(args.src, args.num_expand, args.name)
    except ExpandError as exc:
        print(f"studio expand-model: {exc}", file=sys.stderr)
        return 2
    out.parent.mkdir(parents=True, exist_ok=True)
    argv_ = [sys.executable, "-m", MODULE, str(src), "--out", str(out), "--num-expand", str(args.num_expand)]
    done = subprocess.run(argv_, env=dict(os.environ), check=False, capture_output=True, text=True)
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    if done.returncode != 0:
        return 1
    print(f"{out}: {layers} + {args.num_expand} layers")
    print(
        f"train on it with model.name_or_path: models/{out.name}, method.finetuning: freeze, "
        f"method.freeze.trainable_layers: {args.num_expand}, method.freeze.use_llama_pro: true"
    )
    return 0
