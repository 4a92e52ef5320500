"""The Datasets tab on an image dataset: thumbnails of a row's images, its placeholders shown with the tokens the
processor puts in, and histogram lengths that count those tokens (checked against the real processor)."""

from __future__ import annotations

import base64
import io
import re
from pathlib import Path

import pytest


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


@pytest.mark.parametrize("max_px", [None, 256 * 256], ids=["lf-default", "form-256x256"])
def test_qwen_images_are_counted_by_their_own_size(tmp_path, max_px):
    """A Qwen2-VL model (its config.json is what the tab reads): each image's tokens follow its size, as the real
    Qwen2-VL image processor makes them after LLaMA-Factory's shrink to image_max_pixels (done here by hand): LF's
    default, or the value the form's model.vision.image_max_pixels holds."""
    import json
    import math

    from PIL import Image
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    from engine.data.images import LF_IMAGE_MAX_PIXELS, LF_IMAGE_MIN_PIXELS
    from studio.tabs import data_images

    pixels = data_images.pixel_bounds(max_px, "")
    assert pixels == (max_px or LF_IMAGE_MAX_PIXELS, LF_IMAGE_MIN_PIXELS)
    limit = pixels[0]

    model = tmp_path / "qwen2-vl"
    model.mkdir()
    vision = {"patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2}
    (model / "config.json").write_text(json.dumps({"model_type": "qwen2_vl", "vision_config": vision}))
    proc = Qwen2VLImageProcessorPil(patch_size=14, merge_size=2, temporal_patch_size=2)
    bounds = {"shortest_edge": 3136, "longest_edge": 12845056}
    sizes = [(640, 480), (1920, 1080), (100, 60), (333, 777)]
    refs, want = [], []
    for i, (w, h) in enumerate(sizes):
        path = tmp_path / f"img{i}.png"
        Image.new("RGB", (w, h), (i * 40, 90, 200)).save(path)
        refs.append(str(path))
        img = Image.new("RGB", (w, h))
        if w * h > limit:  # LF's shrink: int(side * sqrt(max / pixels))
            f = math.sqrt(limit / (w * h))
            img = img.resize((int(w * f), int(h * f)))
        grid = proc(images=[img], size=bounds, return_tensors="np")["image_grid_thw"][0]
        want.append(int(grid.prod()) // 4)
    rows = [{"images": refs[:2]}, {"images": refs[2:]}]
    assert data_images.with_image_tokens([10, 20], rows, str(model), 1, pixels) == [
        10 + want[0] + want[1] - 2,
        20 + want[2] + want[3] - 2,
    ]
    note = data_images.image_tokens_note(rows, str(model), "en", pixels)
    assert f"4 images, each sized as the processor sizes it (image_max_pixels {limit})" in note
    assert f"= {sum(want)} image tokens counted" in note
    shown = data_images.mark_placeholders("a &lt;image&gt; b &lt;image&gt;", str(model), "en", refs[:2], pixels)
    assert shown.count("[image: ") == 2
    assert f"[image: {want[0]} tokens]" in shown and f"[image: {want[1]} tokens]" in shown


def test_the_tab_sizes_images_with_the_forms_pixel_bounds(studio_home):
    """The Datasets tab's sample and histogram are drawn with the Train form's model.vision.image_max_pixels and
    image_min_pixels (the values the run will size its images with), read from the page's own event wiring."""
    from studio.app import build_app

    blocks = build_app()
    where = ("studio.tabs.data", "build.<locals>._show")
    (show,) = [
        f for f in blocks.fns.values() if (getattr(f.fn, "__module__", ""), getattr(f.fn, "__qualname__", "")) == where
    ]
    ids = [getattr(c, "elem_id", None) for c in show.inputs]
    assert "f-model-vision-image-max-pixels" in ids and "f-model-vision-image-min-pixels" in ids, ids
