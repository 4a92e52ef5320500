"""Doctor tab: the environment checks of engine.doctor (GPUs, drivers, the stack, communication) as a table.

Light: gradio + pandas; engine.doctor runs its heavy probes in subprocesses.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from studio import backend
from studio.i18n import t


def checks_frame() -> pd.DataFrame:
    try:
        checks = backend.engine_module("doctor").run_checks()
    except backend.Unavailable as exc:
        return pd.DataFrame([{"check": "doctor", "status": "FAIL", "detail": str(exc), "fix": ""}])
    return pd.DataFrame(
        [{"check": c.name, "status": c.status, "detail": c.detail, "fix": c.fix} for c in checks],
        columns=["check", "status", "detail", "fix"],
    )


def build(ctx: Any) -> None:
    import gradio as gr

    run = ctx.texts.add(gr.Button(t("doctor_run", ctx.lang_value), elem_id="doctor-run"), "doctor_run", "value")
    out = gr.Dataframe(interactive=False, wrap=True, elem_id="doctor-table")
    run.click(checks_frame, None, [out])
