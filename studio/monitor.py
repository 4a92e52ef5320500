"""Reads a run's folder incrementally for the live dashboard. Light: stdlib, pandas, engine.events.

A ``RunView`` is a plain dict kept in the browser session's ``gr.State``: the run id, byte offsets into
``events.jsonl`` / ``metrics.jsonl`` and the points read so far. Each tick reads only the new lines. A reload or a
second tab starts from a fresh state, so it re-reads from offset 0 and shows the same thing: the folder is the truth.
"""

from __future__ import annotations

import math
import re
import time
from pathlib import Path
from typing import Any

import pandas as pd

from engine import events as events_mod
from studio.i18n import STRINGS, t


def plot_frame(rows: list[dict], columns: list[str], text: tuple[str, ...] = ("series",)) -> pd.DataFrame:
    """A frame for gr.LinePlot / gr.BarPlot with explicit dtypes: numbers float64, labels str. An empty frame
    built from a column list is all object dtype, which gradio sends as a *nominal* axis; the browser keeps that
    axis type for later updates, so every curve drawn after an empty first tick would come out categorical."""
    frame = pd.DataFrame(rows, columns=columns)
    return frame.astype({c: ("str" if c in text else "float64") for c in columns})


MAX_POINTS = 5000  # per series; older points are thinned so a long run stays cheap to draw


def new_view(run_id: str | None, run_dir: str | Path | None) -> dict:
    return {
        "run_id": run_id,
        "run_dir": str(run_dir) if run_dir else "",
        "offset": 0,
        "moffset": 0,
        "logs": [],
        "evals": [],
        "metrics": [],
        "started": None,
        "last": None,
        "terminal": None,
        "version": 0,
    }


def read_new(view: dict) -> bool:
    """Consume new events and metric samples into ``view``; True when anything changed."""
    if not view.get("run_dir"):
        return False
    run_dir = Path(view["run_dir"])
    changed = False
    evs, view["offset"] = events_mod.read_events(run_dir / "events.jsonl", view["offset"])
    for ev in evs:
        changed = True
        kind, payload = ev.get("type"), ev.get("payload") or {}
        view["last"] = ev
        if kind == "run_started":
            view["started"] = ev
        elif kind == "log" and payload.get("loss") is not None:
            view["logs"].append({"step": ev.get("step"), "ts": ev.get("ts"), **payload})
        elif kind == "eval":
            view["evals"].append({"step": ev.get("step"), "ts": ev.get("ts"), **payload})
        elif kind in events_mod.TERMINAL_TYPES:
            view["terminal"] = ev
    samples, view["moffset"] = events_mod.read_jsonl(run_dir / "metrics.jsonl", view["moffset"])
    if samples:
        changed = True
        view["metrics"] += samples
    for key in ("logs", "evals", "metrics"):
        if len(view[key]) > MAX_POINTS:
            view[key] = view[key][::2]
    if changed:
        view["version"] += 1
    return changed


# ----------------------------------------------------------------------------------------------- frames
X_COLUMNS = {"step": "step", "epoch": "epoch", "tokens": "tokens_seen"}


def _x(row: dict, axis: str) -> float | None:
    value = row.get(X_COLUMNS.get(axis, "step"))
    if value is None and axis != "step":
        value = row.get("step")
    return value if isinstance(value, (int, float)) and math.isfinite(value) else None


def smooth(values: list[float], weight: float) -> list[float]:
    """TensorBoard-style exponential moving average with de-biasing."""
    out, last = [], 0.0
    for n, v in enumerate(values, start=1):
        last = weight * last + (1 - weight) * v
        out.append(last / (1 - weight**n) if weight < 1 else v)
    return out


def loss_frame(
    view: dict, axis: str = "step", smoothing: float = 0.6, log_scale: bool = False, lang: str = "en"
) -> pd.DataFrame:
    """Train (raw and smoothed) and eval loss; the series names are the legend, in the page's language."""
    train, smoothed, evals = t("se_train", lang), t("se_smoothed", lang), t("se_eval", lang)
    rows: list[dict] = []
    xs = [(_x(r, axis), r.get("loss")) for r in view.get("logs", [])]
    xs = [(x, y) for x, y in xs if x is not None and isinstance(y, (int, float)) and math.isfinite(y)]
    for x, y in xs:
        rows.append({"x": x, "value": y, "series": train})
    if smoothing > 0 and len(xs) > 1:
        for (x, _), s in zip(xs, smooth([y for _, y in xs], smoothing)):
            rows.append({"x": x, "value": s, "series": smoothed})
    for r in view.get("evals", []):
        y = r.get("eval_loss")
        x = _x(r, axis) if axis == "step" else _nearest_x(view, r.get("step"), axis)
        if x is not None and isinstance(y, (int, float)) and math.isfinite(y):
            rows.append({"x": x, "value": y, "series": evals})
    frame = plot_frame(rows, ["x", "value", "series"])
    if log_scale and not frame.empty:
        frame = frame[frame["value"] > 0].assign(value=lambda f: f["value"].map(math.log10))
    return frame


