"""Reads a run's folder incrementally for the live dashboard, and makes the charts' frames from what it read (loss,
learning rate, gradient norm, speed, GPU or CPU resources, preference-stage figures, their colours). The dashboard's
words (progress, status, failure, log) are ``studio.monitor_text``'s. Light: stdlib, numpy, pandas,
engine.core.events, studio.alerts / i18n; never studio.tabs (the tabs call this module, not the other way).

A ``RunView`` is a plain dict kept in the browser session's ``gr.State``: the run id, byte offsets into
``events.jsonl`` and each node's metrics file (``metrics.jsonl``; a Slurm job's other nodes write
``metrics-node<N>.jsonl``) and the points read so far: only the numbers the plots draw, as float arrays
(every open page holds its own view, so its size is what a page costs the studio). Each tick reads only the new lines.
A reload or a second tab starts from a fresh state, so it re-reads from offset 0 and shows the same thing: the folder
is the truth.
"""

from __future__ import annotations

import math
import os
import re
from array import array
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from engine.core import events as events_mod
from studio import alerts, grpo_panel
from studio.i18n.page import t

# The plots' colour columns: their name is the tooltip's word for a series (the legend's title is set apart, in the
# page's language): a curve of the dashboard, a run of the Runs overlay, a bar's side of the cutoff.
LABEL_COLUMNS = ("curve", "run", "cutoff")


def plot_frame(rows: list[dict] | dict, columns: list[str], text: tuple[str, ...] = LABEL_COLUMNS) -> pd.DataFrame:
    """A frame for gr.LinePlot / gr.BarPlot with explicit dtypes: numbers float64, labels str. An empty frame
    built from a column list is all object dtype, which gradio sends as a *nominal* axis; the browser keeps that
    axis type for later updates, so every curve drawn after an empty first tick would come out categorical.
    ``rows``: a list of row dicts, or a dict of equal-length columns."""
    frame = pd.DataFrame(rows, columns=columns)
    return frame.astype({c: ("str" if c in text else "float64") for c in columns})


# Tableau's ten colours (Vega's category10): distinct on the light and the dark theme.
PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)


