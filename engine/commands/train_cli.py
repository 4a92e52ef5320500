"""``studio train`` and ``studio validate``: run or check a spec from a terminal. Light (no torch).

``studio train`` goes through the same path as the page: the run registry records it, the launcher builds the
command, the detached runner starts it; this command then follows the run's events, prints progress, and exits 0
only when the run completed. Ctrl-C stops the run gracefully (SIGTERM, checkpoint saved).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import time
from dataclasses import replace
from pathlib import Path

from engine.core import workspace
from engine.lf.compat import load_any_spec
from engine.runs import run_end as run_end_mod
from engine.runs import submit_checks
from engine.runs.launch import add_target_arguments, build_command, target_from_arguments
from engine.runs.run_end import without_log_tail
from engine.spec.rules import spec_warnings
from engine.spec.schema import RunSpec, SpecError


def cli(argv: list[str]) -> int:
    command, rest = argv[0], argv[1:]
    parser = argparse.ArgumentParser(prog=f"studio {command}")
    parser.add_argument("spec", help="run spec YAML: ours, or a LLaMA-Factory training YAML")
    parser.add_argument("--accelerate-config", help="a LLaMA-Factory user's accelerate config YAML")
    if command == "validate":
        add_target_arguments(parser)
    if command == "train":
        parser.add_argument("--name", help="run name shown in the studio")
        parser.add_argument("--detach", action="store_true", help="start (or queue) and return at once")
    args = parser.parse_args(rest)
    if command == "train":  # a LLaMA-Factory YAML that predicts (do_predict / do_eval) runs as an evaluation
        from engine.commands.eval_cli import lf_prediction

        code = lf_prediction(args.spec)
        if code is not None:
            return code
    try:
        # validate judges the spec: a hub model this machine cannot fetch is a warning (the run may go elsewhere, or
        # the model be fetched later); train refuses it before launch
        spec = load_any_spec(args.spec, args.accelerate_config, elsewhere=command == "validate")
        elsewhere = command == "validate" and args.gpus is not None  # checked for another machine (--gpus N)
    except SpecError as exc:
        print(exc, file=sys.stderr)
        return 1
    for field, msg in spec_warnings(spec):
        print(f"warning: {field}: {msg}", file=sys.stderr)
    if command == "validate":
        try:
            build_command(spec, Path("runs/validate"), target_from_arguments(args))
        except SpecError as exc:
            print(exc, file=sys.stderr)
            return 1

        problems = submit_checks.output_problems(spec)  # the same check as `studio train`, submit and the page's form
        if problems:
            print(SpecError(problems, str(args.spec)), file=sys.stderr)
            return 1
        if spec.launch.target == "slurm":  # what `studio train` would refuse here: no sbatch, no shared folder
            from engine.runs import slurm

            problems = slurm.problems()
            if problems and not elsewhere:
                print(SpecError(problems, args.spec), file=sys.stderr)
                return 1
            for field, msg in problems:
                print(f"note: {field}: {msg} (on this machine)", file=sys.stderr)
        print("OK")
        return 0
    return train_and_follow(spec, name=args.name, detach=args.detach)


def train_and_follow(spec: RunSpec, *, name: str | None = None, detach: bool = False) -> int:
    from engine.core.events import read_events
    from engine.runs import overwrite, records
    from engine.runs import registry as runs

    out = submit_checks.output_folder(spec, workspace.runs_dir())
    replaced = overwrite.target(out)[0] if spec.output.overwrite and spec.output.output_dir else None
    try:
        run_id = runs.submit(spec, name=name)
    except (SpecError, records.RunsError) as exc:  # a RunsError is one line: no space left, the folder not created
        print(exc, file=sys.stderr)
        return 1
    record = runs.get(run_id)
    if replaced is not None:
        print(replaced.line(), flush=True)
    print(f"run {run_id}: {record.status} in {record.run_dir}", flush=True)
    if detach:
        return 0
    events_path = Path(record.run_dir) / "events.jsonl"
    offset = 0
    warned = False
    try:
        while True:
            new, offset = read_events(events_path, offset)
            for event in new:
                _say(event)
            try:
                runs.schedule()
                record = runs.get(run_id)
            except sqlite3.Error as exc:  # a full disk: the registry cannot be written; the run folder still tells
                if not warned:
                    why = run_end_mod.write_problem(exc, workspace.home()) or exc
                    print(f"warning: the run registry: {why}", flush=True)
                    warned = True
                record = _from_folder(record)
            if record.status in ("completed", "failed", "stopped"):
                new, offset = read_events(events_path, offset)
                for event in new:
                    _say(event)
                break
            time.sleep(0.5)
    except KeyboardInterrupt:
        print("stopping (checkpoint is being saved)...", flush=True)
        runs.stop(run_id)
        record = runs.get(run_id)
    # the reason's first line: a failed run's recorded reason goes on with its log's last lines (a traceback), which
    # belong in the log, not in the one line a person reads here
    reason = without_log_tail(str(getattr(record, "reason", None) or ""))
    print(f"run {run_id}: {record.status}" + (f" ({reason})" if reason else ""))
    if record.status == "failed":
        print(f"its log: {record.log_path} (studio runs logs {run_id})", file=sys.stderr)
    return 0 if record.status == "completed" else 1


SAID = ".said.json"  # in the workspace: facts about this machine said once, not on every run


def _say(event: dict) -> None:
    """Print an event's line; a fact about the machine (no GPU metrics here) once per workspace and reason, as a note:
    it printed as a warning on every run of a machine without GPUs."""
    p = event.get("payload") or {}
    if event.get("type") == "warning" and p.get("field") == "metrics":
        path = workspace.home() / SAID
        try:
            said = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            said = {}
        if said.get("metrics") == p.get("message"):
            return
        print(f"note: {p.get('message')} (said once per workspace)", flush=True)
        try:
            path.write_text(json.dumps({**said, "metrics": p.get("message")}), encoding="utf-8")
        except OSError:
            pass  # a full disk: said again next time
        return
    print(format_event(event), flush=True)


def _from_folder(record):
    """The run's end as its folder tells it (exit.json, the last event) while the registry cannot be updated."""
    ex = run_end_mod.read_exit(record.run_dir)
    if ex is None:
        return record
    status, reason = run_end_mod.derive_final(record, ex.get("returncode"), ex.get("signal"), ex.get("problem"))
    return replace(record, status=status, reason=str(reason))