def _nearest_x(view: dict, step: Any, axis: str) -> float | None:
    for r in reversed(view.get("logs", [])):
        if step is not None and r.get("step") is not None and r["step"] <= step:
            return _x(r, axis)
    return None


def series_frame(view: dict, key: str, axis: str = "step") -> pd.DataFrame:
    rows = [{"x": _x(r, axis), "value": r.get(key)} for r in view.get("logs", [])]
    rows = [
        r for r in rows if r["x"] is not None and isinstance(r["value"], (int, float)) and math.isfinite(r["value"])
    ]
    return plot_frame(rows, ["x", "value"])


def gpu_frames(view: dict, lang: str = "en") -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """(memory per GPU over time: used and total, utilisation per GPU over time, note).

    Samples come from metrics.jsonl (engine.metrics schema). With no GPU samples the plots show the run's CPU RAM
    and CPU load instead, and the note says why GPU metrics are missing; with no samples at all, the trainer's own
    per-rank memory from the log events."""
    mem_rows, util_rows, note = [], [], ""
    samples = view.get("metrics", [])
    # Seconds since the run's first sample: sampling starts with the process, before run_started (data, loading).
    t0 = (samples[0].get("ts") if samples else None) or (view.get("started") or {}).get("ts") or 0
    has_gpu = any(sample.get("gpus") for sample in samples)
    for sample in samples:
        ts = (sample.get("ts") or 0) - t0
        note = note or _sampler_note(str(sample.get("gpu_note") or sample.get("gpu_error") or ""), lang)
        if not has_gpu:
            if _first(sample, "rss_mib") is not None:
                mem_rows.append({"t": ts, "MiB": sample["rss_mib"], "series": t("se_cpu_ram", lang)})
            if _first(sample, "cpu_pct") is not None:
                util_rows.append({"t": ts, "percent": sample["cpu_pct"], "series": "CPU"})
            continue
        for i, gpu in enumerate(sample.get("gpus") or []):
            name = f"GPU {gpu.get('index', i)}"
            used = _first(gpu, "memory_used_mib", "mem_used_mib")
            total = _first(gpu, "memory_total_mib", "mem_total_mib")
            util = _first(gpu, "utilization_pct", "utilization", "util")
            if used is not None:
                mem_rows.append({"t": ts, "MiB": used, "series": t("se_used", lang, name=name)})
            if total is not None:
                mem_rows.append({"t": ts, "MiB": total, "series": t("se_total", lang, name=name)})
            if util is not None:
                util_rows.append({"t": ts, "percent": util, "series": name})
    if not samples:
        for r in view.get("logs", []):
            for rank, mem in _ranks(r.get("memory")):
                used = _first(mem, "allocated_mib", "peak_mib", "rss_mib")
                if used is not None:
                    series = t("se_rank", lang, rank=rank)
                    mem_rows.append({"t": (r.get("ts") or 0) - t0, "MiB": used, "series": series})
        if mem_rows:
            note = t("gpu_note_ranks", lang)
    elif not has_gpu:
        note = (note or t("gpu_note_none", lang)) + t("gpu_note_cpu", lang)
    return (
        plot_frame(mem_rows, ["t", "MiB", "series"]),
        plot_frame(util_rows, ["t", "percent", "series"]),
        note,
    )


# engine.metrics writes why GPU metrics are missing into metrics.jsonl in English (files stay English); the page
# shows its known heads in its language and keeps the sampler's details (library errors) as they are.
_SAMPLER_NOTES = {
    "GPU metrics off: STUDIO_FORCE_CPU=1; recording CPU and RAM only": "gpu_note_forced_cpu",
    "GPU metrics unavailable: ": "gpu_note_unavailable",
}


def _sampler_note(note: str, lang: str) -> str:
    if lang == "en" or not note:
        return note
    for head, key in _SAMPLER_NOTES.items():
        if note.startswith(head):
            detail = note[len(head) :].removesuffix("; recording CPU and RAM only")
            return t(key, lang, detail=detail)
    return note


def _ranks(memory: Any) -> list[tuple[str, dict]]:
    if isinstance(memory, dict):
        if all(isinstance(v, dict) for v in memory.values()):
            return [(str(k), v) for k, v in memory.items()]
        return [("0", memory)]
    if isinstance(memory, list):
        return [(str(m.get("rank", i)), m) for i, m in enumerate(memory) if isinstance(m, dict)]
    return []


