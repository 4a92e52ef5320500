"""The models (and hub datasets) on this machine: the workspace's ``models/`` folder and the Hugging Face cache, with
their sizes; and deleting one. Light: stdlib (the cache's layout is read directly: ``models--org--name/`` with
``blobs/``, ``snapshots/<commit>/``, ``refs/``; a ``blobs/*.incomplete`` is a download that has not finished).

Used by the Models tab and ``studio models``. Whether a model is in use by a run is the caller's question
(``engine.jobs.downloads``): this module knows files, not runs.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from engine.core import workspace
from engine.core.messages import Message
from engine.models.messages import message

WORKSPACE, CACHE, MODELSCOPE = "workspace", "cache", "modelscope"  # ModelScope's cache (engine.models.ms_models)


@dataclass
class LocalModel:
    name: str  # workspace: models/<folder>; cache: org/name, or datasets/org/name for a dataset
    source: str  # workspace | cache | modelscope
    path: str
    size: int  # bytes on disk, partial downloads included
    kind: str = "model"  # model | dataset
    revisions: list[str] = field(default_factory=list)  # cached commits
    partial: int = 0  # bytes of unfinished downloads (.incomplete)
    complete: bool = True  # a cached model with config.json and its weights
    modified: float = 0.0


def folder_size(path: Path) -> tuple[int, int]:
    """(bytes of the files under ``path``, bytes of those named *.incomplete); links are not followed."""
    total = partial = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            p = os.path.join(root, name)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if os.path.islink(p):
                continue
            total += st.st_size
            if name.endswith(".incomplete"):
                partial += st.st_size
    return total, partial


def workspace_models() -> list[LocalModel]:
    root = workspace.home() / "models"
    found = []
    for p in sorted(root.iterdir()) if root.is_dir() else []:
        if p.is_dir() and not p.name.startswith("."):  # a hidden folder is one being built (demo, GGUF import)
            size, _ = folder_size(p)
            found.append(
                LocalModel(
                    f"models/{p.name}",
                    WORKSPACE,
                    str(p),
                    size,
                    complete=(p / "config.json").is_file(),
                    modified=p.stat().st_mtime,
                )
            )
    return found


def cache_root() -> Path:
    from engine.models.hub_cache import cache_root as root

    return root()


def cached_models() -> list[LocalModel]:
    from engine.models.hub_cache import Target, cached_complete

    root = cache_root()
    found = []
    for p in sorted(root.iterdir()) if root.is_dir() else []:
        kind, _, rest = p.name.partition("--")
        if kind not in ("models", "datasets") or not rest or not p.is_dir():
            continue
        repo = rest.replace("--", "/")
        snaps = p / "snapshots"
        revisions = sorted(s.name for s in snaps.iterdir()) if snaps.is_dir() else []
        size, partial = folder_size(p)
        complete = True
        if kind == "models":
            try:
                complete = cached_complete(Target(repo))
            except (OSError, ImportError):
                complete = False
        found.append(
            LocalModel(
                repo if kind == "models" else f"datasets/{repo}",
                CACHE,
                str(p),
                size,
                kind="model" if kind == "models" else "dataset",
                revisions=revisions,
                partial=partial,
                complete=complete and not partial,
                modified=p.stat().st_mtime,
            )
        )
    return found


def modelscope_models() -> list[LocalModel]:
    """The models in ModelScope's cache (``model.hub: modelscope``, ``studio download --modelscope``)."""
    from engine.models import ms_models

    found = []
    for repo, path, revisions, complete in ms_models.cached_models():
        size, partial = folder_size(path)
        found.append(
            LocalModel(
                repo,
                MODELSCOPE,
                str(path),
                size,
                revisions=revisions,
                partial=partial,
                complete=complete,
                modified=path.stat().st_mtime,
            )
        )
    return found


def _ms_root() -> Path:
    from engine.models import ms_models

    return ms_models.cache_root()


def list_local() -> list[LocalModel]:
    """Everything local: the workspace's models, then the Hugging Face cache's models and datasets, then
    ModelScope's models."""
    return workspace_models() + cached_models() + modelscope_models()


def find(name: str, source: str | None = None) -> LocalModel | None:
    for m in list_local():
        if m.name == name and source in (None, m.source):
            return m
    return None


def delete(model: LocalModel) -> Message:
    """Remove the model's folder (a cache entry goes whole: blobs, snapshots, refs, partial downloads); the
    freed size as a message. Only folders under the workspace's models/ or the cache are ever removed."""
    path = Path(model.path).resolve()
    roots = {WORKSPACE: workspace.home() / "models", MODELSCOPE: _ms_root()}
    allowed = roots.get(model.source, cache_root()).resolve()
    if allowed not in path.parents:
        return message("models.local_unknown", name=model.name)
    shutil.rmtree(path, ignore_errors=True)
    from engine.core.units import file_size

    return message("models.local_deleted", name=model.name, size=file_size(model.size), path=path)
