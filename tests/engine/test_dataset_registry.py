"""Dataset registry: every bad-data case names its file and row; formats; register round-trip; the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.commands import data_cli
from engine.data import dataset_registry as R

ROOT = Path(__file__).resolve().parents[2]
GOOD = {"instruction": "Say hi", "input": "", "output": "hi"}


def make(tmp_path: Path, name: str, content: str, entry: dict | None = None) -> Path:
    (tmp_path / name).write_text(content, encoding="utf-8")
    info = R.read_dataset_info(tmp_path) if (tmp_path / "dataset_info.json").is_file() else {}
    info["d"] = {"file_name": name, **(entry or {})}
    R.save_dataset_info(tmp_path, info)
    return tmp_path / name


def one_problem(tmp_path, stage="sft") -> str:
    problems = R.check_datasets(["d"], tmp_path, stage)
    assert len(problems) == 1, problems
    return str(problems[0])


def test_malformed_json_line_names_file_and_line(tmp_path):
    make(tmp_path, "x.jsonl", json.dumps(GOOD) + "\n{broken\n" + json.dumps(GOOD) + "\n")
    msg = one_problem(tmp_path)
    assert "x.jsonl, line 2" in msg and "malformed JSON" in msg


def test_invalid_json_file_names_line(tmp_path):
    make(tmp_path, "x.json", '[{"instruction": "a",\n "output": }]')
    assert "x.json" in one_problem(tmp_path) and "line 2" in one_problem(tmp_path)


def test_misnamed_column_lists_existing_columns(tmp_path):
    make(
        tmp_path,
        "x.json",
        json.dumps([GOOD, {"instruction": "q", "answer": "a"}, {"instruction": "q", "answer": "b"}]),
    )
    msg = one_problem(tmp_path)
    assert "x.json, row 2, column 'output'" in msg and "instruction, answer" in msg and "1 more row" in msg


def test_empty_response(tmp_path):
    make(tmp_path, "x.json", json.dumps([GOOD, {"instruction": "q", "output": "  "}]))
    assert "row 2" in one_problem(tmp_path) and "empty response" in one_problem(tmp_path)


def test_file_not_found(tmp_path):
    R.save_dataset_info(tmp_path, {"d": {"file_name": "nope.json"}})
    msg = one_problem(tmp_path)
    assert "nope.json" in msg and "file not found" in msg


def test_unknown_name_lists_known(tmp_path):
    R.save_dataset_info(tmp_path, {"alpha": {"file_name": "a.json"}, "beta": {"file_name": "b.json"}})
    problems = R.check_datasets(["gamma"], tmp_path, "sft")
    assert "'gamma' is not registered" in str(problems[0]) and "alpha, beta" in str(problems[0])


def test_sharegpt_wrong_role_order(tmp_path):
    conv = [{"from": "human", "value": "q"}, {"from": "human", "value": "q2"}, {"from": "gpt", "value": "a"}]
    make(tmp_path, "x.json", json.dumps([{"conversations": conv}]), {"formatting": "sharegpt"})
    msg = one_problem(tmp_path)
    assert "row 1" in msg and "turn 2 is 'human' but 'gpt' was expected" in msg


def test_dpo_without_chosen_rejected(tmp_path):
    make(tmp_path, "x.json", json.dumps([GOOD]))
    assert "chosen/rejected" in one_problem(tmp_path, stage="dpo")
    make(tmp_path, "y.json", json.dumps([{"instruction": "q", "chosen": "a"}]), {"ranking": True})
    msg = one_problem(tmp_path, stage="dpo")
    assert "y.json, row 1, column 'rejected'" in msg


def test_formats_load_the_same_rows(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [GOOD, {"instruction": "Add", "input": "1 2", "output": "3"}]
    want = R.load_rows("d", (make(tmp_path, "x.json", json.dumps(rows)).parent))
    make(tmp_path, "x.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    assert R.load_rows("d", tmp_path) == want
    make(tmp_path, "x.csv", "instruction,input,output\nSay hi,,hi\nAdd,1 2,3\n")
    assert R.load_rows("d", tmp_path) == want
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "x.parquet")
    R.register_dataset(tmp_path, "d", "x.parquet", overwrite=True)
    assert R.load_rows("d", tmp_path) == want
    assert want[1]["messages"] == [{"role": "user", "content": "Add\n1 2"}, {"role": "assistant", "content": "3"}]


def test_saved_hf_dataset_folder(tmp_path):
    from datasets import Dataset

    Dataset.from_list([GOOD] * 3).save_to_disk(str(tmp_path / "saved"))
    R.register_dataset(tmp_path, "d", "saved")
    assert len(R.load_rows("d", tmp_path)) == 3


def test_normalize_alpaca_history_and_system(demo_paths):
    rows = R.load_rows("demo_alpaca", demo_paths["data_dir"])
    first = rows[0]
    assert first["system"] and len(first["messages"]) == 4 and first["messages"][-1]["role"] == "assistant"
    msgs = R.load_rows("demo_messages", demo_paths["data_dir"])
    assert any(r["system"] for r in msgs) and all(m["role"] != "system" for r in msgs for m in r["messages"])


def test_register_round_trip_keeps_other_entries(tmp_path):
    R.save_dataset_info(tmp_path, {"keep": {"file_name": "k.json"}})
    (tmp_path / "u.json").write_text(json.dumps([GOOD]))
    R.register_dataset(tmp_path, "up", "u.json", columns={"prompt": "instruction", "response": "output"})
    info = R.read_dataset_info(tmp_path)
    assert set(info) == {"keep", "up"} and info["up"]["columns"]["response"] == "output"
    assert R.preview_rows("up", tmp_path, 1)[0]["messages"][-1]["content"] == "hi"
    with pytest.raises(ValueError, match="already registered"):
        R.register_dataset(tmp_path, "up", "u.json")
    with pytest.raises(ValueError, match="file not found"):
        R.register_dataset(tmp_path, "other", "missing.json")


def test_studio_data_check_cli(tmp_path, demo_paths):
    make(tmp_path, "x.json", json.dumps([GOOD, {"instruction": "q", "output": ""}]))
    env = {"PATH": "/usr/bin:/bin", "STUDIO_HOME": str(tmp_path / "home")}
    bad = subprocess.run(
        [sys.executable, "-m", "engine.cli", "data", "check", "d", "--dataset-dir", str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 1 and "x.json, row 2" in bad.stdout
    good = subprocess.run(
        [
            sys.executable,
            "-m",
            "engine.cli",
            "data",
            "check",
            "demo_alpaca",
            "demo_dpo",
            "--dataset-dir",
            demo_paths["data_dir"],
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert good.returncode == 0 and "demo_alpaca: OK (360 rows" in good.stdout, good.stdout + good.stderr


def test_txt_file_is_one_pretraining_text_per_non_empty_line(tmp_path):
    # LF's wiki_demo: {"file_name": "wiki_demo.txt", "columns": {"prompt": "text"}}; a .txt entry without columns too
    text = "Anarchism is a philosophy.\n\nAutism is a condition.\r\n   \nLast line"
    make(tmp_path, "wiki.txt", text, {"columns": {"prompt": "text"}})
    info = R.read_dataset_info(tmp_path)
    info["bare"] = {"file_name": "wiki.txt"}
    R.save_dataset_info(tmp_path, info)
    assert R.check_datasets(["d", "bare"], tmp_path, "pt") == []
    want = ["Anarchism is a philosophy.", "Autism is a condition.", "Last line"]
    assert [r["text"] for r in R.load_rows("d", tmp_path, "pt")] == want
    assert [r["text"] for r in R.load_rows("bare", tmp_path, "pt")] == want
    assert [r["text"] for r in R.preview_rows("d", tmp_path, n=2, stage="pt")] == want[:2]


@pytest.mark.parametrize("kind", ["videos", "audios"])  # images are checked: tests/engine/test_data_images.py
def test_multimodal_columns_are_refused_at_check_time_naming_the_column(tmp_path, kind):
    row = {"messages": [{"role": "user", "content": "<image>Who?"}, {"role": "assistant", "content": "Kane."}]}
    tags = {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant"}
    make(
        tmp_path,
        "mllm.json",
        json.dumps([{**row, "media": ["a.jpg"]}]),
        {"formatting": "sharegpt", "columns": {"messages": "messages", kind: "media"}, "tags": tags},
    )
    problem = one_problem(tmp_path)
    assert f"{kind} column ('media')" in problem and "not supported" in problem


GLAIVE_TOOLS = json.dumps(
    [
        {
            "name": "search_recipes",
            "description": "Search for recipes based on ingredients",
            "parameters": {
                "type": "object",
                "properties": {"ingredients": {"type": "array", "items": {"type": "string"}, "description": "To use"}},
                "required": ["ingredients"],
            },
        }
    ]
)
GLAIVE_CALL = json.dumps({"name": "search_recipes", "arguments": {"ingredients": ["chicken", "rice"]}})
GLAIVE_ROW = {  # LF's glaive_toolcall demo shape: sharegpt, function_call / observation turns, tools as JSON text
    "conversations": [
        {"from": "human", "value": "I have chicken and rice."},
        {"from": "function_call", "value": GLAIVE_CALL},
        {"from": "observation", "value": '{"recipes": ["Chicken fried rice"]}'},
        {"from": "gpt", "value": "Try chicken fried rice."},
    ],
    "tools": GLAIVE_TOOLS,
}
GLAIVE_ENTRY = {"formatting": "sharegpt", "columns": {"messages": "conversations", "tools": "tools"}}


def test_tool_call_rows_keep_their_roles_and_tools(tmp_path):
    make(tmp_path, "glaive.json", json.dumps([GLAIVE_ROW]), GLAIVE_ENTRY)
    assert R.check_datasets(["d"], tmp_path) == []
    (row,) = R.load_rows("d", tmp_path)
    assert [m["role"] for m in row["messages"]] == ["user", "function", "observation", "assistant"]
    assert row["tools"] == GLAIVE_TOOLS and row["messages"][1]["content"] == GLAIVE_CALL


@pytest.mark.parametrize(
    ("change", "expect"),
    [
        ({"tools": "[not json"}, "not a JSON list"),
        (
            {"conversations": [{"from": "human", "value": "q"}, {"from": "function_call", "value": "call it"}]},
            "not JSON",
        ),
    ],
)
def test_bad_tool_rows_are_named_at_check_time(tmp_path, change, expect):
    make(tmp_path, "glaive.json", json.dumps([{**GLAIVE_ROW, **change}]), GLAIVE_ENTRY)
    assert expect in one_problem(tmp_path)


KTO_ROWS = [
    {"instruction": "Add 1 and 1.", "output": "2.", "label": True},
    {"instruction": "Add 2 and 2.", "output": "5.", "label": False},
    {"instruction": "Add 3 and 3.", "output": "6."},  # no tag: left out of kto training, as LLaMA-Factory drops it
    {"instruction": "Add 4 and 4.", "output": "8.", "label": None},
]
KTO_ENTRY = {"columns": {"prompt": "instruction", "response": "output", "kto_tag": "label"}}


def test_kto_data_check_counts_the_tags_and_names_a_tag_that_is_not_a_boolean(tmp_path, capsys):
    make(tmp_path, "k.json", json.dumps(KTO_ROWS), KTO_ENTRY)
    assert R.entry_stage(R._resolve("d", tmp_path)[0]) == "kto"
    assert data_cli.cli(["check", "d", "--dataset-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "d: OK (4 rows, stage kto: 1 desirable, 1 undesirable, 2 without a tag, left out)" in out, out

    bad = KTO_ROWS + [
        {"instruction": "q", "output": "a", "label": "yes"},
        {"instruction": "q", "output": "a", "label": 1},
    ]
    make(tmp_path, "k.json", json.dumps(bad), KTO_ENTRY)
    assert data_cli.cli(["check", "d", "--dataset-dir", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "k.json, row 5, column 'label'" in out and '"yes", not true or false' in out and "1 more row" in out, out


def test_kto_data_is_refused_for_other_stages_and_without_any_tag(tmp_path, capsys):
    make(tmp_path, "k.json", json.dumps(KTO_ROWS), KTO_ENTRY)
    assert data_cli.cli(["check", "d", "--dataset-dir", str(tmp_path), "--stage", "sft"]) == 1
    out = capsys.readouterr().out
    assert "'d' holds kto data (column 'label'" in out and "use stage kto" in out, out
    make(tmp_path, "k.json", json.dumps([KTO_ROWS[2]]), KTO_ENTRY)
    assert "no row of 'd' has a kto tag (column 'label'" in one_problem(tmp_path, "kto")
    make(tmp_path, "x.json", json.dumps([GOOD]))
    assert "maps no kto_tag column" in one_problem(tmp_path, "kto")
    make(tmp_path, "y.json", json.dumps([{"instruction": "q", "chosen": "a", "rejected": "b"}]), {"ranking": True})
    assert "holds preference pairs (ranking)" in one_problem(tmp_path, "kto")
    assert R.check_datasets(["d"], tmp_path, "rm") == []  # pairs: what a reward model trains on


def test_lf_sharegpt_kto_rows_judge_their_last_answer():
    """LLaMA-Factory's kto_en_demo shape: sharegpt messages and a boolean label column (columns.kto_tag)."""
    data = ROOT / "tests" / "fixtures" / "lf" / "data"
    rows = R.load_rows("kto_en_demo", data, "kto")
    assert len(rows) == 8 and [r["kto_tag"] for r in rows[:2]] == [True, False]
    assert rows[1]["messages"] == [
        {"role": "user", "content": "Add 1 and 1."},
        {"role": "assistant", "content": "2."},
    ]