def _first(d: dict, *keys: str) -> float | None:
    for k in keys:
        v = d.get(k)
        if isinstance(v, (int, float)) and math.isfinite(v):
            return v
    return None


# ----------------------------------------------------------------------------------------------- text
def progress_html(view: dict, lang: str = "en") -> str:
    last_log = view["logs"][-1] if view.get("logs") else {}
    frac = last_log.get("progress")
    started = view.get("started") or {}
    total = (started.get("payload") or {}).get("total_steps")
    step = last_log.get("step")
    if frac is None and total and step is not None:
        frac = step / total
    if (view.get("terminal") or {}).get("type") == "finished":
        frac = 1.0
    frac = max(0.0, min(1.0, float(frac or 0.0)))
    eta = last_log.get("eta_seconds")
    eta_text = f" · {t('w_eta', lang)} {format_duration(eta)}" if eta is not None and frac < 1 else ""
    steps = f" · {t('w_step', lang)} {step}/{total}" if step is not None and total else ""
    return (
        f'<div class="studio-progress"><div class="bar" style="width:{frac * 100:.1f}%"></div></div>'
        f'<div class="studio-progress-text">{frac * 100:.0f}%{steps}{eta_text}</div>'
    )


def format_duration(seconds: Any) -> str:
    if not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds < 0:
        return "–"
    seconds = int(seconds)
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def status_line(view: dict, status: str = "", lang: str = "en") -> str:
    """One line: status, last step and loss, speed; a failed run says why."""
    term = view.get("terminal") or {}
    payload = term.get("payload") or {}
    last_log = view["logs"][-1] if view.get("logs") else {}
    status = status or term.get("type") or ("running" if view.get("started") else "waiting")
    parts = [f"**{view.get('run_id') or '–'}**", t(f"st_{status}", lang) if f"st_{status}" in STRINGS else status]
    if last_log:
        parts.append(f"{t('w_step', lang)} {last_log.get('step')}")
        if isinstance(last_log.get("loss"), (int, float)):
            parts.append(f"{t('w_loss', lang)} {last_log['loss']:.4f}")
        if isinstance(last_log.get("tokens_per_second"), (int, float)):
            parts.append(f"{last_log['tokens_per_second']:.0f} tok/s")
    if term.get("type") == "finished":
        where = payload.get("adapter_dir") or payload.get("model_dir")
        if where:
            parts.append(f"{t('w_saved', lang)} `{where}`")
    if term.get("type") == "failed":
        cause = cause_text(payload.get("cause", "other"), lang)
        parts.append(f"{t('w_cause', lang)}{_colon(lang)}**{cause}**{_colon(lang)}{payload.get('error', '')}")
    if term.get("type") == "stopped":
        parts.append(t("stopped_why", lang, reason=stop_reason(str(payload.get("reason", "")), lang)))
    return " · ".join(str(p) for p in parts if p)


# The runner's reason for a stop whose trainer wrote none (events.jsonl stays English): its words in the page's
# language, the signal or exit code as written.
_USER_STOP = re.compile(
    r"^stopped by the user \(process ended before it reported; (?:signal (\w+)|exit code (-?\d+))\)$"
)


def stop_reason(reason: str, lang: str = "en") -> str:
    m = _USER_STOP.match(reason) if lang != "en" else None
    if not m:
        return reason
    how = t("how_signal", lang, signal=m[1]) if m[1] else t("how_exit", lang, code=m[2])
    return t("stop_by_user", lang, how=how)


def cause_text(cause: str, lang: str = "en") -> str:
    """engine.train.classify's cause (oom, communication, data, config, killed, other) in the page's language."""
    return t(f"cause_{cause}", lang) if f"cause_{cause}" in STRINGS else str(cause)


def _colon(lang: str) -> str:
    return "：" if lang == "zh" else ": "


def failure_text(view: dict, lang: str = "en") -> str:
    """The failed event's cause and error (the trainer's own English words) and traceback, under labels in the
    page's language."""
    term = view.get("terminal") or {}
    if term.get("type") != "failed":
        return ""
    p = term.get("payload") or {}
    cause = cause_text(p.get("cause", "other"), lang)
    head = f"{t('w_cause', lang)}{_colon(lang)}{cause}\n{t('w_error', lang)}{_colon(lang)}{p.get('error', '')}"
    return f"{head}\n\n{p.get('traceback', '')}".strip()


def log_tail(run_dir: str | Path, max_bytes: int = 20_000) -> str:
    path = Path(run_dir) / "train.log"
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            fh.seek(max(0, size - max_bytes))
            text = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    if size > max_bytes:
        text = text.split("\n", 1)[-1]
    return text


def event_latency(view: dict) -> float | None:
    """Seconds between the newest event's timestamp and now (used by the bench)."""
    last = view.get("last")
    return time.time() - last["ts"] if last and last.get("ts") else None
