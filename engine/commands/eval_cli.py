"""``studio eval RUN_ID|SPEC``: evaluate a run's base, checkpoints and final weights (or an evaluation spec YAML) as
an evaluation run, follow it and print the table, the best row and whether each tuned row beats the base
(``engine.eval.verdict``), and the models' degenerate answers. Light: stdlib, engine.jobs.evals, engine.eval; never
torch.

Exit status: 0 the evaluation completed (the table is printed), 1 it failed (what finished is printed and kept),
2 bad input (every problem named by its field, nothing launched), 130 cancelled (Ctrl-C stops it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engine.eval import report
from engine.eval.messages import EvalError
from engine.eval.spec import DEFAULT_MEASURES, MEASURES, parse_eval_spec
from engine.jobs import evals
from engine.jobs.command_job import new_detail


def build_spec(args) -> dict:
    """The evaluation spec from the command line: a spec YAML or a run id, the options given over it."""
    target = args.target
    if target.endswith((".yaml", ".yml")) and Path(target).is_file():
        data = parse_eval_spec(target).model_dump(mode="json")
    else:
        data = {"models": {"run": target}}
    models, d, g = data.setdefault("models", {}), data.setdefault("data", {}), data.setdefault("generation", {})
    if args.base:
        models["base"] = True
    if args.no_final:
        models["final"] = False
    if args.checkpoints:
        ck = args.checkpoints.strip()
        models["checkpoints"] = ck if ck in ("all", "none") else [int(s) for s in ck.split(",") if s.strip()]
    if args.data:
        d["source"], d["datasets"] = "dataset", [s for s in args.data.split(",") if s]
    if args.limit:
        d["limit"] = args.limit
    if args.measures:
        data["measures"] = [m.strip() for m in args.measures.split(",") if m.strip()]
    if args.tasks:  # lm-eval tasks: measured with them
        data.setdefault("lm_eval", {})["tasks"] = [x.strip() for x in args.tasks.split(",") if x.strip()]
        if "lm_eval" not in data.setdefault("measures", list(DEFAULT_MEASURES)):
            data["measures"].append("lm_eval")
    for key in ("max_new_tokens", "batch_size", "temperature"):
        if getattr(args, key) is not None:
            g[key] = getattr(args, key)
    if args.device:
        data["device"] = args.device
    return data


def _eta(status: dict) -> str:
    eta = (status["progress"] or {}).get("eta_seconds")
    return f" (about {eta:.0f} s left)" if eta else ""


def follow(run_id: str, *, echo: bool = True, interval: float = 0.5) -> dict:
    job = evals.EvalJob(run_id)
    return job.follow(new_detail("eval", _eta) if echo else None, interval=interval)


def cli(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="studio eval",
        description="Evaluate a run's base, checkpoints and final weights on held-out rows or a dataset: loss, "
        "perplexity, BLEU-4, ROUGE-1/2/L (LLaMA-Factory's), exact match, accuracy. Prints the table.",
    )
    ap.add_argument("target", metavar="RUN_ID|SPEC", help="a training run's id, or an evaluation spec YAML")
    ap.add_argument("--checkpoints", default=None, help="all, none, or steps: 10,20")
    ap.add_argument("--base", action="store_true", help="also evaluate the base model")
    ap.add_argument("--no-final", action="store_true", help="leave out the run's final weights")
    ap.add_argument("--data", default=None, help="registered dataset name(s) (default: the run's held-out rows)")
    ap.add_argument("--measures", default=None, help=f"comma-separated, of {', '.join(MEASURES)}")
    ap.add_argument("--limit", type=int, default=None, help="evaluate the first N rows")
    ap.add_argument(
        "--tasks", default=None, help="lm-eval tasks, comma-separated: names it knows, task YAML files, studio_demo_mc"
    )
    ap.add_argument("--max-new-tokens", type=int, default=None)
    ap.add_argument("--batch-size", type=int, default=None)
    ap.add_argument("--temperature", type=float, default=None, help="0 (default): greedy")
    ap.add_argument("--device", choices=["auto", "cpu", "cuda"], default=None)
    ap.add_argument("--detach", action="store_true", help="queue it and return its run id")
    args = ap.parse_args(argv)
    try:
        run_id = evals.submit_eval(build_spec(args))
    except (EvalError, ValueError) as exc:
        print(f"studio eval: {exc}", file=sys.stderr)
        return 2
    print(f"[eval] run {run_id}")
    if args.detach:
        return 0
    status = follow(run_id)
    results = status["results"]
    if results and results.get("rows"):
        preds = evals.EvalJob(run_id).predictions()
        print(report.text_table(results, preds))
        said = report.text_verdict(results, preds)
        if said:
            print(said)
        print(f"report: {status['report']}")
    if status["state"] == "finished":
        return 0
    print(f"studio eval: {status['state']}: {status['error']}", file=sys.stderr)
    return 130 if status["state"] == "cancelled" else 1


def lf_prediction(path: str) -> int | None:
    """``studio train FILE`` where FILE is a LLaMA-Factory YAML that predicts or evaluates (``do_predict`` /
    ``do_eval`` without ``do_train``): run it as an evaluation that writes LF's files in its output_dir and print
    the table; the exit status as ``cli``'s. None when FILE is not such a YAML (it is trained as usual)."""
    import yaml

    from engine.eval.lf_predict import is_prediction, to_eval_spec
    from engine.spec.schema import read_yaml_file

    try:
        data = read_yaml_file(path)
    except (OSError, yaml.YAMLError):
        return None  # the training path names the problem
    if not is_prediction(data):
        return None
    try:
        spec, notes = to_eval_spec(data, Path(path).resolve().parent)
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
        run_id = evals.submit_eval(spec)
    except EvalError as exc:
        print(f"studio train: {path} (LLaMA-Factory prediction): {exc}", file=sys.stderr)
        return 2
    print(f"[eval] {path}: LLaMA-Factory {spec['lf_prefix']} as evaluation run {run_id}")
    status = follow(run_id)
    if status["results"] and status["results"].get("rows"):
        print(report.text_table(status["results"]))
    if status["state"] == "finished":
        print(f"[eval] wrote LLaMA-Factory's files in {spec['lf_output_dir']}")
        return 0
    print(f"studio train: {status['state']}: {status['error']}", file=sys.stderr)
    return 130 if status["state"] == "cancelled" else 1
