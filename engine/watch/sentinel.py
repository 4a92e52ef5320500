"""The run wrapper's watch over a live training run: notifications of its alerts and its end, and the health rules
the trainer cannot judge for itself.

Light: stdlib, engine.core.events, engine.watch.health / notify, engine.spec; never torch. A thread of
``engine.runs.runner`` (``Sentinel.loop``) looks every ``STUDIO_HEALTH_INTERVAL`` seconds (default 2):
- new ``alert`` events (the trainer's, and its own) go out as notifications (``engine.watch.notify``);
- no progress: the watchdog's stall detection (``engine.runs.watchdog.stalled_for``), not a second one, which the
  runner hands in as ``stalled`` (the run machinery is a floor above this one);
- the GPUs: idle or memory near the limit, from the run's ``metrics.jsonl`` samples, while the run trains (after its
  first logged step, before its end); nothing on a machine without GPU samples.
A rule set to stop writes ``engine.watch.health.STOP_FILE`` (so the trainer's stopped event says which rule) and asks
the wrapper to stop the run (SIGTERM: the trainer saves a checkpoint; SIGKILL after the grace period if it hangs).
When the run has ended, ``finish`` sends the end notice (completed, failed, stopped) with the registry's reason.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from engine.core import events
from engine.core.messages import to_json
from engine.spec.schema import RunSpec
from engine.watch import health, notify


def interval_s() -> float:
    try:
        return max(0.2, float(os.environ.get("STUDIO_HEALTH_INTERVAL", "2")))
    except ValueError:
        return 2.0


class Sentinel:
    def __init__(
        self,
        rdir: Path,
        run_id: str,
        spec: RunSpec,
        *,
        environ: dict[str, str] | None = None,
        stop_run: Callable[[], None] | None = None,
        say: Callable[[str], None] = print,
        stalled: Callable[[float], tuple[float, float] | None] | None = None,
    ) -> None:
        self.rdir = Path(rdir)
        self.run_id = run_id
        self.spec = spec
        self.environ = dict(os.environ if environ is None else environ)
        self.stop_run = stop_run
        self.say = say
        self.stalled = stalled  # now -> (seconds without progress, the run's limit) once past it, else None
        self.offset = 0
        self.moffset = 0
        self.step: int | None = None
        self.training = False
        self.t_train: float | None = None  # when the first step was logged: GPU samples before it are start-up
        self.samples: list[dict] = []
        self.active: set[str] = set()
        self.stopping = False

    # ------------------------------------------------------------------------------------------- the loop
    def loop(self, stop: threading.Event) -> None:
        while not stop.wait(interval_s()):
            try:
                self.check()
            except Exception as exc:  # noqa: BLE001 - the watch never ends the run it watches
                self.say(f"health watch: {type(exc).__name__}: {exc}")

    def check(self, now: float | None = None) -> None:
        now = time.time() if now is None else now
        self.read_events()
        if not self.training:
            return
        h = self.spec.health
        if h.stall != "off" and self.stalled is not None:
            idle, limit = self.stalled(now) or (None, 0.0)
            self._fire("stall", health.stalled(idle, limit))
        if h.gpu_idle != "off" or h.gpu_memory != "off":
            self.read_samples(now - h.gpu_idle_minutes * 60)
            if h.gpu_memory != "off" and self.samples:
                full = health.gpu_memory_full(self.samples[-1].get("gpus") or [], h.gpu_memory_fraction)
                self._fire("gpu_memory", full)
            if h.gpu_idle != "off":
                self._fire("gpu_idle", health.gpu_idle(self.samples, h.gpu_idle_minutes, now))

    def read_events(self) -> None:
        evs, self.offset = events.read_events(self.rdir / "events.jsonl", self.offset)
        for ev in evs:
            kind = ev.get("type")
            if kind == "log":
                self.step = ev.get("step")
                self.training = True
                self.t_train = self.t_train or ev.get("ts")
            elif kind in events.TERMINAL_TYPES:
                self.training = False
            elif kind == "alert":
                p = ev.get("payload") or {}
                self.send(
                    notify.Notice(
                        "alert",
                        self.run_id,
                        self.spec.output.run_name,
                        "running",
                        ev.get("step"),
                        str(p.get("rule", "")),
                        str(p.get("action", "")),
                        str(p.get("reason", "")),
                        dict(p.get("figures") or {}),
                    )
                )

    def read_samples(self, since: float) -> None:
        samples, self.moffset = events.read_jsonl(self.rdir / "metrics.jsonl", self.moffset)
        self.samples += [s for s in samples if s.get("gpus") and s.get("ts", 0) >= (self.t_train or 0)]
        if self.samples and self.samples[0].get("ts", 0) < since:
            # keep the newest sample at or before ``since`` (it shows how long the span was watched) and what follows
            older = [i for i, s in enumerate(self.samples) if s.get("ts", 0) <= since]
            del self.samples[: older[-1]]

    def _fire(self, rule: str, reason) -> None:
        if reason is None:
            self.active.discard(rule)
            return
        if rule in self.active:
            return
        self.active.add(rule)
        action = getattr(self.spec.health, rule)
        alert = health.Alert(rule, action, self.step, reason, dict(reason.params))
        alert.write(self.rdir / "events.jsonl")
        self.say(f"health: step {self.step}: {rule} ({action}): {reason}")
        if action == "stop" and not self.stopping and self.stop_run is not None:
            self.stopping = True
            told = {"rule": rule, "step": self.step, "reason": str(reason), "reason_msg": to_json(reason)}
            (self.rdir / health.STOP_FILE).write_text(json.dumps(told), encoding="utf-8")
            self.stop_run()

    # ------------------------------------------------------------------------------------------- notices
    def send(self, notice: notify.Notice) -> None:
        for problem in notify.deliver(self.spec.notify, notice, self.environ):
            self.say(f"notification: {problem}")

    def finish(self, status: str, reason: str) -> None:
        """The run has ended: alerts not yet sent, then the end notice."""
        self.read_events()
        if status in ("completed", "failed", "stopped"):
            first_line = str(reason or "").split("\n", 1)[0]
            name = self.spec.output.run_name
            self.send(notify.Notice(status, self.run_id, name, status, self.step, reason=first_line))
