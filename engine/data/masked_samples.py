"""Masked samples and token lengths: a canonical row as the stage trains it, in (text, trained) pieces (the page's
coloured sample: prompts not trained, answers trained; pt trains the whole text), and the tokens of those pieces
per row (the page's length histogram, the plan's token and step counts).

Light: stdlib + engine.data.templates (jinja2) + the ``tokenizers`` library, only inside ``piece_lengths``; never
torch/transformers. The trainer (engine/trainer/dataset.py) renders with the same templates, so what the page shows
is what is trained.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.data.templates import (
    TokenizerInfo,
    assistant_text,
    conversation_segments,
    pretrain_text,
    prompt_text,
    tokenizer_info,
)


def _settings(spec_or_template: Any) -> tuple[str, bool, str, dict]:
    """(template, train_on_prompt, stage, the data options that change rendering: enable_thinking, tool_format,
    mask_history)."""
    if isinstance(spec_or_template, str):
        return spec_or_template, False, "sft", {}
    d = spec_or_template.data
    options = {
        "enable_thinking": d.enable_thinking,
        "tool_format": None if d.tool_format == "template" else d.tool_format,
        "mask_history": d.mask_history,
    }
    return d.template, d.train_on_prompt, spec_or_template.method.stage, options


def render_sample(
    spec_or_template: Any, tokenizer: Any, row: dict, stage: str | None = None
) -> list[tuple[str, bool]]:
    """A canonical row as [(text, trained)] pieces, for the page's coloured masked-sample view. ``stage`` (sft, pt,
    dpo, kto, rm) replaces the spec's, or the default sft when only a template name is given. dpo and rm show the
    prompt and the chosen answer, kto the prompt and its last answer (the one its tag judges)."""
    name, train_on_prompt, spec_stage, options = _settings(spec_or_template)
    stage = stage or spec_stage
    info = tokenizer if isinstance(tokenizer, TokenizerInfo) else tokenizer_info(tokenizer)
    if stage == "pt":
        return [(pretrain_text(row, info), True)]
    tool_format = options.get("tool_format")
    if stage in ("dpo", "rm") or "chosen" in row:
        prompt = prompt_text(name, info, row.get("system", ""), row["messages"], row.get("tools"), tool_format)
        return [(prompt, False), (assistant_text(name, info, row.get("chosen", "")), True)]
    if stage == "kto" and row["messages"]:
        *history, answer = row["messages"]
        prompt = prompt_text(name, info, row.get("system", ""), history, row.get("tools"), tool_format)
        return [(prompt, False), (assistant_text(name, info, answer["content"]), True)]
    pieces: list[tuple[str, bool]] = []
    segs = conversation_segments(
        name,
        info,
        row.get("system", ""),
        row["messages"],
        row.get("tools"),
        enable_thinking=options.get("enable_thinking", True),
        tool_format=tool_format,
        mask_history=bool(options.get("mask_history")),
    )
    for i, (prompt, response) in enumerate(segs):
        # mask_history (LF): only the last answer is trained
        pieces += [(prompt, train_on_prompt), (response, not options.get("mask_history") or i == len(segs) - 1)]
    return pieces


_WIDE = (("\u2e80", "\u9fff"), ("\uac00", "\ud7af"), ("\uf900", "\ufaff"))  # CJK, kana, hangul, compatibility
CHARS_PER_TOKEN = 4  # English in the BPE vocabularies of today's LLMs: about four characters a token


def approx_tokens(text: str) -> int:
    """Tokens of ``text`` without its tokenizer: a CJK character (or kana, hangul) a token, other text
    ``CHARS_PER_TOKEN`` characters a token. Good to a few tens of percent; the plan says it is an estimate."""
    wide = sum(1 for ch in text if any(lo <= ch <= hi for lo, hi in _WIDE))
    return wide + -(-(len(text) - wide) // CHARS_PER_TOKEN)


def token_lengths(spec_or_template: Any, tokenizer: Any, rows: list[dict], stage: str | None = None) -> list[int]:
    """Tokens per canonical row before truncation (for the length histogram): the text the stage trains on (pt:
    the whole text with its EOS). ``tokenizer``: object or folder; ``stage`` as in ``render_sample``."""
    return [sum(n for n, _ in pieces) for pieces in piece_lengths(spec_or_template, tokenizer, rows, stage)]


def piece_lengths(
    spec_or_template: Any, tokenizer: Any, rows: list[dict], stage: str | None = None
) -> list[list[tuple[int, bool]]]:
    """Per canonical row, (tokens, trained) of each piece ``render_sample`` gives, each piece tokenised on its own
    as the trainer's encoder does (engine.trainer.dataset), for the plan's token and step counts. ``tokenizer``
    None (the model's tokenizer is not here yet): ``approx_tokens`` of each piece, rendered with no special tokens."""
    if tokenizer is None:
        info, count = tokenizer_info(None), approx_tokens
    elif isinstance(tokenizer, (str, Path)):
        from tokenizers import Tokenizer

        raw = Tokenizer.from_file(str(Path(tokenizer) / "tokenizer.json"))
        info = tokenizer_info(tokenizer)

        def count(text: str) -> int:
            return len(raw.encode(text, add_special_tokens=False).ids)
    else:
        info = tokenizer_info(tokenizer)

        def count(text: str) -> int:
            return len(tokenizer.encode(text, add_special_tokens=False))

    return [
        [(count(t) if t else 0, trained) for t, trained in render_sample(spec_or_template, info, row, stage)]
        for row in rows
    ]