def _figure(value) -> str:
    """A loss as the user can read it: GRPO's surrogate loss is tiny (4 significant digits, not 0.0000)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return "-" if value is None else str(value)
    return f"{value:.4f}" if abs(value) >= 1e-3 or value == 0 else f"{value:.3g}"


def _rewards(metrics: dict) -> str:
    """GRPO's step figures: the total reward with its spread within the groups, and each function's mean."""
    if "reward" not in metrics:
        return ""
    names = [k[8:-5] for k in metrics if k.startswith("rewards/") and k.endswith("/mean")]
    each = ", ".join(f"{n} {metrics[f'rewards/{n}/mean']:.3f}" for n in names)
    std = metrics.get("reward_std")
    return (
        f"  reward {metrics['reward']:.3f}"
        + (f" (std {std:.3f})" if std is not None else "")
        + (f" [{each}]" if each else "")
    )


def _completions(step, samples: list[dict]) -> str:
    """The sampled completions of a GRPO step, one line each: its total, each reward and the text."""
    lines = [f"completions (step {step}):"]
    for s in samples:
        rewards = ", ".join(f"{k} {'-' if v is None else f'{v:g}'}" for k, v in (s.get("rewards") or {}).items())
        total = s.get("total")
        text = " ".join(str(s.get("completion") or "").split())
        text = text if len(text) <= 100 else text[:99] + "…"
        lines.append(f"  total {'-' if total is None else f'{total:g}'} [{rewards}]  {text!r}")
    if not samples:
        lines.append("  (none kept)")
    return "\n".join(lines)


def format_event(event: dict) -> str:
    p, step, kind = event.get("payload", {}), event.get("step"), event.get("type")
    if str(kind).startswith("download_"):  # the run's first phase: its model downloads (engine.models.download)
        from engine.models.download import describe_event

        return describe_event(event)
    if kind == "log":
        eta = p.get("eta_seconds")
        tps = p.get("tokens_per_second")
        return (
            f"step {step}/{p.get('max_steps', '?')}  loss {_figure(p.get('loss'))}  lr {p.get('learning_rate', 0):.2e}"
            + _rewards(p.get("metrics") or {})
            + f"  tok/s {tps if tps is not None else '-'}  eta {f'{eta:.0f}s' if eta is not None else '-'}"
        )
    if kind == "completions":
        return _completions(step, p.get("samples") or [])
    if kind == "eval":
        return f"step {step}  eval " + "  ".join(f"{k} {v:.4f}" for k, v in p.items() if isinstance(v, (int, float)))
    if kind == "failed":
        return f"FAILED ({p.get('cause')}): {p.get('error')}"
    if kind == "run_started":
        return (
            f"started: {p.get('device')} x{p.get('world_size')} {p.get('backend')} {p.get('precision')}, "
            f"{p.get('total_steps')} steps, {p.get('trainable_params')}/{p.get('total_params')} params trainable"
        )
    return (
        f"{kind}"
        + (f" (step {step})" if step is not None else "")
        + (f": {', '.join(f'{k}={v}' for k, v in p.items() if not isinstance(v, (dict, list)))}" if p else "")
    )
