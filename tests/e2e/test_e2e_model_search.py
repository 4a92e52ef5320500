"""The Train tab's model picker as a person uses it (issue 27, item 6): the test server runs offline
(HF_HUB_OFFLINE=1, as the suite does), so a search answers from Studio's table of published configs and says so in
one line; a click on a row puts the id in the Model field and the plan panel plans it before anything is
downloaded, saying that Start would refuse it here (its weights cannot be downloaded offline). A second studio, online
against the hub stand-in (tests/hub_standin.py, the real client through HF_ENDPOINT), lists the hub's rows with
licence and gating, and a pick plans from the hub's config.json without fetching any weights."""

from __future__ import annotations

import json
import struct

import pytest

from tests.e2e.conftest import type_field
from tests.e2e.conftest import wait_text as _wait_text
from tests.hub_standin import HubStandin

pytestmark = pytest.mark.slow  # a real server and browser

MODEL_INPUT = "#f-model-name-or-path input"


def _rows(page) -> list[list[str]]:
    return page.evaluate(
        """() => [...document.querySelectorAll('#model-search-results [role=row].virtual-row')].map(
            tr => [...tr.querySelectorAll('[role=gridcell]')].map(td => td.innerText.trim()))"""
    )


def test_offline_search_picks_a_table_model_and_the_plan_shows_it(page, shots):
    page.wait_for_selector("#start-btn:not([disabled])", timeout=60_000)  # the page's load handlers have run
    page.locator("#model-search").get_by_text("Find a model on the hub", exact=True).first.click()
    query = page.locator("#model-search-query textarea, #model-search-query input").first
    type_field(page, "#model-search-query textarea, #model-search-query input", "qwen2.5 0.5b")  # once drawn
    query.press("Enter")
    note = _wait_text(page, "#model-search-note", "models of Studio's table of published configs")
    assert note.strip().startswith("2 models of Studio's table of published configs match 'qwen2.5 0.5b'"), note
    assert "HF_HUB_OFFLINE" in note and "\n" not in note.strip()
    rows_shown = "#model-search-results [role=row].virtual-row"
    page.wait_for_function(f"() => document.querySelectorAll({json.dumps(rows_shown)}).length == 2")
    rows = _rows(page)
    assert [r[0] for r in rows] == ["Qwen/Qwen2.5-0.5B", "Qwen/Qwen2.5-0.5B-Instruct"], rows
    assert rows[1][1:] == ["494.0M", "≈ 988.1 MB", "apache-2.0", "no", "not downloaded"], rows
    # every column within the form at 1280 px: the table does not scroll sideways (issue 27 item 6)
    widths = page.evaluate(
        "() => { const v = document.querySelector('#model-search-results .virtual-table-viewport');"
        " return [v.scrollWidth, v.clientWidth]; }"
    )
    assert widths[0] <= widths[1] + 1, widths
    page.locator("#model-search").screenshot(path=str(shots / "model-search.png"))

    page.locator("#model-search-results [role=gridcell]", has_text="Qwen/Qwen2.5-0.5B-Instruct").first.click()
    page.wait_for_function(
        f"document.querySelector({json.dumps(MODEL_INPUT)}).value === 'Qwen/Qwen2.5-0.5B-Instruct'", timeout=60_000
    )
    plan = _wait_text(page, "#plan-panel", "Studio's table of published configs", timeout=90_000)
    assert "Qwen/Qwen2.5-0.5B-Instruct" in plan and "the weights are not downloaded yet" in plan, plan
    assert "could not download its model" in plan and "GiB" in plan, plan  # planned, and Start would refuse it
    # the page's language switch shows the same rows and line in Chinese
    page.click("#lang-picker input")
    page.get_by_role("option", name="中文").click()
    _wait_text(page, "#model-search-note", "Studio 收录的官方配置表")
    _wait_text(page, "#model-search-results", "参数量")
    assert _rows(page)[1][3:] == ["apache-2.0", "无需授权", "未下载"]


TINY = {  # a llama small enough to plan in a blink; the stand-in serves its config.json, never its weights
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 512,
    "max_position_embeddings": 512,
    "tie_word_embeddings": True,
}


def _weights() -> bytes:
    header = json.dumps({"w": {"dtype": "BF16", "shape": [512, 64], "data_offsets": [0, 65536]}}).encode()
    return struct.pack("<Q", len(header)) + header + bytes(65536)


def test_online_search_lists_the_hubs_rows_and_a_pick_plans_without_downloading(make_server, browser, tmp_path):
    with HubStandin() as hub:
        files = {"config.json": json.dumps(TINY).encode(), "model.safetensors": _weights()}
        hub.repos["studio-test/tiny-chat"] = dict(files)
        hub.repos["studio-test/tiny-chat-gated"] = dict(files)
        hub.gated.add("studio-test/tiny-chat-gated")
        hub.meta["studio-test/tiny-chat"] = {"downloads": 5, "license": "apache-2.0"}
        hub.meta["studio-test/tiny-chat-gated"] = {"downloads": 9, "license": "llama3.1"}
        env = {
            "HF_ENDPOINT": hub.url,
            "HF_HUB_OFFLINE": "0",
            "HF_HUB_CACHE": str(tmp_path / "hf-cache"),
            "HF_HOME": str(tmp_path / "hf-home"),
        }
        (tmp_path / "home").mkdir()
        server = make_server(tmp_path / "home", env=env)
        try:
            server.wait_up()
            ctx = browser.new_context(viewport={"width": 1280, "height": 800})
            page = ctx.new_page()
            page.set_default_timeout(90_000)
            page.goto(server.url)
            page.wait_for_selector("#start-btn:not([disabled])", timeout=120_000)
            page.locator("#model-search").get_by_text("Find a model on the hub", exact=True).first.click()
            type_field(page, "#model-search-query textarea, #model-search-query input", "tiny-chat")
            page.click("#model-search-btn")
            note = _wait_text(page, "#model-search-note", "models on the hub")
            assert note.strip() == (
                f"2 models on the hub ({hub.url}) match 'tiny-chat'; nothing is downloaded until a run starts"
            )
            rows_shown = "#model-search-results [role=row].virtual-row"
            page.wait_for_function(f"() => document.querySelectorAll({json.dumps(rows_shown)}).length == 2")
            assert _rows(page) == [
                ["studio-test/tiny-chat-gated", "32.8K", "65.5 KB", "llama3.1", "yes, approved by the authors",
                 "not downloaded"],
                ["studio-test/tiny-chat", "32.8K", "65.5 KB", "apache-2.0", "no", "not downloaded"],
            ]  # fmt: skip
            page.locator(rows_shown).nth(1).locator("[role=gridcell]").first.click()
            page.wait_for_function(
                f"document.querySelector({json.dumps(MODEL_INPUT)}).value === 'studio-test/tiny-chat'"
            )
            plan = _wait_text(page, "#plan-panel", "models--studio-test--tiny-chat", timeout=90_000)
            # the form's check fetched config.json from the hub into the cache (a few hundred bytes); the plan read it
            assert "model figures from the Hugging Face cache" in plan and "GiB" in plan, plan
            assert "could not download" not in plan, plan
            ctx.close()
        finally:
            server.stop()
        fetched = [p for _, p in hub.requests if "/resolve/" in p]
        assert fetched and all(p.endswith("/config.json") for p in fetched), fetched  # the config, never weights
