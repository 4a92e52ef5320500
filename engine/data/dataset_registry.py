"""The dataset registry (of datasets; runs are ``engine.runs.registry``'s): ``dataset_info.json`` in LLaMA-Factory's
schema, loading and checking registered datasets, registration, and ``studio data``.

Light: stdlib; the files are read by engine.data.files (pyarrow only for Parquet / saved HF datasets), the rows
checked by engine.data.rows. Never torch, transformers or datasets.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from pathlib import Path

from engine.core import belongings
from engine.core.messages import from_exception
from engine.data import admit, hub, images, ms_hub
from engine.data.file_selection import folder_files, select_files
from engine.data.files import (
    _read_file,
    _read_folder,
    read_head,
)
from engine.data.messages import message
from engine.data.rows import (
    COLUMN_KEYS,
    DataError,
    DataProblem,
    DatasetEntry,
    _entry_problems,
    _RowError,
    kto_counts,
    normalize_row,
    stage_data_problem,
)

INFO_NAME = "dataset_info.json"
MAX_DATASET_NAME = 100  # as engine.spec.groups.MAX_DATASET_NAME: a name the spec would refuse is not registered
STAGES = ("sft", "pt", "dpo", "kto", "rm", "grpo")
HEAD_CHECK_ROWS = 10_000  # the page's check after registering: at most this many rows (and PAGE_READ_BYTES)


def read_dataset_info(dataset_dir: str | Path) -> dict:
    """The registry as a dict; raises ValueError naming the file when it is not a JSON object."""
    path = Path(dataset_dir) / INFO_NAME
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(
            message("data.info_bad_json", path=path, line=exc.lineno, col=exc.colno, error=exc.msg)
        ) from None
    if not isinstance(info, dict):
        raise ValueError(message("data.info_not_object", path=path, type=type(info).__name__))  # noqa: TRY004 (callers catch ValueError)
    return info


def save_dataset_info(dataset_dir: str | Path, info: dict) -> Path:
    """Write the registry atomically (temp file + rename), so a reader never sees half a file."""
    ddir = Path(dataset_dir)
    ddir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".dataset_info.", suffix=".tmp", dir=ddir)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(info, fh, ensure_ascii=False, indent=2)
        fh.write("\n")
    os.chmod(tmp, 0o644)  # mkstemp creates 0600; the registry is an ordinary shared file
    os.replace(tmp, ddir / INFO_NAME)
    return ddir / INFO_NAME


def _locate(entry: DatasetEntry, dataset_dir: Path) -> Path:
    path = Path(entry.file_name).expanduser()
    return path if path.is_absolute() else dataset_dir / path


# ----------------------------------------------------------------------------------------------- public API
def _resolve(name: str, dataset_dir: Path) -> tuple[DatasetEntry | None, list[DataProblem]]:
    info_path = dataset_dir / INFO_NAME
    if not info_path.is_file():
        return None, [DataProblem(str(info_path), None, None, message("data.no_registry"))]
    try:
        info = read_dataset_info(dataset_dir)
    except ValueError as exc:
        return None, [DataProblem(str(info_path), None, None, from_exception(exc))]
    if name not in info or not belongings.usable_dataset(dataset_dir, name):  # another member's: as unknown
        known = ", ".join(belongings.usable_datasets(dataset_dir, info))
        msg = (
            message("data.not_registered", name=name, known=known)
            if known
            else message("data.not_registered_none", name=name)
        )
        return None, [DataProblem(str(info_path), None, None, msg)]
    problems = _entry_problems(name, info[name], info_path)
    return (None if problems else DatasetEntry.from_info(name, info[name])), problems


def _load(name: str, dataset_dir: Path, stage: str, limit: int | None = None, head: bool = False):
    """(entry, [(row number, canonical row)], problems) with problems of one kind collapsed to the first row.
    ``head``: read only the file's first ``limit`` rows within the page's byte budget
    (``engine.data.files.read_head``); ``_load_head`` also says whether that was the whole file."""
    return _load_head(name, dataset_dir, stage, limit, head)[:3]


def _load_head(name: str, dataset_dir: Path, stage: str, limit: int | None = None, head: bool = False):
    """``_load`` plus whether the whole file was read (always, unless ``head``)."""
    entry, problems = _resolve(name, dataset_dir)
    if entry is None:
        return None, [], problems, True
    return _load_entry(entry, dataset_dir, stage, limit, head)


def _where(entry: DatasetEntry, dataset_dir: Path) -> tuple[Path, list[Path] | None, DataProblem | None]:
    """``_where_unchecked`` behind ``engine.data.admit``: an entry leading out of the dataset folder is refused before
    anything there is looked at, and the files it would read must be regular files inside it within the size bound."""
    info_file = str(dataset_dir / INFO_NAME)
    if entry.source in ("file", "script"):
        key, value = ("script_url", entry.hub_id) if entry.source == "script" else ("file_name", entry.file_name)
        target = dataset_dir / entry.hub_id if entry.source == "script" else _locate(entry, dataset_dir)
        where = [dataset_dir] if entry.source == "script" else admit.roots(dataset_dir)
        why = admit.outside_problem(entry.name, key, str(value), target, where)
        if why is not None:
            return target, None, DataProblem(info_file, None, key, why)
    path, files, problem = _where_unchecked(entry, dataset_dir)
    if problem is not None:
        return path, files, problem
    root = admit.hub_root(path) if entry.source in ("hf_hub", "ms_hub") else admit.roots(dataset_dir)
    try:
        chosen = folder_files(path, files) if path.is_dir() else [path]
    except (OSError, ValueError, KeyError, TypeError):
        return path, files, None  # the reader names what is wrong with the folder
    try:
        why = admit.files_problem(entry.name, chosen, root)
    except ValueError as exc:  # STUDIO_MAX_DATASET_MB itself
        return path, files, DataProblem(info_file, None, None, from_exception(exc))
    return path, files, None if why is None else DataProblem(info_file, None, None, why)


def _where_unchecked(entry: DatasetEntry, dataset_dir: Path) -> tuple[Path, list[Path] | None, DataProblem | None]:
    """(the file or folder the entry's rows are read from, the folder's files of its subset / split / folder or
    None for all, a problem). A hub dataset not in the Hugging Face cache but on the reachable hub is the problem
    with message None: nothing wrong, its rows are checked when the run has downloaded it (``hub_pending``)."""
    info_file = str(dataset_dir / INFO_NAME)
    name = entry.name
    if entry.source == "hf_hub":
        path = hub.cached_snapshot(entry.hub_id, entry.revision, entry.folder)
        if path is None:
            why = hub.availability(entry.hub_id, entry.revision, name)
            return dataset_dir, None, DataProblem(info_file, None, "hf_hub_url", why)
    elif entry.source == "ms_hub":
        path = ms_hub.cached_snapshot(entry.hub_id, entry.revision, entry.folder)
        if path is None:
            why = ms_hub.availability(entry.hub_id, entry.revision, name)
            return dataset_dir, None, DataProblem(info_file, None, "ms_hub_url", why)
    elif entry.source == "script":
        path = dataset_dir / entry.hub_id
        if not path.is_dir():
            return (
                path,
                None,
                DataProblem(info_file, None, "script_url", message("data.script_missing", name=name, path=path)),
            )
        scripts = sorted(p.name for p in path.glob("*.py"))
        if scripts:
            import importlib.metadata

            version = importlib.metadata.version("datasets")
            msg = message("data.script_unsupported", name=name, script=scripts[0], version=version)
            return path, None, DataProblem(str(path / scripts[0]), None, None, msg)
    else:
        path = _locate(entry, dataset_dir)
        if not path.exists():
            return (
                path,
                None,
                DataProblem(str(path), None, None, message("data.file_not_found", name=name, info=info_file)),
            )
        if not path.is_dir():
            for key, value in (("subset", entry.subset), ("folder", entry.folder)):
                if value:
                    return (
                        path,
                        None,
                        DataProblem(info_file, None, key, message("data.option_needs_folder", name=name, key=key)),
                    )
            if entry.split != "train":  # datasets reads a data file as its one split, train
                return (
                    path,
                    None,
                    DataProblem(
                        info_file, None, "split", message("data.split_missing", split=entry.split, have="train")
                    ),
                )
            return path, None, None
    if not (entry.subset or entry.folder or entry.split != "train" or entry.source != "file"):
        return path, None, None
    files, why = select_files(path, subset=entry.subset, split=entry.split, folder=entry.folder)
    if why is not None:
        return path, None, DataProblem(str(path), None, None, message("data.entry_files", name=name, problem=why))
    return path, files, None


def hub_pending(names: list[str], dataset_dir: str | Path) -> list[DatasetEntry]:
    """The hub entries among ``names`` whose snapshot is not in the Hugging Face (or ModelScope) cache yet (a run
    downloads them)."""
    out = []
    for name in names:
        entry, _ = _resolve(name, Path(dataset_dir))
        if entry is None or entry.source not in ("hf_hub", "ms_hub"):
            continue
        cache = hub if entry.source == "hf_hub" else ms_hub
        if cache.cached_snapshot(entry.hub_id, entry.revision, entry.folder) is None:
            out.append(entry)
    return out


def _load_entry(entry: DatasetEntry, dataset_dir: Path, stage: str, limit: int | None = None, head: bool = False):
    """``_load_head`` of an entry that may not be registered yet (the page checks one before it registers it)."""
    name = entry.name
    info_file = str(dataset_dir / INFO_NAME)
    kind = stage_data_problem(stage, name, entry.ranking, entry.kto_tag)
    if kind is not None:
        return entry, [], [DataProblem(info_file, None, None, message("data." + kind[0], **kind[1]))], True
    if stage in ("sft", "grpo") and entry.is_text:
        problem = DataProblem(info_file, None, None, message("data.text_needs_pt", name=name))
        return entry, [], [problem], True
    path, files, problem = _where(entry, dataset_dir)
    if problem is not None:
        return entry, [], [problem] if problem.message is not None else [], True
    complete = True
    try:
        if head:
            raw, problems, complete = read_head(path, limit or HEAD_CHECK_ROWS, files=files)
        else:
            raw, problems = _read_folder(path, files) if path.is_dir() else _read_file(path)
    except (OSError, ValueError, KeyError, TypeError) as exc:  # unreadable file or folder: name it, never a traceback
        error = f"{type(exc).__name__}: {exc}"[:387]  # the whole message stays within 400 characters
        raw, problems = [], [DataProblem(str(path), None, None, message("data.cannot_read", error=error))]
    if not raw and not problems:
        problems.append(DataProblem(str(path), None, None, message("data.no_rows")))
    rows, seen = [], {}
    for rowno, rec in raw[:limit] if limit else raw:
        try:
            rows.append((rowno, normalize_row(rec, entry, stage)))
        except _RowError as err:
            key = (err.column, err.kind)
            if key in seen:
                seen[key][1] += 1
                continue
            seen[key] = [DataProblem(str(path), rowno, err.column, err.message), 0]
    for prob, more in seen.values():
        if more:
            key = "data.more_rows" if more > 1 else "data.more_rows_one"
            prob.message = message(key, message=prob.message, more=more)
        problems.append(prob)
    if entry.columns.get("images") and rows:  # every image opened (header only), paths resolved in the rows
        problems += images.image_problems(rows, str(path), entry.columns["images"], dataset_dir)
    return entry, rows, problems, complete


def share_dataset(dataset_dir: str | Path, name: str, names: list[str]) -> list[str]:
    """Share the registered dataset ``name`` with the accounts ``names`` (``["*"]`` everyone, ``[]`` nobody again);
    belongings.ShareError naming why not. Another member's answers as one not registered."""
    info = read_dataset_info(dataset_dir) if (Path(dataset_dir) / "dataset_info.json").is_file() else {}
    return belongings.share_dataset(dataset_dir, name, names, registered=name in info)


