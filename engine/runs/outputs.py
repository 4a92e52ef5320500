"""What a run made in its output folder: recorded when the run is launched, read when it is deleted.

Light: stdlib only. A run owns its output folder only if it created it, and only the files it wrote there. When
``engine.runs.scheduler.launch`` starts a training run whose ``output.output_dir`` lies outside its run folder,
``claim`` creates the folder if it is missing and writes ``outputs.json`` in the run folder: the output folder, the
folders the run created (outermost first; empty when the folder existed), and, for a folder that existed, the files
that were already there. ``engine.runs.registry.delete`` removes a folder the run created whole, and in a folder
that existed only the files the run wrote (``written``); a run with no record (never started, or from a version
before the record) owns nothing outside its run folder.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

RECORD = "outputs.json"
# A folder that existed is listed up to this many files (a new run's folder is empty: submit refuses one with files).
MAX_LISTED = 20000


def _files(folder: Path) -> list[str]:
    """The files under ``folder`` (relative, links not followed), at most MAX_LISTED."""
    found: list[str] = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            found.append(str((Path(root) / name).relative_to(folder)))
            if len(found) >= MAX_LISTED:
                return found
    return found


def _dirs(folder: Path) -> list[str]:
    """The folders under ``folder`` (relative), at most MAX_LISTED."""
    found: list[str] = []
    for root, dirs, _ in os.walk(folder):
        dirs.sort()
        found += [str((Path(root) / d).relative_to(folder)) for d in dirs]
        if len(found) >= MAX_LISTED:
            break
    return found[:MAX_LISTED]


def claim(run_dir: str | Path, output_dir: str | Path) -> dict | None:
    """At launch: create the output folder when it is missing and record what the run created and what was there
    before. Kept as first written (a relaunch of a claimed run does not make a folder it created someone else's).
    Returns the record, None when the output folder is the run folder or inside it (owned with it)."""
    rdir, out = Path(run_dir).resolve(), Path(output_dir).expanduser().resolve()
    if out == rdir or out.is_relative_to(rdir):
        return None
    existing = read(rdir)
    if existing is not None:  # a relaunch: what it writes from now on is the run's too (``seal``)
        existing["segment_ts"] = time.time()
        _write(rdir, existing)
        return existing
    created: list[Path] = []
    probe = out
    while not probe.exists() and probe != probe.parent:
        created.append(probe)
        probe = probe.parent
    out.mkdir(parents=True, exist_ok=True)
    record = {
        "output_dir": str(out),
        "created": [str(p) for p in reversed(created)],
        "before": [] if created else _files(out),
        "dirs": [] if created else _dirs(out),
        "ts": time.time(),
    }
    _write(rdir, record)
    return record


def _write(rdir: Path, record: dict) -> None:
    tmp = rdir / (RECORD + ".tmp")
    try:
        tmp.write_text(json.dumps(record), encoding="utf-8")
        tmp.replace(rdir / RECORD)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


def seal(run_dir: str | Path) -> None:
    """At the run's end, before its end is recorded: list the files the run wrote in its output folder (``after``),
    so that a file a person puts there a moment later is never taken for the run's (file times alone cannot tell
    them apart within the clock's resolution). A relaunch adds what it wrote since it started. Best effort: a run
    without a record owns nothing outside its run folder; when the list cannot be written the time rule stays."""
    rdir = Path(run_dir)
    record = read(rdir)
    if record is None:
        return
    out = Path(record["output_dir"])
    before = set(record.get("before") or [])
    after = list(record.get("after") or [])
    since = float(record.get("segment_ts") or record.get("ts") or 0) - 1.0
    for rel in _files(out) if out.is_dir() else []:
        if rel in before or rel in after:
            continue
        try:
            if out.joinpath(rel).lstat().st_mtime >= since:
                after.append(rel)
        except OSError:
            continue
    record["after"] = after
    try:
        _write(rdir, record)
    except OSError:
        pass


def read(run_dir: str | Path) -> dict | None:
    try:
        data = json.loads((Path(run_dir) / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("output_dir") else None


def created(record: dict) -> bool:
    """Whether the run created its output folder."""
    return str(record.get("output_dir")) in [str(p) for p in record.get("created") or []]


def written(record: dict, ended: float | None) -> list[Path]:
    """The files of its output folder which the run wrote: those ``seal`` listed at its end; for a run without
    that list (running, or recorded by an older Studio), the files not there at launch and last written between the
    launch and the run's end (a file put there after the run ended is not the run's)."""
    out = Path(record["output_dir"])
    if "after" in record:  # sealed at the run's end: the list, not the clock
        return [out / rel for rel in record["after"] if os.path.lexists(out / rel)]
    before = set(record.get("before") or [])
    # file times come from the kernel's coarse clock, a few ms behind time.time(): never later than when it was read
    start, end = float(record.get("ts") or 0) - 1.0, (ended or time.time()) + 0.01
    found = []
    for rel in _files(out) if out.is_dir() else []:
        path = out / rel
        try:
            mtime = path.lstat().st_mtime
        except OSError:
            continue
        if rel not in before and start <= mtime <= end:
            found.append(path)
    return found


def added_later(record: dict, ended: float | None) -> list[str]:
    """The files of the run's output folder (relative) that the run did not write: there before it started (a folder
    that existed), or written after it ended (a user's notes in a folder the run created)."""
    out = Path(record["output_dir"])
    ours = {str(p.relative_to(out)) for p in written(record, ended)}
    return [rel for rel in (_files(out) if out.is_dir() else []) if rel not in ours]


def remove_written(record: dict, ended: float | None) -> tuple[int, list[str]]:
    """Remove the files the run wrote in a folder that existed (``written``), then the folders that became empty and
    were not there before. Returns (files removed, failures)."""
    out = Path(record["output_dir"])
    removed, errors = 0, []
    for path in written(record, ended):
        try:
            path.unlink()
            removed += 1
        except OSError as exc:
            errors.append(f"{path}: {exc}")
    keep = set(record.get("dirs") or [])
    for root, *_ in sorted(os.walk(out), key=lambda w: -len(w[0])):
        rel = str(Path(root).relative_to(out))
        if rel != "." and rel not in keep:
            try:
                Path(root).rmdir()
            except OSError:
                pass  # not empty: it holds files the run did not write
    return removed, errors


def final_dir(output_dir: str | Path, *, adapter: bool, layout: str = "studio") -> Path:
    """Where a training run's final weights are in its output folder: ``adapter/`` (LoRA, OFT) or ``model/``, or the
    output folder itself for ``output.layout: llamafactory`` (as LLaMA-Factory saves them)."""
    out = Path(output_dir)
    return out if layout == "llamafactory" else out / ("adapter" if adapter else "model")
