"""engine.trainer.chat_worker: multi-turn conversations rendered as in training, stop strings, errors per request."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from engine.data.templates import prompt_text, tokenizer_info
from engine.trainer import chat_worker

ROOT = Path(__file__).resolve().parents[2]


def test_render_is_the_training_rendering(demo_paths):
    info = tokenizer_info(demo_paths["model_dir"])
    turns = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
    ]
    for name in ("auto", "chatml", "default"):
        text = chat_worker.render(info, name, "sys", turns)
        assert text == prompt_text(name, info, "sys", turns)
        assert text.index("a") < text.index("b") < text.index("c")
    assert chat_worker.render(info, "auto", "", turns).endswith("<|im_start|>assistant\n")


def test_held_back_is_a_possible_start_of_a_stop_string():
    assert chat_worker.held_back("hello ##", ["###"]) == 2
    assert chat_worker.held_back("hello #", ["###", "#!"]) == 1
    assert chat_worker.held_back("hello", ["###"]) == 0
    assert chat_worker.held_back("x", []) == 0


def _ask(model_dir: str, requests: list[dict]) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    lines = "".join(json.dumps(r) + "\n" for r in [*requests, {"type": "quit"}])
    out = subprocess.run(
        [sys.executable, "-m", "engine.trainer.chat_worker", model_dir],
        input=lines,
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
        check=True,
    ).stdout
    return [json.loads(line) for line in out.splitlines()]


def test_worker_answers_three_turns_and_cuts_at_stop(demo_paths):
    history = [{"role": "user", "content": "Hello"}]
    first = {"type": "generate", "id": 1, "messages": history, "max_new_tokens": 12}
    replies = _ask(demo_paths["model_dir"], [first])
    assert replies[0]["type"] == "ready"
    done = [r for r in replies if r["type"] == "done"]
    assert len(done) == 1 and done[0]["id"] == 1
    answer = done[0]["text"]
    assert answer == "".join(r["text"] for r in replies if r["type"] == "token")

    third = [*history, {"role": "assistant", "content": answer}, {"role": "user", "content": "More"}]
    third += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "Again"}]
    stop = answer.strip()[2:5] if len(answer.strip()) >= 5 else "zzz"
    requests = [
        {"type": "generate", "id": 2, "messages": third, "system": "Be brief.", "max_new_tokens": 8},
        {"type": "generate", "id": 3, "messages": history, "max_new_tokens": 12, "stop": [stop]},
        {"type": "generate", "id": 4, "messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}]},
        {"type": "generate", "id": 5, "messages": third, "temperature": 0.9, "top_p": 0.5, "max_new_tokens": 4},
    ]
    replies = _ask(demo_paths["model_dir"], requests)
    by_id: dict = {}
    for r in replies[1:]:
        by_id.setdefault(r["id"], []).append(r)
    assert [r["type"] for r in by_id[2]][-1] == "done" and [r["type"] for r in by_id[5]][-1] == "done"
    cut = by_id[3][-1]["text"]
    assert by_id[3][-1]["type"] == "done" and stop not in cut and answer.startswith(cut)
    assert stop not in "".join(r["text"] for r in by_id[3] if r["type"] == "token")
    assert by_id[4] == [{"type": "error", "id": 4, "error": by_id[4][0]["error"]}] and "text" in by_id[4][0]["error"]


def _demo_image(demo_paths) -> str:
    images = sorted((Path(demo_paths["data_dir"]) / "demo_vlm_images").glob("*.png"))
    assert images, "the demo builds its image dataset"
    return str(images[0])


def test_vision_turn_is_rendered_and_encoded_as_in_training(demo_paths):
    """The Chat tab's image turn for a vision-language model: the processor's chat template and the processor's
    image tensors, exactly as the trainer encodes the same turn of a dataset row (engine.trainer.vision)."""
    from transformers import AutoProcessor

    from engine.spec.groups import VisionSpec
    from engine.trainer import vision

    processor = AutoProcessor.from_pretrained(demo_paths["vlm_model_dir"])
    img = _demo_image(demo_paths)
    got = chat_worker.vision_inputs(processor, "Be brief.", [{"role": "user", "content": "Colour?", "images": [img]}])
    row = {"system": "Be brief.", "messages": [{"role": "user", "content": "<image>Colour?"}]}
    row["messages"].append({"role": "assistant", "content": "red"})
    prompt = vision.segments(row, processor)[0][0]
    sizes = VisionSpec()
    want = processor(
        text=[prompt],
        images=[vision.open_image(img, sizes.image_max_pixels, sizes.image_min_pixels)],
        return_tensors="pt",
        add_special_tokens=False,
    )
    assert got["input_ids"].tolist() == want["input_ids"].tolist()
    assert (got["pixel_values"] == want["pixel_values"]).all()
    image_id = processor.tokenizer.convert_tokens_to_ids(vision.image_token(processor))
    assert got["input_ids"][0].tolist().count(image_id) > 1  # the image's tokens, expanded by the processor


def test_worker_answers_a_vision_model_with_an_image_and_a_text_model_refuses_it(demo_paths):
    img = _demo_image(demo_paths)
    ask = {"type": "generate", "id": 1, "max_new_tokens": 6}
    turn = [{"role": "user", "content": "What colour is it?", "images": [img]}]
    replies = _ask(demo_paths["vlm_model_dir"], [{**ask, "messages": turn}])
    assert replies[0]["type"] == "ready" and replies[0]["vision"] is True
    done = [r for r in replies if r["type"] == "done"]
    assert [r["id"] for r in done] == [1]
    assert done[0]["text"] == "".join(r["text"] for r in replies if r["type"] == "token" and r["id"] == 1)
    replies = _ask(demo_paths["model_dir"], [{**ask, "messages": turn}])
    assert replies[0]["type"] == "ready" and replies[0]["vision"] is False
    assert replies[1]["type"] == "error" and "text only" in replies[1]["error"]
