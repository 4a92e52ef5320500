"""Browser tests: a real studio server in its own process group and Debian's Chromium driven by Playwright.

The server gets a free port on 127.0.0.1 and a private STUDIO_HOME (the demo is built by the studio itself on
start, in its subprocess). Only the process group we started is killed at the end.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, home: Path, extra_args: list[str] | None = None, env: dict | None = None):
        self.home, self.port = home, free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.log = home / "studio-server.log"
        base = {k: v for k, v in os.environ.items() if k not in ("STUDIO_AUTH", "STUDIO_HOST", "STUDIO_PORT")}
        env = {**base, "STUDIO_HOME": str(home), "GRADIO_ANALYTICS_ENABLED": "False", **(env or {})}
        env.setdefault("STUDIO_PAGE_HOSTS", "127.0.0.1")  # the page may reach the tests' stand-ins (a judge)
        with open(self.log, "wb") as log:  # the child keeps its own copy of the descriptor
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "engine.cli", "webui", "--port", str(self.port), *(extra_args or [])],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait_up(self, timeout: float = 180) -> float:
        t0 = time.time()
        while time.time() - t0 < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"studio exited {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            try:
                urllib.request.urlopen(self.url, timeout=2)
                return time.time() - t0
            except urllib.error.HTTPError:
                return time.time() - t0  # the server answers (e.g. 401 behind auth)
            except OSError:
                time.sleep(0.3)
        raise RuntimeError(f"studio did not answer in {timeout} s: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


@pytest.fixture
def make_server():
    """The Server class, for tests that need their own studio (another port, login, ...)."""
    return Server


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    srv = Server(tmp_path_factory.mktemp("e2e-home"))
    try:
        srv.wait_up()
        yield srv
    finally:
        srv.stop()
        # Runs were started by this server (detached wrappers): stop what is still alive, by its own record.
        stop_runs(srv.home)


def stop_runs(home: Path) -> None:
    env = {**os.environ, "STUDIO_HOME": str(home)}
    code = (
        "from engine.runs import registry as runs\nfor r in runs.list_runs():\n    if r.status in runs.ACTIVE:\n"
        "        runs.stop(r.id, grace_s=5)\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, timeout=60, check=False)


def finished_run(home: Path, name: str, *, marker: str = "", report_to: tuple[str, ...] = ("none",)) -> str:
    """A training run of the server's workspace ``home`` (one step of the demo, queued as the CLI queues one) that
    completed, with ``marker`` in its log when given; its id. A training run: the dashboard's picker lists training
    runs only, not commands. Started here rather than from the form where the form is not what a test checks (the
    form's Start is checked by tests that start runs from it)."""
    code = (
        "import yaml\nfrom pathlib import Path\nfrom engine.core import workspace\nfrom engine.runs import registry\n"
        "from tests.helpers import wait_for\n"
        "data = yaml.safe_load((workspace.home() / workspace.DEMO_SPEC_NAME).read_text())\n"
        f"data['train'].update(max_steps=1, save_steps=1000)\ndata['output']['report_to'] = {list(report_to)!r}\n"
        f"rid = registry.submit(data, name={name!r})\n"
        "wait_for(lambda: registry.get(rid).status == 'completed', timeout=240)\n"
        "print(rid)\n"
    )
    if marker:
        code += f"with open(registry.get(rid).log_path, 'a') as log: log.write({marker!r} + '\\n')\n"
    env = {**os.environ, "STUDIO_HOME": str(home)}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()[-1]


def pick_run(page, run_id: str) -> None:
    """Choose a run in the Train tab's run picker (its dashboard then shows it), as a person does."""
    page.wait_for_selector("#start-btn:not([disabled])", timeout=240_000)
    page.click("#run-picker input")
    page.get_by_role("option", name=re.compile(re.escape(run_id))).click()


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser, server):
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    pg = ctx.new_page()
    # Playwright's 30 s per action is short on a busy 2-core machine (a click waits for the page's scripts to take it):
    # a bound that allows for load, while explicit waits keep their own.
    pg.set_default_timeout(90_000)
    pg.goto(server.url)
    pg.wait_for_selector("#start-btn", timeout=60_000)
    yield pg
    ctx.close()


