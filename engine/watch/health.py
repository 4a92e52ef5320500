"""Health rules: a run's figures judged for its user, so a run going wrong is said (and stopped) with no page open.

Light: stdlib, engine.core, engine.watch.messages, engine.spec.watch_group; never torch. Each rule is a pure function
over figures that returns the reason it fires (a catalog ``Message`` whose parameters are the figures) or None; the
tests feed them hand-made figures. ``HealthWatch`` keeps what the rules need between steps (recent losses and tokens/s,
evaluations) and fires each rule once per episode: it fires again only after its condition has cleared.

Who evaluates what: the trainer, on every logged step and evaluation (``engine.trainer.callbacks.HealthCallback``):
loss NaN / inf, loss spike, gradient-norm blow-up, learning rate zero, throughput collapse, overfitting, disk; the
run's wrapper (``engine.runs.runner``), which the trainer cannot do for itself: no progress (the watchdog's stall
detection, ``engine.runs.watchdog.stalled_for``) and the GPUs (``metrics.jsonl`` samples). A rule that fires writes an
``alert`` event: rule, action, reason, figures, step. Actions: ``note`` (the alert only), ``warn`` (the alert and a
notification, ``engine.watch.notify``), ``stop`` (also stops the run; ``stop_reason`` is its end state).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.core import events
from engine.core.messages import Message, to_json
from engine.spec.watch_group import HealthSpec
from engine.watch.messages import message

RULES = (
    "loss_nan",
    "loss_spike",
    "grad_norm",
    "lr_zero",
    "throughput",
    "stall",
    "gpu_idle",
    "gpu_memory",
    "eval_overfit",
    "reward_flat",
    "disk",
)
# A stopped run's weights are not saved over a good checkpoint when these rules stopped it with non-finite figures.
MIN_HISTORY = 3  # the fewest earlier figures a median-based rule compares with
GPU_IDLE_PCT = 5.0
# Written by the wrapper before it stops a run for a rule the trainer cannot see, so the trainer's stopped event says
# why (engine.trainer.train reads it).
STOP_FILE = "health-stop.json"


def number(value: Any) -> float | None:
    """A figure as a float (events write NaN / inf as text), None when absent or not a number."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if not math.isfinite(value):
        return str(value)
    return f"{value:.4g}"


# ----------------------------------------------------------------------------------------------- the rules
def loss_not_finite(loss: float | None) -> Message | None:
    if loss is None or math.isfinite(loss):
        return None
    return message("watch.health_loss_nan", loss=_fmt(loss))


def loss_spike(loss: float | None, recent: list[float], factor: float) -> Message | None:
    """The loss above ``factor`` × the median of the recent finite losses (at least ``MIN_HISTORY`` of them)."""
    past = [v for v in recent if _finite(v)]
    if not _finite(loss) or len(past) < MIN_HISTORY:
        return None
    median = statistics.median(past)
    if median <= 0 or loss <= factor * median:
        return None
    return message("watch.health_loss_spike", loss=_fmt(loss), factor=_fmt(factor), median=_fmt(median))


def grad_norm_blowup(grad_norm: float | None, limit: float) -> Message | None:
    if grad_norm is None:
        return None
    if not math.isfinite(grad_norm):
        return message("watch.health_grad_not_finite", grad_norm=_fmt(grad_norm))
    if grad_norm > limit:
        return message("watch.health_grad_norm", grad_norm=_fmt(grad_norm), limit=_fmt(limit))
    return None


def lr_zero(lr: float | None, step: int, warmup_steps: int, max_steps: int) -> Message | None:
    """The learning rate at zero after the warm-up, with steps left to train (a schedule that ended too early)."""
    if lr is None or lr > 0 or step <= warmup_steps or not max_steps or step >= max_steps:
        return None
    return message("watch.health_lr_zero", step=step, remaining=max_steps - step)


def throughput_collapse(tokens_per_second: float | None, recent: list[float], fraction: float) -> Message | None:
    past = [v for v in recent if _finite(v) and v > 0]
    if not _finite(tokens_per_second) or len(past) < MIN_HISTORY:
        return None
    median = statistics.median(past)
    if tokens_per_second >= fraction * median:
        return None
    return message(
        "watch.health_throughput", tps=_fmt(tokens_per_second), median=_fmt(median), fraction=_fmt(fraction)
    )


