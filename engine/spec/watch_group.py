"""The spec's groups that watch a run for its user: ``health`` (rules over the run's figures, and what each does when
it fires) and ``notify`` (a webhook and / or an email on the run's end and its alerts). Light: pydantic only.

The rules themselves are ``engine.watch.health`` (pure functions over the figures); the trainer evaluates them on every
logged step (``engine.trainer.callbacks.HealthCallback``), the run's wrapper the ones the trainer cannot see (no
progress, the GPUs). Notifications are sent by the engine (``engine.watch.notify``), never by the page. Secrets (a
webhook URL holds its token; the SMTP password) are read from environment variables this group names, never from
the spec, so they are never written to the run's folder.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from engine.core import member_secrets, page_trust
from engine.core.messages import Message
from engine.spec.groups import _meta, _Spec
from engine.spec.messages import message

Action = Literal["off", "note", "warn", "stop"]
_ACTION = (
    ": off, note (an alert on the dashboard), warn (an alert and a notification) or stop (an alert, a notification, "
    "and the run stops like Stop: a checkpoint is saved first, unless the weights are no longer finite)"
)
_ENV_NAME = r"^([A-Za-z_][A-Za-z0-9_]*)?$"


def _act(default: str, what: str, label: str) -> object:
    return Field(default, description=what + _ACTION, json_schema_extra=_meta(label))


class HealthSpec(_Spec):
    loss_nan: Action = _act("stop", "The loss is NaN or infinite", "Loss NaN / inf")
    loss_spike: Action = _act("warn", "The loss jumps above k × its recent median", "Loss spike")
    loss_spike_factor: float = Field(
        5.0,
        gt=1.0,
        le=1000.0,
        description="k of the loss-spike rule: a loss above k × the median of the recent logged losses fires it",
        json_schema_extra=_meta("Loss spike factor k", advanced=True),
    )
    window: int = Field(
        20,
        ge=3,
        le=10_000,
        description="How many recent logged steps the loss-spike and throughput rules take their median over",
        json_schema_extra=_meta("Recent window (logged steps)", advanced=True),
    )
    grad_norm: Action = _act("stop", "The gradient norm is NaN / infinite or above its limit", "Gradient norm blow-up")
    grad_norm_max: float = Field(
        1e4,
        gt=0,
        description="The gradient-norm limit (before clipping); NaN or infinite always fires the rule",
        json_schema_extra=_meta("Gradient norm limit", advanced=True),
    )
    lr_zero: Action = _act(
        "warn",
        "The learning rate is zero after the warm-up while steps remain",
        "Learning rate zero",
    )
    throughput: Action = _act(
        "note",
        "Tokens per second fall below a fraction of their recent median",
        "Throughput collapse",
    )
    throughput_fraction: float = Field(
        0.2,
        gt=0,
        lt=1.0,
        description="The throughput rule fires when tokens/s fall below this fraction of their recent median",
        json_schema_extra=_meta("Throughput fraction", advanced=True),
    )
    stall: Action = _act(
        "warn",
        "No progress: the trainer has written nothing for much longer than its usual gap (the stall detection)",
        "No progress",
    )
    gpu_idle: Action = _act("warn", "A GPU of the run stays idle while it trains", "GPU idle")
    gpu_idle_minutes: float = Field(
        5.0,
        gt=0,
        le=1440,
        description="Minutes a GPU's utilisation must stay under 5% before the idle rule fires",
        json_schema_extra=_meta("GPU idle minutes", advanced=True),
    )
    gpu_memory: Action = _act("warn", "A GPU's memory is nearly full", "GPU memory near its limit")
    gpu_memory_fraction: float = Field(
        0.97,
        gt=0.5,
        le=1.0,
        description="The GPU-memory rule fires when used memory reaches this fraction of the GPU's total",
        json_schema_extra=_meta("GPU memory fraction", advanced=True),
    )
    eval_overfit: Action = _act(
        "warn",
        "Overfitting, judged as early stopping judges it: no evaluation for n evaluations has bettered the best eval "
        "loss so far (by more than the minimum delta), while the training loss fell",
        "Eval loss not improving (overfitting)",
    )
    eval_patience: int = Field(
        3,
        ge=1,
        le=100,
        description="n of the overfitting rule (its patience): evaluations since the best eval loss without a better "
        "one",
        json_schema_extra=_meta("Eval patience n", advanced=True),
    )
    eval_min_delta: float = Field(
        0.0,
        ge=0.0,
        description="The overfitting rule's minimum improvement: an eval loss is a new best only when it is lower "
        "than the best before by more than this",
        json_schema_extra=_meta("Eval minimum improvement", advanced=True),
    )
    reward_flat: Action = _act(
        "warn",
        "GRPO without a learning signal: every group's completions scored alike (reward spread 0) for n logged steps",
        "No reward signal (GRPO)",
    )
    reward_flat_steps: int = Field(
        5,
        ge=1,
        le=10_000,
        description="n of the no-reward-signal rule: logged steps in a row with no reward spread within the groups",
        json_schema_extra=_meta("No reward signal steps n", advanced=True),
    )
    disk: Action = _act(
        "warn",
        "The run folder's disk has less room than the next checkpoint needs",
        "Disk nearly full",
    )
    disk_margin: float = Field(
        1.5,
        ge=1.0,
        le=100.0,
        description="The disk rule fires when the free space is under this many times the size of a checkpoint",
        json_schema_extra=_meta("Disk margin", advanced=True),
    )


class NotifySpec(_Spec):
    webhook_env: str = Field(
        "",
        pattern=_ENV_NAME,
        description="Name of the environment variable that holds the webhook URL (it carries its token, so it is "
        "never written to the spec); empty: no webhook",
        json_schema_extra=_meta("Webhook URL variable"),
    )
    webhook_format: Literal["json", "slack", "feishu", "dingtalk", "wecom"] = Field(
        "json",
        description="The webhook's payload: generic JSON, or the incoming-webhook message of Slack, Feishu, "
        "DingTalk or WeCom",
        json_schema_extra=_meta("Webhook format"),
    )
    email_to: list[str] = Field(
        default_factory=list,
        description="Email addresses to notify (comma-separated); empty: no email",
        json_schema_extra=_meta("Email to"),
    )
    email_from: str = Field(
        "",
        description="The sender address of the emails",
        json_schema_extra=_meta("Email from", advanced=True),
    )
    smtp_host: str = Field(
        "",
        description="The SMTP server that sends the emails",
        json_schema_extra=_meta("SMTP server", advanced=True),
    )
    smtp_port: int = Field(
        587,
        ge=1,
        le=65535,
        description="The SMTP server's port (587 STARTTLS, 465 SSL, 25 plain)",
        json_schema_extra=_meta("SMTP port", advanced=True),
    )
    smtp_security: Literal["starttls", "ssl", "none"] = Field(
        "starttls",
        description="How the connection to the SMTP server is secured",
        json_schema_extra=_meta("SMTP security", advanced=True),
    )
    smtp_user: str = Field(
        "",
        description="The SMTP login (empty: no login)",
        json_schema_extra=_meta("SMTP user", advanced=True),
    )
    smtp_password_env: str = Field(
        "",
        pattern=_ENV_NAME,
        description="Name of the environment variable that holds the SMTP password (never written to the spec)",
        json_schema_extra=_meta("SMTP password variable", advanced=True),
    )
    on: list[Literal["completed", "failed", "stopped", "alert"]] = Field(
        default_factory=lambda: ["completed", "failed", "stopped", "alert"],
        description="When to notify: the run's end (completed, failed, stopped) and alerts of rules set to warn or "
        "stop",
        json_schema_extra=_meta("Notify on"),
    )

    def env_names(self) -> list[str]:
        """The environment variables the run's wrapper needs for these notifications."""
        return [n for n in (self.webhook_env, self.smtp_password_env) if n]


