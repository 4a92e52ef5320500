"""DPO on a vision-language model (LLaMA-Factory's ``qwen3vl_lora_dpo.yaml``) on the demo VLM and its image preference
set (LF's ``rlhf_v`` layout): a LoRA run through the real trainer subprocess logging TRL's preference figures, the
images the model's vision tower receives in a training step checked against the processor's output for each row's
image file, and the rule that lets dpo (only) join sft on image data."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.helpers import demo_spec, run_trainer


def _dpo_spec(demo_paths, **train):
    return demo_spec(
        demo_paths,
        model={"name_or_path": demo_paths["vlm_model_dir"]},
        method={"stage": "dpo"},
        data={"datasets": [demo_paths["vlm_dpo_dataset"]], "cutoff_len": 256},
        train={
            "max_steps": 4,
            "per_device_batch_size": 2,
            "logging_steps": 1,
            "save_steps": 1000,
            "warmup_steps": 0,
            "learning_rate": 0.01,
            **train,
        },
        output={"run_name": "vlm-dpo", "report_to": ["none"]},
    )


def test_demo_preference_set_is_lfs_rlhf_v_layout(demo_paths):
    from engine.data import dataset_registry as R

    data = Path(demo_paths["data_dir"])
    entry = json.loads((data / "dataset_info.json").read_text(encoding="utf-8"))[demo_paths["vlm_dpo_dataset"]]
    assert entry["ranking"] is True and entry["columns"]["images"] == "images"
    assert entry["columns"]["messages"] == "conversations"
    assert R.check_datasets([demo_paths["vlm_dpo_dataset"]], data, "dpo") == []
    rows = R.load_rows(demo_paths["vlm_dpo_dataset"], data, "dpo")
    assert len(rows) == 24 and all(len(r["images"]) == 1 and Path(r["images"][0]).is_file() for r in rows)
    for r in rows:  # the chosen answer names what was drawn (the file's name), the rejected one does not
        shape, colour, _ = Path(r["images"][0]).stem.split("_")
        assert r["chosen"] == f"It is a {colour} {shape}." and r["rejected"] != r["chosen"]


def test_pairs_whose_prompt_fills_the_cutoff_are_left_out(demo_paths):
    """TRL would cut such a pair's answers and image tokens away (the model then refuses the batch): the pairs are
    left out and counted, the others kept; the prompt lengths are counted here with the processor itself."""
    from transformers import AutoProcessor

    from engine.trainer import vision_dpo
    from engine.trainer.vision import open_image

    spec = _dpo_spec(demo_paths)
    processor = AutoProcessor.from_pretrained(demo_paths["vlm_model_dir"])
    full = vision_dpo.build_data(spec, processor, log=lambda _: None)
    v = spec.model.vision
    lengths = []
    for row in full.train_dataset:
        images = [open_image(r, v.image_max_pixels, v.image_min_pixels) for r in row["images"]]
        lengths.append(len(processor(text=row["prompt"], images=images, add_special_tokens=False)["input_ids"][0]))
    assert full.stats["dropped_cut_images"] == 0
    image_id = processor.tokenizer.convert_tokens_to_ids("<image>")
    in_images = 0
    for row in full.train_dataset:
        images = [open_image(r, v.image_max_pixels, v.image_min_pixels) for r in row["images"]]
        ids = processor(text=row["prompt"], images=images, add_special_tokens=False)["input_ids"][0]
        in_images += list(ids).count(image_id)
    assert full.stats["image_tokens"] == in_images > 0
    # the demo's pairs share one prompt shape (a question and one image): one token of room keeps every pair
    (length,) = set(lengths)
    spec.data.cutoff_len = length + 1
    kept = vision_dpo.build_data(spec, processor, log=lambda _: None)
    assert (len(kept.train_dataset), kept.stats["dropped_cut_images"]) == (len(lengths), 0)
    spec.data.cutoff_len = length  # no room left for an answer token: every pair is left out, which is said
    with pytest.raises(Exception, match="no trainable pairs left"):
        vision_dpo.build_data(spec, processor, log=lambda _: None)


def test_pairs_are_rendered_with_the_processors_template_and_split_by_val_size(demo_paths):
    from transformers import AutoProcessor

    from engine.trainer import vision_dpo

    spec = _dpo_spec(demo_paths)
    spec.data.val_size = 4
    processor = AutoProcessor.from_pretrained(demo_paths["vlm_model_dir"])
    data = vision_dpo.build_data(spec, processor, log=lambda _: None)
    assert (len(data.train_dataset), len(data.eval_dataset)) == (20, 4)
    assert data.stats["num_images"] == 24 and data.stats["packing"] is False
    row = data.train_dataset[0]
    # chatml as the demo's template writes it: the placeholder stays where LF's row has it
    assert row["prompt"] == "<|im_start|>user\n<image>What shape is in the picture?<|im_end|>\n<|im_start|>assistant\n"
    assert row["chosen"].startswith("It is a ") and row["chosen"].endswith(".<|im_end|>\n")
    assert Path(row["images"][0]).is_file()


def test_lora_dpo_on_the_demo_vlm_trains_in_the_trainer_subprocess(demo_paths, tmp_path):
    from safetensors.torch import load_file

    rc, events = run_trainer(_dpo_spec(demo_paths), tmp_path)
    assert rc == 0, (tmp_path / "train.log").read_text()[-3000:]
    ready = next(e for e in events if e["type"] == "data_ready")["payload"]
    assert (ready["num_train"], ready["num_images"]) == (24, 24)
    # each prompt holds one 56-pixel image in 14-pixel patches: the demo processor's 4 x 4 tokens (16, as SFT counts)
    assert ready["image_tokens"] == 24 * 16
    started = next(e for e in events if e["type"] == "run_started")["payload"]
    assert started["vision"] is True and started["packing"] is False
    logs = [e["payload"] for e in events if e["type"] == "log"]
    assert len(logs) == 4 and all(math.isfinite(p["loss"]) for p in logs)
    for p in logs:  # TRL's preference figures, checked against each other
        m = p["metrics"]
        assert abs(m["rewards/margins"] - (m["rewards/chosen"] - m["rewards/rejected"])) < 1e-4
        assert 0 <= m["rewards/accuracies"] <= 1
    assert logs[0]["metrics"]["rewards/margins"] == pytest.approx(0, abs=1e-6)  # the first step: policy = reference
    assert any(abs(p["metrics"]["rewards/margins"]) > 1e-4 for p in logs[1:])  # then the policy moves
    assert events[-1]["type"] == "finished"
    adapter = tmp_path / "adapter"
    weights = load_file(str(adapter / "adapter_model.safetensors"))
    lora_b = {k: t for k, t in weights.items() if "lora_B" in k}
    assert lora_b and all(t.abs().max() > 0 for t in lora_b.values())  # B starts at zero: they learned
    # LF's defaults, as for SFT: the vision tower and the projector stay frozen, LoRA sits in the language model
    assert all("language_model" in k for k in lora_b), sorted(lora_b)[:4]
    assert not any(".ref." in k for k in weights)  # TRL's reference adapter is not saved
    assert (adapter / "processor_config.json").is_file() and (adapter / "chat_template.jinja").is_file()


def test_each_rows_image_reaches_the_vision_tower(demo_paths, tmp_path):
    """One training step's loss computed by the trainer the run builds (in process): the pixel values the vision
    tower receives are, copy by copy, the processor's output for the image file of the row whose chosen answer is
    in that copy (found from the decoded answer, not from the data code), and they hold the drawn colour."""
    import torch
    from PIL import Image
    from transformers import AutoProcessor

    from engine.trainer import model as model_lib
    from engine.trainer import vision, vision_dpo
    from engine.trainer.trainers import build_trainer, training_arguments

    spec = _dpo_spec(demo_paths)
    spec.train.gradient_checkpointing = "off"
    processor = vision.load_processor(spec, demo_paths["vlm_model_dir"])
    data = vision_dpo.build_data(spec, processor, log=lambda _: None)
    model = model_lib.load_model(spec, device="cpu", precision="fp32", vision=True)
    targs = training_arguments(spec, tmp_path, tmp_path, "cpu", "fp32", has_eval=False, model=model)
    trainer = build_trainer(spec, model, processor, data, targs, [])
    seen: list[torch.Tensor] = []
    tower = next(m for n, m in trainer.model.named_modules() if n.endswith("vision_tower"))
    tower.register_forward_pre_hook(
        lambda _m, args, kwargs: seen.append((args[0] if args else kwargs["pixel_values"]).detach().clone()),
        with_kwargs=True,
    )
    batch = next(iter(trainer.get_train_dataloader()))
    loss = trainer.compute_loss(trainer.model, batch)
    assert torch.isfinite(loss)
    pixels = torch.cat(seen[:1])  # the policy's forward (the reference's is the second)
    assert pixels.shape == (4, 3, 56, 56)  # 2 pairs: the chosen copies, then the rejected copies

    own = AutoProcessor.from_pretrained(demo_paths["vlm_model_dir"])
    tok = own.tokenizer
    images = Path(demo_paths["data_dir"]) / "demo_vlm_images"
    answers = (batch["input_ids"] * batch["completion_mask"]).tolist()
    for k, ids in enumerate(answers):
        text = tok.decode([i for i in ids if i], skip_special_tokens=True)
        colour, shape = text.strip().removeprefix("It is a ").rstrip(".").split()[:2]
        pair = k % 2  # copy k belongs to pair k mod 2; its image is the row's, whichever answer follows
        chosen = tok.decode([i for i in answers[pair] if i], skip_special_tokens=True)
        c_colour, c_shape = chosen.strip().removeprefix("It is a ").rstrip(".").split()[:2]
        # the answer names shape and colour, not the background: exactly one of the two files is the one seen
        paths = sorted(images.glob(f"{c_shape}_{c_colour}_*.png"))
        expected = [own.image_processor(images=[Image.open(p).convert("RGB")], return_tensors="pt") for p in paths]
        hits = [p for p, e in zip(paths, expected) if torch.allclose(pixels[k], e["pixel_values"][0], atol=1e-5)]
        assert len(paths) == 2 and len(hits) == 1, (k, text, paths)
        # independently of any processor: the centre pixel, un-normalised with CLIP's mean and std, is the colour
        mean = torch.tensor(own.image_processor.image_mean)
        std = torch.tensor(own.image_processor.image_std)
        rgb = (pixels[k][:, 28, 28] * std + mean) * 255
        from engine.trainer.demo_vlm import BACKGROUNDS, COLOURS

        assert torch.allclose(rgb, torch.tensor(COLOURS[c_colour], dtype=torch.float), atol=3), (rgb, c_colour)
        corner = (pixels[k][:, 1, 1] * std + mean) * 255
        bg = BACKGROUNDS[hits[0].stem.split("_")[2]]
        assert torch.allclose(corner, torch.tensor(bg, dtype=torch.float), atol=3), (corner, hits[0].name)
        assert (colour, shape) == (c_colour, c_shape) or k >= 2  # copies 0-1 carry the chosen answers
    image_id = tok.convert_tokens_to_ids("<image>")
    assert (batch["input_ids"] == image_id).sum(dim=1).tolist() == [16] * 4  # each copy: one image, 4 x 4 patches


@pytest.mark.parametrize("stage", ["dpo", "kto", "rm", "grpo", "pt"])
def test_the_rule_takes_dpo_with_images_and_refuses_the_other_stages(demo_paths, stage):
    from engine.spec.schema import SpecError, parse_spec

    raw = {
        "model": {"name_or_path": demo_paths["vlm_model_dir"]},
        "method": {"stage": stage, "finetuning": "lora"},
        "data": {"datasets": [demo_paths["vlm_dpo_dataset"]], "dataset_dir": demo_paths["data_dir"]},
        "launch": {"device": "cpu"},
    }
    if stage == "grpo":  # a reward, so that the images are what is refused
        raw["method"]["grpo"] = {"rewards": [{"kind": "math"}]}
    if stage == "dpo":
        assert parse_spec(raw, context=True).method.stage == "dpo"
        raw["method"]["dpo"] = {"loss_type": "orpo"}  # ORPO / SimPO run on TRL's text-only trainers
        with pytest.raises(SpecError) as info:
            parse_spec(raw, context=True)
        said = [(f, str(m)) for f, m in info.value.problems]
        assert any(f == "method.dpo.loss_type" and "'orpo'" in m for f, m in said), said
        return
    with pytest.raises(SpecError) as info:
        parse_spec(raw, context=True)
    said = [(f, str(m)) for f, m in info.value.problems]
    want = f"stage sft or dpo (got '{stage}')"
    assert any(f == "method.stage" and want in m and demo_paths["vlm_dpo_dataset"] in m for f, m in said), said
