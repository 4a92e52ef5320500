"""The Datasets tab's upload and registration: an uploaded file copied into the workspace's uploads folder under a
sanitised name (a client-chosen name can never place a file anywhere else; none over ``MAX_UPLOAD_BYTES``), its
columns read and mapped to the format's roles (``guess_mapping`` preselects them), checked trainable on its first
rows and registered; a registered entry read back, so the left column can fix its mapping in place.

Light: csv, pyarrow (Parquet column names), engine.data.dataset_registry; never gradio, torch or transformers. Bounded:
a file's columns and the checks come from its head (``engine.data.files.read_head``, rows of at most
``PAGE_RECORD_BYTES``).
"""

from __future__ import annotations

import csv
import io
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.core import belongings, workspace
from engine.data import dataset_registry as reg
from engine.data import files as data_files
from engine.data import rows as data_rows
from engine.data.files import PAGE_RECORD_BYTES, read_head
from engine.data.messages import message
from engine.runs import owners
from studio import settings
from studio.i18n.localize import localize, localize_error
from studio.i18n.page import t

MAX_UPLOAD_BYTES = settings.max_upload_bytes()  # STUDIO_MAX_UPLOAD_MB
UPLOAD_TYPES = (".json", ".jsonl", ".csv", ".parquet")
# kto_tag (optional, never guessed): a column of true / false per row makes the dataset kto data (LLaMA-Factory's key)
COLUMN_ROLES = {
    "alpaca": ["prompt", "query", "response", "system", "history", "kto_tag"],
    "sharegpt": ["messages", "system", "kto_tag"],
}
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_upload_name(name: str) -> str:
    """The basename only, with anything but letters, digits, . _ - replaced; refuses empty, dot-only or odd types."""
    base = Path(str(name).replace("\\", "/")).name
    stem, dot, ext = base.rpartition(".")
    ext = ("." + ext.lower()) if dot else ""
    if ext not in UPLOAD_TYPES:
        raise ValueError(message("upload.bad_type", name=base, types=", ".join(UPLOAD_TYPES)))
    stem = _SAFE.sub("_", stem).strip("._-")[:80]
    if not stem:
        raise ValueError(message("upload.no_name", name=base))
    return stem + ext