def color_map(frame: pd.DataFrame, column: str, fixed: dict[str, str] | None = None) -> dict[str, str]:
    """A colour for every series in ``frame[column]``, in the order they appear (``fixed`` names keep theirs).

    gradio's plot fixes its colour scale's domain to the series of the value it held when it was last drawn anew,
    and draws any other series without a stroke or fill (all of them, with an empty legend, when that value was
    empty, as a live run's first tick is); it draws itself anew when its ``color_map`` changes, with the value it
    held before that update. So a plot gets the map of exactly its series, once it holds them (one update after
    the value: dashboard.lagged_colors, the Runs and Datasets tabs' follow-up events); the map changes when a series
    comes or goes, and only then (an unchanged map costs no redraw)."""
    fixed = fixed or {}
    names = list(dict.fromkeys(frame[column])) if column in frame else []
    free = iter(c for c in PALETTE * (1 + len(names) // len(PALETTE)) if c not in fixed.values())
    return {name: fixed.get(name) or next(free) for name in names}


# An axis range gradio's plot leaves to Vega: [None, None] rather than None, which gr.update drops as "not sent"
# (a plot once given a range would keep it).
FREE = [None, None]


def span(values: Any, fixed: list | None = None) -> list:
    """The range one axis of a plot is given: ``fixed`` (or FREE) while the values it shows span some width; around
    the value when they are all one (a run's first logged point, a chart of one step): Vega draws a zero-width
    domain with a single tick formatted to six decimals ("8.900000"). The range is the value +- 10 % (+- 1 for zero
    and for a whole number, so a first step reads 0 .. 2), an end ``fixed`` keeps staying where it is."""
    lo, hi = list(fixed) if fixed else FREE
    v = np.asarray(values, dtype="float64")
    v = v[np.isfinite(v)]
    if not len(v):
        return list(fixed) if fixed else list(FREE)
    first, last = lo if lo is not None else float(v.min()), hi if hi is not None else float(v.max())
    if last > first:
        return list(fixed) if fixed else list(FREE)
    pad = abs(first) / 10 or 1.0
    if float(first).is_integer():
        pad = max(pad, 1.0)
    return [lo if lo is not None else first - pad, hi if hi is not None else first + pad]


def axis_limits(frame: pd.DataFrame, x: str, y: str, y_fixed: list | None = None) -> dict[str, list]:
    """A LinePlot update's ``x_lim`` and ``y_lim`` for ``frame`` (``span`` of its ``x`` and ``y`` columns)."""
    return {"x_lim": span(frame[x] if x in frame else []), "y_lim": span(frame[y] if y in frame else [], y_fixed)}


# Points kept per series (older points are thinned, every other one dropped) and so the most a plot draws: it bounds
# what each open page costs the studio -- its view here and gradio's copy of the last plot values, both kept per
# browser session -- and each redraw's work. 2000 points is more than a plot's width in pixels.
MAX_POINTS = 2000
# A view keeps only the numbers it draws, as columns of float arrays (8 bytes a value, NaN where an event had none),
# not the events themselves: every open page holds its own view, for as long as its session lives.
LOG_COLUMNS = ("step", "ts", "epoch", "tokens_seen", "loss", "learning_rate", "grad_norm", "tokens_per_second")
EVAL_COLUMNS = ("step", "ts", "eval_loss")
NAN = float("nan")
# The trainer's own figures of a preference stage, from the ``metrics`` of its log events (the ``eval_`` ones of its
# eval events): TRL's keys as its DPOTrainer / KTOTrainer / RewardTrainer log them -> the figure drawn. kto logs no
# accuracy; rm no reward per side, but the margin of its scores, its accuracy and mean reward.
STAGE_KEYS = {
    "rewards/chosen": "chosen",
    "rewards/rejected": "rejected",
    "rewards/margins": "margin",
    "rewards/accuracies": "accuracy",
    "accuracy": "accuracy",
    "margin": "margin",
    "mean_reward": "mean_reward",
}
STAGE_FIGURES = ("chosen", "rejected", "margin", "accuracy", "mean_reward")
# The figures of each stage plot: rewards (any scale) apart from the accuracy (a share, 0 to 1).
STAGE_PLOTS = {"rewards": ("chosen", "rejected", "margin", "mean_reward"), "accuracy": ("accuracy",)}
STAGE_COLUMNS = ("step", "epoch", "tokens_seen", *STAGE_FIGURES)
# A Slurm job's node N > 0 samples into this file of the run folder (engine.runs.metrics.node_file).
NODE_FILE = re.compile(r"^metrics-node(\d+)\.jsonl$")


def _columns(names: tuple[str, ...]) -> dict[str, array]:
    return {name: array("d") for name in names}


def new_view(run_id: str | None, run_dir: str | Path | None) -> dict:
    return {
        "run_id": run_id,
        "run_dir": str(run_dir) if run_dir else "",
        "offset": 0,
        "moffsets": {0: 0},  # node -> byte offset into its metrics file
        "logs": _columns(LOG_COLUMNS),  # log events that carry a loss
        "last_log": {},  # the newest of them, whole: progress, ETA, status line
        "evals": _columns(EVAL_COLUMNS),
        "stage": _columns(STAGE_COLUMNS),  # log events that carry a preference stage's figures
        "stage_evals": _columns(("step", *STAGE_FIGURES)),
        "ranks": {},  # rank -> {"t", "MiB"}: the trainer's own memory per rank (shown without metric samples)
        "metrics": {"n": 0, "t0": None, "has_gpu": False, "note": "", "series": {}},  # see _add_sample
        "started": None,
        "download": None,  # the newest download_progress payload while the run's model downloads (its first phase)
        "alerts": [],  # the health rules' alert events (studio.alerts)
        "last": None,
        "terminal": None,
        "version": 0,
    }


def _num(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else NAN


def _append(columns: dict[str, array], row: dict) -> None:
    for name, col in columns.items():
        col.append(_num(row.get(name)))
    if len(columns["step"]) > MAX_POINTS:
        for name in columns:
            columns[name] = columns[name][::2]


def _append_point(series: dict, key: str, t: float, value: float) -> None:
    points = series.setdefault(key, {"t": array("d"), "v": array("d")})
    points["t"].append(t)
    points["v"].append(value)
    if len(points["t"]) > MAX_POINTS:
        points["t"], points["v"] = points["t"][::2], points["v"][::2]


def _add_sample(metrics: dict, sample: dict, node: int = 0) -> None:
    """One metrics sample (engine.runs.metrics schema) of ``node`` into per-series points keyed "kind\tname\tnode":
    kind used / total / util per GPU, cpu_ram / cpu for the run's processes. The earliest first sample of any node is
    the plots' zero."""
    ts = _num(sample.get("ts") or 0)
    if math.isfinite(ts) and (metrics["t0"] is None or (ts and ts < metrics["t0"])):
        metrics["t0"] = sample.get("ts")
    metrics["n"] += 1
    metrics["note"] = metrics["note"] or str(sample.get("gpu_note") or sample.get("gpu_error") or "")
    series = metrics["series"]
    for key, kind in (("rss_mib", "cpu_ram"), ("cpu_pct", "cpu")):
        if _first(sample, key) is not None:
            _append_point(series, f"{kind}\t\t{node}", ts, sample[key])
    gpus = sample.get("gpus") or []
    metrics["has_gpu"] = metrics["has_gpu"] or bool(gpus)
    for i, gpu in enumerate(gpus if isinstance(gpus, list) else []):
        if not isinstance(gpu, dict):
            continue
        name = f"GPU {gpu.get('index', i)}"
        for kind, value in (
            ("used", _first(gpu, "memory_used_mib", "mem_used_mib")),
            ("total", _first(gpu, "memory_total_mib", "mem_total_mib")),
            ("util", _first(gpu, "utilization_pct", "utilization", "util")),
        ):
            if value is not None:
                _append_point(series, f"{kind}\t{name}\t{node}", ts, value)


def _add_stage(view: dict, ev: dict, figures: dict, prefix: str = "") -> None:
    """The preference stage's figures of one log (or, ``prefix`` "eval_", eval) event, when it carries any."""
    keys = {k: k[len(prefix) :] for k in figures if k.startswith(prefix)}
    row = {STAGE_KEYS[name]: figures[k] for k, name in keys.items() if name in STAGE_KEYS}
    if any(math.isfinite(_num(v)) for v in row.values()):
        payload = ev.get("payload") or {}
        _append(view["stage_evals" if prefix else "stage"], {**payload, **row, "step": ev.get("step")})


def _metric_files(run_dir: Path, offsets: dict) -> list[tuple[int, Path]]:
    """(node, file) of every node's metrics: ``metrics.jsonl`` (a local run's, a Slurm job's first node) and the
    ``metrics-node<N>.jsonl`` of a Slurm job's other nodes (a listing of the run folder per read: they start with
    their node's task)."""
    found = {0: run_dir / "metrics.jsonl"}
    try:
        with os.scandir(run_dir) as entries:
            for entry in entries:
                m = NODE_FILE.match(entry.name)
                if m:
                    found[int(m[1])] = Path(entry.path)
    except OSError:
        pass
    for node in found:
        offsets.setdefault(node, 0)
    return sorted(found.items())


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
        elif kind == "download_progress":
            view["download"] = payload
        elif kind == "log" and payload.get("loss") is not None:
            row = {**payload, "step": ev.get("step"), "ts": ev.get("ts")}
            view["last_log"] = row
            _append(view["logs"], row)
            for rank, mem in _ranks(payload.get("memory")):
                used = _first(mem, "allocated_mib", "peak_mib", "rss_mib")
                if used is not None:
                    _append_point(view["ranks"], rank, _num(ev.get("ts") or 0), used)
            if isinstance(payload.get("metrics"), dict):
                _add_stage(view, ev, payload["metrics"])
                if grpo_panel.is_grpo(payload["metrics"]):  # stage grpo: the rewards, KL, completion lengths
                    grpo_panel.add_log(view, ev.get("step"), payload["metrics"])
        elif kind == "completions":
            grpo_panel.add_samples(view, ev.get("step"), payload)
        elif kind == "eval":
            _append(view["evals"], {**payload, "step": ev.get("step"), "ts": ev.get("ts")})
            _add_stage(view, ev, payload, "eval_")
        elif kind in events_mod.TERMINAL_TYPES:
            view["terminal"] = ev
        elif kind == "alert":
            alerts.add_to_view(view, ev)
    offsets = view["moffsets"]
    for node, path in _metric_files(run_dir, offsets):
        samples, offsets[node] = events_mod.read_jsonl(path, offsets[node])
        for sample in samples:
            changed = True
            _add_sample(view["metrics"], sample, node)
    if changed:
        view["version"] += 1
    return changed


def log_points(view: dict) -> int:
    """How many loss points the view holds."""
    return len(view["logs"]["step"])


# ----------------------------------------------------------------------------------------------- frames
X_COLUMNS = {"step": "step", "epoch": "epoch", "tokens": "tokens_seen"}


def _floats(column: array | list) -> np.ndarray:
    """A copy: a numpy view of an ``array`` would stop the view's next append (an exported buffer cannot grow)."""
    return np.array(column, dtype="float64")


def _x(columns: dict[str, array], axis: str) -> np.ndarray:
    """The x values of ``columns`` on ``axis``: the step where an event had no epoch / token count; NaN when even
    that is missing."""
    x = _floats(columns.get(X_COLUMNS.get(axis, "step"), columns["step"]))
    return np.where(np.isnan(x), _floats(columns["step"]), x) if axis != "step" else x


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
    """Train (raw and smoothed) and eval loss; the curve names are the legend, in the page's language."""
    train, smoothed, evals = t("se_train", lang), t("se_smoothed", lang), t("se_eval", lang)
    logs = view["logs"]
    x, y = _x(logs, axis), _floats(logs["loss"])
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    xs, ys, names = [x], [y], [np.full(len(x), train, dtype=object)]
    if smoothing > 0 and len(x) > 1:
        xs.append(x)
        ys.append(np.asarray(smooth(y.tolist(), smoothing)))
        names.append(np.full(len(x), smoothed, dtype=object))
    ev = view["evals"]
    ex = _x(ev, "step") if axis == "step" else np.asarray([x_of_step(view, s, axis) for s in ev["step"]])
    ey = _floats(ev["eval_loss"])
    keep = np.isfinite(ex) & np.isfinite(ey)
    xs.append(ex[keep])
    ys.append(ey[keep])
    names.append(np.full(int(keep.sum()), evals, dtype=object))
    frame = plot_frame(
        {"x": np.concatenate(xs), "value": np.concatenate(ys), "curve": np.concatenate(names)},
        ["x", "value", "curve"],
    )
    if log_scale and not frame.empty:
        frame = frame[frame["value"] > 0].assign(value=lambda f: f["value"].map(math.log10))
    return frame


def stage_frame(view: dict, plot: str = "rewards", axis: str = "step", lang: str = "en") -> pd.DataFrame:
    """A preference stage's figures (dpo / kto / rm) of one ``plot`` over ``axis``, the eval ones beside them:
    "rewards" (the chosen and rejected answers' rewards and their margin; rm's margin and mean reward), "accuracy"
    (the share of pairs whose chosen answer scored higher: dpo, rm). Empty for runs without them (the plot hides)."""
    logs, evals = view.get("stage") or _columns(STAGE_COLUMNS), view.get("stage_evals") or _columns(("step",))
    x = _x(logs, axis)
    ex = _x(evals, "step") if axis == "step" else np.asarray([x_of_step(view, s, axis) for s in evals["step"]])
    xs, ys, names = [], [], []
    for columns, cx, eval_ in ((logs, x, False), (evals, ex, True)):
        for fig in STAGE_PLOTS[plot]:
            if fig not in columns:
                continue
            y = _floats(columns[fig])
            keep = np.isfinite(cx) & np.isfinite(y)
            if keep.any():
                xs.append(cx[keep])
                ys.append(y[keep])
                names.append(np.full(int(keep.sum()), _stage_name(fig, eval_, lang), dtype=object))
    if not xs:
        return plot_frame([], ["x", "value", "curve"])
    return plot_frame(
        {"x": np.concatenate(xs), "value": np.concatenate(ys), "curve": np.concatenate(names)},
        ["x", "value", "curve"],
    )


def _stage_name(fig: str, eval_: bool, lang: str) -> str:
    name = t(f"sf_{fig}", lang)
    return t("sf_eval", lang, name=name) if eval_ else name


def stage_colors(lang: str = "en") -> dict[str, str]:
    """The stage figures' colours, the same in every run and language: one of the ten for each train and eval
    figure (chosen green, rejected red, margin blue, accuracy purple, mean reward orange)."""
    train = dict(zip(("margin", "mean_reward", "chosen", "rejected", "accuracy"), PALETTE))
    colors = {_stage_name(fig, False, lang): train[fig] for fig in STAGE_FIGURES}
    colors.update({_stage_name(fig, True, lang): PALETTE[5 + i] for i, fig in enumerate(STAGE_FIGURES)})
    return colors


def loss_colors(lang: str = "en") -> dict[str, str]:
    """The loss curves' colours, the same in every run and language: train blue, smoothed orange, eval green."""
    return {t(key, lang): color for key, color in zip(("se_train", "se_smoothed", "se_eval"), PALETTE)}


def x_of_step(view: dict, step: float, axis: str) -> float:
    """The x on ``axis`` of the newest loss point at or before ``step`` (evals carry only their step)."""
    steps = _floats(view["logs"]["step"])
    at = np.nonzero(steps <= step)[0]
    return float(_x(view["logs"], axis)[at[-1]]) if len(at) else NAN


def series_frame(view: dict, key: str, axis: str = "step") -> pd.DataFrame:
    logs = view["logs"]
    x, y = _x(logs, axis), _floats(logs[key])
    keep = np.isfinite(x) & np.isfinite(y)
    return plot_frame({"x": x[keep], "value": y[keep]}, ["x", "value"])


def _points(series: dict, label: str, t0: float, ycol: str) -> dict:
    return {
        "t": _floats(series["t"]) - t0,
        ycol: _floats(series["v"]),
        "curve": np.full(len(series["t"]), label, dtype=object),
    }


def _stack(parts: list[dict], columns: list[str]) -> pd.DataFrame:
    if not parts:
        return plot_frame([], columns)
    return plot_frame({c: np.concatenate([p[c] for p in parts]) for c in columns}, columns)


def gpu_frames(view: dict, lang: str = "en") -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """(memory per GPU over time: used and total, utilisation per GPU over time, note).

    Samples come from metrics.jsonl (engine.runs.metrics schema), and on a Slurm job of several nodes from each node's
    file too, every series then named by its node ("node 1 · GPU 0 used"). With no GPU samples the plots show the
    run's CPU RAM and CPU load instead, and the note says why GPU metrics are missing; with no samples at all, the
    trainer's own per-rank memory from the log events."""
    metrics = view["metrics"]
    # Seconds since the run's first sample: sampling starts with the process, before run_started (data, loading).
    t0 = metrics["t0"] or (view.get("started") or {}).get("ts") or 0
    mem, util = [], []
    note = _sampler_note(metrics["note"], lang)
    keys = sorted(metrics["series"], key=lambda k: int(k.rsplit("\t", 1)[1]))  # node by node, each in its order
    nodes = {k.rsplit("\t", 1)[1] for k in keys}
    for key in keys:
        series = metrics["series"][key]
        kind, name, node = key.split("\t")
        if len(nodes) > 1:  # one node (a local run) keeps the names it always had
            name = t("se_node", lang, node=node, name=name or "CPU")
        if metrics["has_gpu"] and kind == "used":
            mem.append(_points(series, t("se_used", lang, name=name), t0, "MiB"))
        elif metrics["has_gpu"] and kind == "total":
            mem.append(_points(series, t("se_total", lang, name=name), t0, "MiB"))
        elif metrics["has_gpu"] and kind == "util":
            util.append(_points(series, name, t0, "percent"))
        elif not metrics["has_gpu"] and kind == "cpu_ram":
            ram = t("se_cpu_ram", lang)
            mem.append(_points(series, t("se_node", lang, node=node, name=ram) if len(nodes) > 1 else ram, t0, "MiB"))
        elif not metrics["has_gpu"] and kind == "cpu":
            util.append(_points(series, name or "CPU", t0, "percent"))
    if not metrics["n"]:
        mem = [_points(series, t("se_rank", lang, rank=rank), t0, "MiB") for rank, series in view["ranks"].items()]
        if mem:
            note = t("gpu_note_ranks", lang)
    elif not metrics["has_gpu"]:
        note = (note or t("gpu_note_none", lang)) + t("gpu_note_cpu", lang)
    return _stack(mem, ["t", "MiB", "curve"]), _stack(util, ["t", "percent", "curve"]), note


def shows_gpu(view: dict) -> bool | None:
    """Whether the resource plots show GPUs (True) or the run's RAM and CPU load (False), by the run's metric
    samples; None before the first sample (the machine's GPUs decide then)."""
    metrics = view["metrics"]
    return bool(metrics["has_gpu"]) if metrics["n"] else None


# engine.runs.metrics writes why GPU metrics are missing into metrics.jsonl in English (files stay English); the page
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
