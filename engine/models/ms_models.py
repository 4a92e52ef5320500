"""Models from ModelScope, as LLaMA-Factory takes them: with ``use_modelscope_hub: true`` (the spec's
``model.hub: modelscope``; LF's ``USE_MODELSCOPE_HUB=1`` when an LF YAML is imported) ``model_name_or_path`` is a
ModelScope id, downloaded with the ``modelscope`` client into ModelScope's cache (``MODELSCOPE_CACHE``, default
``~/.cache/modelscope``; its hub: ``MODELSCOPE_ENDPOINT``, default https://www.modelscope.cn) and loaded from there as
a local folder.

- ``cached_folder`` / ``complete_folder``: the model's snapshot in that cache (anything / config and weights);
- ``fetch_config``: ``config.json`` only, for validation and the plan when the weights are not there yet;
- ``launch_problem``: before launch, why a run could not have the model, in one line naming the id (the client not
  installed, ModelScope not answering (asked once per process through ``engine.models.reach.answers``), no such
  repository); None when it is in the cache or listed by ModelScope;
- ``download_first`` / ``worker_argv``: the download worker (``engine.models.ms_download``) in front of a training
  run's trainer, or alone for ``studio download --modelscope``;
- ``cached_models``: what the cache holds, for the Models tab and ``studio models list``.

Light: stdlib; the ``modelscope`` client is imported inside the functions (it never loads torch).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from functools import lru_cache
from pathlib import Path

from engine.core.messages import Message
from engine.models import reach, snapshot
from engine.models.messages import message

HUB = "modelscope"
DEFAULT_ENDPOINT = "https://www.modelscope.cn"
DEFAULT_REVISION = "master"  # ModelScope's default branch (the hub's is main)


def use_modelscope() -> bool:
    """LLaMA-Factory's switch: ``USE_MODELSCOPE_HUB`` set to 1 / true."""
    return os.environ.get("USE_MODELSCOPE_HUB", "").strip().lower() in ("1", "true", "yes", "on")


