"""Notifications of a run's end and its alerts: a webhook (generic JSON, or the incoming-webhook message of Slack,
Feishu, DingTalk or WeCom) and / or an email through an SMTP server, as ``notify:`` in the spec says.

Light: stdlib only (urllib, smtplib, email). Sent by the engine (the run's wrapper, ``engine.watch.sentinel``), never
by the page, so they go out with no browser open. Secrets come from the environment variables the spec names
(``notify.webhook_env``: the URL, which carries its token; ``notify.smtp_password_env``) and are never written
anywhere: not to the spec, the events or the log (a failure names the host, never the URL's path or query). A
notification that cannot be delivered is returned as a problem for the log; it never fails the run.

Payloads: ``json`` is ``{"event", "run_id", "run_name", "status", "step", "rule", "action", "reason", "figures",
"text"}``; Slack ``{"text"}``; Feishu ``{"msg_type": "text", "content": {"text"}}``; DingTalk and WeCom
``{"msgtype": "text", "text": {"content"}}``.
"""

from __future__ import annotations

import json
import smtplib
import socket
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import Any

from engine.spec.watch_group import NotifySpec

TIMEOUT_S = 10.0


@dataclass
class Notice:
    """One thing to tell: an alert (``event`` "alert") or the run's end ("completed", "failed", "stopped")."""

    event: str
    run_id: str
    run_name: str = ""
    status: str = ""
    step: int | None = None
    rule: str = ""
    action: str = ""
    reason: str = ""
    figures: dict = field(default_factory=dict)

    @property
    def subject(self) -> str:
        name = f"{self.run_name} ({self.run_id})" if self.run_name else self.run_id
        if self.event == "alert":
            return f"[Studio] run {name}: health alert {self.rule} ({self.action}) at step {self.step}"
        return f"[Studio] run {name} {self.event}"

    @property
    def text(self) -> str:
        lines = [self.subject]
        if self.reason:
            lines.append(self.reason)
        return "\n".join(lines)

    def data(self) -> dict[str, Any]:
        return {
            "event": self.event,
            "run_id": self.run_id,
            "run_name": self.run_name,
            "status": self.status,
            "step": self.step,
            "rule": self.rule or None,
            "action": self.action or None,
            "reason": self.reason,
            "figures": self.figures,
            "text": self.text,
        }


def payload(fmt: str, notice: Notice) -> dict[str, Any]:
    """The JSON body for a webhook of format ``fmt``."""
    if fmt == "slack":
        return {"text": notice.text}
    if fmt == "feishu":
        return {"msg_type": "text", "content": {"text": notice.text}}
    if fmt in ("dingtalk", "wecom"):
        return {"msgtype": "text", "text": {"content": notice.text}}
    return notice.data()


def _where(url: str) -> str:
    """The part of a webhook URL a log may say: scheme, host and port (its path and query hold the token)."""
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or '?'}{':' + str(parts.port) if parts.port else ''}"


def send_webhook(url: str, fmt: str, notice: Notice, timeout: float = TIMEOUT_S) -> None:
    """POST the notice; raises ``OSError`` / ``ValueError`` when it was not accepted (HTTP status >= 300)."""
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        raise ValueError("the webhook URL must start with http:// or https://")
    body = json.dumps(payload(fmt, notice), ensure_ascii=False).encode("utf-8")
    req = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": "application/json; charset=utf-8"}
    )
    with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - http(s) only, checked above
        if resp.status >= 300:
            raise ValueError(f"HTTP {resp.status}")


def send_email(spec: NotifySpec, password: str | None, notice: Notice, timeout: float = TIMEOUT_S) -> None:
    msg = EmailMessage()
    msg["Subject"] = notice.subject
    msg["From"] = spec.email_from or spec.smtp_user or f"studio@{socket.getfqdn()}"
    msg["To"] = ", ".join(spec.email_to)
    msg.set_content(notice.text + "\n\n" + json.dumps(notice.data(), indent=2, ensure_ascii=False))
    if spec.smtp_security == "ssl":
        server: smtplib.SMTP = smtplib.SMTP_SSL(
            spec.smtp_host, spec.smtp_port, timeout=timeout, context=ssl.create_default_context()
        )
    else:
        server = smtplib.SMTP(spec.smtp_host, spec.smtp_port, timeout=timeout)
    with server:
        if spec.smtp_security == "starttls":
            server.starttls(context=ssl.create_default_context())
        if spec.smtp_user:
            server.login(spec.smtp_user, password or "")
        server.send_message(msg)


def wanted(spec: NotifySpec, notice: Notice) -> bool:
    """Whether ``notify.on`` asks for this notice (alerts: only those of rules set to warn or stop)."""
    if notice.event == "alert" and notice.action not in ("warn", "stop"):
        return False
    return notice.event in spec.on


def deliver(spec: NotifySpec, notice: Notice, environ: dict[str, str]) -> list[str]:
    """Send ``notice`` by every channel the spec sets; returns what could not be delivered (for the log). Never
    raises."""
    problems: list[str] = []
    if not wanted(spec, notice):
        return problems
    if spec.webhook_env:
        url = environ.get(spec.webhook_env, "")
        if not url:
            problems.append(f"webhook not sent: the environment variable {spec.webhook_env} is not set")
        else:
            try:
                send_webhook(url, spec.webhook_format, notice)
            except (OSError, ValueError, urllib.error.URLError) as exc:
                problems.append(f"webhook to {_where(url)} not delivered: {_safe(exc, url)}")
    if spec.email_to:
        password = environ.get(spec.smtp_password_env) if spec.smtp_password_env else None
        try:
            send_email(spec, password, notice)
        except (OSError, smtplib.SMTPException, ValueError) as exc:
            where = f"{spec.smtp_host}:{spec.smtp_port}"
            problems.append(f"email through {where} not delivered: {type(exc).__name__}: {_safe(exc, password)}")
    return problems


def _safe(exc: BaseException, secret: str | None) -> str:
    """An exception's text without the secret in it (urllib may quote the URL)."""
    if isinstance(exc, urllib.error.HTTPError):
        text = f"HTTP {exc.code} {exc.reason}"
    else:
        text = str(getattr(exc, "reason", None) or exc)
    return text.replace(secret, "***") if secret else text
