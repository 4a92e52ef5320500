"""Run events: the one structured output of a run, one JSON object per line in ``events.jsonl``.

Light: stdlib only. Schema (every line)::

    {"type": <str>, "ts": <unix seconds, float>, "step": <int optimizer step or null>, "payload": {...}}

Types and their payload keys:
- ``run_started``: run_id, world_size, num_processes, backend, device, total_steps, num_train_samples, spec_hash,
  trainable_params, total_params, seed.
- ``data_ready``: num_train, num_eval, truncated, dropped, packed, total_tokens, trainable_tokens; num_samples
  (samples or texts before packing / blocks), packing_efficiency (sft packing), tail_dropped (pt: tokens left out
  of the last partial block).
- ``log``: loss, learning_rate, grad_norm, epoch, tokens_per_second (non-pad, since the previous log; stage grpo:
  from TRL's ``num_tokens``, the prompt and completion tokens generated),
  samples_per_second, tokens_seen, memory (per rank: allocated/reserved/peak MiB on GPU, rss_mib on CPU),
  eta_seconds, progress (0..1).
- ``eval``: eval_loss and other eval_* metrics.
- ``checkpoint``: path.
- ``stopped``: reason, checkpoint (a graceful stop after SIGTERM).
- ``finished``: train_loss, runtime_seconds, adapter_dir / model_dir, memory (peak per rank).
- ``failed``: cause (oom | communication | data | config | killed | disk | other), error, traceback (tail).
- ``merge_progress`` / ``merge_finished`` / ``merge_failed``: stage, i, n, out_dir, report.
- ``download_progress`` / ``download_finished`` / ``download_failed`` (engine.models.download; a download run, or
  the first phase of a training run whose model is not local yet): repo, file, i, n, done, total, speed (bytes/s),
  eta_seconds, progress (0..1); finished: where, files, bytes; failed: cause, error.
- ``warning``: field, message.
- ``alert``: rule, action (note | warn | stop), reason (reason_msg: its catalog form), figures: a health rule fired
  (``engine.watch.health``).
- ``eval_progress`` / ``eval_model_finished`` / ``eval_finished`` / ``eval_failed`` (engine.trainer.evaluate): i, n,
  label, phase, done, total, progress, eta_seconds, detail; a model's metrics; the results; cause, error.
- ``export_progress`` / ``export_finished`` / ``export_failed`` (engine.trainer.convert): stage, i, n, out_dir;
  finished: format, files [{name, bytes}], report (verification), summary; failed: cause, error.
- ``completions`` (stage grpo, engine.trainer.grpo): samples [{prompt, completion, rewards {name: value or null},
  total, advantage}] of the newest generation batch at each logged step.
- ``serve_ready`` / ``serve_stopped`` (the OpenAI-compatible server): url, model; ``push_progress`` /
  ``push_finished`` / ``push_failed`` (a push to the hub): repo, done, total; url; cause, error.
- ``gguf_import_progress`` / ``gguf_import_finished`` / ``gguf_import_failed`` (engine.trainer.gguf_import): stage,
  detail, out_dir; finished: record (source, sha256, quantization, the verification), summary; failed: cause, error.

Readers keep a byte offset and call ``read_events(path, offset)``: a torn last line (a writer mid-append or a crash)
is not consumed, so the next read picks it up whole or, if it never completes, ignores it.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

EVENT_TYPES = (
    "run_started",
    "data_ready",
    "log",
    "eval",
    "checkpoint",
    "stopped",
    "finished",
    "failed",
    "merge_progress",
    "merge_finished",
    "merge_failed",
    "download_progress",
    "download_finished",
    "download_failed",
    "warning",
    "alert",
    "eval_progress",
    "eval_model_finished",
    "eval_finished",
    "eval_failed",
    "export_progress",
    "export_finished",
    "export_failed",
    "serve_ready",
    "serve_stopped",
    "push_progress",
    "push_finished",
    "push_failed",
    "gguf_import_progress",
    "gguf_import_finished",
    "gguf_import_failed",
    "completions",
)
TERMINAL_TYPES = ("finished", "failed", "stopped")
# A command run's own "done" event, written once its work is complete: a stop that lands after it (a Cancel clicked
# as the evaluation ended, a server's teardown) does not undo the work, so the run reads completed, not stopped.
DONE_TYPES = (
    "eval_finished",
    "merge_finished",
    "export_finished",
    "download_finished",
    "gguf_import_finished",
    "push_finished",
)


def make_event(type_: str, step: int | None = None, /, **payload: Any) -> dict:
    if type_ not in EVENT_TYPES:
        raise ValueError(f"unknown event type {type_!r}")
    return {"type": type_, "ts": time.time(), "step": step, "payload": _finite(payload)}


def append_event(path: str | Path, type_: str, step: int | None = None, /, **payload: Any) -> dict:
    """Append one event as a single write of one line (atomic for the small lines we write, O_APPEND). A torn last
    line (a write cut short by a full disk) is closed with a newline first, so this event is not glued to it and
    lost: the torn line alone is skipped by readers."""
    event = make_event(type_, step, **payload)
    line = (json.dumps(event, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
    fd = os.open(str(path), os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line
        os.write(fd, line)
    finally:
        os.close(fd)
    return event


def read_jsonl(path: str | Path, offset: int = 0) -> tuple[list[dict], int]:
    """JSON objects on whole lines after byte ``offset``, and the new offset. A torn last line (a writer mid-append)
    is left for the next read; a corrupt line in the middle (a crash) is skipped. Used for events and metrics."""
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            data = fh.read()
    except OSError:
        return [], offset
    end = data.rfind(b"\n")
    if end < 0:
        return [], offset
    out: list[dict] = []
    for raw in data[: end + 1].splitlines():
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out, offset + end + 1


def read_events(path: str | Path, offset: int = 0) -> tuple[list[dict], int]:
    """Events after byte ``offset`` and the new offset (see ``read_jsonl``)."""
    objs, new_offset = read_jsonl(path, offset)
    return [o for o in objs if isinstance(o.get("type"), str)], new_offset


def read_all(path: str | Path) -> list[dict]:
    return read_events(path, 0)[0]


def last_event(path: str | Path, types: tuple[str, ...] | None = None) -> dict | None:
    for event in reversed(read_all(path)):
        if types is None or event["type"] in types:
            return event
    return None


def _finite(obj: Any) -> Any:
    """JSON has no NaN/inf: write them as strings so every reader parses every line."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj
