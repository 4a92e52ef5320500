"""Evaluations as registry runs: the spec resolved into a plan (which weights, which rows, checked before launch),
submit, follow, cancel, list. Light: stdlib, the registry, engine.eval; never torch.

An evaluation is a command run of the registry (``submit_command``, tag ``eval``) running
``python -m engine.trainer.evaluate --plan RUN_DIR/eval_plan.json``, like a merge (``engine.export.merge_jobs``) or a
download (``engine.jobs.downloads``): its own folder (``spec.yaml``: the evaluation spec as given; ``eval_plan.json``:
what it resolved to; ``events.jsonl``; ``results.json``, ``predictions.jsonl``, ``report.html``), the detached
wrapper, the queue (a CPU slot, or a GPU), Stop (SIGTERM: the models done so far keep their results) and the Runs tab.
``EvalJob(run_id)`` is rebuilt from the registry row and the folder, so a reloaded page or a restarted studio follows
it. The evaluated run's folder gets a line in its ``evaluations.jsonl`` (the run's own page lists them).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from engine.core import acting, belongings, member_secrets, workspace
from engine.core import events as ev
from engine.eval import lm_tasks
from engine.eval.judge import page_problems
from engine.eval.lm_tasks import resolve_tasks
from engine.eval.messages import EvalError, message
from engine.eval.spec import GENERATION_MEASURES, ROW_MEASURES, EvalSpec, columns, dump_eval_spec, parse_eval_spec
from engine.jobs.command_job import CommandJob, job_record, newest_jobs
from engine.runs import checkpoints, owners, records
from engine.runs import registry as runs

EVAL_TAG = "eval"
MODULE = "engine.trainer.evaluate"
STATES = {"queued": "queued", "running": "running", "completed": "finished", "failed": "failed"}
STATES["stopped"] = "cancelled"


# ----------------------------------------------------------------------------------------------- the plan
def _find_run(ref: str) -> records.RunRecord:
    try:
        return runs.get(ref, refresh_status=True)
    except records.RunsError:
        pass
    path = Path(ref).expanduser()
    if path.is_dir():
        for rec in runs.list_runs(refresh_status=False):
            if path.resolve() in (Path(rec.run_dir).resolve(), Path(rec.output_dir).resolve()):
                return rec
    raise EvalError([("models.run", message("eval.no_run", run=ref))])


def _weights_problem(folder: Path, adapter: bool) -> str | None:
    """Why ``folder`` cannot be evaluated (None when it can): the config and every weights file whole."""
    config = "adapter_config.json" if adapter else "config.json"
    if not (folder / config).is_file():
        return f"no {config}"
    weights = list(folder.glob("*.safetensors")) + [b for b in folder.glob("*.bin") if b.name != "training_args.bin"]
    if not weights:
        return "no weights (*.safetensors)"
    for index in folder.glob("*.index.json"):
        try:
            shards = set(json.loads(index.read_text()).get("weight_map", {}).values())
        except (OSError, ValueError):
            return f"{index.name} is not valid JSON"
        missing = sorted(s for s in shards if not (folder / s).is_file())
        if missing:
            return f"shard {missing[0]} is missing"
    for w in weights:
        if w.suffix == ".safetensors" and not checkpoints._safetensors_whole(w):
            return f"{w.name} is cut short"
    return None


def _last_step(events: list[dict]) -> int:
    steps = [e.get("step") for e in events if e["type"] in ("log", "checkpoint", "finished")]
    return max([s for s in steps if isinstance(s, int)], default=0)


def resolve(spec: EvalSpec | dict | str | Path) -> dict:
    """The plan the evaluation subprocess runs: targets (label, kind, step, model folder, adapter folder), data,
    measures, generation, device, the training loss by step. EvalError listing every problem, naming its field."""
    spec = parse_eval_spec(spec)
    m = spec.models
    problems: list[tuple[str, object]] = []
    targets: list[dict] = []
    run_spec = rec = None
    train_loss: list[list[float]] = []
    if m.run:
        rec = _find_run(m.run)
        if rec.kind != "train":
            raise EvalError([("models.run", message("eval.not_training_run", run=m.run))])
        try:
            run_spec = rec.load_spec()
        except Exception as exc:  # noqa: BLE001 - any unreadable spec is named
            raise EvalError([("models.run", message("eval.run_spec_bad", run=rec.id, error=exc))]) from None
        events = ev.read_all(rec.events_path)
        train_loss = [
            [e["step"], e["payload"]["loss"]] for e in events if e["type"] == "log" and "loss" in e["payload"]
        ]
        base = run_spec.model.name_or_path
        adapter = run_spec.method.adapter
        if m.base:
            targets.append({"label": "base", "kind": "base", "step": 0, "model": base, "adapter": None})
        ckpts = sorted(checkpoints.newest_first(Path(rec.output_dir) / "checkpoints"), key=checkpoints.step)
        wanted = [] if m.checkpoints == "none" else ckpts if m.checkpoints == "all" else None
        if wanted is None:
            by_step = {checkpoints.step(c): c for c in ckpts}
            wanted = []
            for s in m.checkpoints:
                if s in by_step:
                    wanted.append(by_step[s])
                else:
                    have = ", ".join(str(k) for k in sorted(by_step)) or "none"
                    problems.append(
                        ("models.checkpoints", message("eval.no_checkpoint", run=rec.id, step=s, have=have))
                    )
        elif m.checkpoints == "all" and not ckpts:
            problems.append(
                (
                    "models.checkpoints",
                    message("eval.no_checkpoints", run=rec.id, path=Path(rec.output_dir) / "checkpoints"),
                )
            )
        for c in wanted:
            why = _weights_problem(c, adapter)
            if why:
                problems.append(("models.checkpoints", message("eval.checkpoint_incomplete", path=c, why=why)))
                continue
            targets.append(
                {
                    "label": c.name,
                    "kind": "checkpoint",
                    "step": checkpoints.step(c),
                    "model": base if adapter else str(c),
                    "adapter": str(c) if adapter else None,
                }
            )
        if m.final:
            final = runs.weights_dir(rec)
            if _weights_problem(final, adapter):
                problems.append(("models.final", message("eval.no_final", run=rec.id, path=final, status=rec.status)))
            else:
                targets.append(
                    {
                        "label": "final",
                        "kind": "final",
                        "step": _last_step(events),
                        "model": base if adapter else str(final),
                        "adapter": str(final) if adapter else None,
                    }
                )
    base_model = m.base_model
    if base_model:
        local = Path(base_model).expanduser()
        if local.exists() and _weights_problem(local, False):
            problems.append(("models.base_model", message("eval.not_model_folder", path=local)))
        base_model = str(local.resolve()) if local.exists() else base_model
        if not m.run and (m.base or not m.adapters):
            targets.append({"label": "base", "kind": "base", "step": 0, "model": base_model, "adapter": None})
    for i, a in enumerate(m.adapters):
        if not base_model:
            problems.append(("models.base_model", message("eval.no_base")))
            break
        folder = Path(a).expanduser()
        why = _weights_problem(folder, True)
        if why:
            problems.append((f"models.adapters[{i}]", message("eval.checkpoint_incomplete", path=folder, why=why)))
        else:
            targets.append(
                {
                    "label": folder.name,
                    "kind": "adapter",
                    "step": None,
                    "model": base_model,
                    "adapter": str(folder.resolve()),
                }
            )
    for i, p in enumerate(m.paths):
        folder = Path(p).expanduser()
        if _weights_problem(folder, False):
            problems.append((f"models.paths[{i}]", message("eval.not_model_folder", path=folder)))
        else:
            targets.append(
                {"label": folder.name, "kind": "model", "step": None, "model": str(folder.resolve()), "adapter": None}
            )
    typed = [("models.base_model", m.base_model)] + [(f"models.adapters[{i}]", a) for i, a in enumerate(m.adapters)]
    for field, given in typed + [(f"models.paths[{i}]", p) for i, p in enumerate(m.paths)]:
        if given and Path(given).expanduser().exists() and (why := owners.path_problem(given, field=field)):
            problems.append((field, why))  # team mode: a folder of another member's run
    if not targets and not problems:
        problems.append(("models", message("eval.no_models")))
    data = _data_plan(spec, run_spec, rec, problems)
    tasks = resolve_tasks(spec.lm_eval.tasks, problems) if "lm_eval" in spec.measures else []
    if tasks and not acting.at_shell():  # the page: task files (and the code beside them) from the workspace only
        named = {field for field, _ in problems}
        problems += [p for p in lm_tasks.page_problems(spec.lm_eval.tasks) if p[0] not in named]
    judge = None
    if "judge" in spec.measures:
        judge = spec.judge.model_dump()  # the key's variable name only: its value stays in the environment
        name = spec.judge.api_key_env
        if name and not member_secrets.environ().get(name):  # in team mode the account's own key counts
            problems.append(("judge.api_key_env", message("eval.judge_key_unset", name=name)))
        if not acting.at_shell():  # the page: only the keys and hosts the operator allowed it (engine.core.page_trust)
            problems += page_problems(spec.judge)
    if problems:
        raise EvalError(problems)
    device = spec.device
    if device == "auto":
        from engine.machine import hardware

        device = "cuda" if hardware.detect().has_gpu else "cpu"
    seen: dict[str, int] = {}
    for t in targets:  # labels are the table's rows: keep them unique
        n = seen[t["label"]] = seen.get(t["label"], 0) + 1
        t["label"] += f" ({n})" if n > 1 else ""
    return {
        "targets": targets,
        "data": data,
        "measures": list(spec.measures),
        "columns": columns(spec.measures, [t["name"] for t in tasks]),
        "lm_eval": {"tasks": tasks, "num_fewshot": spec.lm_eval.num_fewshot, "limit": spec.lm_eval.limit},
        "judge": judge,
        "generation": spec.generation.model_dump(),
        "device": device,
        "run_id": rec.id if rec else None,
        "train_loss": train_loss,
        "lf_output_dir": str(Path(spec.lf_output_dir).expanduser().resolve()) if spec.lf_output_dir else None,
        "lf_prefix": spec.lf_prefix,
    }


def _data_plan(spec: EvalSpec, run_spec, rec, problems: list) -> dict:
    from engine.data import dataset_registry as reg
    from engine.data import rows as data_rows

    d = spec.data
    rd = run_spec.data if run_spec is not None else None
    ddir = Path(d.dataset_dir or (rd.dataset_dir if rd else None) or workspace.data_dir()).expanduser()
    if not ddir.is_absolute():
        ddir = workspace.home() / ddir
    plan = {
        "dataset_dir": str(ddir),
        "datasets": [],
        "held_out": None,
        "limit": d.limit,
        "template": spec.template or (rd.template if rd else "auto"),
        "cutoff_len": d.cutoff_len or (rd.cutoff_len if rd else 1024),
        "train_on_prompt": rd.train_on_prompt if rd else False,
        "mask_history": rd.mask_history if rd else False,
        "enable_thinking": rd.enable_thinking if rd else True,
        "tool_format": (None if not rd or rd.tool_format == "template" else rd.tool_format),
        "max_samples": d.max_samples,
        "text": False,
    }
    if not any(m in ROW_MEASURES for m in spec.measures):
        return plan  # lm-eval only: its tasks bring their own data
    if d.source == "held_out":
        if rec is None:
            problems.append(("data.source", message("eval.no_dataset")))
            return plan
        if rd.eval_datasets:
            plan["datasets"] = list(rd.eval_datasets)
        elif rd.val_size > 0:
            if len(rd.datasets) > 1 and rd.mix != "concat":
                problems.append(("data.source", message("eval.interleaved", run=rec.id, mix=rd.mix)))
            plan["datasets"] = list(rd.datasets)
            plan["held_out"] = {"val_size": rd.val_size, "seed": run_spec.train.seed}
            plan["max_samples"] = rd.max_samples
        else:
            problems.append(("data.source", message("eval.no_held_out", run=rec.id)))
            return plan
    else:
        if not d.datasets:
            problems.append(("data.datasets", message("eval.no_dataset")))
            return plan
        plan["datasets"] = list(d.datasets)
    try:
        info = reg.read_dataset_info(ddir)
    except Exception as exc:  # noqa: BLE001 - a missing or broken registry is named
        problems.append(("data.dataset_dir", message("eval.data_problem", problem=exc)))
        return plan
    for name in plan["datasets"]:
        raw = info.get(name) if belongings.usable_dataset(ddir, name) else None  # another member's: unknown
        if raw is None:
            problems.append(("data.datasets", message("eval.data_problem", problem=f"no dataset {name!r} in {ddir}")))
            continue
        # the registry's own reading of the entry (LF's alpaca default: instruction / input / output)
        text = isinstance(raw, dict) and data_rows.DatasetEntry.from_info(name, raw).is_text
        gen = [x for x in spec.measures if x in GENERATION_MEASURES]
        if text:
            plan["text"] = True
            if gen:
                problems.append(("measures", message("eval.no_references", name=name, measures=", ".join(gen))))
        for p in reg.check_datasets([name], ddir, "pt" if text else "sft"):
            problems.append(("data.datasets", message("eval.data_problem", problem=p.located())))
    return plan


# ----------------------------------------------------------------------------------------------- submit / follow
def submit_eval(spec: EvalSpec | dict | str | Path, *, name: str | None = None) -> str:
    """Check and resolve the spec (EvalError before anything runs), queue the evaluation; its run id."""
    spec = parse_eval_spec(spec)
    plan = resolve(spec)
    argv = [sys.executable, "-m", MODULE, "--plan", "{run_dir}/eval_plan.json", "--events", "{run_dir}/events.jsonl"]
    label = name or spec.name or f"eval {plan['run_id'] or plan['targets'][0]['label']}"
    gpus = 1 if plan["device"] == "cuda" else 0
    run_id = runs.submit_command(argv, name=label, tags=[EVAL_TAG], gpus=gpus, start=False)
    rdir = Path(runs.get(run_id, refresh_status=False).run_dir)
    (rdir / "spec.yaml").write_text(dump_eval_spec(spec), encoding="utf-8")
    (rdir / "eval_plan.json").write_text(json.dumps(plan, indent=1, ensure_ascii=False), encoding="utf-8")
    if plan["judge"] and plan["judge"]["api_key_env"]:  # its name: the scheduler passes the value in memory only
        (rdir / "pass_env.json").write_text(json.dumps([plan["judge"]["api_key_env"]]), encoding="utf-8")
    if plan["run_id"]:
        src = runs.get(plan["run_id"], refresh_status=False)
        line = {
            "eval_id": run_id,
            "created": time.time(),
            "run_dir": str(rdir),
            "targets": [t["label"] for t in plan["targets"]],
        }
        with open(Path(src.run_dir) / "evaluations.jsonl", "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")
    runs.schedule()
    return run_id


class EvalJob(CommandJob):
    """One evaluation, read back from its registry run and folder; ``poll()`` is cheap (a UI timer may call it)."""

    what = "evaluation"
    events_prefix = "eval"

    def __init__(self, run_id: str):
        rec = job_record(run_id, MODULE, lambda why: EvalError([("run", why)]), message("eval.not_eval", id=run_id))[0]
        self.run_id, self.run_dir = rec.id, Path(rec.run_dir)
        self.plan = json.loads((self.run_dir / "eval_plan.json").read_text(encoding="utf-8"))
        self._read_events_from(self.run_dir / "events.jsonl")

    def results(self) -> dict | None:
        """results.json (written after every model, so a failed or cancelled evaluation keeps what it finished)."""
        try:
            return json.loads((self.run_dir / "results.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def predictions(self) -> list[dict]:
        return ev.read_jsonl(self.run_dir / "predictions.jsonl")[0]

    def fields(self, s) -> dict:
        return {
            "progress": s.progress,
            "detail": s.detail,
            "results": self.results(),
            "run_dir": str(self.run_dir),
            "report": str(self.run_dir / "report.html"),
        }


def list_evals(limit: int = 20, run_id: str | None = None) -> list[EvalJob]:
    """The newest evaluations first (``run_id``: only those of that training run)."""
    keep = None if run_id is None else (lambda job: job.plan.get("run_id") == run_id)
    return newest_jobs(EVAL_TAG, EvalJob, (EvalError, OSError, ValueError), limit, keep, refresh_status=False)
