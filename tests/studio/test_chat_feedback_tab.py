"""The Chat tab's feedback handlers (studio.tabs.chat_feedback) on a workspace of their own: a pane without a model
refuses, a mark and a better answer are kept with the model that answered, the counts line says so, and Train on
this feedback submits a DPO run on that model through the registry, which the scheduler trains to the end."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from engine.core.events import read_all
from engine.data import feedback
from engine.runs import records
from engine.runs import registry as runs
from studio.tabs import chat, chat_feedback
from tests.helpers import wait_for


@pytest.fixture
def workspace_home(demo_paths, tmp_path, monkeypatch):
    monkeypatch.setenv("STUDIO_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("STUDIO_CPU_SLOTS", "1")
    yield tmp_path / "home"
    for rec in runs.list_runs(refresh_status=False):
        if rec.status in records.ACTIVE:
            runs.stop(rec.id, grace_s=5)


def test_marks_and_edits_then_train_on_them(demo_paths, workspace_home):
    # the worker's own attributes, as studio.tabs.chat.Worker holds them once the base pane has loaded the demo
    base = SimpleNamespace(model=demo_paths["model_dir"], adapter=None, template="default", source="")

    def workers() -> dict:  # chat.workers: the asking account's slots, looked up at each click
        return {"base": base}

    turn = [{"role": "user", "content": "Say hi."}, {"role": "assistant", "content": "Bye."}]

    said = chat_feedback.mark(True, "tuned", turn, [], "", workers, chat.conversation, "en")
    assert said.startswith("❌ Load a model and chat first"), said
    said, _ = chat_feedback.save_edit("Bye.", "base", turn, [], "", workers, chat.conversation, "en")
    assert "the same as the model's" in said
    msg, run_id = chat_feedback.train("en")
    assert run_id is None and "Nothing to train on yet" in msg

    said = chat_feedback.mark(False, "base", turn, [], "", workers, chat.conversation, "zh")
    assert said.startswith("✅ 已将基座的回答标为不好") and "**1** 个标为不好" in said, said
    said, box = chat_feedback.save_edit("Hi!", "base", turn, [], "Be kind.", workers, chat.conversation, "en")
    assert box == "" and "**1** better answer(s)" in said and "**1** marked bad" in said, said
    row = json.loads((workspace_home / "data" / "chat_feedback_dpo.jsonl").read_text(encoding="utf-8"))
    assert row["chatted"]["model"] == demo_paths["model_dir"] and row["chatted"]["template"] == "default"
    assert chat_feedback.answer_of("base", turn, [], chat.conversation) == "Bye."
    assert "chat_feedback_dpo" in chat_feedback.counts_text("en")

    msg, run_id = chat_feedback.train("en")
    assert run_id and f"Run **{run_id}**" in msg and "DPO on 1 feedback row(s)" in msg, msg
    rec = runs.get(run_id)
    spec = rec.load_spec()
    assert (spec.method.stage, spec.method.finetuning, spec.data.datasets) == ("dpo", "lora", ["chat_feedback_dpo"])
    assert spec.model.name_or_path == demo_paths["model_dir"] and spec.data.template == "default"
    done = wait_for(lambda: runs.get(run_id).status not in records.ACTIVE and runs.get(run_id), timeout=600, every=1)
    events = read_all(Path(done.run_dir) / "events.jsonl")
    assert done.status == "completed", events[-3:]
    margins = [e["payload"]["metrics"]["rewards/margins"] for e in events if e["type"] == "log"]
    assert len(margins) == 3, margins  # 3 epochs of the one pair


def test_an_adapter_is_not_continued_the_run_trains_its_base(demo_paths):
    chatted = feedback.Chatted(model=demo_paths["model_dir"], adapter="/somewhere/adapter", run_id="")
    assert chat_feedback.training_model(chatted) == ({"name_or_path": demo_paths["model_dir"]}, True)
    assert chat_feedback.training_model(feedback.Chatted(model="m")) == ({"name_or_path": "m"}, False)
