"""Bad inputs: fuzzed dataset files (JSON / JSONL / CSV / Parquet: truncated, wrong types, missing columns, huge rows,
wrong encodings, BOMs, nested junk) and fuzzed specs, through every entry point that reads them.

Each case must end as a clear problem naming the file (and the row where there is one) -- never a traceback, and
never a launch: ``runs.submit`` refuses bad data before queueing. ~100 files by default, 1,200 with STUDIO_SOAK=1;
specs reuse tests/engine/test_spec_fuzz.py's strategy (50 here by default, 2,000 in the soak) through runs.submit.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core import workspace
from engine.data import dataset_registry as reg
from engine.data import rows as data_rows
from engine.runs import registry as runs
from engine.spec.schema import SpecError

SOAK = os.environ.get("STUDIO_SOAK") == "1"
FILES = 1200 if SOAK else 100
SPECS = 2000 if SOAK else 50

# ------------------------------------------------------------------------------------------------ strategies
_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True),
    st.text(max_size=30),
    st.sampled_from(
        ["", "\x00", "\ufeff", "真", "\ud800".encode("utf-8", "surrogatepass").decode("utf-8", "replace")]
    ),
)
_junk = st.recursive(
    _scalar,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)),
    max_leaves=10,
)
_good_row = st.fixed_dictionaries(
    {"instruction": st.text(min_size=1, max_size=40), "output": st.text(min_size=1, max_size=40)},
    optional={"input": st.text(max_size=20)},
)
# A row: good, missing a column, a column of the wrong type, or junk.
_row = st.one_of(
    _good_row,
    _good_row.map(lambda r: {k: v for k, v in r.items() if k != "output"}),
    st.builds(lambda r, v: {**r, "instruction": v}, _good_row, _junk),
    _junk,
)


@st.composite
def bad_file(draw) -> tuple[str, bytes]:
    """(suffix, raw bytes) of one malformed or hostile dataset file."""
    kind = draw(st.sampled_from(["json", "jsonl", "csv", "parquet"]))
    rows = draw(st.lists(_row, max_size=6))
    if draw(st.integers(0, 8)) == 0:  # one huge row
        rows.append({"instruction": "x" * draw(st.sampled_from([70_000, 300_000])), "output": "y"})
    if kind == "json":
        top = draw(st.sampled_from(["list", "object", "scalar", "nested"]))
        doc = {"list": rows, "object": rows[0] if rows else {}, "scalar": draw(_scalar), "nested": {"data": rows}}[top]
        raw = json.dumps(doc, ensure_ascii=draw(st.booleans())).encode()
    elif kind == "jsonl":
        raw = b"\n".join(json.dumps(r).encode() for r in rows)
    elif kind == "csv":
        import csv

        buf = io.StringIO()
        cols = draw(st.sampled_from([["instruction", "output"], ["instruction"], ["q", "a"], []]))
        w = csv.writer(buf)
        if cols:
            w.writerow(cols)
        for r in rows:
            w.writerow(
                [json.dumps(v) if not isinstance(v, str) else v for v in (r.values() if isinstance(r, dict) else [r])]
            )
        raw = buf.getvalue().encode()
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = draw(st.sampled_from(["good", "missing", "types", "empty"]))
        cols = {
            "good": {"instruction": ["a", "b"], "output": ["c", "d"]},
            "missing": {"instruction": ["a", "b"]},
            "types": {"instruction": [1, 2], "output": [[1.5], [2.5]]},
            "empty": {"instruction": pa.array([], pa.string()), "output": pa.array([], pa.string())},
        }[table]
        buf = io.BytesIO()
        pq.write_table(pa.table(cols), buf)
        raw = buf.getvalue()
    mangle = draw(
        st.sampled_from(["none", "truncate", "bom", "utf16", "latin1", "nul", "garbage", "empty", "bitflip", "crlf"])
    )
    if mangle == "truncate" and raw:
        raw = raw[: draw(st.integers(0, max(0, len(raw) - 1)))]
    elif mangle == "bom":
        raw = b"\xef\xbb\xbf" + raw
    elif mangle == "utf16":
        raw = raw.decode("utf-8", "replace").encode("utf-16")
    elif mangle == "latin1":
        raw = raw + "\nümlaut é".encode("latin-1")
    elif mangle == "nul":
        raw = raw[: len(raw) // 2] + b"\x00\x00" + raw[len(raw) // 2 :]
    elif mangle == "garbage":
        raw = draw(st.binary(max_size=200))
    elif mangle == "empty":
        raw = b""
    elif mangle == "bitflip" and raw:
        i = draw(st.integers(0, len(raw) - 1))
        raw = raw[:i] + bytes([raw[i] ^ 0xFF]) + raw[i + 1 :]
    elif mangle == "crlf":
        raw = raw.replace(b"\n", b"\r\n")
    return kind, raw


def _register(ddir: Path, name: str, suffix: str, raw: bytes) -> Path:
    path = ddir / f"{name}.{suffix}"
    path.write_bytes(raw)
    reg.save_dataset_info(ddir, {name: {"file_name": path.name, "formatting": "alpaca"}})
    return path


def _clear(problem: data_rows.DataProblem, path: Path) -> bool:
    """Names the file; a message a person can read (no repr of an exception class alone)."""
    return (
        problem.file in (str(path), str(path.parent / reg.INFO_NAME))
        and len(problem.message.strip()) > 5
        and "Traceback" not in problem.message
    )


_FUZZ = settings(
    max_examples=FILES,
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.large_base_example,
        HealthCheck.data_too_large,
    ],
)


@_FUZZ
@given(case=bad_file())
def test_fuzzed_dataset_files_give_named_problems(case, tmp_path_factory, tally):
    suffix, raw = case
    ddir = tmp_path_factory.mktemp("fuzzdata")
    path = _register(ddir, "fuzz", suffix, raw)
    for stage in ("sft", "pt"):
        try:
            problems = reg.check_datasets(["fuzz"], ddir, stage)
            preview = reg.preview_rows("fuzz", ddir, 3)
        except Exception as exc:  # noqa: BLE001 - the point: nothing may escape
            tally.record(f"bad_inputs::dataset file ({suffix}) -> named problem", False)
            raise AssertionError(f"{suffix} {stage}: {type(exc).__name__}: {exc}\nfirst bytes: {raw[:120]!r}") from exc
        ok = all(_clear(p, path) for p in problems) and isinstance(preview, list)
        if stage == "sft":
            tally.record(f"bad_inputs::dataset file ({suffix}) -> named problem", ok)
        assert ok, [str(p) for p in problems]
        if problems:
            try:
                reg.load_rows("fuzz", ddir, stage)
            except data_rows.DataError as exc:
                assert "fuzz" in str(exc)
            else:
                raise AssertionError("load_rows accepted data that check_datasets rejected")


def test_rows_named_in_problems(tmp_path, tally):
    """A bad row deep in a file is named by its row (JSON, CSV, Parquet) or line (JSONL) number."""
    good = {"instruction": "q", "output": "a"}
    cases = {
        "json": json.dumps([good] * 4 + [{"instruction": "q"}]).encode(),
        "jsonl": b"\n".join([json.dumps(good).encode()] * 6 + [b'{"instruction": "q", "output": 3']),
        "csv": b"instruction,output\nq,a\nq,a\nq,\n",
    }
    expect = {"json": 5, "jsonl": 7, "csv": 3}
    for suffix, raw in cases.items():
        path = _register(tmp_path, f"rows_{suffix}", suffix, raw)
        problems = reg.check_datasets([f"rows_{suffix}"], tmp_path)
        ok = any(p.row == expect[suffix] and p.file == str(path) for p in problems)
        tally.check(f"bad_inputs::bad row named ({suffix})", ok, [str(p) for p in problems])


def test_submit_refuses_bad_data_before_any_launch(demo_paths, tmp_path, monkeypatch, tally):
    """runs.submit runs the registry's row check: a malformed file never reaches a process or the queue."""
    monkeypatch.setenv("STUDIO_HOME", str(tmp_path / "home"))
    import yaml

    ddir = tmp_path / "data"
    ddir.mkdir()
    bad = {
        "truncated": ("json", b'[{"instruction": "q", "output": "a"}, {"instr'),
        "latin1": ("jsonl", '{"instruction": "é", "output": "a"}\n'.encode("latin-1")),
        "missing_column": ("csv", b"instruction\nq\n"),
        "parquet_garbage": ("parquet", b"PAR1 not really"),
    }
    info = {}
    for name, (suffix, raw) in bad.items():
        (ddir / f"{name}.{suffix}").write_bytes(raw)
        info[name] = {"file_name": f"{name}.{suffix}"}
    reg.save_dataset_info(ddir, info)
    base = yaml.safe_load(Path(demo_paths["example_spec"]).read_text())
    for name, (suffix, _) in bad.items():
        data = {**base, "data": {**base["data"], "datasets": [name], "dataset_dir": str(ddir)}}
        before = sorted(workspace.runs_dir().glob("*")) if workspace.runs_dir().exists() else []
        try:
            runs.submit(data, start=False)
        except SpecError as exc:
            ok = any(p == "data.datasets" and f"{name}.{suffix}" in m for p, m in exc.problems)
            after = sorted(workspace.runs_dir().glob("*")) if workspace.runs_dir().exists() else []
            tally.check(f"bad_inputs::submit refuses bad data ({name})", ok and after == before, str(exc.problems))
        else:
            tally.check(f"bad_inputs::submit refuses bad data ({name})", False, "submit accepted it")


