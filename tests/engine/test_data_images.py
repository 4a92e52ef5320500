"""Image datasets in LLaMA-Factory's layout (``<image>`` placeholders, an ``images`` column): every image checked
before launch, each problem named by file, row and column; videos refused in one line; LF's no-placeholder rule."""

from __future__ import annotations

import json
from pathlib import Path

from PIL import Image

from engine.data import dataset_registry as R
from engine.data import images as I

TAGS = {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant"}
ENTRY = {"formatting": "sharegpt", "columns": {"messages": "messages", "images": "images"}, "tags": TAGS}


def _row(question: str, answer: str, images: list[str]) -> dict:
    return {
        "messages": [{"role": "user", "content": question}, {"role": "assistant", "content": answer}],
        "images": images,
    }


def _dataset(tmp_path: Path, rows: list[dict]) -> Path:
    (tmp_path / "pics").mkdir(exist_ok=True)
    Image.new("RGB", (32, 24), (200, 0, 0)).save(tmp_path / "pics" / "ok.png")
    (tmp_path / "mm.json").write_text(json.dumps(rows), encoding="utf-8")
    R.save_dataset_info(tmp_path, {"mm": {"file_name": "mm.json", **ENTRY}})
    return tmp_path / "mm.json"


def _problems(tmp_path: Path) -> list[str]:
    return [str(p) for p in R.check_datasets(["mm"], tmp_path, "sft")]


def test_good_rows_check_ok_and_paths_resolve_under_the_dataset_folder(tmp_path):
    _dataset(
        tmp_path,
        [
            _row("<image>What?", "Red.", ["pics/ok.png"]),
            _row("<image><image>Both?", "Red twice.", ["pics/ok.png"] * 2),
        ],
    )
    assert _problems(tmp_path) == []
    rows = R.load_rows("mm", tmp_path, "sft")
    assert [r["images"] for r in rows] == [[str(tmp_path / "pics/ok.png")], [str(tmp_path / "pics/ok.png")] * 2]
    assert I.count_images(rows) == 3


def test_missing_and_unreadable_images_are_named_by_file_row_and_column(tmp_path):
    path = _dataset(
        tmp_path,
        [
            _row("<image>A?", "a", ["pics/ok.png"]),
            _row("<image>B?", "b", ["pics/gone.png"]),
            _row("<image>C?", "c", ["pics/notes.png"]),
        ],
    )
    (tmp_path / "pics" / "notes.png").write_text("not an image", encoding="utf-8")
    probs = _problems(tmp_path)
    assert len(probs) == 2, probs
    assert probs[0].startswith(f"{path}, row 2, column 'images'") and "'pics/gone.png' does not exist" in probs[0]
    assert probs[1].startswith(f"{path}, row 3, column 'images'") and "'pics/notes.png' cannot be read" in probs[1]


def test_placeholder_count_that_differs_from_the_images_is_refused(tmp_path):
    path = _dataset(
        tmp_path, [_row("<image>A?", "a", ["pics/ok.png"]), _row("<image><image>B?", "b", ["pics/ok.png"])]
    )
    probs = _problems(tmp_path)
    assert len(probs) == 1 and probs[0].startswith(f"{path}, row 2, column 'images'")
    assert "2 <image> placeholder(s) in the messages but 1 image(s)" in probs[0]


def test_rows_without_placeholders_get_them_before_the_first_question_as_lf_does(tmp_path):
    _dataset(tmp_path, [_row("Describe it.", "Red.", ["pics/ok.png", "pics/ok.png"])])
    assert _problems(tmp_path) == []
    assert R.load_rows("mm", tmp_path, "sft")[0]["messages"][0]["content"] == "<image><image>Describe it."


def test_image_far_larger_than_the_processors_maximum_is_refused_with_its_size(tmp_path):
    path = _dataset(tmp_path, [_row("<image>Big?", "Yes.", ["pics/huge.png"])])
    side = int((I.LF_IMAGE_MAX_PIXELS * I.FAR_LARGER) ** 0.5) + 8  # just over the limit, by an independent sum
    Image.new("L", (side, side), 0).save(tmp_path / "pics" / "huge.png")
    probs = _problems(tmp_path)
    assert len(probs) == 1 and probs[0].startswith(f"{path}, row 1, column 'images'")
    assert f"{side}x{side} ({side * side} pixels)" in probs[0] and "589824" in probs[0]


def test_images_outside_the_dataset_folder_are_refused(tmp_path):
    outside = tmp_path / "elsewhere.png"
    Image.new("RGB", (8, 8)).save(outside)
    data = tmp_path / "data"
    data.mkdir()
    _dataset(data, [_row("<image>A?", "a", [str(outside)])])
    probs = _problems(data)
    assert len(probs) == 1 and "is outside the dataset folder" in probs[0] and "row 1" in probs[0]


def test_a_column_that_is_not_a_list_of_paths_is_named(tmp_path):
    path = _dataset(tmp_path, [_row("<image>A?", "a", [3])])
    probs = _problems(tmp_path)
    assert len(probs) == 1 and probs[0].startswith(f"{path}, row 1, column 'images'") and "not list" in probs[0]


def test_videos_are_refused_in_one_line(tmp_path):
    (tmp_path / "v.json").write_text(json.dumps([{**_row("<video>A?", "a", []), "videos": ["a.mp4"]}]))
    entry = {"file_name": "v.json", **ENTRY, "columns": {"messages": "messages", "videos": "videos"}}
    R.save_dataset_info(tmp_path, {"v": entry})
    probs = [str(p) for p in R.check_datasets(["v"], tmp_path, "sft")]
    assert len(probs) == 1 and "\n" not in probs[0]
    assert "videos column ('videos')" in probs[0] and "video and audio data is not supported" in probs[0]


def test_the_demo_image_dataset_checks_ok_with_every_image_counted(demo_paths):
    data = Path(demo_paths["data_dir"])
    raw = json.loads((data / "demo_vlm.json").read_text(encoding="utf-8"))
    want = sum(len(r["images"]) for r in raw)
    assert want > len(raw) >= 40  # some rows hold two images
    assert R.check_datasets([demo_paths["vlm_dataset"]], data, "sft") == []
    rows = R.load_rows(demo_paths["vlm_dataset"], data, "sft")
    assert sum(len(r["images"]) for r in rows) == want
    assert all(Path(p).is_file() for r in rows for p in r["images"])


def test_images_need_a_vision_language_model_and_stage_sft_before_launch(demo_paths):
    import pytest

    from engine.spec.schema import SpecError, parse_spec

    def spec(model: str, stage: str = "sft") -> dict:
        return {
            "model": {"name_or_path": model},
            "method": {"stage": stage, "finetuning": "lora"},
            "data": {"datasets": [demo_paths["vlm_dataset"]], "dataset_dir": demo_paths["data_dir"]},
            "launch": {"device": "cpu"},
        }

    assert parse_spec(spec(demo_paths["vlm_model_dir"]), context=True).model.name_or_path
    with pytest.raises(SpecError) as info:
        parse_spec(spec(demo_paths["model_dir"]), context=True)
    said = [(field, str(msg)) for field, msg in info.value.problems]
    assert any(f == "data.datasets" and "has no vision tower" in m and "demo_vlm" in m for f, m in said), said
    with pytest.raises(SpecError) as info:
        parse_spec(spec(demo_paths["vlm_model_dir"], "kto"), context=True)
    assert any(f == "method.stage" and "stage sft or dpo (got 'kto')" in str(m) for f, m in info.value.problems)
