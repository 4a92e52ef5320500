"""The Train tab's model picker as a person uses it (issue 27, item 6): the test server runs offline
(HF_HUB_OFFLINE=1, as the suite does), so a search answers from Studio's table of published configs and says so in
one line; a click on a row puts the id in the Model field and the plan panel plans it before anything is
downloaded, saying that Start would refuse it here (its weights cannot be downloaded offline)."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.slow  # a real server and browser

MODEL_INPUT = "#f-model-name-or-path input"


def _wait_text(page, selector: str, text: str, timeout: int = 60_000) -> str:
    found = f"(document.querySelector({json.dumps(selector)}) || {{innerText: ''}})"
    page.wait_for_function(f"{found}.innerText.includes({json.dumps(text)})", timeout=timeout)
    return page.inner_text(selector)


def _rows(page) -> list[list[str]]:
    return page.evaluate(
        """() => [...document.querySelectorAll('#model-search-results [role=row].virtual-row')].map(
            tr => [...tr.querySelectorAll('[role=gridcell]')].map(td => td.innerText.trim()))"""
    )


def test_offline_search_picks_a_table_model_and_the_plan_shows_it(page, shots):
    page.wait_for_selector("#start-btn:not([disabled])", timeout=60_000)  # the page's load handlers have run
    page.locator("#model-search").get_by_text("Find a model on the hub", exact=True).first.click()
    query = page.locator("#model-search-query textarea, #model-search-query input").first
    query.fill("qwen2.5 0.5b")
    query.press("Enter")
    note = _wait_text(page, "#model-search-note", "models of Studio's table of published configs")
    assert note.strip().startswith("2 models of Studio's table of published configs match 'qwen2.5 0.5b'"), note
    assert "HF_HUB_OFFLINE" in note and "\n" not in note.strip()
    rows_shown = "#model-search-results [role=row].virtual-row"
    page.wait_for_function(f"() => document.querySelectorAll({json.dumps(rows_shown)}).length == 2")
    rows = _rows(page)
    assert [r[0] for r in rows] == ["Qwen/Qwen2.5-0.5B", "Qwen/Qwen2.5-0.5B-Instruct"], rows
    assert rows[1][1:] == ["494.0M", "≈ 988.1 MB", "not known", "not known", "not downloaded"], rows
    page.locator("#model-search").screenshot(path=str(shots / "model-search.png"))

    page.locator("#model-search-results [role=gridcell]", has_text="Qwen/Qwen2.5-0.5B-Instruct").first.click()
    page.wait_for_function(
        f"document.querySelector({json.dumps(MODEL_INPUT)}).value === 'Qwen/Qwen2.5-0.5B-Instruct'", timeout=60_000
    )
    plan = _wait_text(page, "#plan-panel", "Studio's table of published configs", timeout=90_000)
    assert "Qwen/Qwen2.5-0.5B-Instruct" in plan and "the weights are not downloaded yet" in plan, plan
    assert "could not download its model" in plan and "GiB" in plan, plan  # planned, and Start would refuse it
