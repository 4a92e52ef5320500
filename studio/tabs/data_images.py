"""The Datasets tab's images: a row's images as thumbnails beside its text, the ``<image>`` placeholders of the
rendered sample shown with the tokens the model's processor puts in for them, and the histogram's lengths counting
those tokens. Light: PIL (thumbnails) and engine.data.images; never torch or transformers.
"""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

from engine.data.images import (
    IMAGE_PLACEHOLDER,
    LF_IMAGE_MAX_PIXELS,
    LF_IMAGE_MIN_PIXELS,
    is_url,
    row_image_tokens,
    tokens_per_image,
)
from studio.i18n.page import t

THUMB_PX = 96  # the thumbnails' longer side
MAX_THUMBS = 8


def thumbnails_html(row: dict, lang: str = "en") -> str:
    """The row's images (paths already resolved and checked by the registry) as small inline PNGs; a URL is named,
    not fetched; an image that cannot be read is named with a mark."""
    refs = list(row.get("images") or [])
    if not refs:
        return ""
    from PIL import Image

    cells = []
    for ref in refs[:MAX_THUMBS]:
        name = html.escape(Path(ref).name if not is_url(ref) else ref)
        if is_url(ref):
            cells.append(f'<span class="ds-thumb-url">{name}</span>')
            continue
        try:
            with Image.open(ref) as img:
                img = img.convert("RGB")
                img.thumbnail((THUMB_PX, THUMB_PX))
                buf = io.BytesIO()
                img.save(buf, format="PNG")
        except (OSError, ValueError):
            cells.append(f'<span class="ds-thumb-bad">❌ {name}</span>')
            continue
        data = base64.b64encode(buf.getvalue()).decode("ascii")
        cells.append(f'<img class="ds-thumb" src="data:image/png;base64,{data}" alt="{name}" title="{name}">')
    more = f"<span>+{len(refs) - MAX_THUMBS}</span>" if len(refs) > MAX_THUMBS else ""
    label = html.escape(t("ds_images", lang, n=len(refs)))
    return f'<div class="ds-thumbs" id="ds-thumbs"><span>{label}</span> {"".join(cells)}{more}</div>'


def pixel_bounds(max_pixels=None, min_pixels=None) -> tuple[int, int]:
    """The form's ``model.vision.image_max_pixels`` / ``image_min_pixels`` as numbers, LF's defaults for a field left
    empty or not a positive number (the form's own check names it)."""

    def number(value, default: int) -> int:
        try:
            got = int(float(value))
        except (TypeError, ValueError):
            return default
        return got if got > 0 else default

    return number(max_pixels, LF_IMAGE_MAX_PIXELS), number(min_pixels, LF_IMAGE_MIN_PIXELS)


def mark_placeholders(
    sample: str,
    model: str,
    lang: str = "en",
    refs: list[str] | None = None,
    pixels: tuple[int, int] = (LF_IMAGE_MAX_PIXELS, LF_IMAGE_MIN_PIXELS),
) -> str:
    """The rendered sample's ``<image>`` placeholders (HTML-escaped) as badges saying the tokens each becomes: the
    model's fixed count, or for a family whose count follows the image's size, each of the row's images (``refs``,
    in placeholder order) sized as its processor sizes it within ``pixels`` (image_max_pixels, image_min_pixels)."""
    escaped = html.escape(IMAGE_PLACEHOLDER)
    if escaped not in sample:
        return sample
    per = tokens_per_image(model) if model else None
    counts = [per] * sample.count(escaped)
    if per is None and model and refs:
        counts = [row_image_tokens(model, [ref], *pixels) for ref in refs]
    pieces = sample.split(escaped)
    out = [pieces[0]]
    for i, piece in enumerate(pieces[1:]):
        n = counts[i] if i < len(counts) else None
        text = t("ds_image_tokens", lang, n=n) if n else t("ds_image_tokens_unknown", lang)
        out += [f'<span class="tok-image" title="{html.escape(text)}">[image: {text}]</span>', piece]
    return "".join(out)


_DEFAULT_PIXELS = (LF_IMAGE_MAX_PIXELS, LF_IMAGE_MIN_PIXELS)


def _row_tokens(rows: list[dict], model: str, pixels: tuple[int, int] = _DEFAULT_PIXELS) -> list[int] | None:
    """The image tokens of each row, or None when any row's cannot be known."""
    if not model:
        return None
    found = [row_image_tokens(model, list(r.get("images") or []), *pixels) for r in rows]
    return None if any(n is None for n in found) else [int(n) for n in found]


def image_tokens_note(
    rows: list[dict], model: str, lang: str = "en", pixels: tuple[int, int] = _DEFAULT_PIXELS
) -> str:
    """The rows' images and the tokens they add to the histogram's lengths ('' when the rows hold no image)."""
    images = sum(len(r.get("images") or []) for r in rows)
    if not images:
        return ""
    per = tokens_per_image(model) if model else None
    if per is not None:
        return " · " + t("ds_images_note", lang, images=images, per=per, tokens=images * per)
    tokens = _row_tokens(rows, model, pixels)
    if tokens is None:
        return " · " + t("ds_images_note_unknown", lang, images=images)
    return " · " + t("ds_images_note_sized", lang, images=images, tokens=sum(tokens), pixels=pixels[0])


def with_image_tokens(
    counts: list[int], rows: list[dict], model: str, placeholder_tokens: int, pixels: tuple[int, int] = _DEFAULT_PIXELS
) -> list[int]:
    """Each row's length with its images' tokens in place of their placeholders' text tokens (unchanged when the
    model's count is not known); images sized within ``pixels`` (image_max_pixels, image_min_pixels)."""
    tokens = _row_tokens(rows, model, pixels)
    if tokens is None:
        return counts
    return [c + n - len(r.get("images") or []) * placeholder_tokens for c, n, r in zip(counts, tokens, rows)]


def placeholder_tokens(model: str) -> int:
    """The text tokens ``<image>`` becomes with the model's tokenizer (its own image token: one)."""
    from tokenizers import Tokenizer

    raw = Tokenizer.from_file(str(Path(model) / "tokenizer.json"))
    return len(raw.encode(IMAGE_PLACEHOLDER, add_special_tokens=False).ids)
