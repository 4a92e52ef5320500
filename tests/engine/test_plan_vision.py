"""The planner's vision terms (issue 25, item 5): the vision tower's and projector's tensors of each family against
the model transformers builds from the same config (on the meta device), the tokens one image becomes against the
real Qwen2-VL image processor, what learns under LF's freeze switches against the trainer's own choice on a real tiny
model (peft's count of trainable parameters), and the plan of the demo VLM and of published hub configs offline."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from engine.plan.model_shape import model_shape, trainable
from engine.plan.planner import plan
from engine.plan.vision_shape import image_grid
from engine.spec.schema import parse_spec

TEXT = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
TEXT.update(vocab_size=300, head_dim=16)
MROPE = {"mrope_section": [2, 3, 3]}


def _configs():
    from transformers import Gemma3Config, LlavaConfig, Qwen2_5_VLConfig, Qwen2VLConfig, Qwen3VLConfig

    qwen = dict(image_token_id=299, video_token_id=298)
    return {
        "llava": LlavaConfig(
            text_config=dict(model_type="llama", **TEXT),
            vision_config=dict(
                model_type="clip_vision_model",
                hidden_size=32,
                intermediate_size=48,
                num_hidden_layers=2,
                num_attention_heads=4,
                image_size=56,
                patch_size=14,
            ),
            image_token_id=299,
        ),
        "qwen2_vl": Qwen2VLConfig(
            text_config=dict(**TEXT, rope_scaling={"type": "mrope", **MROPE}),
            vision_config=dict(depth=2, embed_dim=32, num_heads=4, hidden_size=64, mlp_ratio=4, patch_size=14),
            vision_start_token_id=297,
            **qwen,
        ),
        "qwen2_5_vl": Qwen2_5_VLConfig(
            text_config=dict(**TEXT, rope_scaling={"type": "mrope", **MROPE}),
            vision_config=dict(depth=2, hidden_size=32, intermediate_size=40, num_heads=4, out_hidden_size=64),
            vision_start_token_id=297,
            **qwen,
        ),
        "qwen3_vl": Qwen3VLConfig(
            text_config=dict(**TEXT, rope_scaling={"rope_type": "default", **MROPE}),
            vision_config=dict(
                depth=3,
                hidden_size=32,
                intermediate_size=40,
                num_heads=4,
                out_hidden_size=64,
                patch_size=16,
                num_position_embeddings=64,
                deepstack_visual_indexes=[0, 2],
            ),
            **qwen,
        ),
        "gemma3": Gemma3Config(
            text_config=dict(model_type="gemma3_text", **TEXT),
            vision_config=dict(
                hidden_size=32,
                intermediate_size=40,
                num_hidden_layers=2,
                num_attention_heads=4,
                image_size=56,
                patch_size=14,
                vision_use_head=False,
            ),
            mm_tokens_per_image=4,
            image_token_index=299,
            boi_token_index=297,
            eoi_token_index=298,
        ),
    }


def _built(config, device: str = "meta"):
    import torch
    from transformers import AutoModelForImageTextToText

    with torch.device(device):
        return AutoModelForImageTextToText.from_config(config)


@pytest.mark.parametrize("fam", ["llava", "qwen2_vl", "qwen2_5_vl", "qwen3_vl", "gemma3"])
def test_tower_and_projector_tensors_are_the_ones_transformers_builds(fam):
    config = _configs()[fam]
    model = _built(config)
    real = {n: tuple(p.shape) for n, p in model.named_parameters()}
    shape = model_shape(config.to_dict())
    ours = {p.name: tuple(p.shape) for p in shape.params if p.part}
    assert ours == {n: s for n, s in real.items() if "language_model" not in n and n != "lm_head.weight"}
    assert shape.total == sum(p.numel() for p in model.parameters())  # the language model counted right too
    assert shape.vision.family == fam


def _spec(model_dir: str, **method) -> object:
    vision = method.pop("vision", {})
    return parse_spec(
        {
            "model": {"name_or_path": model_dir, "vision": vision},
            "data": {"datasets": ["demo_vlm"], "cutoff_len": 256},
            "method": {"stage": "sft", **method},
            "train": {"per_device_batch_size": 2},
            "launch": {"device": "cpu"},
        }
    )


SWITCHES = [
    {},  # LF's defaults: tower and projector frozen
    {"freeze_vision_tower": False},
    {"freeze_multi_modal_projector": False},
    {"freeze_vision_tower": False, "freeze_language_model": True},
]


@pytest.mark.parametrize("fam", ["llava", "qwen2_vl", "qwen3_vl", "gemma3"])
@pytest.mark.parametrize("switches", SWITCHES, ids=["defaults", "tower", "projector", "vision-only"])
def test_what_learns_is_what_the_trainer_trains(fam, switches, tmp_path):
    """LoRA: peft's trainable count on the trainer's own targets (engine.trainer.vision.lora_targets); full: the
    parameters left requiring grad by the trainer's freeze switches."""
    from peft import LoraConfig, get_peft_model

    from engine.trainer import vision

    config = _configs()[fam]
    shape = model_shape(config.to_dict())
    lora = _spec(str(tmp_path), finetuning="lora", lora={"rank": 4, "targets": ["all"]}, vision=switches)
    model = _built(config, "cpu")
    peft_model = get_peft_model(model, LoraConfig(r=4, target_modules=vision.lora_targets(lora, model)))
    assert trainable(lora, shape).numel == peft_model.get_nb_trainable_parameters()[0]

    full = _spec(str(tmp_path), finetuning="full", vision=switches)
    model = _built(config, "cpu")
    vision.apply_freeze_switches(full, model)
    assert trainable(full, shape).numel == sum(p.numel() for p in model.parameters() if p.requires_grad)