@pytest.fixture
def shots():
    out = ROOT / "test-artifacts"
    out.mkdir(exist_ok=True)
    return out


@pytest.fixture
def fits_width():
    """A check that the page has no horizontal scroll bar at its current viewport."""
    return lambda page: page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")


def wait_text(page, selector: str, text: str, timeout: int = 60_000) -> str:
    """Until the element holds ``text`` (an element not drawn yet, as a tab's content before the tab opens, is
    waited for too); its text."""
    found = f"(document.querySelector({json.dumps(selector)}) || {{innerText: ''}})"
    page.wait_for_function(f"{found}.innerText.includes({json.dumps(text)})", timeout=timeout)
    return page.inner_text(selector)


LF_DONE_JS = (
    "() => { const s = (document.querySelector('#lf-msg') || {innerText: ''}).innerText.trim();"
    " return s.startsWith('✅') || s.startsWith('❌') || s.includes('LLaMA-Factory training YAML first'); }"
)


def import_lf_yaml(page, text: str, timeout: int = 180_000) -> str:
    """Paste ``text`` into the Train tab's LLaMA-Factory section and press Import, as a person does; the import's
    message, which must say the form was filled.

    Gradio mounts a closed accordion's children when it first opens (gradio PR 12906), so the box is filled only once
    it shows, and read back before Import. If the server still got an empty box (the message asks for a YAML), the
    text is typed once more: that is the mount, not the import. A wait that runs out says what the message showed
    (gradio's timer there means the event was still queued or running)."""
    from playwright.sync_api import expect

    box = page.locator("#lf-text textarea")
    if not box.is_visible():
        page.get_by_text("LLaMA-Factory YAML", exact=True).first.click()
    for attempt in range(2):
        box.fill(text)
        expect(box).to_have_value(text, timeout=90_000)
        page.click("#lf-import")
        try:
            page.wait_for_function(LF_DONE_JS, timeout=timeout)
        except Exception as exc:  # noqa: BLE001 - said with what the page showed
            shown = page.evaluate("(document.querySelector('#lf-msg') || {innerText: ''}).innerText")
            raise AssertionError(
                f"the import gave no result in {timeout / 1000:.0f} s; #lf-msg shows {shown!r}"
            ) from exc
        msg = page.inner_text("#lf-msg")
        if "LLaMA-Factory training YAML first" not in msg or attempt:
            break
    assert "filled from the LLaMA-Factory YAML" in msg, msg
    return msg


def open_tab(page, name: str) -> None:
    """Click a top-level tab and wait until the page shows it selected (not a fixed pause)."""
    page.get_by_role("tab", name=name).click()
    page.get_by_role("tab", name=name, selected=True).wait_for(state="visible")


def pick(page, dropdown: str, text: str) -> None:
    """Choose an option in a dropdown as a person does: open it, type part of its name, click the option (pressing
    Enter instead picks whatever option the list holds first, which on a busy page may not be filtered yet)."""
    from playwright.sync_api import expect

    box = page.locator(f"{dropdown} input")
    box.click()
    box.fill(text)
    option = page.locator("[role=option]", has_text=text)
    expect(option.first).to_be_visible(timeout=90_000)
    option.first.click()


def type_field(page, selector: str, value: str) -> None:
    """Type a value into a form field as a person does: once the field is drawn on screen, then Tab; and say loudly if
    the page replaces it. Issue 27 item 14b: a field in a section just opened (Output, Advanced) is mounted by gradio
    and, a frame later, given its stored value again; Playwright's fill, waiting for the field to appear, could type
    into it within that frame (1 in ~130 tries, on a busy machine), and the run started with the default (eval_steps
    500 for the 5 typed). A person cannot type before the field is painted: two animation frames after it shows."""
    from playwright.sync_api import expect

    box = page.locator(selector).first
    box.wait_for(state="visible", timeout=90_000)
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    box.fill(value)
    box.press("Tab")
    expect(box).to_have_value(value, timeout=30_000)
