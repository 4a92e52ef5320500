"""studio/page_speed's rewrite of gradio's StatusTracker module: on the installed gradio it applies (its loop then
asks for the next frame only while the status it counts is pending), on a module it does not fit it gives up, and
the middleware serves it for that asset's path alone. The page itself: tests/e2e/test_e2e_page_speed.py."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from studio import page_speed

# gradio 6.31's tracker, the two pieces the rewrite reads (names as its build minified them)
LOOP = "function ze(){me(()=>{F(Pe,(performance.now()-w(de))/1e3),W&&ze()})}"
EFFECT = "O(()=>{o.status===`pending`?Ve():ee(()=>{He()})})"


def test_the_loop_ends_when_its_status_is_no_longer_pending():
    text = f"let U,W=!1;{LOOP}function Ve(){{W||(W=!0,ze())}}function He(){{W&&=!1}}{EFFECT}"
    quiet = page_speed.quiet_statustracker(text)
    assert quiet == text.replace("W&&ze()", "W&&(o.status===`pending`?ze():(W=!1))")


@pytest.mark.parametrize(
    "text",
    [
        LOOP,  # no effect to read the props' name from
        EFFECT,  # no loop
        LOOP + LOOP.replace("ze", "zf") + EFFECT,  # two loops: which one is unknown
    ],
)
def test_a_module_it_does_not_fit_is_left_as_it_is(text):
    assert page_speed.quiet_statustracker(text) is None


def test_the_installed_gradio_module_is_rewritten_and_still_parses(tmp_path):
    import shutil
    import subprocess

    page_speed._statustracker.cache_clear()
    found = page_speed._statustracker()
    assert found is not None, "gradio's StatusTracker changed: studio/page_speed no longer quiets its loop"
    name, body = found
    assert name.startswith("statustracker-") and b".status===`pending`?" in body
    node = shutil.which("node")
    if node:  # the served module must still be JavaScript
        (tmp_path / "m.mjs").write_bytes(body)
        done = subprocess.run([node, "--check", str(tmp_path / "m.mjs")], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr


def _client(monkeypatch, patch: str = "on") -> TestClient:
    monkeypatch.setenv("STUDIO_GRADIO_PATCH", patch)

    def gradio(request):
        return PlainTextResponse("gradio:" + request.url.path)

    inner = Starlette(routes=[Route("/{path:path}", gradio, methods=["GET", "POST"])])
    return TestClient(page_speed.QuietStatusTrackers(inner))


def test_the_middleware_serves_the_rewrite_for_that_asset_only(monkeypatch):
    name, body = page_speed._statustracker()
    client = _client(monkeypatch)
    got = client.get(f"/assets/{name}")
    assert got.status_code == 200 and got.content == body
    assert got.headers["content-type"].startswith("text/javascript")
    assert client.get(f"/sub/path/assets/{name}").content == body  # gradio mounted under a prefix
    assert client.get("/assets/core-x.js").text == "gradio:/assets/core-x.js"
    assert client.post(f"/assets/{name}").text == f"gradio:/assets/{name}"
    assert _client(monkeypatch, "off").get(f"/assets/{name}").text == f"gradio:/assets/{name}"
