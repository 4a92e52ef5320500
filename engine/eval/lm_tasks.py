"""The lm-evaluation-harness tasks of an evaluation, checked before launch: the bundled demo task
(``engine/eval/tasks/studio_demo_mc.yaml``, twelve hand-checkable multiple-choice questions over a JSONL file), local
task YAML files (lm-eval's own task format; a ``dataset_path: json`` task reads its ``dataset_kwargs.data_files``,
relative paths beside the YAML), or names lm-eval knows (mmlu, ceval-valid, cmmlu, gsm8k, ...: their data comes from
the hub or its cache). The subprocess (``engine.trainer.lm_eval_run``) runs them. Light: stdlib, yaml.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from engine.eval.messages import message
from engine.eval.spec import DEMO_TASK

TASKS_DIR = Path(__file__).resolve().parent / "tasks"


class _Loader(yaml.SafeLoader):
    """yaml's safe loader that reads lm-eval's ``!function`` tags (and any other) as None: only plain keys matter."""


_Loader.add_multi_constructor("!", lambda loader, suffix, node: None)


def read_task(path: Path) -> dict:
    return yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)  # noqa: S506 - a safe loader


def data_files(config: dict, folder: Path) -> list[Path]:
    """The local files a ``dataset_path: json`` / ``csv`` / ``parquet`` task reads, resolved beside its YAML."""
    files = (config.get("dataset_kwargs") or {}).get("data_files") or []
    if isinstance(files, dict):
        files = [f for v in files.values() for f in (v if isinstance(v, list) else [v])]
    elif isinstance(files, str):
        files = [files]
    return [(folder / Path(f).expanduser()).resolve() for f in files]


def absolute(files, folder: Path):
    """``data_files`` (a path, a list, or split -> path(s)) with every path made absolute beside ``folder``."""
    if isinstance(files, dict):
        return {k: absolute(v, folder) for k, v in files.items()}
    if isinstance(files, list):
        return [absolute(f, folder) for f in files]
    return str((folder / Path(str(files)).expanduser()).resolve())


def resolve_tasks(tasks: list[str], problems: list) -> list[dict]:
    """Per task: {name, yaml (a local file, or None for a task lm-eval knows by name)}; problems named by field."""
    out = []
    for i, task in enumerate(tasks):
        field = f"lm_eval.tasks[{i}]"
        if task == DEMO_TASK:
            out.append({"name": DEMO_TASK, "yaml": str(TASKS_DIR / f"{DEMO_TASK}.yaml")})
            continue
        if not task.endswith((".yaml", ".yml")):
            out.append({"name": task, "yaml": None})
            continue
        path = Path(task).expanduser().resolve()
        try:
            config = read_task(path)
        except (OSError, yaml.YAMLError) as exc:
            problems.append((field, message("eval.task_unreadable", path=path, error=exc)))
            continue
        if not isinstance(config, dict) or not isinstance(config.get("task"), str):
            problems.append((field, message("eval.task_unreadable", path=path, error="it names no task (task:)")))
            continue
        if config.get("dataset_path") in ("json", "csv", "parquet", "text"):
            missing = [f for f in data_files(config, path.parent) if not f.is_file()]
            if not data_files(config, path.parent):
                problems.append(
                    (field, message("eval.task_data_missing", path=path, file="dataset_kwargs.data_files"))
                )
            elif missing:
                problems.append((field, message("eval.task_data_missing", path=path, file=missing[0])))
        out.append({"name": config["task"], "yaml": str(path)})
    return out


def page_problems(tasks: list[str]) -> list[tuple[str, object]]:
    """The page's rule for local task files (``engine.core.page_trust``): a task YAML, the YAML it includes, the
    local folder or files it reads its data from, are inside the workspace, since lm-eval runs the ``!function``
    code found beside a YAML and the page reads nothing outside the workspace. Tasks lm-eval knows by name and the
    bundled demo are the installed code's own. (field, message) per task refused."""
    from engine.core import page_trust

    found = []
    for i, task in enumerate(tasks):
        if task == DEMO_TASK or not task.endswith((".yaml", ".yml")):
            continue
        path = Path(task).expanduser().resolve()
        why = page_trust.read_problem(path)
        try:
            config = read_task(path) if why is None else None
        except (OSError, yaml.YAMLError):
            config = None  # resolve_tasks names an unreadable task
        if isinstance(config, dict):
            named = [path.parent / str(config["include"])] if isinstance(config.get("include"), str) else []
            source = str(config.get("dataset_path") or "")
            if source.startswith(("/", ".", "~")):
                named.append(path.parent / Path(source).expanduser())
            for f in [*named, *data_files(config, path.parent)]:
                if (why := page_trust.read_problem(f)) is not None:
                    break
        if why is not None:
            found.append((f"lm_eval.tasks[{i}]", why))
    return found
