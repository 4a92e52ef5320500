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

from engine.data_messages import message
from engine.spec_messages import Message, from_exception

INFO_NAME = "dataset_info.json"
# Long documents (pretraining text) are legitimate CSV fields: allow up to 64 MiB instead of csv's 128 KiB.
csv.field_size_limit(64 << 20)


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
    message: str  # an engine.data_messages Message (a plain str from older callers)

    def located(self) -> Message:
        """The problem with its place, as one catalog message (the page shows it in its language)."""
        key = "data.at"
        if self.row is not None:
            key += "_line" if self.file.endswith(".jsonl") else "_row"
        if self.column:
            key += "_column"
        return message(key, file=self.file, row=self.row, column=self.column, message=self.message)

    def __str__(self) -> str:
        return str(self.located())


class DataError(ValueError):
    """Datasets that cannot be trained on; ``problems`` lists every DataProblem found."""

    def __init__(self, problems: list[DataProblem]):
        self.problems = problems
        super().__init__("bad training data:\n" + "\n".join(f"  {p}" for p in problems))


class _RowError(Exception):
    def __init__(self, column: str | None, text: Message, kind: str = ""):
        self.column, self.message, self.kind = column, text, kind or str(text)
        super().__init__(text)


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
        return [DataProblem(str(info_path), None, None, message("data.entry_not_object", name=name))]
    out = []
    if not raw.get("file_name"):
        hub = raw.get("hf_hub_url") or raw.get("ms_hub_url") or raw.get("script_url")
        msg = message("data.entry_hub", name=name, hub=hub) if hub else message("data.entry_no_file", name=name)
        out.append(DataProblem(str(info_path), None, "file_name", msg))
    if raw.get("formatting", "alpaca") not in ("alpaca", "sharegpt"):
        out.append(
            DataProblem(
                str(info_path),
                None,
                "formatting",
                message("data.entry_formatting", name=name, formatting=raw.get("formatting")),
            )
        )
    bad = sorted(set(raw.get("columns") or {}) - COLUMN_KEYS)
    if bad:
        out.append(
            DataProblem(
                str(info_path),
                None,
                "columns",
                message("data.entry_columns", name=name, bad=", ".join(bad), known=", ".join(sorted(COLUMN_KEYS))),
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
                    str(path), None, None, message("data.bad_json", line=exc.lineno, col=exc.colno, error=exc.msg)
                )
            ]
        if isinstance(data, dict):
            data = [data]
        if not isinstance(data, list):
            return [], [DataProblem(str(path), None, None, message("data.not_list"))]
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
                DataProblem(str(path), len(rows) + 1, None, message("data.bad_csv", line=reader.line_num, error=exc))
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
                    message("data.bad_parquet", error=str(exc).splitlines()[0][:200]),
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
            message("data.bad_type", suffix=suffix),
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
                        message("data.not_utf8_column", byte=raw[exc.start], col=exc.start + 1),
                    )
                )
                if len(problems) >= 20:
                    break
                continue
            try:
                rows.append((lineno, json.loads(line)))
            except json.JSONDecodeError as exc:
                problems.append(
                    DataProblem(str(path), lineno, None, message("data.bad_json_line", col=exc.colno, error=exc.msg))
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
            message("data.not_utf8_line", byte=raw[exc.start], line=line),
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
        raise _RowError(None, message("data.row_not_object", type=type(row).__name__))
    cols = entry.columns

    def get(key: str, required: bool) -> Any:
        col = cols.get(key)
        if col is None or col not in row or row[col] is None:
            if not required:
                return None
            have = ", ".join(map(str, row))
            raise _RowError(
                col or key,
                message("data.missing_column", column=col or key, key=key, have=have)
                if have
                else message("data.missing_column_empty", column=col or key, key=key),
                kind=f"missing:{key}",
            )
        return row[col]

    if entry.is_text:
        text = get("text" if "text" in cols else "prompt", True)
        if not str(text).strip():
            raise _RowError(cols.get("text", cols.get("prompt")), message("data.empty_text"), kind="empty")
        return {"system": "", "messages": [], "text": str(text)}
    system = str(get("system", False) or "")
    if entry.formatting == "sharegpt":
        system, messages = _sharegpt_messages(get("messages", True), entry, system)
    else:
        messages = []
        for pair in get("history", False) or []:
            if not isinstance(pair, (list, tuple)) or len(pair) != 2:
                raise _RowError(cols.get("history"), message("data.bad_history"))
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
                raise _RowError(cols[key], message("data.empty_answer", key=key), kind=f"empty-{key}")
            out[key] = str(val)
        if messages and messages[-1]["role"] != "user":
            raise _RowError(cols.get("messages"), message("data.pair_end_user"))
    else:
        last = messages[-1] if messages else None
        if stage != "pt" and (last is None or last["role"] != "assistant"):
            raise _RowError(cols.get("messages"), message("data.end_assistant"), kind="end")
        for i, m in enumerate(messages):
            if m["role"] == "assistant" and not m["content"].strip():
                col = cols.get("response") if entry.formatting == "alpaca" else cols.get("messages")
                raise _RowError(col, message("data.empty_response", turn=i + 1), kind="empty")
    return out


def _sharegpt_messages(turns: Any, entry: DatasetEntry, system: str) -> tuple[str, list[dict]]:
    t = entry.tags
    col = entry.columns.get("messages")
    if not isinstance(turns, list):
        raise _RowError(col, message("data.turns_not_list", type=type(turns).__name__))
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
                message("data.turn_keys", turn=i, role_tag=t["role_tag"], content_tag=t["content_tag"]),
                kind="turn-keys",
            )
        tag, content = turn[t["role_tag"]], str(turn[t["content_tag"]] or "")
        role = roles.get(tag)
        if role is None:
            known = ", ".join(map(str, roles))
            raise _RowError(col, message("data.turn_role", turn=i, tag=tag, known=known), kind="role")
        if role == "system":
            if i != 1:
                raise _RowError(col, message("data.system_first", turn=i), kind="order")
            system = content
            continue
        want = "user" if len(messages) % 2 == 0 else "assistant"
        if role != want:
            tag_want = t["user_tag"] if want == "user" else t["assistant_tag"]
            raise _RowError(
                col,
                message(
                    "data.turn_order", turn=i, tag=tag, want=tag_want, user=t["user_tag"], assistant=t["assistant_tag"]
                ),
                kind="order",
            )
        messages.append({"role": role, "content": content})
    return system, messages


