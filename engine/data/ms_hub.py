"""ModelScope datasets of the registry (``ms_hub_url`` entries), as LLaMA-Factory takes them: an entry with
``ms_hub_url`` and no ``hf_hub_url``, or any entry with ``ms_hub_url`` while ``USE_MODELSCOPE_HUB`` is set (LF's
switch), is read from ModelScope.

The dataset repository's snapshot is downloaded with the ``modelscope`` package (its own cache: ``MODELSCOPE_CACHE``,
default ``~/.cache/modelscope``; its hub: ``MODELSCOPE_ENDPOINT``, default https://www.modelscope.cn) and read with
the same readers and checks as a Hugging Face snapshot or a local folder (``file_selection.select_files`` picks
the files of ``subset`` / ``split`` / ``folder``). Before launch ``availability`` lists the repository's files only and
says in one line why the dataset cannot be had; the run downloads it (``download``, in the trainer's process).

Light: the ``modelscope`` package (imported inside the functions), never datasets or torch.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from engine.core.messages import Message
from engine.data.messages import message
from engine.models import reach
from engine.models.ms_models import (
    cache_root,
    endpoint,
    installed,
)

TIMEOUT_S = 10


def _patterns(folder: str | None) -> list[str] | None:
    return [f"{folder.strip('/')}/*", f"{folder.strip('/')}/**/*", "README.md"] if folder else None


def cached_snapshot(repo_id: str, revision: str | None = None, folder: str | None = None) -> Path | None:
    """The dataset's snapshot folder in ModelScope's cache, or None when it is not there."""
    if not installed():
        return None
    from modelscope.hub.snapshot_download import snapshot_download

    try:
        path = snapshot_download(
            repo_id=repo_id,
            repo_type="dataset",
            revision=revision or "master",
            local_files_only=True,
            cache_dir=cache_root(),
            allow_patterns=_patterns(folder),
        )
    except Exception:  # noqa: BLE001 - not cached, a malformed id, ...
        return None
    path = Path(path)
    return path if path.is_dir() and any(p.is_file() for p in path.rglob("*")) else None


@lru_cache(maxsize=128)
def availability(repo_id: str, revision: str | None, name: str) -> Message | None:
    """None when the run can have the dataset (in ModelScope's cache, or listed by the reachable hub), else one
    line saying why not, naming the entry. Cached per process."""
    if not installed():
        return message("data.ms_not_installed", name=name, hub=repo_id)
    if cached_snapshot(repo_id, revision) is not None:
        return None
    ok, why = reach.answers(endpoint())  # once per process, a short timeout: no client retries per entry
    if not ok:
        return message("data.ms_unavailable", name=name, hub=repo_id, url=endpoint(), error=why or "no answer")
    from modelscope_hub.api import HubApi

    try:
        files = HubApi(endpoint=endpoint()).list_repo_files(repo_id, "dataset", revision=revision or "master")
    except Exception as exc:  # noqa: BLE001 - the client's HTTP errors: not found, no answer, refused
        first = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
        return message("data.ms_unavailable", name=name, hub=repo_id, url=endpoint(), error=first)
    if not files:
        return message("data.ms_empty", name=name, hub=repo_id, url=endpoint())
    return None


def download(repo_id: str, revision: str | None = None, folder: str | None = None) -> Path:
    """Download the dataset's snapshot into ModelScope's cache (files already there are kept) and return it."""
    from modelscope.hub.snapshot_download import snapshot_download

    path = snapshot_download(
        repo_id=repo_id,
        repo_type="dataset",
        revision=revision or "master",
        allow_patterns=_patterns(folder),
        endpoint=endpoint(),
        cache_dir=cache_root(),
    )
    return Path(path)
