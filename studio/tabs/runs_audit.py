"""The Runs tab's audit log (issue 46 item 5): who logged in, started, stopped, deleted, renamed or ran a job, and
when, newest first. Shown to the operator and admins; a member sees one line saying it is not theirs to read
(``engine.core.audit.entries`` answers them nothing, whichever way they ask).

Light: engine.core.audit and the page's catalog.
"""

from __future__ import annotations

import time
from typing import Any

from engine.core import accounts, audit
from studio.i18n.page import t

COLUMNS = ("time", "who", "via", "action", "target")


def table(lang: str = "en", limit: int = 200) -> tuple[dict, str]:
    """(the table, a note) for the viewer: the log for the operator and admins, nothing and a note for a member."""
    headers = [t(f"audit_col_{c}", lang) for c in COLUMNS]
    if accounts.viewer() is not None:
        return {"headers": headers, "data": []}, t("audit_admins_only", lang)
    rows = [
        [
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(e.get("ts") or 0))),
            str(e.get("who", "")),
            str(e.get("via", "")),
            t(f"audit_action_{e.get('action')}", lang) if e.get("action") in ACTIONS else str(e.get("action", "")),
            " ".join([str(e.get("target", "")), *[f"{k}={v}" for k, v in (e.get("detail") or {}).items()]]),
        ]
        for e in audit.entries(limit)
    ]
    return {"headers": headers, "data": rows}, "" if rows else t("audit_empty", lang)


ACTIONS = (
    "login",
    "login-failed",
    "start",
    "stop",
    "delete",
    "rename",
    "job",
    "move",
    "token",
    "revoke-token",
    "share",
)


def build(ctx: Any) -> None:
    import gradio as gr

    texts, lang = ctx.texts, ctx.lang_value
    with texts.add(gr.Accordion(t("audit_title", lang), open=False, elem_id="audit"), "audit_title"):
        refresh = texts.add(
            gr.Button(t("audit_refresh", lang), size="sm", elem_id="audit-refresh"), "audit_refresh", "value"
        )
        first, _ = table(lang, limit=0)
        log = gr.Dataframe(value=first, interactive=False, wrap=True, elem_id="audit-table")
        note = gr.Markdown("", elem_id="audit-note")
    refresh.click(table, [ctx.lang], [log, note], queue=False)
    ctx.on_load.append((table, [ctx.lang], [log, note]))
    ctx.on_lang.append((table, [ctx.lang], [log, note]))
