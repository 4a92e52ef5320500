"""Notifications (engine.watch.notify, engine.watch.sentinel): each webhook's payload, delivery to a real HTTP receiver
and Python's own SMTP server on 127.0.0.1, a notification that cannot be delivered, and a real run under the registry
whose alert and end reach the receiver with the webhook's token never written to disk."""

from __future__ import annotations

import json
import threading
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from engine.core import events
from engine.spec.watch_group import NotifySpec
from engine.watch import notify
from tests import helpers


class Receiver:
    """An HTTP server on 127.0.0.1 that keeps every POSTed JSON body (``status``: the answer it gives)."""

    def __init__(self, status: int = 200) -> None:
        self.bodies: list[dict] = []
        self.paths: list[str] = []
        received = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length", 0))
                received.paths.append(self.path)
                received.bodies.append(json.loads(self.rfile.read(length).decode("utf-8")))
                self.send_response(status)
                self.end_headers()
                self.wfile.write(b'{"ok": true}')

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


ALERT = notify.Notice(
    "alert", "r1", "demo", "running", 16, "grad_norm", "stop", "gradient norm inf", {"grad_norm": "inf"}
)


class TestPayloads:
    def test_each_format(self):
        text = ALERT.text
        assert text.startswith("[Studio] run demo (r1): health alert grad_norm (stop) at step 16")
        assert text.endswith("\ngradient norm inf")
        assert notify.payload("slack", ALERT) == {"text": text}
        assert notify.payload("feishu", ALERT) == {"msg_type": "text", "content": {"text": text}}
        assert notify.payload("dingtalk", ALERT) == {"msgtype": "text", "text": {"content": text}}
        assert notify.payload("wecom", ALERT) == {"msgtype": "text", "text": {"content": text}}
        generic = notify.payload("json", ALERT)
        assert generic["event"] == "alert" and generic["rule"] == "grad_norm" and generic["step"] == 16
        assert generic["figures"] == {"grad_norm": "inf"} and generic["reason"] == "gradient norm inf"

    def test_what_is_wanted(self):
        spec = NotifySpec(on=["failed", "alert"])
        assert notify.wanted(spec, ALERT)
        assert not notify.wanted(spec, notify.Notice("alert", "r1", action="note"))  # notes are not sent
        assert not notify.wanted(spec, notify.Notice("completed", "r1"))
        assert notify.wanted(spec, notify.Notice("failed", "r1"))


class TestWebhook:
    @pytest.mark.parametrize("fmt", ["json", "slack", "feishu", "dingtalk", "wecom"])
    def test_delivered(self, receiver, fmt):
        spec = NotifySpec(webhook_env="HOOK", webhook_format=fmt)
        assert notify.deliver(spec, ALERT, {"HOOK": receiver.url + "/hook?token=s3cret"}) == []
        assert receiver.bodies == [notify.payload(fmt, ALERT)]
        assert receiver.paths == ["/hook?token=s3cret"]

    def test_refused_or_unreachable_is_said_without_the_token(self, receiver):
        refusing = Receiver(status=500)
        try:
            spec = NotifySpec(webhook_env="HOOK")
            (problem,) = notify.deliver(spec, ALERT, {"HOOK": refusing.url + "/hook?token=s3cret"})
            assert "not delivered" in problem and "500" in problem and "s3cret" not in problem
        finally:
            refusing.close()
        port = receiver.server.server_address[1]
        receiver.close()  # nothing listens there any more
        (problem,) = notify.deliver(spec, ALERT, {"HOOK": f"http://127.0.0.1:{port}/hook?token=s3cret"})
        assert problem.startswith(f"webhook to http://127.0.0.1:{port} not delivered") and "s3cret" not in problem

    def test_missing_variable(self):
        (problem,) = notify.deliver(NotifySpec(webhook_env="HOOK"), ALERT, {})
        assert "HOOK is not set" in problem


