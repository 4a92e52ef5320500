"""Bounded reading (issue 18.3): the Datasets tab's work on any file the upload cap admits stays within a memory and
a time bound, and a row too long for the page is named (file and line), not read.

Each file is uploaded, registered, previewed, sampled and measured for the length histogram through the tab's own
functions (``studio.tabs.data_register``: ``store_upload``, ``file_columns``, ``register``; ``studio.tabs.data``:
``head``, ``preview``, ``sample_html``, ``lengths``; what its handlers call) in a fresh interpreter. Its peak RSS is
the measurement: ``VmHWM`` in ``/proc/self/status``, its own address space's high-water mark, not ``ru_maxrss``,
which Linux carries across ``exec`` from the parent (in a full suite that read pytest's own 1.1 GB). That interpreter
is also held to an address-space limit so the old behaviour (a 50 MB line tokenized whole: 9.5 GB, 195 s on the
development machine) fails fast instead of taking the machine's memory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PEAK_BOUND_MIB = 1024  # the page process's peak while doing it all (it starts at ~250 MiB with gradio imported)
TIME_BOUND_S = 60.0  # generous: the point is not hanging for minutes
MIB = 2**20

CHILD = r"""
import json, os, re, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (int(os.environ["LIMIT_AS"]), int(os.environ["LIMIT_AS"])))
src, name, model = sys.argv[1], sys.argv[2], sys.argv[3]
from studio.tabs import data as tab
from studio.tabs import data_register as reg_tab
t0 = time.monotonic()
dest = reg_tab.store_upload(src)
try:
    columns = reg_tab.file_columns(dest)
except ValueError as exc:
    columns = str(exc)