@pytest.mark.parametrize("fam,patch,low,high", [("qwen2_vl", 14, 3136, 12845056), ("qwen3_vl", 16, 65536, 16777216)])
@pytest.mark.parametrize("max_pixels", [10_000, 123_457, 512 * 512, 768 * 768, 780 * 780, 2000 * 2000, 5000 * 5000])
def test_image_tokens_are_what_the_qwen_processor_makes(fam, patch, low, high, max_pixels):
    """A square image shrunk to image_max_pixels (as LF's preprocessing and the trainer do) through the real image
    processor with the pixel bounds the family publishes: its grid of patches, and a quarter of it as tokens."""
    from PIL import Image
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    proc = Qwen2VLImageProcessorPil(patch_size=patch, merge_size=2, temporal_patch_size=2)
    side = int(768 * math.sqrt(max_pixels / (768 * 768)))  # LF: int(width * sqrt(max / (width * height)))
    size = {"shortest_edge": low, "longest_edge": high}
    got = proc(images=[Image.new("RGB", (side, side))], size=size, return_tensors="np")
    grid = [int(x) for x in got["image_grid_thw"][0]]
    config = {"model_type": fam, "vision_config": {"patch_size": patch, "spatial_merge_size": 2}}
    assert image_grid(config, max_pixels) == (grid[0] * grid[1] * grid[2], grid[0] * grid[1] * grid[2] // 4)


def test_demo_vlm_plan_counts_its_tower_and_the_tokens_its_processor_inserts(demo_paths):
    from PIL import Image
    from transformers import AutoProcessor

    model_dir = demo_paths["vlm_model_dir"]
    processor = AutoProcessor.from_pretrained(model_dir)
    enc = processor(text="<image> what is it?", images=[Image.new("RGB", (200, 120))])
    token_id = processor.tokenizer.convert_tokens_to_ids("<image>")
    inserted = sum(1 for t in enc["input_ids"][0] if t == token_id)

    frozen = plan(_spec(model_dir, finetuning="lora", lora={"rank": 4, "targets": ["all"]}))
    vis = frozen.details["vision"]
    assert vis["tokens_per_image"] == inserted == 16
    assert vis["learning_parts"] == ["language_model"]
    from transformers import AutoConfig

    model = _built(AutoConfig.from_pretrained(model_dir))
    tower = sum(p.numel() for n, p in model.named_parameters() if "vision_tower" in n)
    assert vis["tower_params"] == tower
    assert frozen.details["params_total"] == sum(p.numel() for p in model.parameters())
    notes = " ".join(map(str, frozen.notes))
    assert "16 tokens of the sequence" in notes
    # the heaviest sample of the demo's data holds two images (its comparison rows): what the processor inserts for
    # that row, read here from the dataset file itself
    rows = json.loads((Path(demo_paths["data_dir"]) / "demo_vlm.json").read_text())
    most = max(rows[:200], key=lambda r: len(r["images"]))
    images = [Image.open(Path(demo_paths["data_dir"]) / ref) for ref in most["images"]]
    enc = processor(text=most["messages"][0]["content"], images=images)
    inserted = sum(1 for t in enc["input_ids"][0] if t == token_id)
    assert (vis["images_per_sample"], vis["image_tokens_per_sample"]) == (2, inserted) == (2, 32)
    assert vis["image_rows_read"] == min(200, len(rows))
    assert f"first {vis['image_rows_read']} rows of the data" in notes and "2 image(s) making 32 tokens" in notes

    # the tower learning adds its activations; a frozen tower adds none
    spec = _spec(model_dir, finetuning="lora", lora={"rank": 4, "targets": ["all"]}, vision=SWITCHES[1])
    learning = plan(spec)
    assert learning.details["vision"]["learning_parts"] == ["language_model", "vision"]
    assert learning.components["activations"] > frozen.components["activations"]
    assert learning.details["trainable_params"] > frozen.details["trainable_params"]


def test_an_image_longer_than_the_cutoff_is_said(demo_paths):
    spec = _spec(demo_paths["vlm_model_dir"], finetuning="lora")
    spec.data.cutoff_len = 16
    notes = " ".join(map(str, plan(spec).notes))
    assert "one sample's images (2) alone are 32 tokens, at least data.cutoff_len (16)" in notes


def _two_image_rows(data_dir: Path, sizes: list[list[tuple[int, int]]]) -> None:
    """A dataset ``imgs`` in LF's multimodal layout, one row per list of image sizes."""
    from PIL import Image

    rows = []
    for i, row in enumerate(sizes):
        refs = []
        for j, (w, h) in enumerate(row):
            Image.new("RGB", (w, h), (200, 30 * j, 40)).save(data_dir / f"im{i}-{j}.png")
            refs.append(f"im{i}-{j}.png")
        text = "<image>" * len(refs) + "What is it?"
        msgs = [{"role": "user", "content": text}, {"role": "assistant", "content": "A picture."}]
        rows.append({"messages": msgs, "images": refs})
    (data_dir / "imgs.json").write_text(json.dumps(rows))
    entry = {
        "file_name": "imgs.json",
        "formatting": "sharegpt",
        "columns": {"messages": "messages", "images": "images"},
    }
    entry["tags"] = {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant"}
    (data_dir / "dataset_info.json").write_text(json.dumps({"imgs": entry}))


def test_qwen_images_per_sample_are_sized_from_the_data(tmp_path):
    """A Qwen2-VL plan on a dataset whose rows hold one to three images of several sizes: the heaviest sample's tokens
    are what the real image processor makes of that row's images once shrunk to image_max_pixels as LLaMA-Factory
    shrinks them (its own formula, written out here), and two images per row plan more activations than one."""
    from PIL import Image
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    model_dir, data_dir = tmp_path / "model", tmp_path / "data"
    model_dir.mkdir()
    data_dir.mkdir()
    _configs()["qwen2_vl"].save_pretrained(model_dir)
    sizes = [[(200, 120)], [(640, 480), (300, 900)], [(1000, 1000), (64, 64), (500, 260)], [(50, 50)]]
    _two_image_rows(data_dir, sizes)
    max_pixels = 256 * 256
    proc = Qwen2VLImageProcessorPil(patch_size=14, merge_size=2, temporal_patch_size=2)

    def tokens(w: int, h: int) -> int:
        if w * h > max_pixels:  # LF: int(width * sqrt(max / (width * height)))
            f = math.sqrt(max_pixels / (w * h))
            w, h = int(w * f), int(h * f)
        size = {"shortest_edge": 3136, "longest_edge": 12845056}
        grid = proc(images=[Image.new("RGB", (w, h))], size=size, return_tensors="np")["image_grid_thw"][0]
        return int(grid[0] * grid[1] * grid[2]) // 4

    expected = max(sum(tokens(w, h) for w, h in row) for row in sizes)
    spec = parse_spec(
        {
            "model": {
                "name_or_path": str(model_dir),
                "vision": {"freeze_vision_tower": False, "image_max_pixels": max_pixels},
            },
            "data": {"datasets": ["imgs"], "dataset_dir": str(data_dir), "cutoff_len": 2048},
            "method": {"stage": "sft", "finetuning": "lora"},
            "train": {"per_device_batch_size": 2},
            "launch": {"device": "cpu"},
        }
    )
    got = plan(spec)
    vis = got.details["vision"]
    assert (vis["images_per_sample"], vis["image_tokens_per_sample"], vis["image_rows_read"]) == (3, expected, 4)

    # the same rows with one image each: fewer image activations
    _two_image_rows(data_dir, [row[:1] for row in sizes])
    one = plan(spec)
    assert one.details["vision"]["images_per_sample"] == 1
    assert one.components["activations"] < got.components["activations"]


def test_data_not_readable_before_launch_is_planned_at_one_largest_image(demo_paths):
    spec = _spec(demo_paths["vlm_model_dir"], finetuning="lora")
    spec.data.datasets = ["not_registered_here"]
    got = plan(spec)
    vis = got.details["vision"]
    assert (vis["images_per_sample"], vis["image_tokens_per_sample"], vis["image_rows_read"]) == (1, 16, 0)
    assert "cannot be read before launch: planned for one image of the largest size" in " ".join(map(str, got.notes))


@pytest.mark.parametrize(
    "repo,published",
    [  # the parameter counts the hub shows for each model's safetensors (vision tower and projector included)
        ("Qwen/Qwen2-VL-7B-Instruct", 8_291_375_616),
        ("Qwen/Qwen2.5-VL-7B-Instruct", 8_292_166_656),
        ("Qwen/Qwen2.5-VL-3B-Instruct", 3_754_622_976),
        ("Qwen/Qwen3-VL-8B-Instruct", 8_767_123_696),
        ("llava-hf/llava-1.5-7b-hf", 7_063_427_072),
        ("google/gemma-3-4b-it", 4_300_079_472),
        ("google/gemma-3-27b-it", 27_432_406_640),
    ],
)
def test_hub_vlms_plan_offline_with_their_towers(repo, published, monkeypatch):
    """The bundled table carries the vision configs: each family plans offline with every parameter counted."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    spec = parse_spec(
        {
            "model": {"name_or_path": repo},
            "data": {"datasets": ["demo_vlm"], "cutoff_len": 2048},
            "method": {"stage": "sft", "finetuning": "lora"},
        }
    )
    got = plan(spec, gpu_mem_gib=80)
    assert got.details["params_total"] == published
    vis = got.details["vision"]
    assert vis["tower_params"] > 0 and vis["projector_params"] > 0 and vis["tokens_per_image"] > 0
    assert got.fits is True


def test_fit_freezes_a_learning_tower_before_smaller_ranks(monkeypatch):
    """Qwen2.5-VL 7B, LoRA on the language model and the whole tower: after the steps that keep the result (here the
    offloads), the ladder freezes the tower, LF's default, before it shrinks the LoRA rank."""
    from engine.models.known import lookup
    from engine.plan.fit import _edit, _ladder, fit

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    repo = "Qwen/Qwen2.5-VL-7B-Instruct"
    spec = parse_spec(
        {
            "model": {"name_or_path": repo, "vision": {"freeze_vision_tower": False}},
            "data": {"datasets": ["demo_vlm"], "cutoff_len": 4096},
            "method": {"stage": "sft", "finetuning": "lora", "lora": {"rank": 64, "targets": ["all"]}},
            "train": {"per_device_batch_size": 1, "gradient_checkpointing": "on"},
        }
    )
    before = spec
    for desc, change in _ladder(spec, lookup(repo)):
        if "freeze the vision tower" in str(desc):
            after = _edit(before, change)
            break
        before = _edit(before, change)
    low, high = plan(after, gpu_mem_gib=80).total_bytes, plan(before, gpu_mem_gib=80).total_bytes
    assert low < high  # the frozen tower's adapters, their state and the tower's activations go
    got = fit(spec, (low + high) / 2 / 2**30)
    said = [str(s) for s in got.steps]
    assert got.fits and got.spec.model.vision.freeze_vision_tower, said
    assert "freeze the vision tower" in said[-1] and "offload" in said[-2], said
    assert got.spec.method.lora.rank == 64
