"""Dataset files: rows out of JSON, JSON lines, CSV, Parquet, Arrow and saved HF datasets folders, with every
problem met named by file and row (undecodable bytes, torn JSON, bad CSV quoting, unreadable Parquet).

Light: stdlib, plus pyarrow for Parquet / saved HF datasets (imported only when such a file is read). Never
torch, transformers or datasets.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from engine.data.messages import message
from engine.data.rows import DataProblem

# Long documents (pretraining text) are legitimate CSV fields: allow up to 64 MiB instead of csv's 128 KiB.
csv.field_size_limit(64 << 20)


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
