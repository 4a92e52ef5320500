"""Trainer callbacks: events from rank 0, a graceful stop on SIGTERM, and the health rules on every logged step.

Heavy: torch and transformers (trainer subprocess only). The per-step work is a flag check and, in multi-process
runs, one all-reduce of that flag so every rank stops at the same step; everything else happens at log intervals.
The health rules themselves are light (``engine.watch.health``); ``HealthCallback`` feeds them the logged figures on
rank 0 and, when a rule set to stop fires, stops every rank at the same step, saving a checkpoint first unless the
weights are no longer finite (a NaN checkpoint would replace the last good one as the one to resume from).
"""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from pathlib import Path

import torch
import torch.distributed as dist
from transformers import TrainerCallback

from engine.core.events import append_event
from engine.spec.watch_group import HealthSpec
from engine.watch.health import Alert, HealthWatch


def memory_snapshot() -> dict:
    """This rank's memory in MiB: CUDA allocated / reserved / peak (max_*) on GPU, process RSS always."""
    snap: dict = {}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        dev = torch.cuda.current_device()
        snap.update(
            allocated_mib=round(torch.cuda.memory_allocated(dev) / 2**20, 1),
            reserved_mib=round(torch.cuda.memory_reserved(dev) / 2**20, 1),
            max_allocated_mib=round(torch.cuda.max_memory_allocated(dev) / 2**20, 1),
            max_reserved_mib=round(torch.cuda.max_memory_reserved(dev) / 2**20, 1),
        )
    try:
        import psutil

        snap["rss_mib"] = round(psutil.Process().memory_info().rss / 2**20, 1)
    except Exception:  # psutil missing or process gone: memory is informative, never fatal
        pass
    return snap


def gather_memory() -> list[dict]:
    """Memory of every rank (collective: every rank must call it at the same point)."""
    snap = memory_snapshot()
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        out: list = [None] * dist.get_world_size()
        dist.all_gather_object(out, snap)
        return [dict(s or {}, rank=i) for i, s in enumerate(out)]
    return [dict(snap, rank=0)]


class GracefulStop(TrainerCallback):
    """SIGTERM: finish the current step, save a checkpoint, stop. All ranks agree on the step to stop at."""

    def __init__(self) -> None:
        self.requested = False
        self.stopped_at: int | None = None
        self._group = None  # a gloo group of every rank, made at the first step's end (every rank gets there)
        # a Ray Train worker (engine.trainer.ray_driver) runs the trainer off its main thread, where no signal
        # reaches: its driver, which got the SIGTERM, writes this file instead
        self._request = os.environ.get("STUDIO_STOP_REQUEST", "")
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._on_signal)
            signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum, frame) -> None:  # noqa: ARG002
        self.requested = True

    def _agreed(self) -> bool:
        """Whether any rank was asked to stop. Every step, so the flag travels over a gloo group of its own on the
        host: under NCCL a flag on the device read back with ``.item()`` made the host wait for every kernel queued
        (issue 49: no forced synchronisation between logged steps); gloo's all-reduce of one CPU number does not
        touch the device."""
        if not self.requested and self._request and os.path.exists(self._request):
            self.requested = True
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            if self._group is None:
                self._group = dist.new_group(backend="gloo")
            flag = torch.tensor([1.0 if self.requested else 0.0])
            dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=self._group)
            return bool(flag.item())
        return self.requested

    def on_step_end(self, args, state, control, **kwargs):
        if self._agreed():
            self.requested = True
            self.stopped_at = state.global_step
            control.should_save = True
            control.should_training_stop = True
        return control


# Keys of the Trainer's logs that the log event carries under its own names (the rest go under ``metrics``).
_LOG_KEYS = {"loss", "learning_rate", "grad_norm", "epoch", "num_input_tokens_seen", "num_tokens"}


