"""A run's health alerts as the page shows them: marks on the loss curve, the dashboard's list, the Runs table's
column.

Light: pandas, numpy, engine.core, engine.spec.watch_group (the rules' labels), studio.i18n. The alerts are the run's
``alert`` events (``engine.watch.health``), collected into the dashboard's view by ``studio.monitor.read_new``; the
reason is the engine's catalog message, shown in the page's language.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from engine.core import events as events_mod
from engine.core.messages import payload_message
from engine.spec.watch_group import HealthSpec
from studio.i18n.labels import LABELS_ZH
from studio.i18n.localize import localize
from studio.i18n.page import STRINGS, t

ALERT_COLOR = "#d62728"  # red: on the light and the dark theme, apart from the loss curves' blue, orange and green


def rule_label(rule: str, lang: str = "en") -> str:
    """A rule's name as the form labels its field (``health.<rule>``)."""
    info = HealthSpec.model_fields.get(rule)
    extra = info.json_schema_extra if info is not None and isinstance(info.json_schema_extra, dict) else {}
    label = str(extra.get("label") or rule)
    return LABELS_ZH.get(f"health.{rule}", label) if lang == "zh" else label


def from_event(ev: dict) -> dict:
    """What the page keeps of one alert event."""
    p = ev.get("payload") or {}
    return {
        "step": ev.get("step"),
        "rule": str(p.get("rule", "")),
        "action": str(p.get("action", "")),
        "reason": p.get("reason", ""),
        "reason_msg": p.get("reason_msg"),
    }


def reason(alert: dict, lang: str = "en") -> str:
    return localize(payload_message(alert, "reason") or "", lang)


def mark_name(alert: dict, lang: str = "en") -> str:
    """The legend entry of an alert's mark, short enough for the legend's width: "⚠ grad norm @19"."""
    key = f"alr_{alert['rule']}"
    return f"⚠ {t(key, lang) if key in STRINGS else alert['rule']} @{alert['step']}"


def marks(alerts: list[dict], frame: pd.DataFrame, x_at, lang: str = "en") -> pd.DataFrame:
    """``frame`` (the loss plot's x / value / curve) with a vertical rule per alert at its step, across the values
    drawn, each its own series so the legend names it. ``x_at(step)``: the step's x on the plot's axis."""
    if not alerts or frame.empty:
        return frame
    values = frame["value"].to_numpy(dtype="float64")
    values = values[np.isfinite(values)]
    if not len(values):
        return frame
    low, high = float(values.min()), float(values.max())
    if high == low:
        low, high = low - 0.5, high + 0.5
    rows = []
    for alert in alerts:
        x = x_at(alert["step"]) if alert.get("step") is not None else float("nan")
        if x is None or not np.isfinite(x):
            continue
        name = mark_name(alert, lang)
        rows += [{"x": float(x), "value": low, "curve": name}, {"x": float(x), "value": high, "curve": name}]
    if not rows:
        return frame
    return pd.concat([frame, pd.DataFrame(rows).astype(frame.dtypes.to_dict())], ignore_index=True)


def mark_colors(alerts: list[dict], lang: str = "en") -> dict[str, str]:
    return {mark_name(a, lang): ALERT_COLOR for a in alerts}


def table_markdown(alerts: list[dict], lang: str = "en") -> str:
    """The dashboard's list: step, rule, action, reason; empty when the run has none."""
    if not alerts:
        return ""
    head = [t("al_step", lang), t("al_rule", lang), t("al_action", lang), t("al_reason", lang)]
    lines = [f"**{t('al_title', lang)}**", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for a in alerts:
        cells = [str(a["step"]), rule_label(a["rule"], lang), t(f"al_{a['action']}", lang), reason(a, lang)]
        lines.append("| " + " | ".join(html.escape(c).replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def read_alerts(run_dir: str | Path) -> list[dict]:
    """A run's alerts from its folder (the Runs table, which has no live view)."""
    return [from_event(e) for e in events_mod.read_all(Path(run_dir) / "events.jsonl") if e.get("type") == "alert"]


def column_text(alerts: list[dict], lang: str = "en") -> str:
    """The Runs table's cell: how many, and the first one ("2 · Gradient norm blow-up @19")."""
    if not alerts:
        return ""
    first = alerts[0]
    return f"{len(alerts)} · {rule_label(first['rule'], lang)} @{first['step']}"


def add_to_view(view: dict[str, Any], ev: dict) -> None:
    view.setdefault("alerts", []).append(from_event(ev))
