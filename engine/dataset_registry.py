"""The dataset registry: ``dataset_info.json`` in LLaMA-Factory's schema, row loading, checks and normalisation.

Light: stdlib, plus pyarrow for Parquet / saved HF datasets (imported only when such a file is read). Never
torch, transformers or datasets.
"""

from __future__ import annotations

import argparse
import csv
import fcntl
import io
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

INFO_NAME = "dataset_info.json"
# Long documents (pretraining text) are legitimate CSV fields: allow up to 64 MiB instead of csv's 128 KiB.
csv.field_size_limit(64 << 20)


def read_dataset_info(dataset_dir: str | Path) -> dict:
    """The registry as a dict; raises ValueError naming the file when it is not a JSON object."""
    path = Path(dataset_dir) / INFO_NAME
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    if not isinstance(info, dict):
        raise ValueError(f"{path}: expected a JSON object of dataset entries, got {type(info).__name__}")  # noqa: TRY004 (callers catch ValueError)
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


# ----------------------------------------------------------------------------------------------- entries
ALPACA_COLUMNS = {
    "prompt": "instruction",
    "query": "input",
    "response": "output",
    "system": "system",
    "history": "history",
}
SHAREGPT_COLUMNS = {"messages": "conversations", "system": "system", "tools": "tools"}
SHAREGPT_TAGS = {
    "role_tag": "from",
    "content_tag": "value",
    "user_tag": "human",
    "assistant_tag": "gpt",
    "observation_tag": "observation",
    "function_tag": "function_call",
    "system_tag": "system",
}
COLUMN_KEYS = {
    "prompt",
    "query",
    "response",
    "system",
    "history",
    "messages",
    "chosen",
    "rejected",
    "text",
    "tools",
    "images",
    "videos",
    "audios",
    "kto_tag",
}
STAGES = ("sft", "pt", "dpo")


@dataclass
class DataProblem:
    """One thing wrong with a dataset. ``row`` is 1-based (the line number for JSONL files), or None."""

    file: str
    row: int | None
    column: str | None
    message: str

    def __str__(self) -> str:
        where = self.file
        if self.row is not None:
            where += f", {'line' if self.file.endswith('.jsonl') else 'row'} {self.row}"
        if self.column:
            where += f", column '{self.column}'"
        return f"{where}: {self.message}"


class DataError(ValueError):
    """Datasets that cannot be trained on; ``problems`` lists every DataProblem found."""

    def __init__(self, problems: list[DataProblem]):
        self.problems = problems
        super().__init__("bad training data:\n" + "\n".join(f"  {p}" for p in problems))


class _RowError(Exception):
    def __init__(self, column: str | None, message: str, kind: str = ""):
        self.column, self.message, self.kind = column, message, kind or message
        super().__init__(message)


@dataclass
class DatasetEntry:
    name: str
    file_name: str
    formatting: str = "alpaca"
    ranking: bool = False
    columns: dict = field(default_factory=dict)
    tags: dict = field(default_factory=dict)
    is_text: bool = False  # pretraining text: one prompt/text column and no response

    @classmethod
    def from_info(cls, name: str, raw: dict) -> DatasetEntry:
        fmt = raw.get("formatting", "alpaca")
        given = dict(raw.get("columns") or {})
        ranking = bool(raw.get("ranking"))
        is_text = (
            fmt == "alpaca"
            and not ranking
            and bool(given)
            and "response" not in given
            and ("prompt" in given or "text" in given)
        )
        base = SHAREGPT_COLUMNS if fmt == "sharegpt" else ({} if is_text else ALPACA_COLUMNS)
        if ranking and fmt == "alpaca":
            base = {k: v for k, v in ALPACA_COLUMNS.items() if k != "response"} | {
                "chosen": "chosen",
                "rejected": "rejected",
            }
        tags = {**SHAREGPT_TAGS, **(raw.get("tags") or {})} if fmt == "sharegpt" else {}
        return cls(name, str(raw.get("file_name", "")), fmt, ranking, {**base, **given}, tags, is_text)


