"""A hub repo and the Hugging Face cache, without fetching anything: what a download target is (``org/name@rev``,
``datasets/org/name``), where the cache keeps it, whether a model is complete there, and the argv of the download
worker (``engine.models.download``), alone or in front of a training run's trainer (``download_first``).

Light: stdlib; ``huggingface_hub`` inside the functions that read its cache layout (it never loads torch).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from engine.core.messages import Message
from engine.models import snapshot
from engine.models.messages import message
from engine.models.resolve import is_hub_id, looks_local, split_revision

DOWNLOAD_TAG = "download"


HUB_TIMEOUT_S = 10.0


class DownloadError(Exception):
    """A download that cannot finish: ``args[0]`` is the catalog message, ``cause`` a short word for the event."""

    def __init__(self, msg: Message, cause: str = "hub"):
        super().__init__(msg)
        self.cause = cause


@dataclass(frozen=True)
class Target:
    repo_id: str
    revision: str | None = None
    repo_type: str = "model"  # model | dataset

    @property
    def label(self) -> str:
        name = f"datasets/{self.repo_id}" if self.repo_type == "dataset" else self.repo_id
        return f"{name}@{self.revision}" if self.revision else name


def parse_target(text: str, revision: str | None = None, repo_type: str | None = None) -> Target:
    """``org/name``, ``org/name@rev`` or ``datasets/org/name`` (a dataset); DownloadError for anything else."""
    text = text.strip()
    kind = repo_type or "model"
    if text.startswith("datasets/"):
        text, kind = text[len("datasets/") :], "dataset"
    name, rev = split_revision(text)
    if kind not in ("model", "dataset") or not is_hub_id(name):
        raise DownloadError(message("models.bad_id", name=text), "input")
    return Target(name, rev or (revision if revision and revision != "main" else None), kind)


def cache_root() -> Path:
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def storage_folder(target: Target) -> Path:
    from huggingface_hub.file_download import repo_folder_name

    return cache_root() / repo_folder_name(repo_id=target.repo_id, repo_type=target.repo_type)


def _snapshot(target: Target) -> Path | None:
    """The cached snapshot folder of the target's revision (refs/<rev> -> commit), or None."""
    storage = storage_folder(target)
    rev = target.revision or "main"
    ref = storage / "refs" / rev
    commit = ref.read_text(encoding="utf-8").strip() if ref.is_file() else rev
    snap = storage / "snapshots" / commit
    return snap if snap.is_dir() else None


def cached_complete(target: Target) -> bool:
    """Whether the cache holds a usable copy of a model without asking the hub (``engine.models.snapshot``)."""
    snap = _snapshot(target)
    return snap is not None and snapshot.complete(snap)


def needs_download(name_or_path: str, revision: str | None = None) -> Target | None:
    """The target to download before a run can load ``name_or_path``: a hub id whose weights are not complete in the
    cache; None for a local folder or a model already there."""
    name, at_rev = split_revision(name_or_path.strip())
    if looks_local(name) or not is_hub_id(name):
        return None
    target = Target(name, at_rev or (revision if revision and revision != "main" else None))
    try:
        return None if cached_complete(target) else target
    except (OSError, ImportError):
        return target


def download_first(spec, argv: list[str], run_dir: Path) -> list[str]:
    """A training run's argv with the download of its model in front (``--then --``) when the model is not local;
    the argv as it is otherwise. Called by the scheduler when the run starts, so the cache is looked at then."""
    # LF's use_modelscope_hub: the model is a ModelScope id, downloaded by ModelScope's client into its cache
    if getattr(spec.model, "hub", "huggingface") == "modelscope" and not looks_local(spec.model.name_or_path):
        from engine.models import ms_models

        return ms_models.download_first(spec.model.name_or_path, spec.model.revision, argv, run_dir)
    target = needs_download(spec.model.name_or_path, getattr(spec.model, "revision", None))
    if target is None:
        return list(argv)
    return [*worker_argv(target, str(Path(run_dir) / "events.jsonl")), "--then", "--", *argv]


def worker_argv(target: Target, events_path: str) -> list[str]:
    argv = [sys.executable, "-m", "engine.models.download", target.repo_id, "--events", events_path]
    if target.revision:
        argv += ["--revision", target.revision]
    if target.repo_type != "model":
        argv += ["--repo-type", target.repo_type]
    return argv
