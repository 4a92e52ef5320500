"""Doctor tab: the environment checks of engine.machine.doctor (GPUs, drivers, the stack, communication) as a table.

Light: gradio + pandas; engine.machine.doctor runs its heavy probes in subprocesses.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from engine.machine.messages import message as doctor_message
from studio import backend
from studio.i18n.localize import localize
from studio.i18n.page import t

COLUMNS = ["check", "status", "detail", "fix"]


def checks_frame(lang: str = "en") -> pd.DataFrame:
    """One row per check, all in the page's language: headers, verdict (PASS / WARN / FAIL), and the check's name,
    detail and fix (engine.machine.messages; what the probe reports, such as versions, stays as it is)."""
    try:
        rows = [(c.name, c.status, c.detail, c.fix) for c in backend.engine_module("machine.doctor").run_checks()]
    except backend.Unavailable as exc:
        rows = [(doctor_message("doctor.name_doctor"), "FAIL", str(exc), "")]
    return pd.DataFrame(
        [
            (localize(name, lang), t(status, lang), localize(detail, lang), localize(fix, lang))
            for name, status, detail, fix in rows
        ],
        columns=[t(f"d_{c}", lang) for c in COLUMNS],
    )


def build(ctx: Any) -> None:
    import gradio as gr

    run = ctx.texts.add(gr.Button(t("doctor_run", ctx.lang_value), elem_id="doctor-run"), "doctor_run", "value")
    out = gr.Dataframe(interactive=False, wrap=True, elem_id="doctor-table")
    run.click(checks_frame, [ctx.lang], [out])