mapping = {"prompt": "instruction", "response": "output"}
registered = reg_tab.register(str(dest), name, "alpaca", mapping)
rows, problems, _whole = tab.head(name)
frame = tab.preview(name)
sample = tab.sample_html(name, model, "auto", rows=rows)
_, note = tab.lengths(name, model, "auto", 512, rows=rows)
cells = max((len(str(v)) for r in frame.to_dict("records") for v in r.values()), default=0)
print(json.dumps({
    "seconds": time.monotonic() - t0,
    "peak_mib": int(re.search(r"VmHWM:\s+(\d+) kB", open("/proc/self/status").read()).group(1)) / 1024,
    "columns": columns, "registered": registered, "rows": len(rows),
    "problems": [reg_tab.problem_text(p) for p in problems], "sample": sample[:2000], "note": note,
    "max_cell": cells, "sample_len": len(sample),
}))
"""


def _words(n: int) -> str:
    unit = "lorem ipsum dolor sit amet consectetur adipiscing elit "
    return (unit * (n // len(unit) + 1))[:n]


def write_single_line(path: Path, size: int) -> None:
    """One JSON line of ``size`` bytes: a 50 MB instruction."""
    head = '{"instruction": "'
    tail = '", "output": "ok"}\n'
    path.write_text(head + _words(size - len(head) - len(tail)) + tail)


def write_many_rows(path: Path, size: int) -> None:
    """Small rows up to ``size`` bytes (a big but ordinary file)."""
    row = json.dumps({"instruction": _words(300), "output": _words(100)}) + "\n"
    with open(path, "w") as fh:
        for _ in range(size // len(row)):
            fh.write(row)


def write_json_array_giant_first(path: Path, size: int) -> None:
    """A .json list whose first record holds ``size`` bytes, then ordinary records."""
    small = json.dumps({"instruction": "q", "output": "a"})
    with open(path, "w") as fh:
        fh.write('[{"instruction": "' + _words(size) + '", "output": "x"}')
        for _ in range(50):
            fh.write(",\n" + small)
        fh.write("]\n")


def run_tab(tmp_path: Path, src: Path, name: str, model: str) -> dict:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {
        **os.environ,
        "STUDIO_HOME": str(home),
        "PYTHONPATH": str(ROOT),
        "LIMIT_AS": str(8 << 30),  # virtual, not resident: room for gradio's and arrow's reservations
    }
    started = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, str(src), name, model],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIME_BOUND_S * 2,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the Datasets tab's work on {src.name} took over {TIME_BOUND_S * 2:.0f} s")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["wall"] = time.monotonic() - started
    return out


@pytest.fixture(scope="module")
def model_dir(demo_paths) -> str:
    return str(demo_paths["model_dir"])


def test_fifty_mb_single_line_jsonl(tmp_path, model_dir, tally):
    src = tmp_path / "one_line.jsonl"
    write_single_line(src, 50 * MIB)
    out = run_tab(tmp_path, src, "one_line", model_dir)
    where = "one_line.jsonl, line 1"
    tally.check("bounded::50 MB line: peak RSS < 1 GiB", out["peak_mib"] < PEAK_BOUND_MIB, f"{out['peak_mib']:.0f}")
    tally.check("bounded::50 MB line: done in < 60 s", out["seconds"] < TIME_BOUND_S, f"{out['seconds']:.1f}")
    tally.note("bounded::50 MB line: peak RSS < 1 GiB", f"peak {out['peak_mib']:.0f} MiB, {out['seconds']:.1f} s")
    tally.check(
        "bounded::50 MB line named (file, line) when registered",
        where in out["registered"] and "MiB" in out["registered"],
        out["registered"][:500],
    )
    # A file none of whose rows can be trained on is refused at registration (the page's check of the upload), so
    # nothing of it reaches the preview afterwards.
    tally.check(
        "bounded::50 MB line refused at registration, nothing previewed",
        out["registered"].startswith("❌") and out["rows"] == 0,
        out["registered"][:300],
    )
    assert where in out["columns"], out["columns"]  # the upload's column guess says why it has none
    assert out["sample_len"] < 10_000 and "no usable rows" in out["sample"], out["sample"][:500]


def test_big_file_of_ordinary_rows(tmp_path, model_dir, tally):
    """150 MB of small rows (under the 200 MB cap): the page reads the head, says so, shows rows."""
    src = tmp_path / "many.jsonl"
    write_many_rows(src, 150 * MIB)
    out = run_tab(tmp_path, src, "many", model_dir)
    tally.check(
        "bounded::150 MB of rows: peak RSS < 1 GiB", out["peak_mib"] < PEAK_BOUND_MIB, f"{out['peak_mib']:.0f}"
    )
    tally.check("bounded::150 MB of rows: done in < 60 s", out["seconds"] < TIME_BOUND_S, f"{out['seconds']:.1f}")
    tally.note("bounded::150 MB of rows: peak RSS < 1 GiB", f"peak {out['peak_mib']:.0f} MiB, {out['seconds']:.1f} s")
    assert out["registered"].startswith("✅") and "checked the first" in out["registered"], out["registered"]
    assert out["rows"] > 0 and not out["problems"] and "tok-train" in out["sample"], out
    assert "rows" in out["note"] and "cutoff 512" in out["note"], out["note"]


def test_json_list_with_a_giant_record(tmp_path, model_dir, tally):
    """A .json list over the page's budget (parsed element by element from the start) whose first record is 60 MB:
    named as row 1, nothing of it held."""
    src = tmp_path / "giant.json"
    write_json_array_giant_first(src, 60 * MIB)
    out = run_tab(tmp_path, src, "giant", model_dir)
    tally.check(
        "bounded::60 MB JSON record: peak RSS < 1 GiB", out["peak_mib"] < PEAK_BOUND_MIB, f"{out['peak_mib']:.0f}"
    )
    tally.check("bounded::60 MB JSON record: done in < 60 s", out["seconds"] < TIME_BOUND_S, f"{out['seconds']:.1f}")
    assert "giant.json, row 1" in out["registered"], out["registered"][:500]
    assert out["registered"].startswith("❌") and out["rows"] == 0, out["registered"][:500]  # refused, not registered


def test_head_reads_match_full_reads_within_small_budgets(tmp_path, tally):
    """``read_head`` on budgets far below the file: the rows it returns are the file's first rows as the full reader
    sees them (JSON lists parsed element by element across chunk boundaries, numbers split by a chunk included), a
    long line in the middle is named and skipped, CSV heads drop a row the budget may have cut."""
    from engine.data import files

    recs = [
        {"instruction": f'q{i} 真 "x" \\ {"w" * (i * 37 % 900)}', "output": i * 1.5, "n": [i, {"k": None}]}
        for i in range(400)
    ]
    arr = tmp_path / "a.json"
    arr.write_text("[\n" + ",\n".join(json.dumps(r, ensure_ascii=i % 2 == 0) for i, r in enumerate(recs)) + "\n]")
    nums = tmp_path / "n.json"
    nums.write_text("[" + ",".join(str(k * 1234567 % 10 ** (k % 13 + 1)) for k in range(40000)) + "]")
    for path in (arr, nums):
        full, _ = files._read_file(path)
        for budget in (64 << 10, 200 << 10):
            rows, problems, complete = files.read_head(path, 10_000, max_bytes=budget, max_record_bytes=32 << 10)
            ok = rows == full[: len(rows)] and len(rows) > 10 and not problems and not complete
            tally.check("bounded::JSON list head equals the full read's first rows", ok, f"{path.name} {budget}")
        rows, _, complete = files.read_head(path, 100_000, max_bytes=8 << 20)
        tally.check("bounded::JSON list within budget read whole", rows == full and complete, path.name)

    lines = tmp_path / "l.jsonl"
    body = [json.dumps(r) for r in recs[:5]] + ['{"instruction": "' + "z" * 100_000 + '"}'] + [json.dumps(recs[6])]
    lines.write_text("\n".join(body) + "\n")
    rows, problems, complete = files.read_head(lines, 100, max_bytes=1 << 20, max_record_bytes=50_000)
    tally.check(
        "bounded::JSONL long middle line named, the rest read",
        [n for n, _ in rows] == [1, 2, 3, 4, 5, 7] and [p.row for p in problems] == [6] and complete,
        f"{[n for n, _ in rows]} {[str(p) for p in problems]}",
    )
    assert "l.jsonl, line 6: longer than" in str(problems[0])

    csv_path = tmp_path / "c.csv"
    csv_path.write_text("instruction,output\n" + "".join(f'"q{i}\nsecond line",a{i}\n' for i in range(5000)))
    full, _ = files._read_file(csv_path)
    rows, problems, complete = files.read_head(csv_path, 10_000, max_bytes=20_000)
    tally.check(
        "bounded::CSV head equals the full read's first rows",
        rows == full[: len(rows)] and 100 < len(rows) < 5000 and not problems and not complete,
        f"{len(rows)} {problems[:1]}",
    )


# ------------------------------------------------------------------ issue 30.6: FIFOs, devices and paths outside
PAGE_CHECK_CHILD = r"""
import json, os, resource, sys
import psutil
resource.setrlimit(resource.RLIMIT_AS, (int(os.environ["LIMIT_AS"]), int(os.environ["LIMIT_AS"])))
spec_path, names = sys.argv[1], sys.argv[2:]
import yaml
from engine.data import dataset_registry as reg
from engine.runs import registry as runs
from engine.runs import submit_checks
from engine.spec import schema
from studio.tabs import data as tab
from studio.tabs import data_register as reg_tab
from engine.core import workspace
ddir = workspace.data_dir()
rss0 = psutil.Process().memory_info().rss
out = {}
for name in names:
    data = yaml.safe_load(open(spec_path))
    data["data"].update(datasets=[name], dataset_dir=str(ddir))
    spec = schema.parse_spec(data, context=False)
    rows, problems, _ = tab.head(name)
    out[name] = {
        "start": [str(m) for _, m in submit_checks.data_problems(spec)],  # what the page's Start checks
        "head": [reg_tab.problem_text(p) for p in problems],  # the Datasets tab's preview / check
        "check": [str(p) for p in reg.check_head(name, ddir)[0]],
        "rows": len(rows),
    }
