"""The live dashboard's words, from a run's view (``studio.monitor.new_view`` / ``read_new``): the progress bar and
its text (the download phase first, then steps and ETA), the status line, why a run stopped or failed, and the
log's tail. The charts' frames are ``studio.monitor``'s; the dashboard (``studio.tabs.dashboard``) asks both and
lays out what they return, and neither calls back into it.

Light: stdlib, engine.core.messages, engine.models.hub_cache (its byte sizes), engine.runs.records (the active
statuses), studio.i18n.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from engine.core.messages import payload_message
from engine.core.units import file_size
from engine.runs.records import ACTIVE
from studio.i18n.localize import localize
from studio.i18n.page import STRINGS, t


def _downloading(view: dict) -> dict | None:
    """The download phase's progress while it is the run's current phase (before the trainer started)."""
    if view.get("started") or view.get("terminal"):
        return None
    return view.get("download")


def _download_text(dl: dict, lang: str) -> str:
    frac = float(dl.get("progress") or 0.0)
    eta = dl.get("eta_seconds")
    speed = f" · {file_size(dl['speed'])}/s" if isinstance(dl.get("speed"), (int, float)) else ""
    eta_text = f" · {t('w_eta', lang)} {format_duration(eta)}" if eta is not None and frac < 1 else ""
    size = f" · {file_size(dl.get('done') or 0)}/{file_size(dl.get('total') or 0)}"
    return f"{t('w_downloading', lang)} {frac * 100:.0f}%{size}{speed}{eta_text}"


def progress_html(view: dict, lang: str = "en") -> str:
    dl = _downloading(view)
    if dl is not None:
        frac = max(0.0, min(1.0, float(dl.get("progress") or 0.0)))
        return (
            f'<div class="studio-progress"><div class="bar" style="width:{frac * 100:.1f}%"></div></div>'
            f'<div class="studio-progress-text">{_download_text(dl, lang)}</div>'
        )
    last_log = view.get("last_log") or {}
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
    ended = bool(view.get("terminal"))  # a stopped or failed run has no time left to estimate
    eta_text = f" · {t('w_eta', lang)} {format_duration(eta)}" if eta is not None and frac < 1 and not ended else ""
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


def status_line(view: dict, status: str = "", lang: str = "en", detail: str = "") -> str:
    """One line: status (the registry's, as the run picker's label says it; ``detail`` beside it: a cluster run's
    Slurm job), last step and loss, speed; a stopped run says why in the same phrase, a failed run says why."""
    term = view.get("terminal") or {}
    payload = term.get("payload") or {}
    last_log = view.get("last_log") or {}
    status = status or term.get("type") or ("running" if view.get("started") else "waiting")
    word = t(f"st_{status}", lang) if f"st_{status}" in STRINGS else status
    said = term.get("type") == "stopped" and status == "stopped"
    if said:  # one phrase that says "stopped" once (it read "stopped · stopped (stopped by the user (SIGTERM))")
        word = stopped_phrase(payload, lang)
    parts = [f"**{view.get('run_id') or '–'}**", word, detail]
    dl = _downloading(view)
    if dl is not None:
        parts.append(_download_text(dl, lang))
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
        error = event_text(payload, "error", lang)
        parts.append(f"{t('w_cause', lang)}{_colon(lang)}**{cause}**{_colon(lang)}{error}")
    if term.get("type") == "stopped" and not said and status not in ACTIVE:  # (while the registry says running,
        parts.append(stopped_phrase(payload, lang))  # as the run picker does, the header waits for it to end)
    return " · ".join(str(p) for p in parts if p)


def stopped_phrase(payload: dict, lang: str = "en") -> str:
    """A stopped run's end as one phrase that says "stopped" once: its reason alone where the reason says it
    ("stopped by health rule: ...", "由用户在第 3 步停止；..."), else the word with the reason in brackets ("stopped
    (by the user at step 3; checkpoint saved at ...)", "stopped (SIGTERM)")."""
    reason = stop_reason(payload, lang)
    if not reason:
        return t("st_stopped", lang)
    return reason if t("stopped_stem", lang) in reason.lower() else t("stopped_why", lang, reason=reason)


def event_text(payload: dict, name: str, lang: str = "en") -> str:
    """A text field of an event in the page's language when its writer stored the catalog key beside it (the runner
    and the merge do: ``<name>_msg``); the trainer's own words (errors from libraries) stay as written."""
    return localize(payload_message(payload, name) or "", lang)


# Runs recorded before the runner stored the key beside its stop reason: the same words matched by pattern.
_USER_STOP = re.compile(
    r"^stopped by the user \(process ended before it reported; (?:signal (\w+)|exit code (-?\d+))\)$"
)


def stop_reason(payload: dict | str, lang: str = "en") -> str:
    """Why a run stopped (a stopped event's payload, or its reason text) in the page's language."""
    if isinstance(payload, dict):
        if payload.get("reason_msg"):
            return event_text(payload, "reason", lang)
        payload = str(payload.get("reason", ""))
    m = _USER_STOP.match(payload) if lang != "en" else None
    if not m:
        return payload
    how = t("how_signal", lang, signal=m[1]) if m[1] else t("how_exit", lang, code=m[2])
    return t("stop_by_user", lang, how=how)


def cause_text(cause: str, lang: str = "en") -> str:
    """engine.trainer.train.classify's cause (oom, communication, data, config, killed, disk, other) in the page's
    language."""
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
    error = event_text(p, "error", lang)
    head = f"{t('w_cause', lang)}{_colon(lang)}{cause}\n{t('w_error', lang)}{_colon(lang)}{error}"
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