# ------------------------------------------------------------------ issue 30.6: only regular files inside the folder
def _outside_entries(tmp_path: Path) -> Path:
    """A dataset folder with one entry of each kind that must not be read: a FIFO, a link to /dev/zero, a link to a
    file outside, ``../../``, ``/``, a script folder outside, and a folder holding a FIFO."""
    ddir = tmp_path / "data"
    (ddir / "withfifo").mkdir(parents=True)
    os.mkfifo(ddir / "fifo.jsonl")
    os.mkfifo(ddir / "withfifo" / "train.jsonl")
    (ddir / "zero.jsonl").symlink_to("/dev/zero")
    (tmp_path / "secret.jsonl").write_text(json.dumps({"instruction": "SECRET-KEY", "output": "x"}) + "\n")
    (ddir / "leak.jsonl").symlink_to(tmp_path / "secret.jsonl")
    (ddir / "ok.jsonl").write_text(json.dumps(GOOD) + "\n")
    R.save_dataset_info(
        ddir,
        {
            "fifo": {"file_name": "fifo.jsonl"},
            "zero": {"file_name": "zero.jsonl"},
            "leak": {"file_name": "leak.jsonl"},
            "up": {"file_name": "../../"},
            "root": {"file_name": "/"},
            "etc": {"script_url": "../../../../etc"},
            "folder": {"file_name": "withfifo"},
            "ok": {"file_name": "ok.jsonl"},
        },
    )
    return ddir


