"""The reward dry run before a GRPO launch: ``studio rewards try SPEC [--rows N] [--source answers|model]`` and
``try_rewards`` for the page.

Light: stdlib only. The reward functions (a user's file among them) run in a subprocess,
``python -m engine.trainer.reward_dry_run``, started with an argv list and an explicit environment; this module reads
its JSON result and prints a table: one line per row, one column per reward function, and each function's error
(naming the function, row and value) under it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from engine.core import accounts, acting

ROOT = Path(__file__).resolve().parents[2]


def try_rewards(spec: Any, rows: int = 8, source: str = "answers", timeout: float = 600) -> dict:
    """Run the spec's reward functions on its first ``rows`` prompts in a subprocess; the result (rows, and per
    reward its scores or error), or ``{"error": ...}``. ``spec``: a RunSpec or a spec / LLaMA-Factory YAML path."""
    from engine.runs.launch import anchor_paths, owner_environment
    from engine.spec.schema import save_spec

    with tempfile.TemporaryDirectory(prefix="studio-rewards-") as tmp:
        if isinstance(spec, (str, Path)):
            from engine.lf.compat import load_any

            spec = load_any(spec, context=False)  # checked in the subprocess, with its files, as the trainer does
        spec = spec.model_copy(deep=True)
        anchor_paths(spec)  # models/... is the workspace's, not the repository's (the subprocess's working folder)
        spec_path = str(save_spec(spec, Path(tmp) / "spec.yaml"))
        out = str(Path(tmp) / "result.json")
        argv = [
            sys.executable,
            "-m",
            "engine.trainer.reward_dry_run",
            spec_path,
            "--rows",
            str(rows),
            "--source",
            source,
        ]
        if acting.at_shell():  # the spec is checked again there as the shell's (engine.core.acting)
            argv.append("--as-shell")
        # the page's login stays behind; a member's dry run holds their secrets, none of the operator's unbound ones
        env = {k: v for k, v in os.environ.items() if k != "STUDIO_AUTH"}
        env = owner_environment(env, accounts.owner_of_new())
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
        env.setdefault("OMP_NUM_THREADS", "1")
        try:
            proc = subprocess.run(
                [*argv, "--out", out], env=env, capture_output=True, text=True, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired:
            return {"error": f"the dry run took longer than {timeout:g} s"}
        try:
            return json.loads(Path(out).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-5:]
            return {"error": f"the dry run ended with code {proc.returncode}: " + " | ".join(tail)}


def _cell(value: Any) -> str:
    return "-" if value is None else f"{value:g}"


def table(result: dict, width: int = 40) -> str:
    """The result as text: a row per prompt (dataset, row, completion), a column per reward, the errors below."""
    if "rows" not in result:
        return f"error: {result.get('error')}"
    rewards = result["rewards"]
    names = [r["name"] for r in rewards]
    head = ["dataset:row", "completion".ljust(width), *names]
    lines = ["  ".join(head)]
    for i, row in enumerate(result["rows"]):
        text = " ".join(str(row["completion"]).split())
        text = (text[: width - 1] + "…") if len(text) > width else text.ljust(width)
        cells = ["error" if r["scores"] is None else _cell(r["scores"][i]).rjust(len(r["name"])) for r in rewards]
        lines.append("  ".join([f"{row['dataset']}:{row['row']}", text, *cells]))
    for r in rewards:
        scored = [v for v in (r["scores"] or []) if v is not None]
        if r.get("note"):
            lines.append(f"{r['name']}: {r['note']}")
        if r["error"]:
            lines.append(f"{r['name']}: ERROR {r['error']}")
        else:
            mean = sum(scored) / len(scored) if scored else None
            lines.append(f"{r['name']}: mean {_cell(mean)} over {len(scored)} scored rows (weight {r['weight']:g})")
    if result.get("error"):
        lines.append(f"error: {result['error']}")
    return "\n".join(lines)


def _rows(text: str) -> int:
    """--rows: a whole number of prompts from 1 to 256 (argparse turns the ValueError into one line, exit 2)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= n <= 256:
        raise argparse.ArgumentTypeError(f"{n}: give 1 to 256 prompts")
    return n


def cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="studio rewards")
    sub = parser.add_subparsers(dest="action", required=True)
    t = sub.add_parser("try", help="run a GRPO spec's reward functions on real rows before training")
    t.add_argument("spec", help="a run spec (or LLaMA-Factory YAML) with method.stage grpo")
    t.add_argument("--rows", type=_rows, default=8, help="how many prompts (default 8, at most 256)")
    t.add_argument(
        "--source",
        choices=("answers", "model"),
        default="answers",
        help="completions to score: the dataset's own answers, or the base model's, generated now",
    )
    args = parser.parse_args(argv)
    from engine.lf.compat import load_any_spec
    from engine.spec.schema import SpecError

    try:
        spec = load_any_spec(args.spec)
    except SpecError as exc:
        print(exc, file=sys.stderr)
        return 1
    if spec.method.stage != "grpo":
        print(
            f"{args.spec}: method.stage is {spec.method.stage}; reward functions belong to stage grpo", file=sys.stderr
        )
        return 1
    result = try_rewards(spec, args.rows, args.source)
    print(table(result))
    failed = "rows" not in result or result.get("error") or any(r["error"] for r in result["rewards"])
    return 1 if failed else 0
