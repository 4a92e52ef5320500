"""The model picker's search (issue 27, item 6): hub ids found by part of their name with their size, licence and
gating, from the hub's search API when it answers (the stand-in, through the real ``huggingface_hub`` client) and
from Studio's table of published configs when it does not, saying which in one line. Nothing is downloaded."""

from __future__ import annotations

import json
import socket
import struct
import time

import pytest

from engine.models import reach
from engine.models.search import HUB, TABLE, human_count, search_models
from engine.plan.model_shape import param_counts
from tests.hub_standin import COMMIT, HubStandin


def _safetensors(shapes: dict[str, list[int]], dtype: str = "BF16") -> bytes:
    """A safetensors file with these tensors (zeros): what the hub reads its parameter counts from."""
    header, offset = {}, 0
    for name, shape in shapes.items():
        n = 2
        for dim in shape:
            n *= dim
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + b"\0" * offset


CONFIG = json.dumps({"model_type": "llama", "hidden_size": 8}).encode()


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """The stand-in with four models, online for this test only: the client points at it, a fresh cache."""
    from huggingface_hub import constants

    with HubStandin() as standin:
        weights = _safetensors({"embed": [32, 8], "lm_head": [32, 8]})  # 512 parameters, bf16
        for repo in ("studio-test/tiny-chat", "studio-test/tiny-chat-gated", "studio-test/other"):
            standin.repos[repo] = {"config.json": CONFIG, "model.safetensors": weights}
        standin.repos["big-org/huge-chat-70b"] = {"config.json": CONFIG}
        standin.gated.add("studio-test/tiny-chat-gated")
        standin.meta["studio-test/tiny-chat"] = {"downloads": 50, "license": "apache-2.0"}
        standin.meta["studio-test/tiny-chat-gated"] = {"downloads": 100, "license": "llama3.1"}
        standin.meta["big-org/huge-chat-70b"] = {
            "downloads": 10,
            "gated": "auto",
            "license": "other",
            "safetensors": {"parameters": {"BF16": 70_000_000_000, "F32": 1_000_000}, "total": 70_001_000_000},
        }
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        monkeypatch.setattr(constants, "ENDPOINT", standin.url)
        monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
        reach.forget()
        yield standin
        reach.forget()


def _cache(tmp_path, repo: str, files: dict[str, bytes]) -> None:
    """A complete snapshot of ``repo`` in the Hugging Face cache's layout."""
    storage = tmp_path / "hf-cache" / f"models--{repo.replace('/', '--')}"
    (storage / "refs").mkdir(parents=True)
    (storage / "refs" / "main").write_text(COMMIT)
    snap = storage / "snapshots" / COMMIT
    snap.mkdir(parents=True)
    for name, data in files.items():
        (snap / name).write_bytes(data)


def test_hub_search_lists_size_licence_gating_and_the_cache_without_downloading(hub, tmp_path):
    _cache(tmp_path, "studio-test/tiny-chat", hub.repos["studio-test/tiny-chat"])
    found = search_models("CHAT", limit=10)
    assert found.source == HUB
    assert found.note == f"3 models on the hub ({hub.url}) match 'CHAT'; nothing is downloaded until a run starts"
    assert [r.id for r in found.rows] == [  # the hub's order: most downloaded first
        "studio-test/tiny-chat-gated",
        "studio-test/tiny-chat",
        "big-org/huge-chat-70b",
    ]
    gated, tiny, huge = found.rows
    assert (gated.gated, gated.licence, gated.cached, gated.downloads) == ("manual", "llama3.1", False, 100)
    assert (tiny.gated, tiny.licence, tiny.cached, tiny.source) == ("no", "apache-2.0", True, HUB)
    assert (tiny.parameters, tiny.size_bytes) == (512, 1024)  # read from the safetensors header, 2 bytes each
    assert (huge.gated, huge.licence, huge.parameters) == ("auto", "other", 70_001_000_000)
    assert huge.size_bytes == 70_000_000_000 * 2 + 1_000_000 * 4
    assert human_count(huge.parameters) == "70.0B"
    # the search asked the hub's search API with the fields the rows show, and fetched no file
    searches = [p for m, p in hub.requests if p.startswith("/api/models?")]
    assert len(searches) == 1 and "search=CHAT" in searches[0] and "expand=safetensors" in searches[0]
    assert not [p for _, p in hub.requests if "/resolve/" in p or "/tree/" in p]


