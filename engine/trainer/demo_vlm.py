"""The demo's vision-language model and its image dataset, built offline in a couple of seconds (``studio demo``).

The model is a seeded, randomly initialised LLaVA (a CLIP vision tower, a two-layer projector and a Llama decoder)
written with ``save_pretrained``, with a real ``LlavaProcessor`` (CLIP's PIL image processor + a byte-level BPE
tokenizer trained here on the dataset's texts, with the ``<image>`` token and a chatml template that takes both
string and list-of-parts contents) saved beside it, so it loads back through ``AutoProcessor`` and
``AutoModelForImageTextToText`` like any hub VLM. LLaVA is the family chosen because its processor needs no
torchvision (Qwen2-VL's processor requires a video processor, which does) and its image tokens are a fixed count.

The dataset (shapes and colours drawn with PIL, captions generated from what was drawn) is written in LLaMA-Factory's
multimodal layout: ``messages`` with ``<image>`` placeholders and an ``images`` column of paths relative to the
dataset folder, registered in ``dataset_info.json`` with ``columns.images`` as LF's ``mllm_demo`` is. Its preference
set (``demo_vlm_dpo``: one question per image, the true caption chosen and another image's rejected) is laid out as
LF's ``rlhf_v``: sharegpt ``conversations``, ``chosen`` / ``rejected`` answers and ``images``, ``ranking: true``, for
stage dpo. Importing this module is cheap: heavy imports live inside the functions (only ``engine.trainer`` may import
them).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

BUILD_VERSION = 1  # bump when the recipe changes, so old workspaces rebuild
MARKER = "studio_demo_vlm.json"
SEED = 4321
DATASET = "demo_vlm"
DPO_DATASET = "demo_vlm_dpo"  # engine.core.workspace.DEMO_VLM_DPO_DATASET
IMAGES_DIR = "demo_vlm_images"
IMAGE_SIZE = 56  # the CLIP tower's input: 4 x 4 patches of 14 pixels
PATCH_SIZE = 14
IMAGE_TOKENS = (IMAGE_SIZE // PATCH_SIZE) ** 2  # "default" feature selection drops CLIP's CLS token
SPECIAL_TOKENS = ["<pad>", "<s>", "</s>", "<|im_start|>", "<|im_end|>", "<image>"]
VOCAB_SIZE = 800
# chatml; a message's content is a string (``<image>`` placeholders kept) or a list of {"type": "image"} /
# {"type": "text", "text": ...} parts, as processors' chat templates take them. One line: transformers compiles
# templates with trim_blocks, so newlines are written as '\n' strings.
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}{{ '<image>' }}{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}{{ '<|im_end|>' + '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
TEXT_SHAPE = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 1024,
}
VISION_SHAPE = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "image_size": IMAGE_SIZE,
    "patch_size": PATCH_SIZE,
    "projection_dim": 32,
}
SHAPES = ("circle", "square", "triangle")
COLOURS = {"red": (220, 30, 30), "green": (30, 170, 60), "blue": (40, 70, 220), "yellow": (235, 200, 30)}
BACKGROUNDS = {"white": (250, 250, 250), "black": (10, 10, 10)}


def images_plan() -> list[dict]:
    """Every demo image: file name, shape, colour, background (24 in all)."""
    out = []
    for shape in SHAPES:
        for colour in COLOURS:
            for bg in BACKGROUNDS:
                out.append(
                    {"file": f"{IMAGES_DIR}/{shape}_{colour}_{bg}.png", "shape": shape, "colour": colour, "bg": bg}
                )
    return out


def dataset_rows() -> list[dict]:
    """The demo rows in LF's layout: one-image questions (two per image) and two-image comparisons."""
    plan = images_plan()
    rows = []
    for i, im in enumerate(plan):
        what = f"a {im['colour']} {im['shape']}"
        rows.append(
            {
                "messages": [
                    {"role": "user", "content": "<image>What shape is in the picture?"},
                    {"role": "assistant", "content": f"It is {what}."},
                ],
                "images": [im["file"]],
            }
        )
        rows.append(
            {
                "messages": [
                    {"role": "user", "content": "<image>Describe the image."},
                    {"role": "assistant", "content": f"{what.capitalize()} on a {im['bg']} background."},
                    {"role": "user", "content": "What colour is the shape?"},
                    {"role": "assistant", "content": f"It is {im['colour']}."},
                ],
                "images": [im["file"]],
            }
        )
        if i % 4 == 0:
            other = plan[(i + 7) % len(plan)]
            rows.append(
                {
                    "messages": [
                        {"role": "user", "content": "<image><image>Compare the two pictures."},
                        {
                            "role": "assistant",
                            "content": f"The first shows a {im['colour']} {im['shape']}, "
                            f"the second a {other['colour']} {other['shape']}.",
                        },
                    ],
                    "images": [im["file"], other["file"]],
                }
            )
    return rows


def dataset_entry() -> dict:
    """The ``dataset_info.json`` entry, LF's ``mllm_demo`` layout."""
    return {
        "file_name": f"{DATASET}.json",
        "formatting": "sharegpt",
        "columns": {"messages": "messages", "images": "images"},
        "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant"},
    }


def preference_rows() -> list[dict]:
    """The demo's image preference pairs in LF's ``rlhf_v`` layout: per image, the caption of what was drawn is
    chosen and that of an image with another shape and colour is rejected."""
    plan = images_plan()
    rows = []
    for i, im in enumerate(plan):
        other = next(o for o in plan[i + 1 :] + plan if o["shape"] != im["shape"] and o["colour"] != im["colour"])
        rows.append(
            {
                "conversations": [{"from": "human", "value": "<image>What shape is in the picture?"}],
                "chosen": {"from": "gpt", "value": f"It is a {im['colour']} {im['shape']}."},
                "rejected": {"from": "gpt", "value": f"It is a {other['colour']} {other['shape']}."},
                "images": [im["file"]],
            }
        )
    return rows


