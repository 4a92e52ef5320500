"""Dataset files: rows out of JSON, JSON lines, CSV, Parquet, Arrow and saved HF datasets folders, with every
problem met named by file and row (undecodable bytes, torn JSON, bad CSV quoting, unreadable Parquet). Which files
a dataset reads (subset, split, folder) is engine.data.file_selection's; this module reads them.

Two ways to read: ``_read_file`` / ``_read_folder`` read everything (the trainer, ``studio data check``);
``read_head`` reads the first rows within a byte budget (the page: preview, masked sample, length histogram, the
check after registering). A head read holds at most ``max_bytes`` of the file plus one record of at most
``max_record_bytes``: a longer record (a 50 MB JSON line) is skipped without being held, as a problem naming the file
and the line or row, so the page's memory and time do not grow with what an upload may contain.

Light: stdlib, plus pyarrow for Parquet / saved HF datasets (imported only when such a file is read). Never
torch, transformers or datasets.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
from pathlib import Path
from typing import Any

from engine.data.file_selection import folder_files
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
    if suffix == ".txt":
        return _read_text(path)
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
            if not _jsonl_line(path, lineno, raw, rows, problems):
                break
    return rows, problems


def _jsonl_line(path: Path, lineno: int, raw: bytes, rows: list, problems: list) -> bool:
    """Parse one JSON line into ``rows`` or ``problems``; False once 20 undecodable lines say it is not text."""
    if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte order mark
        raw = raw[3:]
    if not raw.strip():
        return True
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
        return len(problems) < 20
    try:
        rows.append((lineno, json.loads(line)))
    except json.JSONDecodeError as exc:
        problems.append(
            DataProblem(str(path), lineno, None, message("data.bad_json_line", col=exc.colno, error=exc.msg))
        )
    return True


def _read_text(path: Path, max_rows: int | None = None, max_bytes: int | None = None):
    """A .txt file as LLaMA-Factory reads it (the ``text`` builder): one {"text": line} row per non-empty line,
    numbered by line. With limits: (rows, problems, whether the whole file was read)."""
    with path.open("rb") as fh:
        raw = fh.read(max_bytes + 1 if max_bytes is not None else -1)
    whole = max_bytes is None or len(raw) <= max_bytes
    if not whole:
        raw = raw[: raw.rfind(b"\n") + 1]  # only complete lines
    text, problem = _decode(raw, path)
    rows = [(n, {"text": line}) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if max_rows is not None and len(rows) > max_rows:
        rows, whole = rows[:max_rows], False
    out = (rows if problem is None else [], [problem] if problem else [])
    return out if max_rows is None and max_bytes is None else (*out, whole)


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


def _read_folder(path: Path, files: list[Path] | None = None) -> tuple[list[tuple[int, Any]], list[DataProblem]]:
    """A datasets save_to_disk folder (Dataset or DatasetDict's train split), or a folder of data files (``files``:
    those ``select_files`` chose)."""
    files = folder_files(path, files)
    rows, problems = [], []
    for f in files:
        got, probs = _read_file(f)
        rows += [(len(rows) + i, r) for i, (_, r) in enumerate(got, 1)] if len(files) > 1 else got
        problems += probs
    return rows, problems


# ----------------------------------------------------------------------------------------------- bounded reading
PAGE_READ_BYTES = 16 << 20  # what a head read takes of a file at most
PAGE_RECORD_BYTES = 1 << 20  # one JSON line / JSON record / CSV row, at most; longer ones are skipped, named
_CHUNK = 256 << 10


def _mib(n: int) -> str:
    return f"{n / 2**20:g}"


def _too_long(path: Path, row: int, max_record_bytes: int) -> DataProblem:
    return DataProblem(str(path), row, None, message("data.record_too_long", limit=_mib(max_record_bytes)))


def _record_bytes(rec: Any) -> int:
    """About how many bytes a record holds (for rows from CSV / Parquet / Arrow, already parsed)."""
    if isinstance(rec, dict):
        return sum(_record_bytes(v) for v in rec.values()) + len(rec)
    if isinstance(rec, (list, tuple)):
        return sum(_record_bytes(v) for v in rec) + len(rec)
    if isinstance(rec, (str, bytes)):
        return len(rec)
    return 8


def read_head(
    path: str | Path,
    max_rows: int,
    max_bytes: int = PAGE_READ_BYTES,
    max_record_bytes: int = PAGE_RECORD_BYTES,
    files: list[Path] | None = None,
) -> tuple[list[tuple[int, Any]], list[DataProblem], bool]:
    """(first rows, problems met, whether the whole file was read): at most ``max_rows`` rows, reading at most about
    ``max_bytes`` of the file; a record longer than ``max_record_bytes`` is a problem (file, line / row), not a row.
    A folder is read file by file within the same budget (``files``: those of the folder ``select_files`` chose)."""
    path = Path(path)
    max_record_bytes = min(max_record_bytes, max_bytes)
    if path.is_dir():
        return _folder_head(path, max_rows, max_bytes, max_record_bytes, files)
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _jsonl_head(path, max_rows, max_bytes, max_record_bytes)
    if suffix == ".json":
        return _json_head(path, max_rows, max_bytes, max_record_bytes)
    if suffix == ".csv":
        return _csv_head(path, max_rows, max_bytes, max_record_bytes)
    if suffix in (".parquet", ".arrow"):
        return _columnar_head(path, max_rows, max_record_bytes)
    if suffix == ".txt":
        return _read_text(path, max_rows, max_bytes)
    rows, problems = _read_file(path)  # an unsupported type: the problem, nothing read
    return rows, problems, True


def read_file(path: str | Path) -> tuple[list[tuple[int, Any]], list[DataProblem]]:
    """The whole file: [(row number, record)] and the problems met (for readers outside engine.data)."""
    return _read_file(Path(path))


def _jsonl_head(path: Path, max_rows: int, max_bytes: int, max_record: int):
    rows: list[tuple[int, Any]] = []
    problems: list[DataProblem] = []
    used = lineno = 0
    with path.open("rb") as fh:
        while len(rows) < max_rows and used < max_bytes:
            raw = fh.readline(max_record + 1)
            if not raw:
                return rows, problems, True
            lineno += 1
            used += len(raw)
            if len(raw) > max_record and not raw.endswith(b"\n"):
                while used < max_bytes:  # the rest of the line is read in pieces and dropped, never held whole
                    more = fh.readline(min(_CHUNK, max_bytes - used))
                    used += len(more)
                    if not more or more.endswith(b"\n"):
                        break
                problems.append(_too_long(path, lineno, max_record))
                continue
            if not _jsonl_line(path, lineno, raw, rows, problems):
                return rows, problems, False
        return rows, problems, not fh.read(1)


def _json_head(path: Path, max_rows: int, max_bytes: int, max_record: int):
    """A JSON list read element by element from the start (a file within the budget is read whole, as before)."""
    if path.stat().st_size <= max_bytes:
        got, problems = _read_file(path)
        rows = []
        for rowno, rec in got[:max_rows]:
            (
                problems.append(_too_long(path, rowno, max_record))
                if _record_bytes(rec) > max_record
                else rows.append((rowno, rec))
            )
        return rows, problems, len(got) <= max_rows
    decoder, text_of = json.JSONDecoder(), codecs.getincrementaldecoder("utf-8-sig")()
    rows: list[tuple[int, Any]] = []
    with path.open("rb") as fh:
        used, eof, text, pos = 0, False, "", 0

        def more() -> bool:
            nonlocal used, eof, text, pos
            if eof or used >= max_bytes:
                return False
            raw = fh.read(min(_CHUNK, max_bytes - used))
            used += len(raw)
            eof = not raw
            try:
                text = text[pos:] + text_of.decode(raw, final=eof)
            except UnicodeDecodeError:
                raise ValueError(message("data.not_utf8_near", offset=used - len(raw) + 1)) from None
            pos = 0
            return True

        def skip(chars: str) -> str:
            nonlocal pos
            while True:
                while pos < len(text) and (text[pos].isspace() or text[pos] in chars):
                    pos += 1
                if pos < len(text) or not more():
                    return text[pos] if pos < len(text) else ""

        try:
            first = skip("")
            if first == "{":  # one object, or JSON lines in a .json file
                return _jsonl_head(path, max_rows, max_bytes, max_record)
            if first != "[":
                return [], [DataProblem(str(path), None, None, message("data.not_list"))], False
            pos += 1
            while len(rows) < max_rows:
                nxt = skip(",")
                if nxt == "]":
                    return rows, [], True
                if not nxt:  # the budget ran out between records, or the list is not closed (read in full by a run)
                    return rows, [], False
                try:
                    rec, end = decoder.raw_decode(text, pos)
                    if end == len(text) and not eof and more():  # a number may go on in the next chunk
                        continue
                except json.JSONDecodeError as exc:
                    if len(text) - pos > max_record:
                        return rows, [_too_long(path, len(rows) + 1, max_record)], False
                    if more():
                        continue
                    if eof:
                        return (
                            rows,
                            [
                                DataProblem(
                                    str(path),
                                    len(rows) + 1,
                                    None,
                                    message("data.bad_json_line", col=exc.colno, error=exc.msg),
                                )
                            ],
                            False,
                        )
                    return rows, [], False  # the budget ends inside this record
                if end - pos > max_record:
                    return rows, [_too_long(path, len(rows) + 1, max_record)], False
                rows.append((len(rows) + 1, rec))
                pos = end
        except ValueError as exc:
            return rows, [DataProblem(str(path), None, None, exc.args[0])], False
    return rows, [], False


def _csv_head(path: Path, max_rows: int, max_bytes: int, max_record: int):
    with path.open("rb") as fh:
        raw = fh.read(max_bytes)
        complete = not fh.read(1)
    if not complete:
        cut = raw.rfind(b"\n")
        if cut < 0:
            return [], [_too_long(path, 1, max_record)], False
        raw = raw[: cut + 1]
    text, problem = _decode(raw, path)
    if problem:
        return [], [problem], complete
    rows: list[tuple[int, Any]] = []
    problems: list[DataProblem] = []
    reader = csv.DictReader(io.StringIO(text, newline=""))
    n = 0
    try:
        for row in reader:
            n += 1
            if _record_bytes(row) > max_record:
                problems.append(_too_long(path, n, max_record))
            else:
                rows.append((n, row))
            if len(rows) >= max_rows:
                return rows, problems, False
    except csv.Error as exc:
        if complete:
            problems.append(
                DataProblem(str(path), n + 1, None, message("data.bad_csv", line=reader.line_num, error=exc))
            )
        return rows, problems, False
    if not complete and rows and rows[-1][0] == n:  # the last row may be cut short by the budget (quoted newlines)
        rows.pop()
    if not complete and not rows and not problems:
        problems.append(_too_long(path, 1, max_record))
    return rows, problems, complete


def _columnar_head(path: Path, max_rows: int, max_record: int):
    import pyarrow as pa

    try:
        if path.suffix.lower() == ".parquet":
            import pyarrow.parquet as pq

            pf = pq.ParquetFile(path)
            total = pf.metadata.num_rows
            batch = next(pf.iter_batches(batch_size=max(1, max_rows)), None)
            got = batch.to_pylist() if batch is not None else []
        else:
            with pa.memory_map(str(path)) as src:
                try:
                    reader = pa.ipc.open_stream(src)
                    batches, total = [], None
                    for b in reader:
                        batches.append(b.slice(0, max_rows - sum(len(x) for x in batches)))
                        if sum(len(x) for x in batches) >= max_rows:
                            break
                except pa.ArrowInvalid:
                    reader = pa.ipc.open_file(src)
                    batches, total = [], sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))
                    for i in range(reader.num_record_batches):
                        batches.append(reader.get_batch(i).slice(0, max_rows - sum(len(x) for x in batches)))
                        if sum(len(x) for x in batches) >= max_rows:
                            break
                got = [r for b in batches for r in b.to_pylist()]
    except (pa.ArrowException, OSError) as exc:
        return (
            [],
            [DataProblem(str(path), None, None, message("data.bad_parquet", error=str(exc).splitlines()[0][:200]))],
            True,
        )
    rows, problems = [], []
    for i, rec in enumerate(got[:max_rows], 1):
        (problems.append(_too_long(path, i, max_record)) if _record_bytes(rec) > max_record else rows.append((i, rec)))
    return rows, problems, total is not None and total <= max_rows


def _folder_head(path: Path, max_rows: int, max_bytes: int, max_record: int, files: list[Path] | None = None):
    files = folder_files(path, files)
    rows: list[tuple[int, Any]] = []
    problems: list[DataProblem] = []
    for i, f in enumerate(files):
        budget = max_bytes - sum(min(g.stat().st_size, max_bytes) for g in files[:i])
        if len(rows) >= max_rows or budget <= 0:
            return rows, problems, False
        got, probs, complete = read_head(f, max_rows - len(rows), budget, max_record)
        rows += [(len(rows) + j, r) for j, (_, r) in enumerate(got, 1)] if len(files) > 1 else got
        problems += probs
        if not complete:
            return rows, problems, False
    return rows, problems, True
