"""The Runs tab's "My secrets" section in team mode (issue 46 item 4): a logged-in account stores its own hub token,
W&B key, webhook URL, judge or SMTP key under a variable name; its runs and jobs get them (and, for a member, none of
the operator's the operator did not bind for the page). The page lists the names only: a value goes in, never back
out. The operator's secrets are the studio's environment, so the section says so to the operator.

Light: engine.core.member_secrets and the page's catalog.
"""

from __future__ import annotations

from typing import Any

from engine.core import accounts, member_secrets
from studio.i18n.localize import localize_error
from studio.i18n.page import t


def listed(lang: str = "en") -> tuple[dict, str]:
    """(the table of the asking account's secret names, a note): the operator's note says where theirs are."""
    headers = [t("secrets_col_name", lang)]
    if not accounts.owner_of_new():
        return {"headers": headers, "data": []}, t("secrets_operator", lang)
    rows = [[name] for name in member_secrets.names()]
    return {"headers": headers, "data": rows}, "" if rows else t("secrets_none", lang)


def save(name: str, value: str, lang: str = "en") -> tuple[dict, str, str]:
    """Store a secret: (the table, its note, the value box emptied); the status line says what happened."""
    name = str(name or "").strip()
    try:
        member_secrets.put(name, value or "")
    except member_secrets.SecretError as exc:
        table, _ = listed(lang)
        return table, f"❌ {localize_error(exc, lang)}", ""
    table, _ = listed(lang)
    return table, "✅ " + t("secrets_saved", lang, name=name), ""


def forget(name: str, lang: str = "en") -> tuple[dict, str]:
    name = str(name or "").strip()
    try:
        gone = member_secrets.remove(name)
    except member_secrets.SecretError as exc:
        return listed(lang)[0], f"❌ {localize_error(exc, lang)}"
    table, _ = listed(lang)
    return table, ("✅ " + t("secrets_removed", lang, name=name)) if gone else t("secrets_unknown", lang, name=name)


def build(ctx: Any) -> None:
    import gradio as gr

    texts, lang = ctx.texts, ctx.lang_value
    with texts.add(gr.Accordion(t("secrets_title", lang), open=False, elem_id="secrets"), "secrets_title"):
        texts.add(gr.Markdown(t("secrets_help", lang), elem_id="secrets-help"), "secrets_help", "value")
        with gr.Row():
            name = texts.add(
                gr.Dropdown(
                    list(member_secrets.SUGGESTED),
                    value=member_secrets.SUGGESTED[0],
                    allow_custom_value=True,
                    label=t("secrets_name", lang),
                    elem_id="secret-name",
                ),
                "secrets_name",
            )
            value = texts.add(
                gr.Textbox(label=t("secrets_value", lang), type="password", elem_id="secret-value"), "secrets_value"
            )
        with gr.Row():
            save_btn = texts.add(
                gr.Button(t("secrets_save", lang), size="sm", elem_id="secret-save"), "secrets_save", "value"
            )
            forget_btn = texts.add(
                gr.Button(t("secrets_remove", lang), size="sm", elem_id="secret-remove"), "secrets_remove", "value"
            )
        headers = [t("secrets_col_name", lang)]  # the rows come with the page's load, for the logged-in account
        table = gr.Dataframe(value={"headers": headers, "data": []}, interactive=False, elem_id="secrets-table")
        note = gr.Markdown("", elem_id="secrets-note")
    save_btn.click(save, [name, value, ctx.lang], [table, note, value], queue=False)
    forget_btn.click(forget, [name, ctx.lang], [table, note], queue=False)
    ctx.on_load.append((listed, [ctx.lang], [table, note]))
    ctx.on_lang.append((listed, [ctx.lang], [table, note]))