def _entry_problems(name: str, raw: Any, info_path: Path) -> list[DataProblem]:
    if not isinstance(raw, dict):
        return [DataProblem(str(info_path), None, None, f"entry '{name}' must be an object")]
    out = []
    if not raw.get("file_name"):
        hub = raw.get("hf_hub_url") or raw.get("ms_hub_url") or raw.get("script_url")
        msg = (
            (
                f"entry '{name}' points to a hub dataset ({hub}); Studio reads local files only: download it and "
                "set file_name"
            )
            if hub
            else f"entry '{name}' has no file_name"
        )
        out.append(DataProblem(str(info_path), None, "file_name", msg))
    if raw.get("formatting", "alpaca") not in ("alpaca", "sharegpt"):
        out.append(
            DataProblem(
                str(info_path),
                None,
                "formatting",
                f"entry '{name}': formatting {raw.get('formatting')!r} is not alpaca or sharegpt",
            )
        )
    bad = sorted(set(raw.get("columns") or {}) - COLUMN_KEYS)
    if bad:
        out.append(
            DataProblem(
                str(info_path),
                None,
                "columns",
                f"entry '{name}': unknown column keys {', '.join(bad)} (known: {', '.join(sorted(COLUMN_KEYS))})",
            )
        )
    return out


# ----------------------------------------------------------------------------------------------- loading
def _read_file(path: Path) -> tuple[list[tuple[int, Any]], list[DataProblem]]:
    """[(row number, record)] and the problems met; JSON arrays count records, JSONL counts lines."""
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _read_jsonl(path)
    if suffix == ".json":
        raw = path.read_bytes()
        text, problem = _decode(raw, path)
        if problem:
            return [], [problem]
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            if exc.msg == "Extra data":  # a JSON-lines file named .json
                return _read_jsonl(path)
            return [], [
                DataProblem(
                    str(path), None, None, f"not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
                )
            ]
        if isinstance(data, dict):
            data = [data]
        if not isinstance(data, list):
            return [], [DataProblem(str(path), None, None, "expected a JSON list of records")]
        return list(enumerate(data, 1)), []
    if suffix == ".csv":
        text, problem = _decode(path.read_bytes(), path)
        if problem:
            return [], [problem]
        rows: list[tuple[int, Any]] = []
        reader = csv.DictReader(io.StringIO(text, newline=""))
        try:
            for row in reader:
                rows.append((len(rows) + 1, row))
        except csv.Error as exc:
            return rows, [
                DataProblem(str(path), len(rows) + 1, None, f"not valid CSV (line {reader.line_num}): {exc}")
            ]
        return rows, []
    if suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            return list(enumerate(pq.read_table(path).to_pylist(), 1)), []
        except (pa.ArrowException, OSError) as exc:
            return [], [
                DataProblem(
                    str(path),
                    None,
                    None,
                    f"not a readable Parquet file (truncated or not Parquet): {str(exc).splitlines()[0][:200]}",
                )
            ]
    if suffix == ".arrow":
        import pyarrow as pa

        with pa.memory_map(str(path)) as src:
            try:
                table = pa.ipc.open_stream(src).read_all()
            except pa.ArrowInvalid:
                table = pa.ipc.open_file(src).read_all()
        return list(enumerate(table.to_pylist(), 1)), []
    return [], [
        DataProblem(
            str(path),
            None,
            None,
            f"unsupported file type '{suffix}' (use .json, .jsonl, .csv, "
            ".parquet, or a folder saved with datasets' save_to_disk)",
        )
    ]


def _read_jsonl(path: Path) -> tuple[list[tuple[int, Any]], list[DataProblem]]:
    rows, problems = [], []
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte order mark
                raw = raw[3:]
            if not raw.strip():
                continue
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                problems.append(
                    DataProblem(
                        str(path),
                        lineno,
                        None,
                        f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at "
                        f"column {exc.start + 1}): save the file as UTF-8",
                    )
                )
                if len(problems) >= 20:
                    break
                continue
            try:
                rows.append((lineno, json.loads(line)))
            except json.JSONDecodeError as exc:
                problems.append(
                    DataProblem(str(path), lineno, None, f"malformed JSON line (column {exc.colno}: {exc.msg})")
                )
    return rows, problems


def _decode(raw: bytes, path: Path) -> tuple[str, DataProblem | None]:
    """UTF-8 text (a byte order mark is dropped), or a problem naming the line of the first undecodable byte."""
    try:
        return raw.decode("utf-8-sig"), None
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        return "", DataProblem(
            str(path),
            None,
            None,
            f"not UTF-8 text (byte 0x{raw[exc.start]:02x} on line {line}): save the file as UTF-8",
        )