def eval_overfit(evals: list[tuple[float, float | None]], patience: int, min_delta: float = 0.0) -> Message | None:
    """``evals``: (eval loss, mean training loss since the evaluation before) per evaluation, oldest first.

    Judged as early stopping judges it: the best eval loss so far (an evaluation is a new best only when it is lower
    than the best before by more than ``min_delta``) was reached ``patience`` or more evaluations ago, and the
    training loss fell over the same span (a run whose training loss does not fall either is not overfitting). A
    curve that wobbles (rises broken by small dips that never reach the best) fires as soon as it has not improved
    for ``patience`` evaluations; counting rises in a row would never fire on it."""
    best_i: int | None = None
    for i, (value, _train) in enumerate(evals):
        if _finite(value) and (best_i is None or value < evals[best_i][0] - min_delta):
            best_i = i
    if best_i is None:
        return None
    since = len(evals) - 1 - best_i
    now = evals[-1][0]
    if since < patience or not _finite(now):
        return None
    train_at_best, train_now = evals[best_i][1], evals[-1][1]
    if not (_finite(train_at_best) and _finite(train_now)) or train_now >= train_at_best:
        return None
    return message(
        "watch.health_overfit",
        n=since,
        best=_fmt(evals[best_i][0]),
        now=_fmt(now),
        train_from=_fmt(train_at_best),
        train_to=_fmt(train_now),
    )


def reward_flat(stds: list[float], steps: int, mean_reward: float | None) -> Message | None:
    """GRPO with no learning signal: the reward's spread within the groups (TRL's ``reward_std``) was 0 on each of the
    last ``steps`` logged steps, so every completion of a group scored alike and every advantage was 0."""
    recent = stds[-steps:]
    if len(recent) < steps or any(not _finite(v) or v > 1e-9 for v in recent):
        return None
    return message("watch.health_reward_flat", n=steps, reward=_fmt(mean_reward))


def disk_low(free_bytes: int | None, checkpoint_bytes: int | None, margin: float) -> Message | None:
    if free_bytes is None or not checkpoint_bytes or free_bytes >= margin * checkpoint_bytes:
        return None
    return message(
        "watch.health_disk",
        free_mib=round(free_bytes / 2**20, 1),
        need_mib=round(margin * checkpoint_bytes / 2**20, 1),
        checkpoint_mib=round(checkpoint_bytes / 2**20, 1),
    )


def stalled(idle_s: float | None, limit_s: float) -> Message | None:
    if idle_s is None or idle_s <= limit_s:
        return None
    return message("watch.health_stall", idle_s=round(idle_s), limit_s=round(limit_s))


def gpu_memory_full(gpus: list[dict], fraction: float) -> Message | None:
    """The first GPU of a sample whose used memory reaches ``fraction`` of its total."""
    for gpu in gpus:
        used, total = number(gpu.get("memory_used_mib")), number(gpu.get("memory_total_mib"))
        if used is not None and total and used >= fraction * total:
            return message(
                "watch.health_gpu_memory",
                gpu=gpu.get("index", "?"),
                used_mib=round(used),
                total_mib=round(total),
                pct=round(100 * used / total, 1),
            )
    return None


def gpu_idle(samples: list[dict], minutes: float, now: float) -> Message | None:
    """A GPU whose utilisation stayed under ``GPU_IDLE_PCT`` in every sample of the last ``minutes``; the samples
    (``metrics.jsonl`` lines) must cover that span."""
    start = now - minutes * 60
    first = number(samples[0].get("ts")) if samples else None
    if first is None or first > start:
        return None  # not watched for that long yet
    span = [s for s in samples if (number(s.get("ts")) or 0.0) >= start]
    indexes = {g.get("index") for s in span for g in s.get("gpus") or []}
    for index in sorted(i for i in indexes if i is not None):
        utils = [number(g.get("utilization_pct")) for s in span for g in s.get("gpus") or [] if g["index"] == index]
        utils = [u for u in utils if u is not None]
        if utils and max(utils) < GPU_IDLE_PCT:
            return message("watch.health_gpu_idle", gpu=index, minutes=_fmt(minutes), max_pct=_fmt(max(utils)))
    return None


# ----------------------------------------------------------------------------------------------- alerts
@dataclass
class Alert:
    rule: str
    action: str
    step: int | None
    reason: Message
    figures: dict = field(default_factory=dict)

    def payload(self) -> dict:
        return {
            "rule": self.rule,
            "action": self.action,
            "reason": str(self.reason),
            "reason_msg": to_json(self.reason),
            "figures": self.figures,
        }

    def write(self, events_path: str | Path) -> dict:
        return events.append_event(events_path, "alert", self.step, **self.payload())


def stop_reason(rule_reason: Any, step: int | None, kept: str | None, saved: bool) -> Message:
    """The end state of a run a rule stopped: "stopped by health rule: loss NaN at step 812; checkpoint-800 kept"."""
    if kept and saved:
        return message("watch.health_stop_saved", what=rule_reason, step=step, checkpoint=kept)
    if kept:
        return message("watch.health_stop_kept", what=rule_reason, step=step, checkpoint=kept)
    return message("watch.health_stop_none", what=rule_reason, step=step)


