"""studio.gradio_setup: gradio imported by the studio skips its stub regeneration, listener docs read the same."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest

from studio.gradio_setup import render_listener_doc

ROOT = Path(__file__).resolve().parents[2]


def _listener_templates() -> list[str]:
    """The unrendered docstrings gradio renders once per component (its Events keep the templates)."""
    from gradio import events

    docs = [
        v.listener.__doc__
        for v in vars(events.Events).values()
        if isinstance(v, events.EventListener) and v.listener.__doc__
    ]
    assert len(docs) > 20 and all("{{ component }}" in d for d in docs[:5]), "gradio's Events changed shape"
    return docs


def test_listener_docs_match_jinja_for_every_gradio_event():
    for doc in _listener_templates():
        for name in ("Button", "Textbox"):
            assert render_listener_doc(doc, name) == jinja2.Template(doc).render(component=name), doc[:60]


@pytest.mark.parametrize(
    "doc",
    ["Click the {{ component }}.\n", "no placeholder\n\n", "{{ component }} and {{ component }}", "  end\n  "],
)
def test_plain_substitution_is_what_jinja_renders(doc):
    assert render_listener_doc(doc, "Slider") == jinja2.Template(doc).render(component="Slider")


@pytest.mark.parametrize(
    "doc", ["{{ other }}", "{% if x %}a{% endif %}", "{# note #} {{ component }}", "a }} b", "line\r\nnext"]
)
def test_any_other_template_syntax_is_left_to_jinja(doc):
    assert render_listener_doc(doc, "Slider") is None


def test_studio_app_imports_gradio_through_the_hook():
    """In a fresh process: importing the studio page patches gradio as it loads, the hook then removes itself, the
    page's default concurrency is 8 without a second queue() call, its idle queue looks for events every 20 ms (not
    gradio's 1 ms), and no torch is loaded."""
    code = """
import sys
import studio.app as app
import gradio as gr
from gradio import component_meta
from studio import gradio_setup
assert component_meta.create_or_modify_pyi is gradio_setup._no_stub_update, component_meta.create_or_modify_pyi
from gradio import networking
assert networking.url_ok.__module__ == "studio.gradio_setup", networking.url_ok
assert not any(isinstance(f, gradio_setup._PatchAfterExec) for f in sys.meta_path), sys.meta_path
doc = gr.Button.click.__doc__
assert doc.startswith("Triggered when the Button is clicked."), doc[:80]
assert "{{" not in gr.Slider.change.__doc__
with gr.Blocks() as page:
    gr.Button("x")
assert page._queue.default_concurrency_limit == 8, page._queue.default_concurrency_limit
assert page._queue.sleep_when_free == page._queue.progress_update_sleep_when_free == 0.02, vars(page._queue)
assert gradio_setup.install() is False  # gradio is loaded: too late, nothing added
assert "torch" not in sys.modules
print("ok")
"""
    env = {k: v for k, v in os.environ.items() if k not in ("GRADIO_DEFAULT_CONCURRENCY_LIMIT", "STUDIO_QUEUE_POLL_S")}
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]


def test_launch_waits_for_its_own_server_on_a_busy_machine(monkeypatch):
    """gradio's self-check gave up after one HEAD timed out at 3 s (the studio then exited at start under load): the
    patched check waits for a slow answer, asks again after a refused connection, and says no after SELF_CHECK_S."""
    import socket
    import threading
    import time
    import types
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from studio import gradio_setup

    class Slow(BaseHTTPRequestHandler):
        def do_HEAD(self):  # noqa: N802 - http.server's name
            time.sleep(4)  # longer than gradio's 3 s timeout
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    module = types.SimpleNamespace(url_ok=lambda url: False)
    gradio_setup._patient_self_check(module)
    try:
        assert module.url_ok(f"http://127.0.0.1:{server.server_port}/") is True
    finally:
        server.shutdown()
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setattr(gradio_setup, "SELF_CHECK_S", 1.0)
    assert module.url_ok(f"http://127.0.0.1:{port}/") is False
