"""Where a model's figures come from: a local folder, the Hugging Face cache, the hub, or Studio's table.

Light: stdlib (``huggingface_hub`` is imported inside the functions that use it; it never loads torch). A model field
takes a local folder, a hub id (``org/name``, optionally ``org/name@revision``), or a model already in the Hugging
Face cache. ``resolve_config`` reads its ``config.json`` in this order:

1. a local folder (``~`` expanded);
2. the Hugging Face cache (``huggingface_hub.try_to_load_from_cache``: no network);
3. the hub: ``config.json`` only (a few KB, into the cache), unless ``HF_HUB_OFFLINE`` is set or the hub did not
   answer ``engine.models.reach``'s one quick probe of the process (one line says so, then the process works offline:
   no retries, no waiting per hub id);
4. ``engine.models.known``: the published figures of popular open models.

A ModelScope id (``modelscope=True``: the spec's ``model.hub: modelscope``, LF's ``use_modelscope_hub``) is read from
ModelScope's cache, then ModelScope (``config.json`` only, ``engine.models.ms_models``), then the table.

The answer says which source it used (``Resolved.source`` / ``where``) and, when none had the model, why
(``Resolved.problem``: not found on the hub, gated, hub unreachable, ...). Validation, the plan panel and
``studio plan`` use it, so a hub id plans offline.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from engine.core import workspace
from engine.core.messages import Message
from engine.models import known, reach
from engine.models.messages import message

LOCAL, CACHE, HUB, TABLE, NONE = "local", "cache", "hub", "table", "none"
MS_CACHE, MS_HUB = "ms_cache", "ms_hub"  # ModelScope's cache, its config.json (model.hub: modelscope)
HUB_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Resolved:
    name: str  # as given (without a ``@revision`` suffix)
    revision: str | None
    config: dict | None
    source: str  # local | cache | hub | table | none | ms_cache | ms_hub
    where: str = ""  # the folder, the cached file, the hub URL or the table's source URL
    problem: Message | None = None  # why no config was found (source none), or what the hub said (gated, ...)

    @property
    def found(self) -> bool:
        return self.config is not None


def _user_path(path: str) -> Path:
    try:
        return Path(path).expanduser()
    except RuntimeError:  # ~user that does not exist
        return Path(path)


def model_path(name: str) -> Path:
    """Where a local model named ``name`` is: an absolute or ``~`` path as it is; a relative one in the working
    folder when it is there, else under the workspace (``$STUDIO_HOME``, e.g. ``models/demo-tiny-llama``), so a
    spec can name workspace models without knowing where the workspace is."""
    path = _user_path(name)
    if path.is_absolute() or name.startswith((".", "~")) or path.exists():
        return path
    in_workspace = workspace.home() / path
    return in_workspace if in_workspace.exists() else path


def looks_local(name: str) -> bool:
    """A path rather than a hub id: starts with / . ~, or exists here or under the workspace."""
    return name.startswith(("/", ".", "~")) or model_path(name).exists()


def split_revision(name: str) -> tuple[str, str | None]:
    """``org/name@rev`` -> (``org/name``, ``rev``); a local path or a name without ``@`` is returned as it is."""
    if "@" in name and not looks_local(name):
        base, _, rev = name.rpartition("@")
        if base and rev:
            return base, rev
    return name, None


def is_hub_id(name: str) -> bool:
    """``org/name`` or ``name`` as the hub spells repository ids (letters, digits, - _ .), not a path."""
    if looks_local(name) or not name or name.count("/") > 1:
        return False
    allowed = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./")
    return all(c in allowed for c in name) and not name.startswith("/") and ".." not in name


def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def from_cache(repo_id: str, revision: str | None) -> tuple[dict | None, str]:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - huggingface_hub comes with transformers
        return None, ""
    try:
        hit = try_to_load_from_cache(repo_id, "config.json", revision=revision or None)
    except Exception:  # a malformed id: the hub would refuse it too
        return None, ""
    if isinstance(hit, str):
        cfg = _read_json(Path(hit))
        return cfg, hit
    return None, ""


@lru_cache(maxsize=256)
def _from_hub(repo_id: str, revision: str | None) -> tuple[str, str, Message | None]:
    """(path of the downloaded config.json or '', the URL, problem). Cached per process: the page validates often."""
    from huggingface_hub import constants, hf_hub_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    url = f"{constants.ENDPOINT}/{repo_id}"
    try:
        path = hf_hub_download(repo_id, "config.json", revision=revision or None, etag_timeout=HUB_TIMEOUT_S)
        return path, url, None
    except GatedRepoError:
        return "", url, message("models.gated", name=repo_id)
    except RepositoryNotFoundError:
        return "", url, message("models.not_on_hub", name=repo_id, url=url)
    except RevisionNotFoundError:
        return "", url, message("models.no_revision", name=repo_id, revision=revision or "main")
    except LocalEntryNotFoundError:  # a subclass of EntryNotFoundError: the hub did not answer, it said nothing
        return "", url, message("models.unreachable", name=repo_id, url=constants.ENDPOINT)
    except EntryNotFoundError:
        return "", url, message("models.no_config_on_hub", name=repo_id)
    except HfHubHTTPError as exc:
        return "", url, message("models.hub_error", name=repo_id, error=str(exc).splitlines()[0][:200])
    except Exception as exc:  # connection errors of the HTTP client, a malformed id, ...
        first = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
        return "", url, message("models.hub_error", name=repo_id, error=first)


def resolve_config(
    name_or_path: str, revision: str | None = None, *, hub: bool | None = None, modelscope: bool = False
) -> Resolved:
    """The model's config.json and where it came from (see the module doc for the order). ``hub=False`` skips the
    network; by default the hub is asked unless ``HF_HUB_OFFLINE`` is set. ``modelscope``: a hub id is ModelScope's."""
    name, at_rev = split_revision(name_or_path.strip())
    revision = at_rev or (revision if revision and revision != "main" else None)
    path = model_path(name)
    if looks_local(name):
        cfg = _read_json(path / "config.json")
        if cfg is not None:
            return Resolved(name, None, cfg, LOCAL, str(path))
        if not path.is_dir():
            return Resolved(name, None, None, NONE, str(path), message("models.no_folder", path=name))
        return Resolved(name, None, None, NONE, str(path), message("models.no_config", path=name))
    if not is_hub_id(name):
        return Resolved(name, revision, None, NONE, "", message("models.bad_id", name=name))
    if modelscope:
        return _from_modelscope(name, revision, hub)
    cfg, where = from_cache(name, revision)
    if cfg is not None:
        return Resolved(name, revision, cfg, CACHE, where)
    problem = None
    if hub is None:
        hub = reach.reachable()
        if not hub and not reach.offline_set():
            problem = message("models.unreachable", name=name, url=reach.endpoint())
    if hub:
        got, url, problem = _from_hub(name, revision)
        if got:
            cfg = _read_json(Path(got))
            if cfg is not None:
                return Resolved(name, revision, cfg, HUB, url)
    figures = known.lookup(name)
    if figures is not None:
        return Resolved(name, revision, figures, TABLE, known.SOURCE.format(id=known.canonical(name)), problem)
    if name.startswith("models/"):  # the workspace's models folder, where imports and the demo put models
        problem = message("models.not_in_workspace", name=name, path=workspace.home() / name)
    elif problem is None:
        problem = message("models.offline_unknown", name=name)
    return Resolved(name, revision, None, NONE, "", problem)