REFUSED = {
    "fifo": "is a FIFO, not a regular file",
    "zero": "file_name 'zero.jsonl' leads outside the dataset folder",
    "leak": "file_name 'leak.jsonl' leads outside the dataset folder",
    "up": "file_name '../../' leads outside the dataset folder",
    "root": "file_name '/' leads outside the dataset folder",
    "etc": "script_url '../../../../etc' leads outside the dataset folder",
    "folder": "train.jsonl is a FIFO, not a regular file",
}


def test_entries_leading_out_or_to_devices_are_refused_naming_the_entry(tmp_path):
    """Issue 30.6: each is refused with the entry named and nothing of a foreign file quoted (the FIFO would block
    the reader for ever, /dev/zero fill memory); every reader goes through the same check (full check, the page's
    head check, preview)."""
    ddir = _outside_entries(tmp_path)
    for name, why in REFUSED.items():
        for problems in (R.check_datasets([name], ddir), R.check_head(name, ddir)[0]):
            assert len(problems) == 1, (name, problems)
            text = str(problems[0])
            assert f"entry '{name}'" in text and why in text, text
            assert "SECRET-KEY" not in text and "root:" not in text
        assert R.preview_rows(name, ddir) == [] and R.raw_head(name, ddir) == []
    assert R.check_datasets(["ok"], ddir) == []