def notify_page_problems(notify: NotifySpec, environ: dict[str, str] | None = None) -> list[tuple[str, Message]]:
    """What a spec from the page may not send (``engine.core.page_trust``): a webhook variable or an SMTP password
    variable the operator did not bind for the page, or bound to other hosts (a webhook's host is its URL's, read from
    the variable); an SMTP server at a private address not allowed. The shell is not bound by these."""
    environ = member_secrets.environ() if environ is None else environ  # an account's own secrets over the studio's
    out: list[tuple[str, Message]] = []
    if notify.webhook_env:
        dest = page_trust.url_destination(environ.get(notify.webhook_env, ""))  # None: unset (a warning says so)
        problem = page_trust.destination_problem(dest, notify.webhook_env)
        if problem is not None:
            out.append(("notify.webhook_env", problem))
    if notify.email_to and notify.smtp_host:
        dest = (notify.smtp_host.strip().strip("[]").lower(), notify.smtp_port)
        problem = page_trust.destination_problem(dest, notify.smtp_password_env)
        if problem is not None:
            field = "notify.smtp_password_env" if notify.smtp_password_env else "notify.smtp_host"
            out.append((field, problem))
    return out


def watch_errors(health: HealthSpec, notify: NotifySpec) -> list[tuple[str, Message]]:  # noqa: ARG001
    """The cross-field rules of these groups (run by ``engine.spec.rules.cross_field_errors``)."""
    errors: list[tuple[str, Message]] = []
    for i, address in enumerate(notify.email_to):
        if address.count("@") != 1 or any(c.isspace() for c in address) or address.startswith("@"):
            errors.append((f"notify.email_to.{i}", message("notify_bad_address", address=address)))
    if notify.email_to and not notify.smtp_host:
        errors.append(("notify.smtp_host", message("notify_email_needs_smtp")))
    if notify.email_from and notify.email_from.count("@") != 1:
        errors.append(("notify.email_from", message("notify_bad_address", address=notify.email_from)))
    return errors


def watch_warnings(notify: NotifySpec, environ: dict[str, str]) -> list[tuple[str, Message]]:
    """Legal but unwise: a notification whose secret is not in this environment is never sent."""
    out: list[tuple[str, Message]] = []
    named = (("notify.webhook_env", notify.webhook_env), ("notify.smtp_password_env", notify.smtp_password_env))
    for path, name in named:
        if name and not environ.get(name):
            out.append((path, message("notify_env_missing", name=name)))
    return out
