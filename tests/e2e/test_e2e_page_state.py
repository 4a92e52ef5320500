"""The page after a reload and after its actions, as a user sees it in Chromium: an uploaded dataset in both pickers,
a saved preset that loads, the words of Stop until the checkpoint is saved, the chosen language. Screenshots into
test-artifacts/. Every wait is for the text or element asserted, never for a fixed time."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.slow  # a real server and browser


def _wait_text(page, selector: str, text: str, timeout: int = 60_000) -> str:
    found = f"(document.querySelector({json.dumps(selector)}) || {{innerText: ''}})"
    page.wait_for_function(f"{found}.innerText.includes({json.dumps(text)})", timeout=timeout)
    return page.inner_text(selector)


def _reload(page) -> None:
    page.reload()
    page.wait_for_selector("#start-btn:not([disabled])", timeout=60_000)  # the page's load handlers have run


def _options(page, input_selector: str, name: str, timeout: int = 30_000) -> None:
    """Open a dropdown and wait for the option ``name`` in its list."""
    page.click(input_selector)
    page.get_by_role("option", name=name, exact=True).wait_for(timeout=timeout)


TAB_IDS = {"Datasets": "data", "Train": "train"}


def _tab(page, name: str) -> None:
    page.get_by_role("tab", name=name).click()
    page.wait_for_selector(f"#tab-{TAB_IDS[name]}", state="visible", timeout=15_000)


def test_uploaded_dataset_is_in_both_pickers_after_a_reload(page, server, shots, tmp_path):
    page.wait_for_selector("#start-btn:not([disabled])", timeout=60_000)
    _tab(page, "Datasets")
    src = tmp_path / "after reload.jsonl"
    src.write_text("\n".join(json.dumps({"instruction": f"Say {i}", "output": f"{i}"}) for i in range(12)))
    page.set_input_files("#ds-upload input[type=file]", str(src))
    _wait_text(page, "#ds-upload-msg", "stored")
    page.fill("#ds-name input", "after_reload")
    page.click("#ds-register")
    _wait_text(page, "#ds-register-msg", "registered")
    _reload(page)
    _options(page, "#f-data-datasets input", "after_reload")
    page.screenshot(path=str(shots / "reload-train-datasets.png"))
    page.keyboard.press("Escape")
    _tab(page, "Datasets")
    _options(page, "#ds-pick input", "after_reload")
    page.screenshot(path=str(shots / "reload-datasets-pick.png"))


def test_saved_preset_loads_after_a_reload(page, shots):
    page.wait_for_selector("#start-btn:not([disabled])", timeout=60_000)
    lr = page.locator("#f-train-learning-rate input")
    lr.fill("0.000321")
    lr.press("Tab")
    page.click("#presets button")  # the accordion opens
    page.fill("#preset-name input", "reload check")
    page.click("#preset-save")
    _wait_text(page, "#preset-msg", "saved")
    _reload(page)
    assert page.input_value("#f-train-learning-rate input") != "0.000321"  # the demo's default again
    page.click("#presets button")
    _options(page, "#preset-pick input", "reload check")
    page.get_by_role("option", name="reload check", exact=True).click()
    _wait_text(page, "#preset-msg", "loaded reload check.yaml")
    page.wait_for_function(
        "document.querySelector('#f-train-learning-rate input').value === '0.000321'", timeout=30_000
    )
    page.screenshot(path=str(shots / "reload-preset-loaded.png"))


def test_stop_says_where_the_checkpoint_went(page, shots):
    page.wait_for_selector("#start-btn:not([disabled])", timeout=60_000)
    steps = page.locator("#f-train-max-steps input")
    steps.fill("4321")
    steps.press("Tab")
    page.wait_for_selector("#start-btn:not([disabled])", timeout=15_000)
    page.click("#start-btn")
    _wait_text(page, "#action-msg", "run")  # started or queued, with its id
    _wait_text(page, "#run-status", "running", timeout=180_000)
    page.wait_for_function("document.querySelectorAll('#plot-loss g.mark-line path').length > 0", timeout=180_000)
    page.click("#stop-btn")
    final = _wait_text(page, "#action-msg", "checkpoint saved at", timeout=150_000)
    assert "stopped at step" in final and "Stopping" not in final, final
    status = _wait_text(page, "#run-status", "stopped")
    assert "SIGTERM" not in status and "checkpoint saved at" in status, status
    page.wait_for_function("!document.querySelector('#run-progress').innerText.includes('ETA')", timeout=30_000)
    # the run picker's label follows the run
    page.wait_for_function("document.querySelector('#run-picker input').value.includes('stopped')", timeout=30_000)
    page.screenshot(path=str(shots / "train-stop-final.png"))
    page.click("#stop-btn")  # Stop again: the run has ended
    _wait_text(page, "#action-msg", "has already ended")
    page.screenshot(path=str(shots / "train-stop-ended.png"))


def test_chosen_language_survives_a_reload(page, shots):
    page.wait_for_selector("#start-btn:not([disabled])", timeout=60_000)
    page.click("#lang-picker input")
    page.get_by_role("option", name="中文").click()
    _wait_text(page, "#start-btn", "开始训练", timeout=120_000)
    _reload(page)
    _wait_text(page, "#start-btn", "开始训练", timeout=30_000)
    page.get_by_role("tab", name="数据集").wait_for(timeout=30_000)
    assert page.input_value("#lang-picker input") == "中文"
    page.screenshot(path=str(shots / "reload-language-zh.png"))


def _upload(page, path) -> None:
    """Put a file on the Datasets tab's upload widget as a person does: a file shown there is taken off first (its
    × button), which brings back the drop area and its file input."""
    clear = page.locator("#ds-upload button[aria-label=Clear]")
    if clear.count():
        clear.click()
    page.wait_for_selector("#ds-upload input[type=file]", state="attached", timeout=60_000)
    page.set_input_files("#ds-upload input[type=file]", str(path))


def _shows_file(page, name: str) -> bool:
    return page.locator("#ds-upload td.filename", has_text=name).count() > 0


def test_a_new_upload_clears_the_last_registers_words(page, tmp_path):
    """Issue 27 item 11: an old ❌ of Register stayed under a new upload; a refused upload stayed on the widget, so
    Register then said "upload a file first" beside a file shown."""
    page.wait_for_selector("#start-btn:not([disabled])", timeout=240_000)
    _tab(page, "Datasets")
    good = tmp_path / "fresh_one.jsonl"
    good.write_text("\n".join(json.dumps({"instruction": f"Say {i}", "output": f"{i}"}) for i in range(6)))
    _upload(page, good)
    _wait_text(page, "#ds-upload-msg", "stored")
    page.fill("#ds-name input", "bad name/with slash")
    page.click("#ds-register")
    _wait_text(page, "#ds-register-msg", "❌")
    other = tmp_path / "fresh_two.jsonl"
    other.write_text(good.read_text())
    _upload(page, other)
    _wait_text(page, "#ds-upload-msg", "fresh_two")
    page.wait_for_function("document.querySelector('#ds-register-msg').innerText.trim() === ''", timeout=60_000)
    assert _shows_file(page, "fresh_two")
    broken = tmp_path / "broken_three.json"
    broken.write_text("{not json")
    _upload(page, broken)
    _wait_text(page, "#ds-upload-msg", "❌")
    # the refused file is not left on the widget, so Register's "upload a file first" never sits beside it
    page.wait_for_selector("#ds-upload input[type=file]", state="attached", timeout=60_000)
    assert not _shows_file(page, "broken_three")
    page.click("#ds-register")
    _wait_text(page, "#ds-register-msg", "upload a file first")
    assert page.locator("#ds-upload td.filename").count() == 0
