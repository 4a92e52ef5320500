"""Team mode's logins over HTTP, through gradio's own app and studio.guard: a session ends when it expires, when its
account's password changes or the account is removed; wrong logins are throttled per account as well as per address.
The clock is the guard's own (injected), so the test waits for nothing."""

from __future__ import annotations

import gradio as gr
import pytest
from gradio.routes import App
from starlette.middleware import Middleware
from starlette.testclient import TestClient

from engine.core import accounts
from studio import settings, team
from studio.guard import LoginGuard, LoginThrottle

HOUR = 3600.0


@pytest.fixture()
def served(tmp_path, monkeypatch):
    """(make a client from an address, the clock, gradio's app) for a one-button page behind the guard, in team mode
    with ann and bob."""
    monkeypatch.setenv("STUDIO_HOME", str(tmp_path))
    accounts.add("ann", "ann's password")
    accounts.add("bob", "bob's password")
    now = [1000.0]
    clock = lambda: now[0]  # noqa: E731
    with gr.Blocks() as blocks:
        gr.Button("hello")
    blocks.auth, blocks.auth_message = team.login, None  # what launch() sets
    guard = Middleware(LoginGuard, throttle=LoginThrottle(clock=clock), session_s=12 * HOUR, clock=clock)
    app = App.create_app(blocks, app_kwargs={"middleware": [guard]})

    def client(addr: str = "10.0.0.1") -> TestClient:
        return TestClient(app, client=(addr, 50000), base_url="https://testserver")

    yield client, now, app


def login(c: TestClient, name: str, password: str) -> int:
    return c.post("/login", data={"username": name, "password": password}).status_code


def test_a_session_ends_after_its_hours(served):
    client, now, app = served
    c = client()
    assert c.get("/config").status_code == 401
    assert login(c, "bob", "bob's password") == 200
    assert c.get("/config").status_code == 200
    now[0] += 11 * HOUR
    assert c.get("/config").status_code == 200
    now[0] += 2 * HOUR  # 13 h after the login: gone, here and in gradio's own table
    assert c.get("/config").status_code == 401
    assert "bob" not in app.tokens.values()
    page = c.get("/")
    assert page.status_code == 200 and "named_endpoints" not in page.text  # the login page again
    assert login(c, "bob", "bob's password") == 200 and c.get("/config").status_code == 200


def test_password_change_and_removal_end_open_sessions(served):
    client, _, _ = served
    ann, bob = client("10.0.0.1"), client("10.0.0.2")
    assert login(ann, "ann", "ann's password") == 200 and login(bob, "bob", "bob's password") == 200
    accounts.set_password("bob", "a new password")
    assert bob.get("/config").status_code == 401
    assert ann.get("/config").status_code == 200  # another account's change ends nothing of ann's
    assert login(bob, "bob", "a new password") == 200 and bob.get("/config").status_code == 200
    accounts.remove("bob")
    assert bob.get("/config").status_code == 401 and ann.get("/config").status_code == 200


def test_wrong_logins_are_throttled_per_account_across_addresses(served):
    client, now, _ = served
    for i in range(4):  # one wrong try from each of four addresses: no address reaches its own limit
        assert login(client(f"10.1.0.{i}"), "ann", "wrong password") == 400
    refused = client("10.1.0.9").post("/login", data={"username": "ann", "password": "ann's password"})
    assert refused.status_code == 429 and "for this account" in refused.json()["detail"]
    assert int(refused.headers["retry-after"]) >= 1
    assert login(client("10.1.0.9"), "bob", "bob's password") == 200  # the address itself is free
    now[0] += 2  # the account's first back-off (1 s) is over
    assert login(client("10.1.0.9"), "ann", "ann's password") == 200


def test_session_hours_setting():
    assert settings.load([], env={}).session_s == 12 * HOUR
    assert settings.load([], env={"STUDIO_SESSION_HOURS": "0.5"}).session_s == 1800
    for bad in ("0", "-1", "never", "inf"):
        with pytest.raises(settings.SettingsError, match="STUDIO_SESSION_HOURS"):
            settings.load([], env={"STUDIO_SESSION_HOURS": bad})
