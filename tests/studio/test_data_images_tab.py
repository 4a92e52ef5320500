"""The Datasets tab on an image dataset: thumbnails of a row's images, its placeholders shown with the tokens the
processor puts in, and histogram lengths that count those tokens (checked against the real processor)."""

from __future__ import annotations

import base64
import io
import re
from pathlib import Path


def _processor_lengths(model_dir: str, rows: list[dict]) -> list[int]:
    """Each row's full length as the model's own processor tokenises it with its images (independent of Studio)."""
    from PIL import Image
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(model_dir)
    out = []
    for row in rows:
        text = processor.apply_chat_template(row["messages"], tokenize=False)
        images = [Image.open(p).convert("RGB") for p in row["images"]]
        out.append(len(processor(text=[text], images=images or None)["input_ids"][0]))
    return out


def test_thumbnails_show_the_rows_images(demo_paths):
    from PIL import Image

    from studio.tabs import data, data_images

    rows, problems, _ = data.head(demo_paths["vlm_dataset"])
    assert not problems
    two = next(r for r in rows if len(r["images"]) == 2)
    shown = data_images.thumbnails_html(two)
    pngs = re.findall(r'<img class="ds-thumb" src="data:image/png;base64,([^"]+)"', shown)
    assert len(pngs) == 2 and "2 image(s)" in shown
    for png, src in zip(pngs, two["images"]):
        thumb = Image.open(io.BytesIO(base64.b64decode(png))).convert("RGB")
        assert max(thumb.size) <= data_images.THUMB_PX
        with Image.open(src) as full:
            full = full.convert("RGB")
            w, h = full.size
            want = full.getpixel((w // 2, h * 2 // 3))
        tw, th = thumb.size
        assert thumb.getpixel((tw // 2, th * 2 // 3)) == want  # the same picture, shrunk
    assert Path(two["images"][0]).name in shown


def test_sample_and_histogram_count_the_image_tokens(demo_paths):
    from studio.tabs import data, data_images

    model = demo_paths["vlm_model_dir"]
    rows, _, _ = data.head(demo_paths["vlm_dataset"])
    used = data._within_text_budget(rows[: data.LENGTHS_ROWS])
    want = _processor_lengths(model, used)
    frame, note = data.lengths(demo_paths["vlm_dataset"], model, "auto", 48, rows=rows)
    over = sum(n > 48 for n in want)
    assert f"{len(want)} rows · max {max(want)} tokens · cutoff 48" in note and f"({over} rows)" in note
    images = sum(len(r["images"]) for r in used)
    assert f"{images} images × 16 tokens = {images * 16} image tokens counted" in note
    assert int(frame["rows"].sum()) == len(want)
    sample = data_images.mark_placeholders(
        data.sample_html(demo_paths["vlm_dataset"], model, "auto", rows=rows), model
    )
    assert "[image: 16 tokens]" in sample and "&lt;image&gt;" not in sample
