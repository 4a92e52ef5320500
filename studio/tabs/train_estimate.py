"""The Train tab's plan panel, time and cost part: the run's tokens after the template and cutoff, its optimizer
steps, the expected minutes on the target (a GPU picked here, this machine's GPUs, or this CPU) and the cost at the
price per GPU-hour typed here (the GPU's default when empty). Numbers from ``engine.plan.estimate``; this module
only words them in the page's language.

Light: html and engine's light modules (engine.plan; never torch).
"""

from __future__ import annotations

import html
from typing import Any

from engine.plan import estimate, planner
from studio.i18n.localize import localize, localize_error
from studio.i18n.page import t

AUTO = "auto"  # the GPU choice that means: this machine's GPUs (or its CPU)


def gpu_choices() -> list[str]:
    return [AUTO, *estimate.gpu_names()]


def duration_text(seconds: float, lang: str = "en") -> str:
    """A duration as a person reads it: seconds under a minute and a half, minutes under 90, hours beyond, in the
    page's language (a 9 s run is "9 s", not "0.15 min")."""
    if seconds < 90:
        return t("est_seconds", lang, n=f"{seconds:.1f}" if seconds < 10 else f"{seconds:.0f}")
    if seconds < 5400:
        return t("est_min", lang, n=f"{seconds / 60:.1f}")
    return t("est_hours", lang, n=f"{seconds / 3600:.1f}")


def typed_price(text: Any) -> float | None:
    """The price per GPU-hour typed in the panel ("2", "2.5", "$2"): None when empty (the GPU's default); anything
    else that is not a number of dollars at least 0 is refused naming the field."""
    raw = str("" if text is None else text).strip().removeprefix("$").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise ValueError(str(text))
    return value


def estimate_html(spec: Any, plan: dict, gpu: str | None, price: Any, hw: Any, lang: str = "en") -> str:
    """The estimate block under the memory plan. ``plan``: the memory plan's dict (its checkpointing decision
    resolves ``auto``, which the FLOPs count depends on)."""
    try:
        price = typed_price(price)
    except ValueError:
        why = html.escape(t("est_price_bad", lang, value=str(price)))
        return f'<div class="plan" id="plan-estimate"><small>{why}</small></div>'
    try:
        timed = spec.model_copy(deep=True)
        target = None if not gpu or gpu == AUTO else gpu
        checkpointing = plan.get("checkpointing")
        if target is None and not (hw and getattr(hw, "gpus", None)) and spec.launch.device == "auto":
            # the run will train on this CPU: checkpointing auto is decided against its memory, as the trainer does
            timed.launch.device = "cpu"
            checkpointing = planner.plan(timed, hardware=hw).checkpointing
        if checkpointing is not None:
            timed.train.gradient_checkpointing = "on" if checkpointing else "off"
        est = estimate.estimate(timed, hardware=hw, gpu=target, price_per_hour=price)
    except Exception as exc:  # an estimate never breaks the page: say why there is none
        why = html.escape(localize_error(exc, lang))
        return (
            f'<div class="plan" id="plan-estimate"><small>{html.escape(t("est_unknown", lang, why=why))}</small></div>'
        )
    parts = [f"<b>{html.escape(t('est_title', lang))}</b>"]
    c = est.counts
    if c:
        tokens = t(
            "est_tokens", lang, tokens=f"{c['tokens']:,}", trained=f"{c['trained_tokens']:,}", samples=c["samples"]
        )
        parts.append(f'<span id="est-tokens">{html.escape(tokens)}</span>')
    parts.append(f'<span id="est-steps">{html.escape(t("est_steps", lang, steps=est.steps))}</span>')
    where = t("est_where_cpu", lang, n=est.devices) if est.target == "cpu" else f"{est.devices} × {est.target}"
    if est.seconds is not None:
        minutes = t("est_minutes", lang, where=where, duration=duration_text(est.seconds, lang))
        parts.append(f'<span id="est-minutes">{html.escape(minutes)}</span>')
    if est.cost is not None:
        cost = "< $0.01" if est.cost < 0.01 else f"${est.cost:,.2f}"
        text = t("est_cost", lang, cost=cost, price=f"{est.price_per_hour:g}")
        parts.append(f'<span id="est-cost">{html.escape(text)}</span>')
    elif est.seconds is not None:
        parts.append(f'<span id="est-cost">{html.escape(t("est_cost_none", lang))}</span>')
    for note in est.notes:
        parts.append(f"<small>• {html.escape(localize(note, lang))}</small>")
    return '<div class="plan" id="plan-estimate">' + "<br>".join(parts) + "</div>"