def store_upload(src: str | Path, original_name: str | None = None) -> Path:
    """Copy an uploaded temp file into workspace/uploads under a sanitised, non-clobbering name."""
    src = Path(src)
    size = src.stat().st_size
    if size > MAX_UPLOAD_BYTES:
        raise ValueError(
            message("upload.too_big", name=src.name, mib=f"{size / 2**20:.0f}", limit=MAX_UPLOAD_BYTES // 2**20)
        )
    name = safe_upload_name(original_name or src.name)
    root = workspace.uploads_dir().resolve()
    dest = (root / name).resolve()
    if dest.parent != root:  # belt and braces: the sanitised name has no separators
        raise ValueError(message("upload.outside", name=name))
    n = 1
    while dest.exists():
        stem, ext = name.rsplit(".", 1)
        dest, n = root / f"{stem}-{n}.{ext}", n + 1
    shutil.copyfile(src, dest)
    belongings.record_path(dest)  # team mode: the uploader's (engine.core.belongings)
    return dest


def file_columns(path: str | Path) -> list[str]:
    """Column names from the first row of a JSON / JSONL / CSV / Parquet file; reads the file's head only. Raises
    ValueError (naming file and line) when no row can be read there."""
    path = Path(path)
    ext = path.suffix.lower()
    if ext == ".csv":
        with open(path, "rb") as fh:
            header = fh.readline(PAGE_RECORD_BYTES + 1)
        if len(header) > PAGE_RECORD_BYTES:
            raise ValueError(message("data.record_too_long", limit=f"{PAGE_RECORD_BYTES / 2**20:g}"))
        return next(csv.reader(io.StringIO(header.decode("utf-8-sig"), newline="")), [])
    if ext == ".parquet":
        import pyarrow.parquet as pq

        return list(pq.read_schema(path).names)
    rows, problems, _ = read_head(path, 1)
    if not rows and problems:
        raise ValueError(problems[0].located())
    return list(rows[0][1]) if rows and isinstance(rows[0][1], dict) else []


def guess_mapping(columns: list[str], formatting: str) -> dict[str, str | None]:
    """Preselect columns whose names match a role (instruction -> prompt, output -> response, conversations...)."""
    aliases = {
        "prompt": ["instruction", "prompt", "question"],
        "query": ["input", "query"],
        "response": ["output", "response", "answer"],
        "system": ["system"],
        "history": ["history"],
        "messages": ["conversations", "messages"],
    }
    lower = {c.lower(): c for c in columns}
    return {
        role: next((lower[a] for a in aliases.get(role, []) if a in lower), None) for role in COLUMN_ROLES[formatting]
    }


def problem_text(problem: Any, lang: str = "en") -> str:
    """A dataset problem with its place (file, line or row, column) in the page's language."""
    return localize(problem.located(), lang) if hasattr(problem, "located") else localize(problem, lang)


def _registrable(path: str) -> Path:
    """A file the page may register: an upload, or a file in the workspace's data folder (a registered dataset whose
    mapping is being fixed); in team mode not another member's upload."""
    src = Path(path).resolve()
    roots = (workspace.uploads_dir().resolve(), workspace.data_dir().resolve())
    if not any(src.is_relative_to(root) for root in roots):
        raise ValueError(message("upload.not_uploaded", path=path))
    if owners.path_problem(src) is not None:
        raise ValueError(message("upload.not_yours", path=path))
    return src


def trainability(path: str, name: str, formatting: str, mapping: dict[str, str | None], lang: str = "en") -> str:
    """ "" when some of the file's first rows can be trained on as mapped; else the refusal, naming the rows and
    columns at fault, the file's columns and what to change (the mapping or the format, on this page)."""
    return trainability_text(path, name, formatting, mapping)(lang)


def trainability_text(path: str, name: str, formatting: str, mapping: dict[str, str | None]) -> Callable[[str], str]:
    """``trainability`` checked once, said in any of the page's languages (a switch says it again)."""
    columns = {k: v for k, v in mapping.items() if v}
    problems, good, read, _ = reg.check_entry(workspace.data_dir(), name or "upload", path, formatting, columns)
    if good:
        return lambda code: ""
    try:
        have = ", ".join(file_columns(path)) or "–"
    except (ValueError, OSError):
        have = "–"

    def render(code: str) -> str:
        head = localize(
            message("data.untrainable", rows=read, file=Path(path).name, formatting=formatting, columns=have), code
        )
        listed = "\n".join(f"- {problem_text(p, code)}" for p in problems[:10])
        return f"❌ {t('not_registered', code)}{head}\n{listed}\n\n{t('fix_mapping', code)}"

    return render


def register(
    path: str, name: str, formatting: str, mapping: dict[str, str | None], lang: str = "en", replace: bool = False
) -> str:
    """Register an uploaded file (``replace``: the entry of the same name and file, its mapping fixed). A file none
    of whose first rows can be trained on as mapped is refused, with the rows and columns at fault."""
    return register_text(path, name, formatting, mapping, replace)(lang)


def register_text(
    path: str, name: str, formatting: str, mapping: dict[str, str | None], replace: bool = False
) -> Callable[[str], str]:
    """``register``, done once; what it says, in any of the page's languages (a switch says it again)."""
    if not path:
        return lambda code: "❌ " + t("upload_first", code)
    try:
        src = _registrable(path)
        refusal = trainability_text(str(src), name, formatting, mapping)
        if refusal("en"):
            return refusal
        columns = {k: v for k, v in mapping.items() if v}
        reg.register_dataset(
            workspace.data_dir(), name, str(src), formatting, columns=columns or None, overwrite=replace
        )
        problems, checked, complete = reg.check_head(name, workspace.data_dir(), reg.entry_stage(_entry(name)))
    except ValueError as exc:
        return lambda code, err=exc: f"❌ {localize_error(err, code)}"

    def head(code: str) -> str:
        return "" if complete else "\n\n" + t("checked_head", code, rows=checked, mib=data_files.PAGE_READ_BYTES >> 20)

    if problems:
        return lambda code: (
            (f"⚠ {t('registered_but', code)}\n" + "\n".join(f"- {problem_text(p, code)}" for p in problems[:10]))
            + head(code)
        )
    entry = _entry(name)
    if entry is not None and entry.is_text:  # no response column: plain text, which only stage pt trains on
        return lambda code: "⚠ " + t("registered_pt_only", code, name=name) + head(code)
    return lambda code: "✅ " + t("registered", code, name=name) + head(code)


def _raw(name: str) -> Any:
    """The registry's entry of ``name`` as the page's user may read it (None: none, or another member's)."""
    ddir = workspace.data_dir()
    return reg.read_dataset_info(ddir).get(name) if belongings.usable_dataset(ddir, name) else None


def _entry(name: str) -> Any:
    raw = _raw(name)
    return data_rows.DatasetEntry.from_info(name, raw) if isinstance(raw, dict) else None


def registered_entry(name: str) -> dict | None:
    """The registry's entry of ``name`` as the page edits it: (file path, format, {role: column}), or None."""
    if not name:
        return None
    try:
        raw = _raw(name)
    except (ValueError, OSError):
        return None
    if not isinstance(raw, dict) or not raw.get("file_name"):
        return None
    entry = data_rows.DatasetEntry.from_info(name, raw)
    path = Path(entry.file_name).expanduser()
    path = path if path.is_absolute() else workspace.data_dir() / path
    return {
        "path": str(path),
        "formatting": entry.formatting,
        "columns": dict(entry.columns),
        "ranking": entry.ranking,
    }


def picked_mapping(name: str) -> dict:
    """What the left column shows for a picked dataset: its file ("" where the page cannot register it again: a hub,
    folder or script entry), format, {role: column} and the file's columns to choose from. A role the entry does not
    map is empty, so nothing of the dataset shown before stays (a sharegpt entry's ``messages``)."""
    found = registered_entry(name)
    if found is None:
        try:
            entry = _entry(name) if name else None
        except (ValueError, OSError):
            entry = None
        formatting, columns = (entry.formatting, dict(entry.columns)) if entry is not None else ("alpaca", {})
        found = {"path": "", "formatting": formatting, "columns": columns}
    try:
        found["choices"] = file_columns(found["path"]) if found["path"] else []
    except (ValueError, OSError):
        found["choices"] = []
    return found
