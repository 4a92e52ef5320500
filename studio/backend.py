"""What several tabs ask of the workspace: a run's folder, the runs listed, local models, the demo's defaults and
the registered datasets. Light: engine.core.workspace, and engine.runs.registry inside the functions that read it
(``studio.app`` imports this module before gradio builds the page; the registry is loaded with the first tab).
"""

from __future__ import annotations

from pathlib import Path

from engine.core import workspace


def run_dir(run_id: str) -> Path | None:
    """The folder of a run as the page's user may see it: from the run registry when it knows the run, else the
    workspace layout (a folder copied in still shows), for the operator only; None for a run they cannot see."""
    from engine.runs import owners

    return owners.run_folder(run_id)


def list_runs() -> list:
    from engine.runs import registry as runs
    from engine.runs import store

    try:
        store.refresh()
    except Exception:  # refresh is best-effort (status from exit files); listing must still work
        pass
    return list(runs.list_runs())


def training_runs() -> list:
    """The training runs of ``list_runs`` (no merge, export, evaluation or serve job): what the dashboard's, the
    compare and the Evaluate pickers offer (a serve job compared with a run gave rows of "None")."""
    return [r for r in list_runs() if getattr(r, "training", True)]


def local_models() -> list[str]:
    """Model folders under the workspace (those with a config.json) the page's user may use, newest first (team
    mode: not another member's import, engine.runs.owners.path_problem)."""
    from engine.runs import owners

    root = workspace.models_dir()
    found = [p for p in root.iterdir() if (p / "config.json").is_file()] if root.is_dir() else []
    found = [p for p in found if owners.path_problem(p) is None]
    return [str(p) for p in sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)]


def demo_defaults() -> dict:
    """The example spec of the demo (model + dataset preselected), or a best guess from the workspace layout."""
    paths = workspace.demo_paths()
    example = paths.get("example_spec") if isinstance(paths, dict) else getattr(paths, "example_spec", None)
    if isinstance(example, (str, Path)) and Path(example).is_file():
        import yaml

        return yaml.safe_load(Path(example).read_text(encoding="utf-8")) or {}
    if isinstance(example, dict):
        return example
    names = registered_datasets()
    return {"model": {"name_or_path": str(workspace.demo_model_dir())}, "data": {"datasets": names[:1]}}


def registered_datasets(dataset_dir: str | Path | None = None) -> list[str]:
    """The registered names the page's user may pick (team mode: their own and those the operator or an admin
    registered, engine.core.belongings)."""
    import json

    from engine.core import belongings

    ddir = Path(dataset_dir or workspace.data_dir())
    try:
        return belongings.usable_datasets(ddir, json.loads((ddir / "dataset_info.json").read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return []
