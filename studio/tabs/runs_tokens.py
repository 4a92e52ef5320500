"""The Runs tab's "Command-line tokens" section in team mode (issue 46 item 6): a logged-in account makes a personal
token for its own command line (``STUDIO_SERVER`` + ``STUDIO_TOKEN``: ``engine.commands.remote_cli``), sees it once,
lists its tokens by id and label and revokes them. The operator's command line is the shell: the section says so.

Light: engine.core.api_tokens and the page's catalog.
"""

from __future__ import annotations

import time
from typing import Any

from engine.core import accounts, api_tokens
from studio.i18n.localize import localize_error
from studio.i18n.page import t


def listed(lang: str = "en") -> tuple[dict, str]:
    """(the table of the asking account's tokens, a note)."""
    headers = [t("tokens_col_id", lang), t("tokens_col_label", lang), t("tokens_col_created", lang)]
    if not accounts.owner_of_new():
        return {"headers": headers, "data": []}, t("tokens_operator", lang)
    rows = [
        [x["id"], x["label"], time.strftime("%Y-%m-%d %H:%M", time.localtime(float(x["created"] or 0)))]
        for x in api_tokens.listed()
    ]
    return {"headers": headers, "data": rows}, "" if rows else t("tokens_none", lang)


def create(label: str, lang: str = "en") -> tuple[dict, str, str]:
    """(the table, a note, the new token: shown this once, in its own box)."""
    try:
        token_id, token = api_tokens.create(label)
    except api_tokens.TokenError as exc:
        return listed(lang)[0], f"❌ {localize_error(exc, lang)}", ""
    return listed(lang)[0], "✅ " + t("tokens_made", lang, id=token_id), token


def revoke(token_id: str, lang: str = "en") -> tuple[dict, str]:
    try:
        api_tokens.revoke(token_id)
    except api_tokens.TokenError as exc:
        return listed(lang)[0], f"❌ {localize_error(exc, lang)}"
    return listed(lang)[0], "✅ " + t("tokens_revoked", lang, id=str(token_id).strip())


def build(ctx: Any) -> None:
    import gradio as gr

    texts, lang = ctx.texts, ctx.lang_value
    with texts.add(gr.Accordion(t("tokens_title", lang), open=False, elem_id="tokens"), "tokens_title"):
        texts.add(gr.Markdown(t("tokens_help", lang), elem_id="tokens-help"), "tokens_help", "value")
        with gr.Row():
            label = texts.add(gr.Textbox(label=t("tokens_label", lang), elem_id="token-label"), "tokens_label")
            make = texts.add(
                gr.Button(t("tokens_create", lang), size="sm", elem_id="token-create"), "tokens_create", "value"
            )
        shown = texts.add(
            gr.Textbox(label=t("tokens_new", lang), interactive=False, buttons=["copy"], elem_id="token-new"),
            "tokens_new",
        )
        with gr.Row():
            which = texts.add(gr.Textbox(label=t("tokens_col_id", lang), elem_id="token-id"), "tokens_col_id")
            drop = texts.add(
                gr.Button(t("tokens_revoke", lang), size="sm", variant="stop", elem_id="token-revoke"),
                "tokens_revoke",
                "value",
            )
        headers = [t("tokens_col_id", lang), t("tokens_col_label", lang), t("tokens_col_created", lang)]
        table = gr.Dataframe(value={"headers": headers, "data": []}, interactive=False, elem_id="tokens-table")
        note = gr.Markdown("", elem_id="tokens-note")
    make.click(create, [label, ctx.lang], [table, note, shown], queue=False)
    drop.click(revoke, [which, ctx.lang], [table, note], queue=False)
    ctx.on_load.append((listed, [ctx.lang], [table, note]))
    ctx.on_lang.append((listed, [ctx.lang], [table, note]))