def alerts_of(evs: list[dict]) -> list[dict]:
    """The alert events of a run, oldest first."""
    return [e for e in evs if e.get("type") == "alert"]


class HealthWatch:
    """The trainer's rules over one run's logged figures, with what they need to remember."""

    def __init__(
        self, spec: HealthSpec, *, warmup_steps: int = 0, max_steps: int = 0, surrogate_loss: bool = False
    ) -> None:
        self.spec = spec
        # GRPO's loss is a policy-gradient surrogate near zero, of either sign, whose size says nothing of how the
        # run goes (its rewards do): the loss spike rule does not judge it (NaN still does)
        self.surrogate_loss = surrogate_loss
        self.warmup_steps = warmup_steps
        self.max_steps = max_steps
        self.losses: list[float] = []
        self.tps: list[float] = []
        self.evals: list[tuple[float, float | None]] = []
        self.reward_stds: list[float] = []
        self._train_since_eval: list[float] = []
        self._skip_tps = True  # the first interval holds the start-up (compilation, the first batches)
        self.active: set[str] = set()

    def _fire(self, rule: str, step: int | None, reason: Message | None) -> Alert | None:
        action = getattr(self.spec, rule)
        if reason is None:
            self.active.discard(rule)
            return None
        if rule in self.active:
            return None
        self.active.add(rule)
        return Alert(rule, action, step, reason, dict(reason.params))

    def _on(self, rule: str) -> bool:
        return getattr(self.spec, rule) != "off"

    def interrupted(self) -> None:
        """An evaluation or a checkpoint happened since the last log: its time is not the trainer's throughput."""
        self._skip_tps = True

    def observe_log(
        self,
        step: int,
        *,
        loss: Any = None,
        grad_norm: Any = None,
        learning_rate: Any = None,
        tokens_per_second: Any = None,
        max_steps: int | None = None,
        reward: Any = None,
        reward_std: Any = None,
    ) -> list[Alert]:
        """One logged step's figures; ``reward`` / ``reward_std``: GRPO's mean reward and its spread within the
        groups (absent for other stages)."""
        s = self.spec
        loss_v, grad_v, lr_v, tps_v = map(number, (loss, grad_norm, learning_rate, tokens_per_second))
        if max_steps:
            self.max_steps = max_steps
        found: list[Alert | None] = []
        if self._on("loss_nan"):
            found.append(self._fire("loss_nan", step, loss_not_finite(loss_v)))
        if self._on("loss_spike") and not self.surrogate_loss:
            spike = loss_spike(loss_v, self.losses[-s.window :], s.loss_spike_factor)
            found.append(self._fire("loss_spike", step, spike))
        if self._on("grad_norm"):
            found.append(self._fire("grad_norm", step, grad_norm_blowup(grad_v, s.grad_norm_max)))
        if self._on("lr_zero"):
            found.append(self._fire("lr_zero", step, lr_zero(lr_v, step, self.warmup_steps, self.max_steps)))
        if self._on("throughput") and not self._skip_tps:
            collapse = throughput_collapse(tps_v, self.tps[-s.window :], s.throughput_fraction)
            found.append(self._fire("throughput", step, collapse))
        std_v = number(reward_std)
        if std_v is not None:
            self.reward_stds.append(std_v)
            del self.reward_stds[: -s.reward_flat_steps]
            if self._on("reward_flat"):
                flat = reward_flat(self.reward_stds, s.reward_flat_steps, number(reward))
                found.append(self._fire("reward_flat", step, flat))
        if _finite(loss_v):
            self.losses.append(loss_v)
            self._train_since_eval.append(loss_v)
            del self.losses[: -s.window]
        if _finite(tps_v) and not self._skip_tps:
            self.tps.append(tps_v)
            del self.tps[: -s.window]
        self._skip_tps = False
        return [a for a in found if a is not None]

    def observe_eval(self, step: int, eval_loss: Any) -> list[Alert]:
        value = number(eval_loss)
        since = self._train_since_eval
        train = statistics.fmean(since) if since else (self.evals[-1][1] if self.evals else None)
        self._train_since_eval = []
        self.evals.append((value if value is not None else math.nan, train))
        self.interrupted()
        if not self._on("eval_overfit"):
            return []
        alert = self._fire(
            "eval_overfit", step, eval_overfit(self.evals, self.spec.eval_patience, self.spec.eval_min_delta)
        )
        return [alert] if alert else []

    def observe_disk(self, step: int, free_bytes: int | None, checkpoint_bytes: int | None) -> list[Alert]:
        if not self._on("disk"):
            return []
        alert = self._fire("disk", step, disk_low(free_bytes, checkpoint_bytes, self.spec.disk_margin))
        return [alert] if alert else []