def check_datasets(names: list[str], dataset_dir: str | Path, stage: str = "sft") -> list[DataProblem]:
    """Every problem in the named datasets for this stage; empty when they can be trained on."""
    return [p for name in names for p in check_dataset(name, dataset_dir, stage)[3]]


def check_dataset(
    name: str, dataset_dir: str | Path, stage: str | None = None
) -> tuple[DatasetEntry | None, str, list[dict], list[DataProblem]]:
    """One dataset read whole for ``stage`` (None: the entry's own): (its entry, the stage, its rows, every problem;
    a kto set with no tagged row is one)."""
    ddir = Path(dataset_dir)
    entry, _ = _resolve(name, ddir)
    stage = stage or entry_stage(entry)
    _, loaded, problems = _load(name, ddir, stage)
    rows = [r for _, r in loaded]
    if stage == "kto" and rows and not problems:
        problems = _kto_problems(name, ddir, rows)
    return entry, stage, rows, problems


def _kto_problems(name: str, dataset_dir: Path, rows: list[dict]) -> list[DataProblem]:
    """A kto dataset none of whose rows carries a tag has nothing to train on (untagged rows are left out)."""
    if kto_counts(rows)["untagged"] < len(rows):
        return []
    entry, _ = _resolve(name, dataset_dir)
    column = entry.kto_tag if entry else "kto_tag"
    msg = message("data.kto_no_tags", name=name, column=column)
    return [DataProblem(str(dataset_dir / INFO_NAME), None, None, msg)]


