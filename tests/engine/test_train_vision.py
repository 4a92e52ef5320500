"""Vision-language training on the demo VLM: a LoRA SFT run through the real trainer subprocess (engine.runs.launch),
labels that train only the answers (checked against the answers tokenised on their own), LF's freeze switches."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.helpers import demo_spec, run_trainer


def _vlm_spec(demo_paths, **method):
    return demo_spec(
        demo_paths,
        model={"name_or_path": demo_paths["vlm_model_dir"]},
        data={"datasets": [demo_paths["vlm_dataset"]], "cutoff_len": 256, "max_samples": 24},
        train={"max_steps": 6, "per_device_batch_size": 2, "logging_steps": 1, "save_steps": 1000, "warmup_steps": 0},
        output={"run_name": "vlm", "report_to": ["none"]},
        **({"method": method} if method else {}),
    )


def test_lora_sft_on_the_demo_vlm_trains_in_the_trainer_subprocess(demo_paths, tmp_path):
    from safetensors.torch import load_file

    rc, events = run_trainer(_vlm_spec(demo_paths), tmp_path)
    assert rc == 0, (tmp_path / "train.log").read_text()[-3000:]
    ready = next(e for e in events if e["type"] == "data_ready")["payload"]
    raw = json.loads((Path(demo_paths["data_dir"]) / "demo_vlm.json").read_text(encoding="utf-8"))[:24]
    assert ready["num_images"] == sum(len(r["images"]) for r in raw)
    assert ready["image_tokens"] == ready["num_images"] * 16  # a 56-pixel image in 14-pixel patches: 4 x 4
    started = next(e for e in events if e["type"] == "run_started")["payload"]
    assert started["vision"] is True and started["packing"] is False and "packing" in started["packing_reason"]
    logs = [e["payload"] for e in events if e["type"] == "log"]
    assert len(logs) == 6 and all(math.isfinite(p["loss"]) for p in logs)
    assert events[-1]["type"] == "finished"
    adapter = tmp_path / "adapter"
    weights = load_file(str(adapter / "adapter_model.safetensors"))
    lora_b = {k: t for k, t in weights.items() if "lora_B" in k}
    assert lora_b and all(t.abs().max() > 0 for t in lora_b.values())  # B starts at zero: they learned
    # LF's defaults: the vision tower and the projector stay frozen, so LoRA sits only in the language model
    assert all("language_model" in k for k in lora_b), sorted(lora_b)[:4]
    assert (adapter / "processor_config.json").is_file() and (adapter / "chat_template.jinja").is_file()


def test_labels_train_only_the_answers(demo_paths):
    from transformers import AutoProcessor, AutoTokenizer

    from engine.data.dataset_registry import load_rows
    from engine.trainer import vision

    spec = _vlm_spec(demo_paths)
    processor = AutoProcessor.from_pretrained(demo_paths["vlm_model_dir"])
    tok = AutoTokenizer.from_pretrained(demo_paths["vlm_model_dir"])
    rows = load_rows(demo_paths["vlm_dataset"], demo_paths["data_dir"], "sft")
    two_turns = next(r for r in rows if len(r["messages"]) == 4)
    two_images = next(r for r in rows if len(r["images"]) == 2)
    for row in (two_turns, two_images):
        sample = vision.encode_row(row, processor, spec)
        ids, labels = sample["input_ids"], sample["labels"]
        trained_runs, run = [], []
        for i, label in zip(ids, labels):
            if label == -100:
                if run:
                    trained_runs.append(run)
                run = []
            else:
                assert label == i
                run.append(label)
        if run:
            trained_runs.append(run)
        # independently: each answer with the chatml end of turn, tokenised alone
        answers = [m["content"] for m in row["messages"] if m["role"] == "assistant"]
        want = [tok(a + "<|im_end|>\n", add_special_tokens=False)["input_ids"] for a in answers]
        assert trained_runs == want
        image_id = tok.convert_tokens_to_ids("<image>")
        assert ids.count(image_id) == 16 * len(row["images"]) and image_id not in [x for x in labels if x != -100]
        assert sample["pixel_values"].shape[0] == len(row["images"])


@pytest.mark.parametrize(
    ("switches", "tower", "projector", "language"),
    [
        ({}, False, False, True),
        ({"freeze_vision_tower": False, "freeze_multi_modal_projector": False}, True, True, True),
        ({"freeze_language_model": True, "freeze_multi_modal_projector": False}, False, True, False),
    ],
)
def test_full_fine_tuning_follows_lfs_freeze_switches(demo_paths, switches, tower, projector, language):
    from engine.trainer.model import load_model

    spec = _vlm_spec(demo_paths, finetuning="full")
    spec = spec.model_copy(
        update={"model": spec.model.model_copy(update={"vision": spec.model.vision.model_copy(update=switches)})}
    )
    model = load_model(spec, device="cpu", precision="fp32", vision=True)
    grads = {n: p.requires_grad for n, p in model.named_parameters()}

    def trained(part: str) -> set[bool]:
        return {g for n, g in grads.items() if part in n}

    assert trained("vision_tower") == {tower} and trained("multi_modal_projector") == {projector}
    assert trained("language_model") == {language} and trained("lm_head") == {language}


def test_merged_vlm_keeps_its_processor_and_matches_base_plus_adapter(demo_paths, tmp_path, studio_home):
    """A LoRA adapter of the demo VLM merged by the merge subprocess: the folder loads with AutoProcessor and
    AutoModelForImageTextToText, and its logits on an image prompt match the base with the adapter (PEFT, unmerged)."""
    import subprocess
    import sys

    import torch
    from peft import PeftModel
    from PIL import Image
    from transformers import AutoModelForImageTextToText, AutoProcessor

    spec = _vlm_spec(demo_paths)
    spec = spec.model_copy(update={"train": spec.train.model_copy(update={"max_steps": 3, "learning_rate": 0.05})})
    rc, _ = run_trainer(spec, tmp_path / "run")
    assert rc == 0, (tmp_path / "run" / "train.log").read_text()[-3000:]
    out = studio_home / "exports" / f"vlm-merged-{tmp_path.name}"
    argv = [sys.executable, "-m", "engine.trainer.merge", str(tmp_path / "run" / "adapter"), "--out", str(out)]
    argv += ["--dtype", "fp32", "--events", str(tmp_path / "merge.jsonl")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (out / "processor_config.json").is_file() and (out / "chat_template.jinja").is_file()
    processor = AutoProcessor.from_pretrained(str(out))
    merged = AutoModelForImageTextToText.from_pretrained(str(out)).eval()
    base = AutoModelForImageTextToText.from_pretrained(demo_paths["vlm_model_dir"])
    tuned = PeftModel.from_pretrained(base, str(tmp_path / "run" / "adapter")).eval()
    msgs = [
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What shape is in the picture?"}]}
    ]
    text = processor.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    batch = processor(
        text=[text],
        images=[Image.open(Path(demo_paths["data_dir"]) / "demo_vlm_images" / "circle_red_white.png")],
        return_tensors="pt",
    )
    with torch.no_grad():
        want = tuned(**batch).logits
        got = merged(**batch).logits
        with tuned.disable_adapter():
            plain = tuned(**batch).logits
    assert (want - plain).abs().max() > 1e-4  # the adapter changes the answer: the comparison means something
    assert torch.allclose(got, want, atol=1e-4, rtol=1e-4), float((got - want).abs().max())


def test_an_empty_dataset_dir_reads_the_workspace_data_folder(demo_paths, tmp_path, monkeypatch):
    """The form's default dataset_dir is empty: the workspace's data folder, as for text runs. The vision path took
    it as the current folder, and a run from the page failed at its start ("no dataset_info.json")."""
    from transformers import AutoProcessor

    from engine.trainer import vision

    monkeypatch.chdir(tmp_path)  # a folder without dataset_info.json
    spec = demo_spec(
        demo_paths,
        model={"name_or_path": demo_paths["vlm_model_dir"]},
        data={"datasets": [demo_paths["vlm_dataset"]], "dataset_dir": "", "cutoff_len": 256, "max_samples": 6},
    )
    assert spec.data.dataset_dir == ""
    data = vision.build_data(spec, AutoProcessor.from_pretrained(demo_paths["vlm_model_dir"]), log=lambda *_: None)
    raw = json.loads((Path(demo_paths["data_dir"]) / "demo_vlm.json").read_text(encoding="utf-8"))[:6]
    assert data.stats["num_train_samples"] == 6
    assert data.stats["num_images"] == sum(len(r["images"]) for r in raw)