def _read_folder(path: Path) -> tuple[list[tuple[int, Any]], list[DataProblem]]:
    """A datasets save_to_disk folder (Dataset or DatasetDict's train split), or a folder of data files."""
    if (path / "dataset_dict.json").is_file():
        return _read_folder(path / "train")
    if (path / "state.json").is_file():
        state = json.loads((path / "state.json").read_text(encoding="utf-8"))
        files = [path / f["filename"] for f in state.get("_data_files", [])]
    else:
        files = sorted(p for p in path.iterdir() if p.suffix.lower() in (".json", ".jsonl", ".csv", ".parquet"))
    rows, problems = [], []
    for f in files:
        got, probs = _read_file(f)
        rows += [(len(rows) + i, r) for i, (_, r) in enumerate(got, 1)] if len(files) > 1 else got
        problems += probs
    return rows, problems


def _locate(entry: DatasetEntry, dataset_dir: Path) -> Path:
    path = Path(entry.file_name).expanduser()
    return path if path.is_absolute() else dataset_dir / path


# ----------------------------------------------------------------------------------------------- normalising
def normalize_row(row: Any, entry: DatasetEntry, stage: str = "sft") -> dict:
    """Any supported row -> {system, messages:[{role, content}], chosen?, rejected?, text?}; raises _RowError."""
    if not isinstance(row, dict):
        raise _RowError(None, f"expected an object with columns, got {type(row).__name__}")
    cols = entry.columns

    def get(key: str, required: bool) -> Any:
        col = cols.get(key)
        if col is None or col not in row or row[col] is None:
            if not required:
                return None
            have = ", ".join(map(str, row)) or "none"
            raise _RowError(
                col or key,
                f"missing column '{col or key}' ({key}); the row has: {have}. Fix "
                f"columns.{key} in dataset_info.json or rename the column",
                kind=f"missing:{key}",
            )
        return row[col]

    if entry.is_text:
        text = get("text" if "text" in cols else "prompt", True)
        if not str(text).strip():
            raise _RowError(cols.get("text", cols.get("prompt")), "empty text", kind="empty")
        return {"system": "", "messages": [], "text": str(text)}
    system = str(get("system", False) or "")
    if entry.formatting == "sharegpt":
        system, messages = _sharegpt_messages(get("messages", True), entry, system)
    else:
        messages = []
        for pair in get("history", False) or []:
            if not isinstance(pair, (list, tuple)) or len(pair) != 2:
                raise _RowError(cols.get("history"), "history must be a list of [prompt, response] pairs")
            messages += [{"role": "user", "content": str(pair[0])}, {"role": "assistant", "content": str(pair[1])}]
        prompt, query = str(get("prompt", True)), str(get("query", False) or "")
        messages.append({"role": "user", "content": f"{prompt}\n{query}" if query else prompt})
        if not entry.ranking:
            messages.append({"role": "assistant", "content": str(get("response", True))})
    out = {"system": system, "messages": messages}
    if entry.ranking:
        for key in ("chosen", "rejected"):
            val = get(key, True)
            if isinstance(val, dict):  # sharegpt ranking: {"from": "gpt", "value": ...}
                val = val.get(entry.tags.get("content_tag", "value"), "")
            if not str(val).strip():
                raise _RowError(cols[key], f"empty {key} answer", kind=f"empty-{key}")
            out[key] = str(val)
        if messages and messages[-1]["role"] != "user":
            raise _RowError(cols.get("messages"), "a preference row's conversation must end with a user turn")
    else:
        last = messages[-1] if messages else None
        if stage != "pt" and (last is None or last["role"] != "assistant"):
            raise _RowError(cols.get("messages"), "the conversation must end with an assistant turn", kind="end")
        for i, m in enumerate(messages):
            if m["role"] == "assistant" and not m["content"].strip():
                col = cols.get("response") if entry.formatting == "alpaca" else cols.get("messages")
                raise _RowError(col, f"empty response (turn {i + 1})", kind="empty")
    return out


