"""Hub datasets of the registry (``hf_hub_url`` entries): where their files are, and why not when they cannot be had.

An entry's rows are read from the dataset repository's snapshot in the Hugging Face cache, with the same readers and
the same checks as a local folder (``file_selection.select_files`` chooses the files of ``subset`` / ``split`` /
``folder`` as ``datasets.load_dataset`` does), so what ``studio data check`` and the check before launch read is
what the run trains on. A snapshot that is not in the cache is downloaded by the run (``download``, in the trainer's
process); before launch ``availability`` asks the hub for the repository's info only (a few KB), and says in one
line why it cannot be had: offline, not found, gated.

A hub that does not answer is found once per process (``engine.models.reach``), not per entry.

Light: huggingface_hub (imported inside the functions), never datasets or torch.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from engine.core.messages import Message
from engine.data.messages import message
from engine.models import reach

HUB_TIMEOUT_S = 10.0


def offline() -> bool:
    """huggingface_hub's own answer (HF_HUB_OFFLINE, or TRANSFORMERS_OFFLINE, read when it was imported)."""
    from huggingface_hub import is_offline_mode

    return bool(is_offline_mode())


def _patterns(folder: str | None) -> list[str] | None:
    return [f"{folder.strip('/')}/**", "README.md"] if folder else None


def cached_snapshot(repo_id: str, revision: str | None = None, folder: str | None = None) -> Path | None:
    """The dataset's snapshot folder in the Hugging Face cache, or None when it is not there (nothing downloaded)."""
    from huggingface_hub import snapshot_download

    try:
        path = snapshot_download(
            repo_id,
            repo_type="dataset",
            revision=revision,
            local_files_only=True,
            allow_patterns=_patterns(folder),
        )
    except Exception:  # noqa: BLE001 - not cached (LocalEntryNotFoundError), a malformed id, ...
        return None
    return Path(path)


@lru_cache(maxsize=128)
def availability(repo_id: str, revision: str | None, name: str) -> Message | None:
    """None when the run can have the dataset (in the cache, or on the reachable hub), else one line saying why not,
    naming the entry. Cached per process: the page validates often."""
    if cached_snapshot(repo_id, revision) is not None:
        return None
    if offline():
        return message("data.hub_offline", name=name, hub=repo_id)
    from huggingface_hub import HfApi, constants

    if not reach.reachable():  # asked once per process: no client retries per entry
        why = reach.reason() or "no answer"
        return message("data.hub_unreachable", name=name, hub=repo_id, url=constants.ENDPOINT, error=why)
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    try:
        info = HfApi().dataset_info(repo_id, revision=revision, timeout=HUB_TIMEOUT_S)
    except GatedRepoError:
        return message("data.hub_gated", name=name, hub=repo_id)
    except RepositoryNotFoundError:
        return message("data.hub_not_found", name=name, hub=repo_id, url=constants.ENDPOINT)
    except RevisionNotFoundError:
        return message("data.hub_no_revision", name=name, hub=repo_id, revision=revision or "main")
    except Exception as exc:  # noqa: BLE001 - connection errors of the HTTP client, a malformed id, ...
        first = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
        return message("data.hub_unreachable", name=name, hub=repo_id, url=constants.ENDPOINT, error=first)
    if getattr(info, "gated", False) and not os.environ.get("HF_TOKEN"):
        return message("data.hub_gated", name=name, hub=repo_id)
    return None


def download(repo_id: str, revision: str | None = None, folder: str | None = None) -> Path:
    """Download the dataset's snapshot into the Hugging Face cache (files already there are kept) and return it."""
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(repo_id, repo_type="dataset", revision=revision, allow_patterns=_patterns(folder)))