class EventsCallback(TrainerCallback):
    """Writes log / eval / checkpoint events (rank 0) with throughput, memory per rank and ETA."""

    def __init__(self, events_path: Path, *, tokens_logged: bool = False) -> None:
        """``tokens_logged``: the trainer logs its own running count of tokens as ``num_tokens`` (TRL's
        GRPOTrainer: the prompt and completion tokens of every generation, all processes), the count tokens/s is
        taken from; else the Trainer's ``num_input_tokens_seen`` (engine.trainer.callbacks.TokensSeen)."""
        self.path = events_path
        self.tokens_logged = tokens_logged
        self.t0 = time.time()
        self.last_log_t = self.t0
        self.last_tokens = 0
        self.last_step = 0
        self.start_step = 0
        self.peak_memory: list[dict] = []
        self.last_log: dict = {}  # the payload of the last log event (the health rules read its tokens/s)

    def on_train_begin(self, args, state, control, **kwargs):
        self.t0 = self.last_log_t = time.time()
        self.start_step = self.last_step = state.global_step
        self.last_tokens = state.num_input_tokens_seen or 0

    def on_log(self, args, state, control, logs=None, **kwargs):
        logs = dict(logs or {})
        memory = gather_memory()  # collective: on_log runs on every rank
        self._track_peak(memory)
        if not state.is_world_process_zero:
            return
        now = time.time()
        if "eval_loss" in logs:
            append_event(
                self.path, "eval", state.global_step, **{k: v for k, v in logs.items() if k.startswith("eval_")}
            )
            return
        if "loss" not in logs:
            return  # the final train_* summary goes into the finished event
        tokens = state.num_input_tokens_seen or 0  # also where a log with no generation since the last has none
        if self.tokens_logged and isinstance(logs.get("num_tokens"), (int, float)):
            tokens = int(logs["num_tokens"])
        dt = max(now - self.last_log_t, 1e-9)
        steps_done = state.global_step - self.start_step
        elapsed = now - self.t0
        sec_per_step = elapsed / steps_done if steps_done else None
        remaining = max(state.max_steps - state.global_step, 0)
        samples = (
            (state.global_step - self.last_step)
            * args.per_device_train_batch_size
            * args.gradient_accumulation_steps
            * args.world_size
        )
        self.last_log = append_event(
            self.path,
            "log",
            state.global_step,
            loss=logs.get("loss"),
            learning_rate=logs.get("learning_rate"),
            grad_norm=logs.get("grad_norm"),
            epoch=logs.get("epoch", state.epoch),
            tokens_per_second=round((tokens - self.last_tokens) / dt, 2),
            samples_per_second=round(samples / dt, 3),
            tokens_seen=tokens,
            memory=memory,
            eta_seconds=round(remaining * sec_per_step, 1) if sec_per_step else None,
            progress=round(state.global_step / state.max_steps, 4) if state.max_steps else None,
            max_steps=state.max_steps,
            elapsed_seconds=round(elapsed, 2),
            # the trainer's own figures beside the loss: TRL's rewards and margins (dpo, kto), a reward model's
            # accuracy on its pairs (rm: chosen scored above rejected)
            metrics={k: v for k, v in logs.items() if k not in _LOG_KEYS and isinstance(v, (int, float))} or None,
        )["payload"]
        self.last_log_t, self.last_tokens, self.last_step = now, tokens, state.global_step

    def on_save(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            path = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            append_event(self.path, "checkpoint", state.global_step, path=str(path))

    def _track_peak(self, memory: list[dict]) -> None:
        if not self.peak_memory:
            self.peak_memory = [dict(m) for m in memory]
            return
        for old, new in zip(self.peak_memory, memory):
            for key, value in new.items():
                if key != "rank" and isinstance(value, (int, float)):
                    old[key] = max(old.get(key, 0), value)


class TokensSeen(TrainerCallback):
    """The Trainer's count of input tokens (``state.num_input_tokens_seen``), summed on the device and read back only
    when a step logs, saves, evaluates or stops, and at the end. transformers reads it back after every batch
    (``.item()``: on a GPU a wait for every kernel queued before it, bench/step_overhead.py); the count it logs and
    saves is the same. Takes the Trainer's ``_track_num_input_tokens`` (its rules for all / non_padding); a
    transformers without it keeps its own. Add it after the callbacks that ask to save or stop at a step's end."""

    def __init__(self, trainer) -> None:
        self.trainer = trainer
        self.pending = None  # this rank's tokens since the last read, a tensor on the device
        if hasattr(trainer, "_track_num_input_tokens"):
            trainer._track_num_input_tokens = self.track

    def track(self, inputs) -> None:
        t = self.trainer
        mode = t.args.include_num_input_tokens_seen
        name = getattr(t.model, "main_input_name", "input_ids")
        if mode == "no" or name not in inputs:
            return
        ids = inputs[name]
        count = ids.numel()
        pad = getattr(t.processing_class, "pad_token_id", None)
        if mode == "non_padding" and isinstance(inputs.get("attention_mask"), torch.Tensor):
            count = inputs["attention_mask"].sum()
        elif mode == "non_padding" and pad is not None:
            count = (ids != pad).sum()
        count = torch.as_tensor(count, device=t.args.device, dtype=torch.int64)
        self.pending = count if self.pending is None else self.pending + count

    def read(self, state) -> None:
        """Add the tokens since the last read (collective: every rank reads at the same points)."""
        if self.pending is not None:
            state.num_input_tokens_seen += int(self.trainer.accelerator.gather(self.pending).sum().item())
            self.pending = None

    def on_step_end(self, args, state, control, **kwargs):
        if control.should_log or control.should_save or control.should_evaluate or control.should_training_stop:
            self.read(state)

    on_epoch_end = on_step_end

    def on_train_end(self, args, state, control, **kwargs):
        self.read(state)


def _any_rank(flag: bool) -> bool:
    """True on every rank when ``flag`` is true on any (collective in multi-process runs)."""
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else "cpu"
        t = torch.tensor([1.0 if flag else 0.0], device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return bool(t.item())
    return flag


def weights_finite(model) -> bool:
    """Whether every trained parameter of this rank is finite."""
    with torch.no_grad():
        return all(bool(torch.isfinite(p).all()) for p in model.parameters() if p.requires_grad and p.numel())


def folder_bytes(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total


class HealthCallback(TrainerCallback):
    """The health rules (``engine.watch.health``) on every logged step and evaluation (rank 0 judges, each alert is an
    ``alert`` event); a rule set to stop ends the run at the same step on every rank."""

    def __init__(
        self,
        spec: HealthSpec,
        events_path: Path,
        events: EventsCallback,
        *,
        checkpoint_estimate: int = 0,
        surrogate_loss: bool = False,
    ) -> None:
        self.spec = spec
        self.surrogate_loss = surrogate_loss  # stage grpo: the loss spike rule is not judged (engine.watch.health)
        self.path = events_path
        self.events = events
        self.watch: HealthWatch | None = None
        self.checkpoint_bytes = checkpoint_estimate  # the last checkpoint's size once there is one
        self.stop_alert: Alert | None = None
        self.stopping = False  # agreed by every rank
        self.saved = False  # the stop saved a checkpoint (the weights were finite)
        self.stop_step: int | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        warmup = args.get_warmup_steps(state.max_steps) if state.max_steps else 0
        self.watch = HealthWatch(
            self.spec, warmup_steps=warmup, max_steps=state.max_steps, surrogate_loss=self.surrogate_loss
        )

    def on_save(self, args, state, control, **kwargs):
        if self.watch is not None:
            self.watch.interrupted()
        ckpt = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if state.is_world_process_zero and ckpt.is_dir():
            self.checkpoint_bytes = folder_bytes(ckpt) or self.checkpoint_bytes

    def on_log(self, args, state, control, logs=None, model=None, **kwargs):
        if self.stopping:
            return control
        if state.is_world_process_zero and self.watch is not None:
            self._judge(args, state, dict(logs or {}))
        if _any_rank(self.stop_alert is not None):  # collective: on_log runs on every rank at the same point
            self.stopping = True
            self.stop_step = state.global_step
            self.saved = not _any_rank(model is not None and not weights_finite(model))
            control.should_training_stop = True
            control.should_save = self.saved
        return control

    def _judge(self, args, state, logs: dict) -> None:
        step = state.global_step
        if "eval_loss" in logs:
            alerts = self.watch.observe_eval(step, logs["eval_loss"])
        elif "loss" in logs:
            alerts = self.watch.observe_log(
                step,
                loss=logs.get("loss"),
                grad_norm=logs.get("grad_norm"),
                learning_rate=logs.get("learning_rate"),
                tokens_per_second=self.events.last_log.get("tokens_per_second"),
                max_steps=state.max_steps,
                reward=logs.get("reward"),
                reward_std=logs.get("reward_std"),
            )
            if args.save_strategy != "no":
                alerts += self.watch.observe_disk(step, _free_bytes(Path(args.output_dir)), self.checkpoint_bytes)
        else:
            return
        for alert in alerts:
            alert.write(self.path)
            print(f"[studio health] step {step}: {alert.rule} ({alert.action}): {alert.reason}", flush=True)
            if alert.action == "stop" and self.stop_alert is None:
                self.stop_alert = alert


def _free_bytes(path: Path) -> int | None:
    for p in (path, *path.parents):
        if p.exists():
            try:
                return shutil.disk_usage(p).free
            except OSError:
                return None
    return None


def rank() -> int:
    return int(os.environ.get("RANK", "0"))