def endpoint() -> str:
    return (os.environ.get("MODELSCOPE_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def installed() -> bool:
    return importlib.util.find_spec("modelscope") is not None


def cache_root() -> Path:
    """ModelScope's cache folder as its client picks it (``MODELSCOPE_CACHE``, default ``~/.cache/modelscope``),
    given to every call of the client: it keeps the folder it saw first for the rest of the process."""
    return Path(os.environ.get("MODELSCOPE_CACHE") or "~/.cache/modelscope").expanduser()


def revision_of(revision: str | None) -> str:
    """The spec's revision for ModelScope: its default branch for the spec's default ``main``."""
    return revision if revision and revision != "main" else DEFAULT_REVISION


def label(repo_id: str, revision: str | None = None) -> str:
    rev = revision_of(revision)
    return repo_id if rev == DEFAULT_REVISION else f"{repo_id}@{rev}"


def cached_folder(repo_id: str, revision: str | None = None) -> Path | None:
    """The model's snapshot folder in ModelScope's cache when it holds anything (a fetched config.json included)."""
    if not installed():
        return None
    from modelscope.hub.snapshot_download import snapshot_download

    try:
        path = Path(
            snapshot_download(
                repo_id=repo_id, revision=revision_of(revision), local_files_only=True, cache_dir=cache_root()
            )
        )
    except Exception:  # noqa: BLE001 - not cached, a malformed id, ...
        return None
    return path if path.is_dir() and any(path.iterdir()) else None


def complete_folder(repo_id: str, revision: str | None = None) -> Path | None:
    """The snapshot folder when it holds the model's config and weights (what a run loads), else None."""
    folder = cached_folder(repo_id, revision)
    return folder if folder is not None and snapshot.complete(folder) else None


def client_problem(exc: BaseException, repo_id: str, revision: str | None) -> Message:
    """The client's exception in one line naming the id: no such repository, or ModelScope's own words."""
    kinds = {k.__name__ for k in type(exc).__mro__}
    status = getattr(getattr(exc, "response", None), "status_code", None)  # snapshot_download: requests' HTTPError
    if "NotExistError" in kinds or "RepositoryNotFoundError" in kinds or status == 404:
        return message("models.ms_not_found", name=label(repo_id, revision), url=endpoint())
    first = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
    return message("models.ms_error", name=label(repo_id, revision), url=endpoint(), error=first)


def unanswered(repo_id: str, revision: str | None) -> Message | None:
    if not installed():
        return message("models.ms_not_installed", name=label(repo_id, revision))
    ok, why = reach.answers(endpoint())  # once per process, a short timeout: no client retries per model
    if not ok:
        return message("models.ms_unreachable", name=label(repo_id, revision), url=endpoint(), why=why or "no answer")
    return None


@lru_cache(maxsize=128)
def fetch_config(repo_id: str, revision: str | None = None) -> tuple[str, Message | None]:
    """(path of the model's config.json fetched into ModelScope's cache or '', why not). Cached per process."""
    problem = unanswered(repo_id, revision)
    if problem is not None:
        return "", problem
    from modelscope.hub.snapshot_download import snapshot_download

    try:
        path = Path(
            snapshot_download(
                repo_id=repo_id,
                revision=revision_of(revision),
                allow_patterns=["config.json"],
                endpoint=endpoint(),
                cache_dir=cache_root(),
            )
        )
    except Exception as exc:  # noqa: BLE001 - the client's HTTP errors become one line
        return "", client_problem(exc, repo_id, revision)
    if not (path / "config.json").is_file():
        return "", message("models.ms_no_config", name=label(repo_id, revision), url=endpoint())
    return str(path / "config.json"), None


@lru_cache(maxsize=128)
def launch_problem(repo_id: str, revision: str | None = None) -> Message | None:
    """Why a run could not have the model (one line naming the id), or None: complete in the cache, or listed by
    ModelScope (the run downloads it). Cached per process: the page validates often."""
    if complete_folder(repo_id, revision) is not None:
        return None
    problem = unanswered(repo_id, revision)
    if problem is not None:
        return problem
    from modelscope_hub.api import HubApi

    try:
        files = HubApi(endpoint=endpoint()).list_repo_files(repo_id, "model", revision=revision_of(revision))
    except Exception as exc:  # noqa: BLE001
        return client_problem(exc, repo_id, revision)
    if not files:
        return message("models.ms_not_found", name=label(repo_id, revision), url=endpoint())
    return None


def worker_argv(repo_id: str, revision: str | None, events_path: str) -> list[str]:
    argv = [sys.executable, "-m", "engine.models.ms_download", repo_id, "--events", events_path]
    if revision_of(revision) != DEFAULT_REVISION:
        argv += ["--revision", revision_of(revision)]
    return argv


def download_first(name: str, revision: str | None, argv: list[str], run_dir: Path) -> list[str]:
    """A training run's argv with the ModelScope download in front (``--then --``) unless the model is complete in the
    cache (a local folder is the caller's: ``engine.models.hub_cache.download_first``)."""
    if complete_folder(name, revision) is not None:
        return list(argv)
    return [*worker_argv(name, revision, str(Path(run_dir) / "events.jsonl")), "--then", "--", *argv]


def cached_models() -> list[tuple[str, Path, list[str], bool]]:
    """(org/name, the repo's cache folder, its cached revisions, complete) for every model in ModelScope's cache
    (its layout: ``models/<org>--<name>/snapshots/<revision>/``)."""
    root = cache_root() / "models"
    found = []
    for p in sorted(root.iterdir()) if root.is_dir() else []:
        snaps = p / "snapshots"
        if "--" not in p.name or not snaps.is_dir():
            continue
        revisions = sorted(s.name for s in snaps.iterdir() if s.is_dir())
        complete = any(snapshot.complete(snaps / r) for r in revisions)
        found.append((p.name.replace("--", "/", 1), p, revisions, complete))
    return found


def where() -> Message:
    """Which ModelScope this process talks to, in one line (the Models tab, ``studio download --modelscope``)."""
    return message("models.ms_where", url=endpoint(), cache=cache_root())
