"""lm-evaluation-harness as a measure of an evaluation (``engine.trainer.evaluate``): its own ``HFLM`` on the model
folder (an adapter through lm-eval's ``peft=``), its ``simple_evaluate`` on the plan's tasks, per task the accuracy
(``acc``; a generative task such as gsm8k: its ``exact_match``, the fraction answered right) ×100 in the column
``TASK/acc``, and every document's scored choices kept (``lm_eval_samples.jsonl``).

Local task YAMLs run offline: each is registered through a small YAML of our own in the evaluation's folder that
``include``-s it (lm-eval merges the two) and gives its ``data_files`` as absolute paths, so a task file reads the
JSONL beside it wherever the evaluation runs. Tasks lm-eval knows by name are indexed only when one is asked for;
their data comes from the hub or its cache (offline and not cached: the evaluation fails naming the task, before
any model is evaluated). Heavy: lm_eval (torch, transformers, datasets); only in the evaluation subprocess.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import yaml

from engine.eval.lm_tasks import absolute, read_task
from engine.eval.messages import message


class TaskProblem(Exception):
    """A task that cannot run; ``msg`` names it and the cause."""

    def __init__(self, msg):
        self.msg = msg
        super().__init__(str(msg))


def _offline() -> bool:
    return any(
        os.environ.get(k, "").lower() in ("1", "true", "yes") for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
    )


def prepare(lm_plan: dict, out: Path):
    """The TaskManager that knows the plan's tasks, each task's data loaded once (so a missing one fails here, named,
    before any model runs); TaskProblem otherwise."""
    from lm_eval.tasks import TaskManager, get_task_dict

    folder = out / "lm_eval_tasks"
    folder.mkdir(parents=True, exist_ok=True)
    for i, task in enumerate(lm_plan["tasks"]):
        if not task["yaml"]:
            continue
        src = Path(task["yaml"])
        config = read_task(src)
        own: dict = {"include": str(src), "task": task["name"]}
        files = (config.get("dataset_kwargs") or {}).get("data_files")
        if files is not None:
            own["dataset_kwargs"] = {**config["dataset_kwargs"], "data_files": absolute(files, src.parent)}
        (folder / f"{i:02d}_{task['name']}.yaml").write_text(yaml.safe_dump(own, allow_unicode=True), encoding="utf-8")
    named = [t["name"] for t in lm_plan["tasks"] if not t["yaml"]]
    manager = TaskManager(include_path=str(folder), include_defaults=bool(named))
    for task in lm_plan["tasks"]:
        name = task["name"]
        if name not in manager.all_tasks:
            raise TaskProblem(message("eval.task_failed", task=name, error="lm-eval knows no task by this name"))
        try:
            get_task_dict([name], manager)
        except Exception as exc:  # noqa: BLE001 - the task's data could not be had: named with its cause
            error = f"{type(exc).__name__}: {str(exc)[:300]}"
            key = "eval.task_offline" if (_offline() and not task["yaml"]) else "eval.task_failed"
            raise TaskProblem(message(key, task=name, error=error)) from None
    return manager


def _score(result: dict) -> float | None:
    for metric in ("acc", "exact_match"):
        for key, value in result.items():
            if key.split(",")[0] == metric and isinstance(value, (int, float)):
                return round(float(value) * 100, 4)
    return None


def run(target: dict, plan: dict, manager, progress) -> tuple[dict, list[dict]]:
    """({TASK/acc: accuracy ×100}, per document {task, doc_id, target, responses, acc}) for one model."""
    import torch
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM

    from engine.models.resolve import looks_local, model_path

    lm_plan, device = plan["lm_eval"], plan["device"]
    model = HFLM(
        pretrained=str(model_path(target["model"])) if looks_local(target["model"]) else target["model"],
        peft=target["adapter"],
        device=device,
        dtype=torch.float32 if device == "cpu" else torch.bfloat16,
        batch_size=plan["generation"]["batch_size"],
    )
    names = [task["name"] for task in lm_plan["tasks"]]
    progress(", ".join(names))
    out = simple_evaluate(
        model=model,
        tasks=names,
        task_manager=manager,
        num_fewshot=lm_plan.get("num_fewshot"),
        limit=lm_plan.get("limit"),
        bootstrap_iters=0,
        log_samples=True,
        random_seed=plan["generation"]["seed"],
    )
    metrics = {f"{name}/acc": _score(out["results"].get(name, {})) for name in names}
    samples = [
        {
            "task": sub,
            "doc_id": d["doc_id"],
            "target": d["target"],
            "responses": json.loads(json.dumps(d["filtered_resps"], default=str)),
            "acc": d.get("acc", d.get("exact_match")),
        }
        for sub, docs in (out.get("samples") or {}).items()
        for d in docs
    ]
    del model
    return metrics, samples