def sample_rows(rows: list, num_samples: int, seed: int) -> list:
    """LLaMA-Factory's ``num_samples`` (its loader.py): a random permutation of the rows cut to ``num_samples``; when
    that asks for more rows than there are, the rest are drawn at random with replacement. Seeded by train.seed."""
    import numpy as np  # light: not part of the training stack

    rng = np.random.RandomState(seed)
    indexes = rng.permutation(len(rows))[:num_samples]
    if num_samples > len(indexes):
        indexes = np.concatenate((indexes, rng.choice(len(rows), num_samples - len(indexes))))
    return [rows[int(i)] for i in indexes]


def load_rows(name: str, dataset_dir: str | Path, stage: str = "sft") -> list[dict]:
    """Canonical rows of one dataset; raises DataError listing every problem."""
    _, rows, problems = _load(name, Path(dataset_dir), stage)
    if problems:
        raise DataError(problems)
    return [r for _, r in rows]


def raw_head(name: str, dataset_dir: str | Path, n: int = 5) -> list[dict]:
    """The first ``n`` rows as the file has them (its own columns, before any mapping): the page's preview. Bounded
    like ``head_rows``; rows that are not objects are left out."""
    entry, _ = _resolve(name, Path(dataset_dir))
    if entry is None:
        return []
    path, files, problem = _where(entry, Path(dataset_dir))
    if problem is not None:
        return []
    try:
        rows, _, _ = read_head(path, n, files=files)
    except (OSError, ValueError, KeyError, TypeError):  # head_rows names the problem
        return []
    return [rec for _, rec in rows if isinstance(rec, dict)][:n]