def test_register_refuses_absolute_paths_outside_the_folder(tmp_path):
    ddir = tmp_path / "data"
    ddir.mkdir()
    (tmp_path / "x.json").write_text(json.dumps([GOOD]))
    for name in (str(tmp_path / "x.json"), "/", "../x.json"):
        with pytest.raises(ValueError, match="leaves the dataset folder"):
            R.register_dataset(ddir, "d", name)


def test_dataset_size_bound_is_checked_before_reading(tmp_path, monkeypatch):
    """``STUDIO_MAX_DATASET_MB``: a file over it is refused from its size alone (the file is sparse: reading it
    would take its whole length); a bad value is refused naming the variable."""
    ddir = tmp_path / "data"
    ddir.mkdir()
    with open(ddir / "big.jsonl", "wb") as fh:
        fh.truncate(3 << 20)
    R.save_dataset_info(ddir, {"big": {"file_name": "big.jsonl"}})
    monkeypatch.setenv("STUDIO_MAX_DATASET_MB", "2")
    problems = R.check_datasets(["big"], ddir)
    assert len(problems) == 1 and "over the 2 MiB" in str(problems[0]) and "entry 'big'" in str(problems[0])
    monkeypatch.setenv("STUDIO_MAX_DATASET_MB", "lots")
    assert "STUDIO_MAX_DATASET_MB" in str(R.check_datasets(["big"], ddir)[0])


