"""Data that cannot train is refused where it comes in (the Datasets tab), fixed there (mapping, format) without
editing dataset_info.json, and the Train form's check is Start's; the preview shows a row in its own format and says
how many rows the figures come from."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from engine.core import workspace
from studio import forms
from studio.tabs import data, train, train_actions
from studio.tabs.data_register import guess_mapping, picked_mapping, register, registered_entry, trainability


def _upload(name: str, rows: list[dict]) -> Path:
    uploads = workspace.uploads_dir()
    uploads.mkdir(parents=True, exist_ok=True)
    path = uploads / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _info() -> dict:
    path = workspace.data_dir() / "dataset_info.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def test_a_file_without_its_required_column_is_refused_then_fixed_in_place(run_registry):
    path = _upload("qa.jsonl", [{"q": f"question {i}", "a": f"answer {i}"} for i in range(5)])
    shown = register(str(path), "qa", "alpaca", guess_mapping(["q", "a"], "alpaca"))
    assert shown.startswith("❌ Not registered: none of the 5 rows read from qa.jsonl"), shown
    assert "its columns: q, a" in shown and "qa.jsonl, line 1, column 'instruction'" in shown, shown
    assert "(and 4 more rows like it)" in shown and "Column mapping" in shown and "dataset_info.json" not in shown
    assert "qa" not in _info()
    zh = register(str(path), "qa", "alpaca", {}, "zh")
    assert zh.startswith("❌ 未注册：从 qa.jsonl 读取的 5 行中") and "列映射" in zh, zh
    # the upload itself says so with the proposed mapping
    assert "Not registered" in trainability(str(path), "qa", "alpaca", {"prompt": None})
    # the mapping fixed on the page: registered
    assert register(str(path), "qa", "alpaca", {"prompt": "q", "response": "a"}).startswith("✅")
    assert _info()["qa"]["columns"] == {"prompt": "q", "response": "a"}


def test_a_registered_entry_is_edited_in_place(run_registry):
    path = _upload("chat.jsonl", [{"instruction": "hi", "output": "yo"}, {"instruction": "a", "output": "b"}])
    assert register(str(path), "chat", "alpaca", {"prompt": "instruction", "response": "output"}).startswith("✅")
    found = registered_entry("chat")
    assert found["path"] == str(path.resolve()) and found["formatting"] == "alpaca"
    assert found["columns"]["prompt"] == "instruction"
    # the same name again is refused unless it replaces its own entry (the page passes replace for the same file)
    assert register(str(path), "chat", "alpaca", {"prompt": "output", "response": "instruction"}).startswith("❌")
    done = register(str(path), "chat", "alpaca", {"prompt": "output", "response": "instruction"}, replace=True)
    assert done.startswith("✅"), done
    assert _info()["chat"]["columns"] == {"prompt": "output", "response": "instruction"}


def test_the_form_check_is_starts_data_check(run_registry, demo_paths):
    rows = [{"instruction": "fine", "output": "ok"}, {"instruction": "a", "output": ""}]
    path = _upload("half.jsonl", rows)
    assert register(str(path), "half", "alpaca", {}).startswith("⚠ registered, but:")
    values = forms.spec_to_values(yaml.safe_load(Path(demo_paths["example_spec"]).read_text(encoding="utf-8")))
    values |= {"data.datasets": ["half"], "data.dataset_dir": str(workspace.data_dir())}
    *updates, problems, start, _ = train.validate_form(*[values[f.path] for f in forms.FIELDS], {}, "en")
    assert "Spec is valid" not in problems and "line 2, column 'output': empty response (turn 2)" in problems
    assert start["interactive"] is False
    datasets = [f.path for f in forms.FIELDS].index("data.datasets")
    assert "empty response" in updates[datasets]["info"]
    started, run_id, _ = train_actions.start_run(values, "en")
    assert run_id is None and "line 2, column 'output': empty response (turn 2)" in started
    # fixed file: the form reads it again (its size and time changed) and the spec is valid
    path.write_text(json.dumps(rows[0]) + "\n")
    problems = train.validate_form(*[values[f.path] for f in forms.FIELDS], {}, "en")[-3]
    assert "Spec is valid" in problems, problems


def test_preview_is_the_files_own_row_and_the_figures_say_their_rows(run_registry):
    rows = [{"instruction": f"Say {i}", "input": "", "output": str(i)} for i in range(3)]
    path = _upload("own.jsonl", rows)
    assert register(str(path), "own", "alpaca", {"prompt": "instruction", "response": "output"}).startswith("✅")
    frame = data.preview("own")
    assert list(frame.columns) == ["instruction", "input", "output"] and frame.iloc[0]["instruction"] == "Say 0"
    got, _, whole = data.head("own")
    assert len(got) == 3 and whole
    assert data.rows_note(3, True, 3) == (
        "the first 3 rows as the file has them · the sample and the token lengths come from all 3 rows of the file"
    )
    _, _, whole = data.head("own", n=2)
    assert not whole
    assert "前 2 行（不是整个文件）" in data.rows_note(2, False, 2, "zh")


def test_a_kto_tag_column_registers_kto_data_and_a_bad_tag_is_named(run_registry):
    rows = [{"q": "Add 1 and 1.", "a": "2.", "ok": True}, {"q": "Add 2 and 2.", "a": "5.", "ok": "no"}]
    rows += [{"q": "Add 3 and 3.", "a": "7.", "ok": False}]
    path = _upload("tagged.jsonl", rows)
    assert guess_mapping(["q", "a", "ok", "label"], "alpaca")["kto_tag"] is None, "never guessed"
    shown = register(str(path), "tagged", "alpaca", {"prompt": "q", "response": "a", "kto_tag": "ok"})
    assert shown.startswith("⚠ registered, but:"), shown
    assert "tagged.jsonl, line 2, column 'ok'" in shown and '"no", not true or false' in shown, shown
    assert _info()["tagged"]["columns"] == {"prompt": "q", "response": "a", "kto_tag": "ok"}
    assert registered_entry("tagged")["columns"]["kto_tag"] == "ok"


def test_a_picked_dataset_shows_its_own_mapping_never_the_last_ones(run_registry):
    """Issue 27 item 11: picking a dataset without a file here (a hub entry) left the last dataset's mapping (its
    ``messages`` column) on the page; every role is now the picked entry's, empty where it maps none."""
    path = _upload(
        "chat.jsonl", [{"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]}]
    )
    assert register(str(path), "chat", "sharegpt", {"messages": "conversations"}).startswith("✅")
    info = _info() | {"hub_qa": {"hf_hub_url": "someone/qa", "columns": {"prompt": "question", "response": "answer"}}}
    (workspace.data_dir() / "dataset_info.json").write_text(json.dumps(info))
    chat = picked_mapping("chat")
    assert chat["path"] == str(path.resolve()) and chat["formatting"] == "sharegpt"
    assert chat["columns"]["messages"] == "conversations" and chat["choices"] == ["conversations"]
    hub = picked_mapping("hub_qa")
    assert hub["path"] == "" and hub["formatting"] == "alpaca" and hub["choices"] == []
    assert hub["columns"].get("messages") is None
    assert (hub["columns"]["prompt"], hub["columns"]["response"]) == ("question", "answer")
    gone = picked_mapping("no_such_dataset")
    assert gone == {"path": "", "formatting": "alpaca", "columns": {}, "choices": []}