def preview_rows(name: str, dataset_dir: str | Path, n: int = 5, stage: str | None = None) -> list[dict]:
    """The first ``n`` canonical rows (bad rows skipped) for the page's preview; reads only the file's head."""
    return head_rows(name, dataset_dir, n, stage)[0]


def head_rows(
    name: str, dataset_dir: str | Path, n: int = 5, stage: str | None = None
) -> tuple[list[dict], list[DataProblem]]:
    """(the first ``n`` canonical rows, the problems met reading them): what the page shows. Bounded: the file's
    first rows within ``PAGE_READ_BYTES``; a row longer than ``PAGE_RECORD_BYTES`` is a problem naming its line."""
    return head_rows_counted(name, dataset_dir, n, stage)[:2]


def head_rows_counted(
    name: str, dataset_dir: str | Path, n: int = 5, stage: str | None = None
) -> tuple[list[dict], list[DataProblem], bool]:
    """``head_rows`` plus whether those rows are the whole file (the page says which its figures come from)."""
    entry, _ = _resolve(name, Path(dataset_dir))
    if stage is None:
        stage = entry_stage(entry)
    _, rows, problems, complete = _load_head(name, Path(dataset_dir), stage, limit=max(n * 4, n), head=True)
    return [r for _, r in rows][:n], problems, complete and len(rows) <= n


def check_head(
    name: str, dataset_dir: str | Path, stage: str = "sft", max_rows: int = HEAD_CHECK_ROWS
) -> tuple[list[DataProblem], int, bool]:
    """(problems, rows checked, whether that was the whole file): the page's check, bounded like ``head_rows``
    (``max_rows`` rows, ``PAGE_READ_BYTES`` of the file); a run checks every row before training."""
    _, rows, problems, complete = _load_head(name, Path(dataset_dir), stage, limit=max_rows, head=True)
    return problems, len(rows), complete


def entry_stage(entry: DatasetEntry | None) -> str:
    """The stage an entry's rows are read for when none is given: dpo for pairs, kto for answers with a kto tag,
    pt for plain text, else sft."""
    if entry is None:
        return "sft"
    return "dpo" if entry.ranking else "kto" if entry.kto_tag else "pt" if entry.is_text else "sft"


