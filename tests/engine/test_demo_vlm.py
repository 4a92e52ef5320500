"""The demo's vision-language model: built offline, loads through AutoProcessor / AutoModelForImageTextToText like a
hub VLM, its processor expands ``<image>`` into the tower's patch count, its images look like their captions."""

from __future__ import annotations

import json
from pathlib import Path


def test_demo_vlm_loads_through_the_auto_classes(demo_paths):
    import torch
    from PIL import Image
    from transformers import AutoModelForImageTextToText, AutoProcessor

    path = demo_paths["vlm_model_dir"]
    processor = AutoProcessor.from_pretrained(path)
    model, info = AutoModelForImageTextToText.from_pretrained(path, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    assert type(model).__name__ == "LlavaForConditionalGeneration" and type(processor).__name__ == "LlavaProcessor"
    assert sum(p.numel() for p in model.parameters()) < 1_000_000
    vision = model.config.vision_config
    patches = (vision.image_size // vision.patch_size) ** 2  # CLS dropped by the "default" feature selection
    msgs = [
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What shape is in the picture?"}]},
        {"role": "assistant", "content": "It is a red circle."},
    ]
    text = processor.apply_chat_template(msgs, tokenize=False)
    assert text == (
        "<|im_start|>user\n<image>What shape is in the picture?<|im_end|>\n"
        "<|im_start|>assistant\nIt is a red circle.<|im_end|>\n"
    )
    as_string = [{"role": "user", "content": "<image>What shape is in the picture?"}, msgs[1]]
    assert processor.apply_chat_template(as_string, tokenize=False) == text  # LF's string contents render the same
    red, blue = Image.new("RGB", (80, 60), (220, 30, 30)), Image.new("RGB", (80, 60), (40, 70, 220))
    batch = processor(text=[text], images=[red], return_tensors="pt")
    assert int((batch["input_ids"] == model.config.image_token_id).sum()) == patches
    with torch.no_grad():
        out = model(**batch, labels=batch["input_ids"])
        other = model(**processor(text=[text], images=[blue], return_tensors="pt")).logits
    assert torch.isfinite(out.loss) and not torch.allclose(out.logits, other)  # the image reaches the answer


def test_demo_images_show_what_their_captions_say(demo_paths):
    from PIL import Image

    data = Path(demo_paths["data_dir"])
    rows = json.loads((data / "demo_vlm.json").read_text(encoding="utf-8"))
    channel = {"red": (1, 0, 0), "green": (0, 1, 0), "blue": (0, 0, 1), "yellow": (1, 1, 0)}
    seen = 0
    for row in rows:
        answer = row["messages"][1]["content"]
        if not answer.startswith("It is a "):
            continue
        colour, shape = answer[len("It is a ") : -1].split()
        with Image.open(data / row["images"][0]) as img:
            w, h = img.size
            r, g, b = img.convert("RGB").getpixel((w // 2, h * 2 // 3))  # inside every shape drawn
            corner = img.convert("RGB").getpixel((2, 2))
        strong = tuple(int(v > 150) for v in (r, g, b))
        assert strong == channel[colour], (row["images"][0], (r, g, b))
        assert corner != (r, g, b) and shape in row["images"][0]
        seen += 1
    assert seen == 24


def test_second_build_keeps_the_model(demo_paths):
    from engine.core import workspace
    from engine.trainer import demo_vlm

    weights = Path(demo_paths["vlm_model_dir"]) / "model.safetensors"
    mtime = weights.stat().st_mtime_ns
    demo_vlm.build(Path(demo_paths["vlm_model_dir"]), workspace.data_dir())
    assert weights.stat().st_mtime_ns == mtime