# ----------------------------------------------------------------------------------------------- public API
def _resolve(name: str, dataset_dir: Path) -> tuple[DatasetEntry | None, list[DataProblem]]:
    info_path = dataset_dir / INFO_NAME
    if not info_path.is_file():
        return None, [DataProblem(str(info_path), None, None, message("data.no_registry"))]
    try:
        info = read_dataset_info(dataset_dir)
    except ValueError as exc:
        return None, [DataProblem(str(info_path), None, None, from_exception(exc))]
    if name not in info:
        known = ", ".join(sorted(info))
        msg = (
            message("data.not_registered", name=name, known=known)
            if known
            else message("data.not_registered_none", name=name)
        )
        return None, [DataProblem(str(info_path), None, None, msg)]
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
                    message("data.dpo_needs_pairs", name=name),
                )
            ],
        )
    if stage != "dpo" and entry.ranking:
        return entry, [], [DataProblem(info_file, None, None, message("data.pairs_need_dpo", name=name))]
    if stage == "sft" and entry.is_text:
        return (
            entry,
            [],
            [
                DataProblem(
                    info_file,
                    None,
                    None,
                    message("data.text_needs_pt", name=name),
                )
            ],
        )
    if not path.exists():
        return (
            entry,
            [],
            [DataProblem(str(path), None, None, message("data.file_not_found", name=name, info=info_file))],
        )
    try:
        raw, problems = _read_folder(path) if path.is_dir() else _read_file(path)
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
        raise ValueError(message("data.bad_name", name=name))
    if formatting not in ("alpaca", "sharegpt"):
        raise ValueError(message("data.bad_formatting", formatting=formatting))
    bad = sorted(set(columns or {}) - COLUMN_KEYS)
    if bad:
        raise ValueError(message("data.unknown_columns", bad=", ".join(bad), known=", ".join(sorted(COLUMN_KEYS))))
    target = Path(file_name).expanduser()
    # A relative name stays inside the dataset folder: "../.." must not reach other files through the page.
    if not target.is_absolute() and not (ddir / target).resolve().is_relative_to(ddir.resolve()):
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
        if name in info and not overwrite:
            raise ValueError(message("data.already_registered", name=name, path=ddir / INFO_NAME))
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
