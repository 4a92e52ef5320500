"""The reward dry run's subprocess: ``python -m engine.trainer.reward_dry_run SPEC --rows N --source answers|model
--out RESULT.json``.

Heavy: transformers (and torch for ``--source model``). Reads the first N prompts of the spec's datasets as a GRPO
run reads them (``engine.trainer.grpo.prompt_rows``), takes a completion per row (the dataset's own answer, or the
base model's, generated here with the spec's temperature and completion length), runs every reward function of
``method.grpo.rewards`` on them (a user's file in its confined worker, ``engine.trainer.reward_confine``; never in
the page or CLI process; ``--as-shell``: the spec is checked as the shell's, its reward files anywhere) and writes one
JSON result: the rows, and per reward its scores or the error that names the function, row and value. Started by
``engine.jobs.rewards_try``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def completions_from_model(spec, tokenizer, prompts: list[str]) -> list[str]:
    """One sampled completion per prompt from the base model (seeded by train.seed)."""
    import torch
    from transformers import AutoModelForCausalLM, set_seed

    set_seed(spec.train.seed)
    g = spec.method.grpo
    model = AutoModelForCausalLM.from_pretrained(spec.model.name_or_path, revision=spec.model.revision)
    model.eval()
    out = []
    for prompt in prompts:
        ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
        with torch.no_grad():
            gen = model.generate(
                **ids,
                do_sample=True,
                temperature=g.temperature,
                top_p=g.top_p,
                max_new_tokens=g.max_completion_length,
                pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id,
            )
        out.append(tokenizer.decode(gen[0, ids["input_ids"].shape[1] :], skip_special_tokens=True))
    return out


def dry_run(spec, n: int, source: str) -> dict:
    from transformers import AutoTokenizer

    from engine.spec.rules import resolve_dataset_dir
    from engine.trainer.grpo import prompt_rows
    from engine.trainer.rewards import RewardError, build_rewards

    tokenizer = AutoTokenizer.from_pretrained(spec.model.name_or_path, revision=spec.model.revision)
    stats = {"truncated": 0}
    rows = prompt_rows(spec, tokenizer, spec.data.datasets, resolve_dataset_dir(spec), stats)[:n]
    if source == "model":
        completions = completions_from_model(spec, tokenizer, [r["prompt"] for r in rows])
    else:
        completions = [r["answer"] if r["answer"] is not None else "" for r in rows]
    kwargs = {
        "answer": [r["answer"] for r in rows],
        "dataset": [r["dataset"] for r in rows],
        "row": [r["row"] for r in rows],
        "completion_ids": [tokenizer(c, add_special_tokens=False)["input_ids"] for c in completions],
    }
    result = {
        "source": source,
        "rows": [{**r, "completion": c} for r, c in zip(rows, completions)],
        "rewards": [],
    }
    specs = spec.method.grpo.rewards
    try:
        rewards = build_rewards(specs, template=spec.data.template)
    except Exception as exc:  # noqa: BLE001 - a user file that does not import: say so for every reward
        return result | {"error": f"{type(exc).__name__}: {exc}"}
    for r, reward in zip(specs, rewards):
        entry = {"name": reward.__name__, "kind": r.kind, "weight": r.weight, "scores": None, "error": None}
        entry["note"] = getattr(reward, "note", "")  # a python reward's confinement that this machine lacks
        try:
            entry["scores"] = reward(prompts=[x["prompt"] for x in rows], completions=completions, **kwargs)
        except RewardError as exc:
            entry["error"] = str(exc)
        result["rewards"].append(entry)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.trainer.reward_dry_run")
    parser.add_argument("spec")
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--source", choices=("answers", "model"), default="answers")
    parser.add_argument("--out", required=True)
    parser.add_argument("--as-shell", action="store_true", help="checked as the person at the shell's spec")
    args = parser.parse_args(argv)
    from engine.core import acting
    from engine.lf.compat import load_any

    try:
        if args.as_shell:  # started by `studio rewards try`: its reward files may be anywhere (engine.core.acting)
            with acting.shell():
                spec = load_any(args.spec)
        else:
            spec = load_any(args.spec)
        result = dry_run(spec, args.rows, args.source)
    except Exception as exc:  # noqa: BLE001 - the caller prints the cause
        result = {"error": f"{type(exc).__name__}: {exc}"}
    tmp = Path(args.out + ".tmp")
    tmp.write_text(json.dumps(result, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, args.out)
    return 0 if "error" not in result else 1


if __name__ == "__main__":
    sys.exit(main())