class SmtpServer:
    """Python's own SMTP server (stdlib ``smtpd``, deprecated but present in 3.11) on 127.0.0.1."""

    def __init__(self) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            asyncore = pytest.importorskip("asyncore", reason="Python 3.12 removed asyncore and smtpd")
            smtpd = pytest.importorskip("smtpd", reason="Python 3.12 removed asyncore and smtpd")
        self.messages: list[tuple[str, list[str], str]] = []
        received = self

        class Server(smtpd.SMTPServer):
            def process_message(self, peer, mailfrom, rcpttos, data, **kwargs):
                text = data.decode("utf-8") if isinstance(data, bytes) else data
                received.messages.append((mailfrom, rcpttos, text))

        self.server = Server(("127.0.0.1", 0), None, decode_data=False)
        self.port = self.server.socket.getsockname()[1]
        self.thread = threading.Thread(target=asyncore.loop, kwargs={"timeout": 0.1}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.close()
        self.thread.join(5)


def test_email_through_a_local_smtp_server():
    smtp = SmtpServer()
    try:
        spec = NotifySpec(
            email_to=["ops@example.org"], email_from="studio@example.org", smtp_host="127.0.0.1", smtp_port=smtp.port
        )
        spec = spec.model_copy(update={"smtp_security": "none"})
        assert notify.deliver(spec, ALERT, {}) == []
        helpers.wait_for(lambda: smtp.messages, timeout=10)
        (mailfrom, to, data), *_ = smtp.messages
        assert mailfrom == "studio@example.org" and to == ["ops@example.org"]
        assert f"Subject: {ALERT.subject}" in data and "gradient norm inf" in data
    finally:
        smtp.close()
    # the server is gone: said, not raised
    (problem,) = notify.deliver(spec, ALERT, {})
    assert problem.startswith(f"email through 127.0.0.1:{smtp.port} not delivered")


@pytest.fixture
def home(demo_paths, run_registry) -> Path:
    return run_registry


def test_a_diverging_run_notifies_its_alert_and_its_end(home, demo_paths, receiver, monkeypatch):
    from engine.runs import registry as runs

    token = "tok-9f8e7d"
    # a variable the scheduler passes to the run's wrapper only because the spec names it
    monkeypatch.setenv("HOOK_URL_UNDER_TEST", f"{receiver.url}/hook/{token}")
    # submitted as the page submits: the operator binds the variable to the receiver (engine.core.page_trust)
    monkeypatch.setenv("STUDIO_PAGE_SECRETS", f"HOOK_URL_UNDER_TEST={receiver.url.split('//')[1]}")
    data = yaml.safe_load(Path(demo_paths["example_spec"]).read_text())
    data["train"].update(learning_rate=1.0, max_steps=60, save_steps=10, logging_steps=1)
    data["output"]["report_to"] = ["none"]
    data["notify"] = {"webhook_env": "HOOK_URL_UNDER_TEST", "webhook_format": "json"}
    rid = runs.submit(data, name="diverges")
    rec = helpers.wait_for(lambda: runs.get(rid).status != "running" and runs.get(rid), timeout=600, every=0.5)
    assert rec.status == "stopped", (rec.status, rec.reason, helpers.log_tail(Path(rec.run_dir)))
    assert rec.reason.startswith("stopped by health rule: ")
    # the end notice comes after the wrapper recorded the end: wait for it
    helpers.wait_for(lambda: any(b["event"] == "stopped" for b in receiver.bodies), timeout=30)
    # the alert that stopped it (a busy machine may add a throughput note, which notifies nobody)
    (alert_ev,) = [
        e for e in events.read_all(rec.events_path) if e["type"] == "alert" and e["payload"]["action"] == "stop"
    ]
    alerts = [b for b in receiver.bodies if b["event"] == "alert" and b["action"] == "stop"]
    assert alerts == [
        {
            **alerts[0],
            "run_id": rid,
            "step": alert_ev["step"],
            "rule": alert_ev["payload"]["rule"],
            "action": "stop",
            "reason": alert_ev["payload"]["reason"],
            "figures": alert_ev["payload"]["figures"],
        }
    ]
    (end,) = [b for b in receiver.bodies if b["event"] == "stopped"]
    assert end["reason"] == rec.reason and end["run_id"] == rid
    # the token lives in the environment only: not in the spec, launch.json, the events or the log
    for path in Path(rec.run_dir).rglob("*"):
        if path.is_file() and path.stat().st_size < 50 * 2**20:
            assert token.encode() not in path.read_bytes(), path