def resolve_model(model) -> Resolved:
    """``resolve_config`` for a spec's model group (its hub: Hugging Face or ModelScope)."""
    ms = getattr(model, "hub", "huggingface") == "modelscope"
    return resolve_config(model.name_or_path, model.revision, modelscope=ms)


def _from_modelscope(name: str, revision: str | None, hub: bool | None) -> Resolved:
    """A ModelScope id: its cache, then ModelScope's config.json (unless ``hub=False``), then Studio's table."""
    from engine.models import ms_models

    folder = ms_models.cached_folder(name, revision)
    cfg = _read_json(folder / "config.json") if folder is not None else None
    if cfg is not None:
        return Resolved(name, revision, cfg, MS_CACHE, str(folder))
    problem = None
    if hub is not False:
        got, problem = ms_models.fetch_config(name, revision)
        cfg = _read_json(Path(got)) if got else None
        if cfg is not None:
            return Resolved(name, revision, cfg, MS_HUB, f"{ms_models.endpoint()}/models/{name}")
    if problem is not None and problem.key in ("models.ms_not_found", "models.ms_no_config"):
        return Resolved(name, revision, None, NONE, "", problem)  # ModelScope said so: the table cannot stand in
    figures = known.lookup(name)
    if figures is not None:
        return Resolved(name, revision, figures, TABLE, known.SOURCE.format(id=known.canonical(name)), problem)
    return Resolved(
        name, revision, None, NONE, "", problem or message("models.ms_not_found", name=name, url=ms_models.endpoint())
    )


def read_config(name_or_path: str, revision: str | None = None) -> dict | None:
    """Just the figures (or None): what the rules and the planner need."""
    return resolve_config(name_or_path, revision).config


def source_text(res: Resolved) -> Message:
    """One line for the page and ``studio plan``: which source the figures came from."""
    return message(f"models.source_{res.source}", name=res.name, where=res.where)
