"""ModelScope datasets (``ms_hub_url``), as LLaMA-Factory takes them, through the real ``modelscope`` client against a
local stand-in of ModelScope's API on 127.0.0.1 (tests/modelscope_standin.py; ``MODELSCOPE_ENDPOINT`` points at it).

An entry with only ``ms_hub_url`` is read from ModelScope; with both URLs the Hugging Face hub is used unless
``USE_MODELSCOPE_HUB`` is set (LF's switch). Before launch an entry not in ModelScope's cache is fine when the
stand-in lists it (the run downloads it) and refused in one line naming the entry when it does not exist or
nothing answers; after the download (what the trainer does) its rows are read with the same checks as any file.
"""

from __future__ import annotations

import json

import pytest

from engine.data import dataset_registry as R
from engine.data import ms_hub
from engine.data.rows import DatasetEntry
from tests.modelscope_standin import ModelScopeStandin

ROWS = [{"instruction": f"question {i}", "input": "", "output": f"answer {i}"} for i in range(4)]


@pytest.fixture
def standin(tmp_path, monkeypatch):
    with ModelScopeStandin() as server:
        server.datasets["studio-test/alpaca-ms"] = {"data/train.json": json.dumps(ROWS).encode()}
        monkeypatch.setenv("MODELSCOPE_ENDPOINT", server.url)
        monkeypatch.setenv("MODELSCOPE_CACHE", str(tmp_path / "ms-cache"))
        monkeypatch.delenv("USE_MODELSCOPE_HUB", raising=False)
        ms_hub.availability.cache_clear()
        yield server
        ms_hub.availability.cache_clear()


def test_which_hub_an_entry_reads_follows_lf(monkeypatch):
    both = {"hf_hub_url": "org/a", "ms_hub_url": "org/a-ms"}
    assert DatasetEntry.from_info("x", {"ms_hub_url": "org/m"}).source == "ms_hub"
    assert DatasetEntry.from_info("x", both).source == "hf_hub"
    monkeypatch.setenv("USE_MODELSCOPE_HUB", "1")
    entry = DatasetEntry.from_info("x", both)
    assert (entry.source, entry.hub_id) == ("ms_hub", "org/a-ms")


def test_a_modelscope_dataset_is_checked_downloaded_and_read(standin, tmp_path):
    ddir = tmp_path / "data"
    ddir.mkdir()
    R.save_dataset_info(
        ddir,
        {
            "alpaca_ms": {"ms_hub_url": "studio-test/alpaca-ms"},
            "missing_ms": {"ms_hub_url": "studio-test/nothing-here"},
        },
    )
    assert [e.name for e in R.hub_pending(["alpaca_ms", "missing_ms"], ddir)] == ["alpaca_ms", "missing_ms"]
    assert R.check_datasets(["alpaca_ms"], ddir, "sft") == []  # listed by the hub: the run downloads it
    (problem,) = R.check_datasets(["missing_ms"], ddir, "sft")
    assert "dataset 'missing_ms': ModelScope" in str(problem) and "studio-test/nothing-here" in str(problem)
    assert not any(p.endswith("repo?Revision=master&FilePath=data%2Ftrain.json") for _, p in standin.requests)

    snapshot = ms_hub.download("studio-test/alpaca-ms")  # what the trainer does for a pending entry
    assert snapshot.is_relative_to(tmp_path / "ms-cache")
    assert json.loads((snapshot / "data" / "train.json").read_text()) == ROWS
    assert R.hub_pending(["alpaca_ms"], ddir) == []
    assert R.check_datasets(["alpaca_ms"], ddir, "sft") == []
    rows = R.load_rows("alpaca_ms", ddir, "sft")
    assert [r["messages"][-1]["content"] for r in rows] == [r["output"] for r in ROWS]
    assert [r["messages"][0]["content"] for r in rows] == [r["instruction"] for r in ROWS]


def test_modelscope_that_does_not_answer_is_said_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("MODELSCOPE_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("MODELSCOPE_CACHE", str(tmp_path / "ms-cache"))
    ms_hub.availability.cache_clear()
    why = ms_hub.availability("org/ds", None, "ds")
    assert str(why).startswith("dataset 'ds': ModelScope (http://127.0.0.1:9) cannot give org/ds")
    assert "\n" not in str(why)