def _sharegpt_messages(turns: Any, entry: DatasetEntry, system: str) -> tuple[str, list[dict]]:
    t = entry.tags
    col = entry.columns.get("messages")
    if not isinstance(turns, list):
        raise _RowError(col, f"expected a list of turns, got {type(turns).__name__}")
    roles = {
        t["user_tag"]: "user",
        t["observation_tag"]: "user",
        t["assistant_tag"]: "assistant",
        t["function_tag"]: "assistant",
        t["system_tag"]: "system",
    }
    messages: list[dict] = []
    for i, turn in enumerate(turns, 1):
        if not isinstance(turn, dict) or t["role_tag"] not in turn or t["content_tag"] not in turn:
            raise _RowError(
                col,
                f"turn {i} needs '{t['role_tag']}' and '{t['content_tag']}' keys (tags in dataset_info.json)",
                kind="turn-keys",
            )
        tag, content = turn[t["role_tag"]], str(turn[t["content_tag"]] or "")
        role = roles.get(tag)
        if role is None:
            raise _RowError(col, f"turn {i} has role '{tag}'; known roles: {', '.join(map(str, roles))}", kind="role")
        if role == "system":
            if i != 1:
                raise _RowError(col, f"turn {i}: a system turn may only come first", kind="order")
            system = content
            continue
        want = "user" if len(messages) % 2 == 0 else "assistant"
        if role != want:
            tag_want = t["user_tag"] if want == "user" else t["assistant_tag"]
            raise _RowError(
                col,
                f"turn {i} is '{tag}' but '{tag_want}' was expected: turns must alternate "
                f"{t['user_tag']}/{t['assistant_tag']}, starting with {t['user_tag']}",
                kind="order",
            )
        messages.append({"role": role, "content": content})
    return system, messages


# ----------------------------------------------------------------------------------------------- public API
def _resolve(name: str, dataset_dir: Path) -> tuple[DatasetEntry | None, list[DataProblem]]:
    info_path = dataset_dir / INFO_NAME
    if not info_path.is_file():
        return None, [DataProblem(str(info_path), None, None, "dataset registry not found (no dataset_info.json)")]
    try:
        info = read_dataset_info(dataset_dir)
    except ValueError as exc:
        return None, [DataProblem(str(info_path), None, None, str(exc))]
    if name not in info:
        known = ", ".join(sorted(info)) or "none"
        return None, [DataProblem(str(info_path), None, None, f"dataset '{name}' is not registered (known: {known})")]
    problems = _entry_problems(name, info[name], info_path)
    return (None if problems else DatasetEntry.from_info(name, info[name])), problems


def _load(name: str, dataset_dir: Path, stage: str, limit: int | None = None):
    """(entry, [(row number, canonical row)], problems) with problems of one kind collapsed to the first row."""
    entry, problems = _resolve(name, dataset_dir)
    if entry is None:
        return None, [], problems
    path = _locate(entry, dataset_dir)
    info_file = str(dataset_dir / INFO_NAME)
    if stage == "dpo" and not entry.ranking:
        return (
            entry,
            [],
            [
                DataProblem(
                    info_file,
                    None,
                    None,
                    f"stage dpo needs preference pairs, but '{name}' has "
                    'no chosen/rejected columns: set "ranking": true with columns chosen and '
                    "rejected, or use stage sft",
                )
            ],
        )
    if stage != "dpo" and entry.ranking:
        return entry, [], [DataProblem(info_file, None, None, f"'{name}' holds preference pairs: use stage dpo")]
    if stage == "sft" and entry.is_text:
        return (
            entry,
            [],
            [
                DataProblem(
                    info_file,
                    None,
                    None,
                    f"'{name}' is plain text with no response column: use stage pt, or map columns.response",
                )
            ],
        )
    if not path.exists():
        return (
            entry,
            [],
            [DataProblem(str(path), None, None, f"file not found (file_name of '{name}' in {info_file})")],
        )
    try:
        raw, problems = _read_folder(path) if path.is_dir() else _read_file(path)
    except (OSError, ValueError, KeyError, TypeError) as exc:  # unreadable file or folder: name it, never a traceback
        raw, problems = [], [DataProblem(str(path), None, None, f"cannot read: {type(exc).__name__}: {exc}"[:400])]
    if not raw and not problems:
        problems.append(DataProblem(str(path), None, None, "no rows"))
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
            prob.message += f" (and {more} more row{'s' if more > 1 else ''} like it)"
        problems.append(prob)
    return entry, rows, problems