def test_a_typed_full_id_the_search_left_out_is_asked_for_and_listed_first(hub):
    found = search_models("studio-test/tiny-chat", limit=1)  # the search's one row is the more downloaded -gated
    assert found.source == HUB
    assert [r.id for r in found.rows] == ["studio-test/tiny-chat"]
    assert (found.rows[0].licence, found.rows[0].parameters) == ("apache-2.0", 512)
    assert ("GET", "/api/models/studio-test/tiny-chat?expand=downloads&expand=likes&expand=gated&expand=cardData"
            "&expand=safetensors&expand=tags") in hub.requests  # fmt: skip
    assert search_models("studio-test/not-there", limit=5).rows == []


def test_offline_the_table_answers_and_says_so_in_one_line(monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    found = search_models("qwen 0.5b", count=lambda cfg: param_counts(cfg)["total"])
    assert found.source == TABLE
    assert [r.id for r in found.rows] == ["Qwen/Qwen2.5-0.5B", "Qwen/Qwen2.5-0.5B-Instruct"]
    assert "\n" not in found.note
    assert found.note.startswith("2 models of Studio's table of published configs match 'qwen 0.5b'")
    assert "the hub is not asked (HF_HUB_OFFLINE is set)" in found.note
    row = found.rows[0]
    assert row.source == TABLE and (row.licence, row.gated) == ("apache-2.0", "no")  # as Qwen2.5's card states
    # the terms the table records: a Llama model is gated for Meta's review, Qwen2.5-3B has its research licence
    llama = search_models("meta-llama llama-3.1-8b-instruct").rows
    assert [(r.id, r.licence, r.gated) for r in llama] == [("meta-llama/Llama-3.1-8B-Instruct", "llama3.1", "manual")]
    assert {(r.licence, r.gated) for r in search_models("qwen2.5-3b").rows} == {("qwen-research", "no")}
    assert {r.licence for r in search_models("gemma-2-9b").rows} == {"gemma"}
    assert human_count(row.parameters) == "494.0M" and row.size_bytes == row.parameters * 2
    assert search_models("no-such-model-anywhere").rows == []
    assert (
        search_models("  ").note
        == "type part of a model id (e.g. qwen 7b) to search the hub, or Studio's table offline"
    )


def test_an_unreachable_hub_falls_back_to_the_table_quickly(monkeypatch):
    from huggingface_hub import constants

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there: refused
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{port}")
    reach.forget()
    try:
        start = time.monotonic()
        found = search_models("llama-3.2-1b")
        assert time.monotonic() - start < 5
    finally:
        reach.forget()
    assert found.source == TABLE
    assert [r.id for r in found.rows] == ["meta-llama/Llama-3.2-1B", "meta-llama/Llama-3.2-1B-Instruct"]
    assert f"the hub (http://127.0.0.1:{port}) cannot be reached" in found.note and "\n" not in found.note


def test_an_error_answer_of_the_hub_falls_back_to_the_table(hub, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", hub.url + "/broken")  # answers 404 to every route, search included
    found = search_models("gemma-2-2b")
    assert found.source == TABLE and [r.id for r in found.rows] == ["google/gemma-2-2b", "google/gemma-2-2b-it"]
    assert "answered an error to the search" in found.note


def test_a_hub_that_does_not_answer_the_search_gives_the_table_in_time(hub, monkeypatch):
    from engine.models import search

    monkeypatch.setattr(search, "SEARCH_TIMEOUT_S", 0.5)
    hub.search_delay = 5.0  # the probe is answered, the search is not (huggingface_hub's own client would wait)
    start = time.monotonic()
    found = search_models("qwen3-0.6b")
    assert time.monotonic() - start < 3
    assert found.source == TABLE and [r.id for r in found.rows] == ["Qwen/Qwen3-0.6B", "Qwen/Qwen3-0.6B-Base"]
    assert f"the hub ({hub.url}) did not answer the search within 0.5 s" in found.note
