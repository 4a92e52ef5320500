"""Finding a hub model by part of its id, before anything is downloaded: the Train tab's model picker.

``search_models(query, limit)`` answers rows (id, parameters and the weights' size, licence, gating, whether the
Hugging Face cache holds the model) and one line saying where they came from:

- the hub, when it answers (``engine.models.reach``): ``HfApi.list_models(search=...)`` with the fields the rows
  show (``expand``: downloads, gated, cardData, safetensors, tags). A typed full id the search did not list is asked
  for by itself (``model_info``), so an exact id is accepted when the hub knows it;
- Studio's table of published configs (``engine.models.known``) otherwise (``HF_HUB_OFFLINE`` set, or the hub does
  not answer, or it answered an error): every word of the query must be in the id, with the licence and gating
  the table records from each model's card.

Nothing is downloaded: the hub's search answers metadata, and picking a row only fills the Model field (the plan
then reads the model's config as it does for a typed id). The table's parameter counts come from the planner's
counting (``engine.plan.model_shape``), which this package may not import: the caller passes it as ``count``.

Light: stdlib; ``huggingface_hub`` inside the functions that ask the hub (it never loads torch).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from engine.core.messages import Message
from engine.models import known, reach
from engine.models.hub_cache import HUB_TIMEOUT_S, Target, cached_complete
from engine.models.messages import message
from engine.models.resolve import is_hub_id

HUB, TABLE = "hub", "table"  # where a row came from
EXPAND = ["downloads", "likes", "gated", "cardData", "safetensors", "tags"]  # the fields a row shows
DEFAULT_LIMIT = 20
MAX_LIMIT = 100
# bytes per parameter of safetensors' dtypes (the hub's ``safetensors.parameters`` counts by dtype)
DTYPE_BYTES = {"F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "BF16": 2, "F16": 2, "I16": 2, "U16": 2}
TABLE_DTYPE_BYTES = 2  # the table's models publish bf16 weights
# huggingface_hub's search has no timeout of its own (its client waits forever): a hub that took the probe and then
# says nothing gives the table after this long
SEARCH_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ModelRow:
    id: str
    source: str  # HUB | TABLE
    parameters: int | None = None  # None: not known
    size_bytes: int | None = None  # the weights' size: the hub's safetensors counts by dtype, or bf16 for the table
    licence: str = ""  # "": not known
    gated: str = ""  # "no" | "manual" | "auto"; "": not known
    cached: bool = False  # complete in the Hugging Face cache (config and weights)
    downloads: int | None = None


@dataclass
class SearchResult:
    query: str
    source: str  # HUB | TABLE: where the rows came from
    note: Message  # one line: the source, and why the table when it is the table
    rows: list[ModelRow] = field(default_factory=list)


def search_models(
    query: str, limit: int = DEFAULT_LIMIT, *, count: Callable[[dict], int | None] | None = None
) -> SearchResult:
    """Models whose id contains ``query``: from the hub when it answers, else from Studio's table, with one line
    saying which. ``count`` (a model config → its parameter count) sizes the table's rows. Downloads nothing."""
    query = " ".join((query or "").split())
    limit = max(1, min(int(limit or DEFAULT_LIMIT), MAX_LIMIT))
    if not query:
        return SearchResult(query, TABLE, message("models.search_type"))
    why: Message | None = None
    if reach.offline_set():
        why = message("models.search_why_offline")
    elif not reach.reachable():
        why = message("models.search_why_unreachable", url=reach.endpoint(), why=reach.reason() or "no answer")
    else:
        try:
            rows = _bounded(lambda: _hub_rows(query, limit), SEARCH_TIMEOUT_S)
        except TimeoutError:
            why = message("models.search_why_slow", url=reach.endpoint(), timeout=SEARCH_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - an error answer or a broken connection: the table still answers
            first = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
            why = message("models.search_why_error", url=reach.endpoint(), error=first)
        else:
            note = message("models.search_hub", count=len(rows), query=query, url=reach.endpoint())
            return SearchResult(query, HUB, note, rows)
    rows = table_rows(query, limit, count)
    return SearchResult(query, TABLE, message("models.search_table", count=len(rows), query=query, why=why), rows)


def table_rows(query: str, limit: int = DEFAULT_LIMIT, count: Callable[[dict], int | None] | None = None):
    """The table's models whose id holds every word of ``query`` (case-insensitive), in the table's order."""
    words = query.lower().split()
    rows: list[ModelRow] = []
    for repo_id in known.KNOWN:
        if len(rows) >= limit:
            break
        if all(w in repo_id.lower() for w in words):
            params = _count(count, repo_id)
            size = params * TABLE_DTYPE_BYTES if params else None
            licence, gated = known.terms(repo_id)
            rows.append(ModelRow(repo_id, TABLE, params, size, licence, gated, cached=_cached(repo_id)))
    return rows


def _count(count: Callable[[dict], int | None] | None, repo_id: str) -> int | None:
    if count is None:
        return None
    try:
        n = count(known.lookup(repo_id) or {})
    except Exception:  # noqa: BLE001 - a config the counter cannot read: the row says "not known"
        return None
    return int(n) if n else None


def _bounded(ask: Callable[[], list[ModelRow]], timeout: float) -> list[ModelRow]:
    """``ask()`` in a daemon thread, waited for ``timeout`` s (TimeoutError after that; the thread ends with its
    connection); its exception is raised here."""
    box: dict = {}

    def run() -> None:
        try:
            box["rows"] = ask()
        except Exception as exc:  # noqa: BLE001 - handed to the caller
            box["error"] = exc

    worker = threading.Thread(target=run, name="studio-hub-search", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise TimeoutError
    if "error" in box:
        raise box["error"]
    return box["rows"]


def _hub_rows(query: str, limit: int) -> list[ModelRow]:
    from huggingface_hub import HfApi

    api = HfApi()
    infos = list(api.list_models(search=query, limit=limit, sort="downloads", expand=EXPAND))
    rows = [hub_row(info) for info in infos]
    if is_hub_id(query) and "/" in query and not any(r.id.lower() == query.lower() for r in rows):
        exact = _exact(api, query)  # the search did not list a typed full id: ask for it by itself
        if exact is not None:
            rows = [exact, *rows][:limit]
    rows.sort(key=lambda r: r.id.lower() != query.lower())  # a typed full id first; the hub's order otherwise
    return rows


def _exact(api, repo_id: str) -> ModelRow | None:
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    try:
        return hub_row(api.model_info(repo_id, expand=EXPAND, timeout=HUB_TIMEOUT_S))
    except GatedRepoError:
        return ModelRow(repo_id, HUB, gated="manual", cached=_cached(repo_id))
    except RepositoryNotFoundError:
        return None


def hub_row(info) -> ModelRow:
    """One row from the hub's ``ModelInfo`` (the fields of ``EXPAND``)."""
    params, size = None, None
    st = getattr(info, "safetensors", None)
    if st is not None:
        by_dtype = dict(getattr(st, "parameters", None) or {})
        params = int(getattr(st, "total", 0) or sum(by_dtype.values())) or None
        if by_dtype:
            size = sum(int(n) * DTYPE_BYTES.get(str(dtype).upper(), 1) for dtype, n in by_dtype.items())
    gated = getattr(info, "gated", None)
    gated_text = "no" if gated is False else str(gated) if gated else ""
    return ModelRow(
        info.id,
        HUB,
        params,
        size,
        licence=_licence(info),
        gated=gated_text,
        cached=_cached(info.id),
        downloads=getattr(info, "downloads", None),
    )


def _licence(info) -> str:
    card = getattr(info, "card_data", None)
    value = getattr(card, "license", None) if card is not None else None
    if isinstance(value, list):
        value = ", ".join(str(v) for v in value)
    if value:
        return str(value)
    tags = getattr(info, "tags", None) or []
    return ", ".join(t.split(":", 1)[1] for t in tags if isinstance(t, str) and t.startswith("license:"))


def _cached(repo_id: str) -> bool:
    try:
        return cached_complete(Target(repo_id))
    except (OSError, ImportError, ValueError):
        return False


def human_count(n: int | None) -> str:
    """A parameter count as people say it (7.6B, 494M); '' when not known."""
    if not n:
        return ""
    for div, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= div:
            return f"{n / div:.1f}{unit}"
    return str(n)