# ------------------------------------------------------------------------------------------------ specs
def _spec_strategy():
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
    from test_spec_fuzz import _names_a_field, spec_dicts  # reuse the schema-wide strategy

    return spec_dicts(), _names_a_field


_SPECS, _NAMES_A_FIELD = _spec_strategy()


@settings(
    max_examples=SPECS,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=_SPECS)
def test_fuzzed_specs_never_reach_a_process(data, studio_home, tally):
    """Through runs.submit(start=False): a SpecError naming real fields, or a queued run; never another error."""
    try:
        rid = runs.submit(data, start=False)
    except SpecError as exc:
        ok = bool(exc.problems) and all(_NAMES_A_FIELD(p, m, data) for p, m in exc.problems)
        tally.record("bad_inputs::fuzzed spec -> named problem or queued", ok)
        assert ok, exc.problems
    except Exception as exc:  # noqa: BLE001
        tally.record("bad_inputs::fuzzed spec -> named problem or queued", False)
        raise AssertionError(f"{type(exc).__name__}: {exc}") from exc
    else:
        tally.record("bad_inputs::fuzzed spec -> named problem or queued", runs.get(rid).status == "queued")
        runs.delete(rid)


@pytest.mark.parametrize(
    "field,value",
    [
        ("data.dataset_dir", "/definitely/not/here"),
        ("model.name_or_path", "./no-such-model"),
    ],
)
def test_missing_paths_named(demo_paths, field, value, tally):
    import yaml

    data = yaml.safe_load(Path(demo_paths["example_spec"]).read_text())
    group, key = field.split(".")
    data[group][key] = value
    with pytest.raises(SpecError) as info:
        runs.submit(data, start=False)
    tally.check(
        f"bad_inputs::missing path named ({field})",
        any(p == field for p, _ in info.value.problems),
        str(info.value.problems),
    )