def test_deeply_nested_yaml_is_one_line(tmp_path):
    """Issue 30.6: a 5000-deep YAML (a list, a mapping) gives one line from ``studio validate``, not a
    RecursionError, and the page's LLaMA-Factory import refuses it in one line too."""
    deep_list = "a: " + "[" * 5000 + "]" * 5000 + "\n"
    # a block mapping 5000 deep is 24 MiB of indentation, refused for its size first (4 MiB): a flow mapping instead
    deep_map = "a: " + "{k: " * 5000 + "1" + "}" * 5000 + "\n"
    for i, text in enumerate((deep_list, deep_map)):
        path = tmp_path / f"deep{i}.yaml"
        path.write_text(text)
        proc = subprocess.run(
            [sys.executable, "-m", "engine.cli", "validate", str(path)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        out = proc.stdout + proc.stderr
        assert proc.returncode != 0 and "Traceback" not in out and "RecursionError" not in out, out[-800:]
        assert "nested deeper than 64 levels" in out, out[-800:]
    from engine.lf import compat
    from engine.spec.schema import SpecError

    with pytest.raises(SpecError, match="nested deeper than 64 levels"):
        compat.lf_text_to_spec("stage: sft\nmodel_name_or_path: m\nfoo: " + "[" * 5000 + "]" * 5000)