def preference_entry() -> dict:
    """The preference set's ``dataset_info.json`` entry, LF's ``rlhf_v`` layout."""
    return {
        "file_name": f"{DPO_DATASET}.json",
        "ranking": True,
        "formatting": "sharegpt",
        "columns": {"messages": "conversations", "chosen": "chosen", "rejected": "rejected", "images": "images"},
    }


def build(model_dir: Path, data_dir: Path, force: bool = False) -> None:
    """Build the model (unless present at this recipe's version) and write the dataset and its entry."""
    if force or not _complete(model_dir):
        _build_model(model_dir)
        (model_dir / MARKER).write_text(json.dumps({"version": BUILD_VERSION}), encoding="utf-8")
    _write_dataset(data_dir, force=force)


def _complete(model_dir: Path) -> bool:
    needed = ["config.json", "model.safetensors", "tokenizer.json", "processor_config.json", MARKER]
    if not all((model_dir / n).is_file() for n in needed):
        return False
    try:
        return json.loads((model_dir / MARKER).read_text(encoding="utf-8")) == {"version": BUILD_VERSION}
    except ValueError:
        return False


def _corpus() -> list[str]:
    texts = [m["content"].replace("<image>", "") for r in dataset_rows() for m in r["messages"]]
    words = list(SHAPES) + list(COLOURS) + list(BACKGROUNDS) + ["picture", "image", "shape", "colour", "background"]
    return texts + [" ".join(words)] * 4


def _build_model(model_dir: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tmp = model_dir.with_name(f".{model_dir.name}.building-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)

    import torch
    from transformers import (
        CLIPVisionConfig,
        GenerationConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
        PreTrainedTokenizerFast,
    )
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="<|im_end|>",
        pad_token="<pad>",
        additional_special_tokens=["<|im_start|>", "</s>"],
        extra_special_tokens={"image_token": "<image>"},
        model_max_length=TEXT_SHAPE["max_position_embeddings"],
        clean_up_tokenization_spaces=False,
    )
    fast.chat_template = CHAT_TEMPLATE
    images = CLIPImageProcessorPil(
        size={"shortest_edge": IMAGE_SIZE}, crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}
    )
    processor = LlavaProcessor(
        image_processor=images,
        tokenizer=fast,
        chat_template=CHAT_TEMPLATE,
        patch_size=PATCH_SIZE,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
    )
    ids = {t: tok.token_to_id(t) for t in SPECIAL_TOKENS}
    config = LlavaConfig(
        vision_config=CLIPVisionConfig(**VISION_SHAPE),
        text_config=LlamaConfig(
            vocab_size=tok.get_vocab_size(),
            **TEXT_SHAPE,
            rms_norm_eps=1e-6,
            tie_word_embeddings=False,
            bos_token_id=ids["<s>"],
            eos_token_id=ids["<|im_end|>"],
            pad_token_id=ids["<pad>"],
        ),
        image_token_id=ids["<image>"],
        image_seq_length=IMAGE_TOKENS,
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
        projector_hidden_act="gelu",
        tie_word_embeddings=False,
    )
    torch.manual_seed(SEED)  # a fixed demo model: same weights on every machine
    model = LlavaForConditionalGeneration(config)
    model.generation_config = GenerationConfig(
        bos_token_id=ids["<s>"], eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<pad>"]
    )
    model.save_pretrained(str(tmp))
    processor.save_pretrained(str(tmp))

    shutil.rmtree(model_dir, ignore_errors=True)
    tmp.rename(model_dir)


def _draw(im: dict, path: Path) -> None:
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (IMAGE_SIZE * 2, IMAGE_SIZE * 2), BACKGROUNDS[im["bg"]])
    draw = ImageDraw.Draw(img)
    box, colour = (24, 24, 88, 88), COLOURS[im["colour"]]
    if im["shape"] == "circle":
        draw.ellipse(box, fill=colour)
    elif im["shape"] == "square":
        draw.rectangle(box, fill=colour)
    else:
        draw.polygon([(56, 20), (92, 88), (20, 88)], fill=colour)
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path, format="PNG", optimize=False)


def _write_dataset(data_dir: Path, *, force: bool) -> None:
    """The images (drawn when missing), the rows of both sets and their entries merged into dataset_info.json
    (others kept)."""
    from engine.data.dataset_registry import read_dataset_info, save_dataset_info

    data_dir.mkdir(parents=True, exist_ok=True)
    for im in images_plan():
        path = data_dir / im["file"]
        if force or not path.is_file():
            _draw(im, path)
    for name, rows in ((DATASET, dataset_rows()), (DPO_DATASET, preference_rows())):
        text = json.dumps(rows, ensure_ascii=False, indent=1)
        rows_path = data_dir / f"{name}.json"
        if force or not rows_path.is_file() or rows_path.read_text(encoding="utf-8") != text:
            rows_path.write_text(text, encoding="utf-8")
    info_path = data_dir / "dataset_info.json"
    current = read_dataset_info(data_dir) if info_path.is_file() else {}
    entries = {DATASET: dataset_entry(), DPO_DATASET: preference_entry()}
    if any(current.get(k) != v for k, v in entries.items()):
        save_dataset_info(data_dir, {**current, **entries})
