"""A studio served with a login: routes need it; a public host without a login is refused before serving."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_public_host_without_auth_is_refused(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "STUDIO_AUTH"}
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-m", "engine.cli", "webui", "--host", "0.0.0.0", "--no-demo"],
        cwd=root,
        env={**env, "STUDIO_HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode != 0 and "--auth USER:PASS" in proc.stderr and "STUDIO_AUTH" in proc.stderr


def test_routes_need_the_login(tmp_path, browser, make_server):
    srv = make_server(tmp_path, ["--no-demo"], env={"STUDIO_AUTH": "ann:s3cret"})
    try:
        srv.wait_up()
        with pytest.raises(urllib.error.HTTPError) as exc:
            urllib.request.urlopen(srv.url + "config", timeout=10)
        assert exc.value.code in (401, 403)
        page = browser.new_page()
        page.goto(srv.url)
        page.wait_for_selector("input[type=password]", timeout=90_000)
        assert page.locator("#start-btn").count() == 0
        page.fill("input[name=username], input[type=text]", "ann")
        page.fill("input[type=password]", "s3cret")
        page.keyboard.press("Enter")
        page.wait_for_selector("#start-btn", timeout=60_000)
        page.close()
    finally:
        srv.stop()
