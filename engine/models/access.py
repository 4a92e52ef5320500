"""Whether a run could have its hub model, said before launch: the check ``engine.spec.rules.check_context`` makes
so that a model the run could not download (the hub offline or unreachable while the weights are not in the cache,
gated without a token with access, not on the hub) is refused with the other problems, naming the field, instead of
failing seconds after Start. The model-side twin of the hub datasets' ``engine.data.hub.availability``.

Light: stdlib; ``huggingface_hub`` is imported inside the function that asks the hub.
"""

from __future__ import annotations

from functools import lru_cache

from engine.core.messages import Message
from engine.models import reach
from engine.models.hub_cache import HUB_TIMEOUT_S, needs_download
from engine.models.messages import message


def launch_problem(name_or_path: str, revision: str | None = None, resolved: Message | None = None) -> Message | None:
    """Why a run on ``name_or_path`` could not download its model, said before launch (None when it is local,
    complete in the cache, or can be downloaded): offline or the hub unreachable while the weights are not in the
    cache, gated without a token with access (``resolved``: what resolving its config heard from the hub), not on the
    hub. Like the hub datasets' ``engine.data.hub.availability``."""
    target = needs_download(name_or_path, revision)
    if target is None:
        return None
    if reach.offline_set():
        return message("models.not_downloadable_offline", name=target.label)
    if not reach.reachable():
        return message("models.not_downloadable_unreachable", name=target.label, url=reach.endpoint())
    if resolved is not None and resolved.key in ("models.gated", "models.not_on_hub", "models.no_revision"):
        return resolved
    return _hub_access(target.repo_id, target.revision)


@lru_cache(maxsize=128)
def _hub_access(repo_id: str, revision: str | None) -> Message | None:
    """The hub's word on a repo (its info only, a few KB; cached per process: the page validates often)."""
    from huggingface_hub import HfApi, constants, get_token
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    label = f"{repo_id}@{revision}" if revision else repo_id
    try:
        info = HfApi().model_info(repo_id, revision=revision, timeout=HUB_TIMEOUT_S)
    except GatedRepoError:
        return message("models.gated", name=label)
    except RepositoryNotFoundError:
        return message("models.not_on_hub", name=label, url=f"{constants.ENDPOINT}/{repo_id}")
    except RevisionNotFoundError:
        return message("models.no_revision", name=label, revision=revision or "main")
    except Exception:  # noqa: BLE001 - anything else: the download says what it is, with its own retries
        return None
    if getattr(info, "gated", False) and not get_token():
        return message("models.gated", name=label)
    return None
