"""THE browser test (issue 2 item 8): open the page, start a run on the demo, see the loss plot draw at least two
points and the run finish, merge with one click, see the merged path."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import pick

pytestmark = pytest.mark.slow  # a real server and browser


_POINTS_JS = """() => { const ps = document.querySelectorAll('#plot-loss g.mark-line path');
        let n = 0;
        for (const p of ps) { n = Math.max(n, ((p.getAttribute('d') || '').match(/[ML]/g) || []).length); }
        return n; }"""


def _loss_points(page) -> int:
    """Points drawn on the loss plot: vertices of the train line (Vega SVG path 'M..L..L..')."""
    return page.evaluate(_POINTS_JS)


def merge_in_export_tab(page, run_id: str, timeout: int) -> str:
    """Merge ``run_id`` with the Export tab's button, as a person does; the merged folder the page names."""
    page.get_by_role("tab", name="Export").click()
    page.wait_for_selector("#export-source", timeout=90_000)
    page.click("#export-source input")
    page.get_by_role("option", name=run_id).first.click()
    page.wait_for_function("document.querySelector('#export-out input').value.length > 0", timeout=90_000)
    page.click("#merge-btn")
    page.wait_for_selector("#merged-path", timeout=timeout)
    return page.inner_text("#merged-path")


def _wait_loss_points(page, n: int, timeout_ms: int = 90_000) -> int:
    """Vega draws the plot asynchronously after the status text updates: wait for the curve, then count it."""
    try:
        page.wait_for_function(f"({_POINTS_JS})() >= {n}", timeout=timeout_ms)
    except Exception:  # noqa: BLE001 - the assertion below reports the count actually drawn
        pass
    return _loss_points(page)


def test_train_watch_merge(page, shots, fits_width):
    assert fits_width(page)
    page.wait_for_selector("#start-btn:not([disabled])", timeout=60_000)
    assert "demo-tiny-llama" in page.input_value("#f-model-name-or-path input")
    page.screenshot(path=str(shots / "train-form.png"))
    id_re = r"\d{8}-\d{6}-[0-9a-f]+"
    before = re.findall(id_re, page.inner_text("#action-msg"))
    page.click("#start-btn")
    page.wait_for_function(
        "([re, before]) => { const m = document.querySelector('#action-msg').innerText"
        ".match(new RegExp('Started run (' + re + ')')); return !!m && !before.includes(m[1]); }",
        arg=[id_re, before],
        timeout=90_000,
    )
    # The run Start named: until the dashboard follows it, its status line still shows the run the page attached to
    # at load, which on a server shared with other tests is another test's, perhaps completed (CI read that one's
    # "completed" and id here once, and the second tab then looked for the wrong run).
    run_id = re.search(f"Started run ({id_re})", page.inner_text("#action-msg")).group(1)

    deadline, points, status = time.time() + 240, 0, ""
    while time.time() < deadline:
        status = page.inner_text("#run-status")
        if run_id in status:
            points = max(points, _loss_points(page))
            if "completed" in status or "failed" in status:
                break
        time.sleep(1)
    points = max(points, _wait_loss_points(page, 2))
    page.screenshot(path=str(shots / "train-finished.png"), full_page=True)
    assert run_id in status and "completed" in status, (run_id, status)
    assert points >= 2, f"loss plot drew {points} points"
    assert "%" in page.inner_text("#run-progress")

    # A second tab (or a reload) re-attaches: it reads the run folder from offset 0 and draws the same curve.
    other = page.context.new_page()
    other.goto(page.url)
    # typed once the page's load handlers have run: the last of them picks the newest run, which on a server shared
    # with other tests may be another one (it replaced the typed id, and a run without a loss curve was shown)
    other.wait_for_selector("#start-btn:not([disabled])", timeout=90_000)
    other.wait_for_function("document.querySelector('#run-picker input').value.length > 0", timeout=90_000)
    pick(other, "#run-picker", run_id)
    try:
        other.wait_for_function(
            f"(() => {{ const s = document.querySelector('#run-status').innerText;"
            f" return s.includes('{run_id}') && s.includes('completed'); }})()",
            timeout=90_000,
        )
    except Exception as exc:  # what the second tab showed instead (CI failed here once, cause not seen)
        seen = {"picker": other.input_value("#run-picker input"), "status": other.inner_text("#run-status")}
        raise AssertionError(f"the second tab never showed {run_id} completed: {seen}") from exc
    assert _wait_loss_points(other, 2) >= 2
    other.close()

    merged = merge_in_export_tab(page, run_id, timeout=180_000)
    page.screenshot(path=str(shots / "export-merged.png"))
    assert Path(merged, "config.json").is_file(), merged
    assert "verification" in page.inner_text("#export-result")