def check_entry(
    dataset_dir: str | Path,
    name: str,
    file_name: str,
    formatting: str = "alpaca",
    columns: dict | None = None,
    ranking: bool = False,
    max_rows: int = HEAD_CHECK_ROWS,
) -> tuple[list[DataProblem], int, int, bool]:
    """(problems, trainable rows, rows read, whether that was the whole file) of an entry before it is registered,
    bounded like ``check_head``: the page refuses a file none of whose rows can be trained on as mapped."""
    raw: dict = {"file_name": str(file_name), "formatting": formatting}
    if ranking:
        raw["ranking"] = True
    if columns:
        raw["columns"] = dict(columns)
    ddir = Path(dataset_dir)
    problems = _entry_problems(name, raw, ddir / INFO_NAME)
    if problems:
        return problems, 0, 0, True
    entry = DatasetEntry.from_info(name, raw)
    _, rows, problems, complete = _load_entry(entry, ddir, entry_stage(entry), limit=max_rows, head=True)
    return problems, len(rows), len(rows) + _failed_rows(problems), complete


def _failed_rows(problems: list[DataProblem]) -> int:
    """Rows the problems stand for (a problem of one kind counts the rows it collapsed: ``data.more_rows``)."""
    count = 0
    for p in problems:
        if p.row is None:
            continue
        params = getattr(p.message, "params", {}) or {}
        count += 1 + int(params.get("more", 0) if getattr(p.message, "key", "").startswith("data.more_rows") else 0)
    return count


def register_dataset(
    dataset_dir: str | Path,
    name: str,
    file_name: str,
    formatting: str = "alpaca",
    columns: dict | None = None,
    tags: dict | None = None,
    ranking: bool = False,
    overwrite: bool = False,
    owner: str | None = None,
) -> dict:
    """Add (or replace, with overwrite) one entry in dataset_info.json, keeping the others (``owner``: belongings')."""
    ddir = Path(dataset_dir)
    if not name or not name.replace("_", "").replace("-", "").replace(".", "").isalnum():
        raise ValueError(message("data.bad_name", name=name))
    if len(name) > MAX_DATASET_NAME:
        raise ValueError(message("data.name_too_long", length=len(name), limit=MAX_DATASET_NAME))
    if formatting not in ("alpaca", "sharegpt"):
        raise ValueError(message("data.bad_formatting", formatting=formatting))
    bad = sorted(set(columns or {}) - COLUMN_KEYS)
    if bad:
        raise ValueError(message("data.unknown_columns", bad=", ".join(bad), known=", ".join(sorted(COLUMN_KEYS))))
    target = Path(file_name).expanduser()
    # The name stays inside the dataset folder (or the page's uploads): "../.." or "/" must not reach other files.
    if not admit.inside(target if target.is_absolute() else ddir / target, admit.roots(ddir)):
        raise ValueError(message("data.file_outside", file=file_name, folder=ddir))
    if not (target if target.is_absolute() else ddir / target).exists():
        raise ValueError(message("data.file_missing", path=target if target.is_absolute() else ddir / target))
    entry: dict = {"file_name": str(file_name), "formatting": formatting}
    if ranking:
        entry["ranking"] = True
    if columns:
        entry["columns"] = dict(columns)
    if tags:
        entry["tags"] = dict(tags)
    ddir.mkdir(parents=True, exist_ok=True)
    with open(ddir / ".dataset_info.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two uploads at once must not lose each other's entries
        info = read_dataset_info(ddir) if (ddir / INFO_NAME).is_file() else {}
        why, held = belongings.refusal(ddir, name, name in info, overwrite, owner)
        if why is not None:
            raise ValueError(message(f"data.{why}", name=name, path=ddir / INFO_NAME, owner=held or "the operator"))
        info[name] = entry
        save_dataset_info(ddir, info)
        belongings.record_dataset(ddir, name, owner if owner is not None else held)
    return entry


def entry_bytes(raw: dict, dataset_dir: str | Path) -> int:
    """What a registered file entry's file or folder holds, in bytes; 0 for an entry leading out of the dataset folder
    or to anything but regular files (the row check then refuses it, naming the entry, without walking it)."""
    ddir = Path(dataset_dir)
    path = Path(str(raw["file_name"])).expanduser()
    path = path if path.is_absolute() else ddir / path
    where = admit.roots(ddir)
    if not admit.inside(path, where):
        return 0
    if not path.is_dir():
        return path.stat().st_size if path.is_file() else 0
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and admit.inside(f, where))
