"""Doctor tab: the environment checks of engine.machine.doctor (GPUs, drivers, the stack, communication) as a table.

Light: gradio + pandas; engine.machine.doctor runs its heavy probes in subprocesses.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from engine.machine.doctor import run_checks
from studio.i18n.localize import localize
from studio.i18n.page import t

COLUMNS = ["check", "status", "detail", "fix"]


def checks_frame(lang: str = "en") -> pd.DataFrame:
    """One row per check, all in the page's language: headers, verdict (PASS / WARN / FAIL), and the check's name,
    detail and fix (engine.machine.messages; what the probe reports, such as versions, stays as it is)."""
    rows = [(c.name, c.status, c.detail, c.fix) for c in run_checks()]
    return pd.DataFrame(
        [
            (localize(name, lang), t(status, lang), localize(detail, lang), localize(fix, lang))
            for name, status, detail, fix in rows
        ],
        columns=[t(f"d_{c}", lang) for c in COLUMNS],
    )


def show_checks(lang: str = "en") -> Any:
    """The table with the checks' results, shown from now on."""
    import gradio as gr

    return gr.update(value=checks_frame(lang), visible=True)


# check · verdict · detail · fix, as shares of the table's width: the long texts wrap inside their column instead of
# widening the table past the page (the fix column was cut off at the right).
COLUMN_WIDTHS = ["20%", "10%", "38%", "32%"]


def build(ctx: Any) -> None:
    import gradio as gr

    run = ctx.texts.add(gr.Button(t("doctor_run", ctx.lang_value), elem_id="doctor-run"), "doctor_run", "value")
    # Hidden until it has results: an empty table shows placeholder headers ("1 2 3").
    out = gr.Dataframe(
        headers=[t(f"d_{c}", ctx.lang_value) for c in COLUMNS],
        interactive=False,
        wrap=True,
        visible=False,
        column_widths=COLUMN_WIDTHS,
        elem_id="doctor-table",
    )
    run.click(show_checks, [ctx.lang], [out])
