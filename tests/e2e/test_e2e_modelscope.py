"""The Models tab's ModelScope download, as a person does it (issue 27 item 4): the tab says which ModelScope it talks
to and where its cache is, "From ModelScope" ticked, a repo id typed, Download; the download's progress line ends
finished, and the tab's table lists the model with its source, from ModelScope's cache.

Everything talks to tests/modelscope_standin.py on 127.0.0.1 (``MODELSCOPE_ENDPOINT``), serving the demo model's
files; the files that landed are checked against the ones served, read here."""

from __future__ import annotations

import functools
from pathlib import Path

from playwright.sync_api import expect

from tests.e2e.conftest import open_tab, wait_text
from tests.modelscope_standin import ModelScopeStandin

REPO = "studio-test/ms-tiny"


_wait_text = functools.partial(wait_text, timeout=120_000)


def test_a_modelscope_download_from_the_models_tab(make_server, browser, tmp_path, demo_paths, shots):
    served = {p.name: p.read_bytes() for p in Path(demo_paths["model_dir"]).iterdir() if p.is_file()}
    cache = tmp_path / "ms-cache"
    with ModelScopeStandin() as standin:
        standin.repos[REPO] = served
        (tmp_path / "home").mkdir()
        env = {"MODELSCOPE_ENDPOINT": standin.url, "MODELSCOPE_CACHE": str(cache), "STUDIO_DOWNLOAD_INTERVAL": "0.2"}
        server = make_server(tmp_path / "home", ["--no-demo"], env=env)
        try:
            server.wait_up()
            page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            page.set_default_timeout(90_000)
            page.goto(server.url)
            page.wait_for_selector("#lang-picker", timeout=120_000)
            open_tab(page, "Models")
            where = _wait_text(page, "#models-modelscope-hub", standin.url)
            assert str(cache) in where, where
            page.locator("#models-modelscope input[type=checkbox]").check()
            page.fill("#models-repo input, #models-repo textarea", REPO)
            page.click("#models-download")
            _wait_text(page, "#models-note", "queued as run")
            progress = _wait_text(page, "#models-downloads", "finished")
            assert REPO in progress and "failed" not in progress, progress
            page.click("#models-refresh")
            row = page.locator("#models-table [role=row]", has_text=REPO)
            expect(row.first).to_be_visible(timeout=90_000)
            cells = row.first.get_by_role("gridcell").all_inner_texts()
            assert "ModelScope cache" in [c.strip() for c in cells], cells
            page.screenshot(path=str(shots / "models-modelscope.png"), full_page=True)
        finally:
            server.stop()
    landed = {p.name: p.read_bytes() for p in cache.rglob("*") if p.is_file() and p.name in served}
    assert landed == served  # every file, byte for byte, in ModelScope's cache