def check_datasets(names: list[str], dataset_dir: str | Path, stage: str = "sft") -> list[DataProblem]:
    """Every problem in the named datasets for this stage; empty when they can be trained on."""
    problems: list[DataProblem] = []
    for name in names:
        problems += _load(name, Path(dataset_dir), stage)[2]
    return problems


def load_rows(name: str, dataset_dir: str | Path, stage: str = "sft") -> list[dict]:
    """Canonical rows of one dataset; raises DataError listing every problem."""
    _, rows, problems = _load(name, Path(dataset_dir), stage)
    if problems:
        raise DataError(problems)
    return [r for _, r in rows]


def preview_rows(name: str, dataset_dir: str | Path, n: int = 5, stage: str | None = None) -> list[dict]:
    """The first ``n`` canonical rows (bad rows skipped) for the page's preview."""
    entry, _ = _resolve(name, Path(dataset_dir))
    if stage is None:
        stage = "dpo" if entry and entry.ranking else "pt" if entry and entry.is_text else "sft"
    return [r for _, r in _load(name, Path(dataset_dir), stage, limit=max(n * 4, n))[1]][:n]


def register_dataset(
    dataset_dir: str | Path,
    name: str,
    file_name: str,
    formatting: str = "alpaca",
    columns: dict | None = None,
    tags: dict | None = None,
    ranking: bool = False,
    overwrite: bool = False,
) -> dict:
    """Add (or replace, with overwrite) one entry in dataset_info.json, keeping every other entry."""
    ddir = Path(dataset_dir)
    if not name or not name.replace("_", "").replace("-", "").replace(".", "").isalnum():
        raise ValueError(f"dataset name {name!r}: use letters, digits, _ - .")
    if formatting not in ("alpaca", "sharegpt"):
        raise ValueError(f"formatting {formatting!r}: use alpaca or sharegpt")
    bad = sorted(set(columns or {}) - COLUMN_KEYS)
    if bad:
        raise ValueError(f"unknown column keys {', '.join(bad)} (known: {', '.join(sorted(COLUMN_KEYS))})")
    target = Path(file_name).expanduser()
    # A relative name stays inside the dataset folder: "../.." must not reach other files through the page.
    if not target.is_absolute() and not (ddir / target).resolve().is_relative_to(ddir.resolve()):
        raise ValueError(f"file_name {file_name!r} leaves the dataset folder {ddir}")
    if not (target if target.is_absolute() else ddir / target).exists():
        raise ValueError(f"file not found: {target if target.is_absolute() else ddir / target}")
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
        if name in info and not overwrite:
            raise ValueError(f"dataset '{name}' is already registered in {ddir / INFO_NAME}")
        info[name] = entry
        save_dataset_info(ddir, info)
    return entry


def cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="studio data", description="Inspect registered datasets.")
    sub = parser.add_subparsers(dest="action", required=True)
    for action in ("check", "preview"):
        p = sub.add_parser(action)
        p.add_argument("names", nargs="+", metavar="NAME")
        p.add_argument("--dataset-dir", default="", help="folder with dataset_info.json (default: the workspace's)")
        p.add_argument("--stage", choices=STAGES, default=None, help="sft, pt or dpo (default: from the entry)")
        p.add_argument("-n", type=int, default=3, help="rows to preview")
    args = parser.parse_args(argv)
    if args.dataset_dir:
        ddir = Path(args.dataset_dir).expanduser()
    else:
        from engine import workspace

        ddir = workspace.data_dir()
    if args.action == "preview":
        for name in args.names:
            print(json.dumps({name: preview_rows(name, ddir, args.n, args.stage)}, ensure_ascii=False, indent=1))
        return 0
    failed = False
    for name in args.names:
        entry, _ = _resolve(name, ddir)
        stage = args.stage or ("dpo" if entry and entry.ranking else "pt" if entry and entry.is_text else "sft")
        _, rows, problems = _load(name, ddir, stage)
        if problems:
            failed = True
            print(f"{name}: {len(problems)} problem(s)")
            for p in problems:
                print(f"  {p}")
        else:
            print(f"{name}: OK ({len(rows)} rows, stage {stage})")
    return 1 if failed else 0
