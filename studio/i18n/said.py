"""A message the page shows, kept in every language of the page: a language switch says it again (Start and Stop on
the Train tab, Upload and Register on the Datasets tab). Light: no gradio."""

from __future__ import annotations

from collections.abc import Callable

from studio.i18n.page import LANGS


class Said(str):
    """A message the page shows, in the language it was asked in; ``texts`` holds it in every language."""

    texts: dict[str, str]


def said(render: Callable[[str], str], lang: str) -> Said:
    """``render(code)`` for every language of the page, as a ``Said`` in ``lang``."""
    texts = {code: render(code) for code in LANGS}
    out = Said(texts.get(lang, texts["en"]))
    out.texts = texts
    return out