print(json.dumps({"rss_growth_mib": (psutil.Process().memory_info().rss - rss0) / 2**20, "names": out}))
"""


def _bad_dataset_folder(home: Path) -> Path:
    ddir = home / "data"
    ddir.mkdir(parents=True, exist_ok=True)
    os.mkfifo(ddir / "fifo.jsonl")
    (ddir / "zero.jsonl").symlink_to("/dev/zero")
    (ddir / "dataset_info.json").write_text(
        json.dumps(
            {
                "fifo": {"file_name": "fifo.jsonl"},
                "zero": {"file_name": "zero.jsonl"},
                "up": {"file_name": "../../"},
                "root": {"file_name": "/"},
                "etc": {"script_url": "../../../../etc"},
            }
        )
    )
    return ddir


def _bounded(args: list[str], home: Path, timeout: float) -> subprocess.CompletedProcess:
    """A child under an address-space limit (so /dev/zero read whole fails fast, not by taking the machine); a child
    blocked on a FIFO is killed at ``timeout`` and the test fails saying so."""
    env = {**os.environ, "STUDIO_HOME": str(home), "PYTHONPATH": str(ROOT), "LIMIT_AS": str(4 << 30)}
    try:
        return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{args[2:]} still running after {timeout:.0f} s (blocked reading a FIFO?)")


def test_fifo_and_dev_zero_refused_by_data_check(tmp_path, tally):
    """Issue 30.6: ``studio data check`` on a FIFO entry ends (it blocked until the FIFO got EOF), a link to /dev/zero
    is not read (the studio grew by GBs), ``../../``, ``/`` and a script folder outside are refused naming the
    entry and the key, quoting nothing of what is there."""
    home = tmp_path / "home"
    _bad_dataset_folder(home)
    limit = "import resource, os; resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30)); "
    for name, why in (
        ("fifo", "is a FIFO, not a regular file"),
        ("zero", "file_name 'zero.jsonl' leads outside"),
        ("up", "file_name '../../' leads outside"),
        ("root", "file_name '/' leads outside"),
        ("etc", "script_url '../../../../etc' leads outside"),
    ):
        code = limit + f"import sys; from engine.cli import main; sys.exit(main(['data', 'check', {name!r}]))"
        proc = _bounded([sys.executable, "-c", code], home, timeout=60)
        out = proc.stdout + proc.stderr
        ok = proc.returncode == 1 and f"entry '{name}'" in out and why in out and "Traceback" not in out
        tally.check("bounded::dataset entry outside the folder / not a regular file refused (CLI)", ok, out[-600:])


def test_fifo_and_dev_zero_refused_by_the_page(tmp_path, demo_paths, tally):
    """Issue 30.6, the page: Start's data check, the Datasets tab's preview and its check refuse each entry within
    the child's time limit, with the process's memory unchanged (within 64 MiB: no file read)."""
    home = tmp_path / "home"
    _bad_dataset_folder(home)
    names = ["fifo", "zero", "up", "root", "etc"]
    proc = _bounded([sys.executable, "-c", PAGE_CHECK_CHILD, str(demo_paths["example_spec"]), *names], home, 120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for name in names:
        got = out["names"][name]
        ok = got["rows"] == 0 and all(
            len(got[k]) == 1 and f"'{name}'" in got[k][0] for k in ("start", "head", "check")
        )
        tally.check("bounded::dataset entry outside the folder / not a regular file refused (page)", ok, str(got))
    tally.check(
        "bounded::refusing them leaves the page's memory unchanged",
        out["rss_growth_mib"] < 64,
        f"{out['rss_growth_mib']:.0f} MiB",
    )
