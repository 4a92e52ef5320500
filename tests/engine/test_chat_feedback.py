"""Feedback from the Chat tab as training data (engine.data.feedback): edits become preference pairs and marks kto
rows in LLaMA-Factory's sharegpt layouts, registered so the data registry reads them for dpo and kto; appends from
many threads at once all land; and a DPO run on the demo model trains on a feedback set through the real trainer
subprocess, its logs carrying DPO's rewards and margins."""

from __future__ import annotations

import json
import math
import threading

import pytest

from engine.data import dataset_registry as reg
from engine.data import feedback
from engine.data import rows as data_rows
from engine.spec.schema import RunSpec
from tests.helpers import run_trainer

CHATTED = feedback.Chatted(model="/models/demo", adapter="/runs/r1/adapter", run_id="r1", template="default")


def _conv(prompt: str, answer: str, earlier: tuple[str, str] | None = None) -> list[dict]:
    turns = [{"role": "user", "content": earlier[0]}, {"role": "assistant", "content": earlier[1]}] if earlier else []
    return [*turns, {"role": "user", "content": prompt}, {"role": "assistant", "content": answer}]


def test_edits_and_marks_are_lf_rows_the_registry_reads(tmp_path):
    got = feedback.add_edit(_conv("What is 2+2?", "5", ("Hi", "Hello!")), "4", CHATTED, "Be brief.", tmp_path)
    assert got == feedback.Counts(pairs=1)
    feedback.add_mark(_conv("Capital of France?", "Paris."), True, CHATTED, data_dir=tmp_path)
    got = feedback.add_mark(_conv("Capital of Spain?", "Rome."), False, CHATTED, data_dir=tmp_path)
    assert (got.pairs, got.good, got.bad, got.marks) == (1, 1, 1, 2)

    # the files as LLaMA-Factory reads them: sharegpt ranking rows, and kto rows with a boolean kto_tag
    row = json.loads((tmp_path / "chat_feedback_dpo.jsonl").read_text(encoding="utf-8"))
    assert row["conversations"] == [
        {"from": "human", "value": "Hi"},
        {"from": "gpt", "value": "Hello!"},
        {"from": "human", "value": "What is 2+2?"},
    ]
    assert row["chosen"] == {"from": "gpt", "value": "4"} and row["rejected"] == {"from": "gpt", "value": "5"}
    assert row["system"] == "Be brief." and row["chatted"]["run_id"] == "r1"
    info = json.loads((tmp_path / "dataset_info.json").read_text(encoding="utf-8"))
    assert info["chat_feedback_dpo"]["ranking"] is True
    assert info["chat_feedback_kto"]["columns"]["kto_tag"] == "kto_tag"

    pairs = reg.load_rows("chat_feedback_dpo", tmp_path, "dpo")
    assert len(pairs) == 1 and (pairs[0]["chosen"], pairs[0]["rejected"]) == ("4", "5")
    assert pairs[0]["system"] == "Be brief."
    assert pairs[0]["messages"][-1] == {"role": "user", "content": "What is 2+2?"}
    kto = reg.load_rows("chat_feedback_kto", tmp_path, "kto")
    assert data_rows.kto_counts(kto) == {"desirable": 1, "undesirable": 1, "untagged": 0}
    assert kto[1]["messages"][-1] == {"role": "assistant", "content": "Rome."}
    assert reg.check_datasets(["chat_feedback_dpo"], tmp_path, "dpo") == []
    assert reg.check_datasets(["chat_feedback_kto"], tmp_path, "kto") == []
    # the wrong stage is refused by the one rule (a pair set is not kto data)
    assert reg.check_datasets(["chat_feedback_dpo"], tmp_path, "kto")

    assert feedback.last_chatted("dpo", tmp_path) == CHATTED
    assert feedback.stage_for(feedback.counts(tmp_path)) == "dpo"
    assert feedback.stage_for(feedback.Counts(good=1, bad=1)) == "kto"
    assert feedback.stage_for(feedback.Counts(bad=1)) is None


def test_in_team_mode_each_account_keeps_its_own_feedback(tmp_path, monkeypatch):
    """What a member says of a chat is theirs (issue 46 item 2): Ann's marks and edits go to her own sets, listed to
    her and not to Bob, whose counts stay empty and whose training run would name his own set; the operator's sets
    keep their names."""
    from engine.core import accounts, belongings

    monkeypatch.setenv("STUDIO_HOME", str(tmp_path))
    accounts.add("ann", "ann's password")
    accounts.add("bob", "bob's password")
    ddir = tmp_path / "data"
    who = {"name": "ann"}
    accounts.set_viewer_source(lambda: who["name"])
    try:
        feedback.add_mark(_conv("Who are you?", "A cat."), False, CHATTED, data_dir=ddir)
        got = feedback.add_edit(_conv("Who are you?", "A cat."), "Studio's assistant.", CHATTED, data_dir=ddir)
        assert (got.pairs, got.bad) == (1, 1)
        assert feedback.set_name("dpo") == "chat_feedback_dpo_ann"
        assert reg.load_rows("chat_feedback_dpo_ann", ddir, "dpo")[0]["chosen"] == "Studio's assistant."
        assert feedback.train_spec("dpo", {"name_or_path": "m"})["data"]["datasets"] == ["chat_feedback_dpo_ann"]
        info = reg.read_dataset_info(ddir)
        assert set(belongings.usable_datasets(ddir, info)) == {"chat_feedback_dpo_ann", "chat_feedback_kto_ann"}
        who["name"] = "bob"
        assert feedback.counts(ddir) == feedback.Counts() and feedback.last_chatted("dpo", ddir) is None
        assert belongings.usable_datasets(ddir, info) == []
        assert feedback.train_spec("kto", {"name_or_path": "m"})["data"]["datasets"] == ["chat_feedback_kto_bob"]
        who["name"] = None  # the operator: every set listed, their own under the plain names
        assert feedback.set_name("kto") == "chat_feedback_kto" and feedback.counts(ddir) == feedback.Counts()
        assert len(belongings.usable_datasets(ddir, info)) == 2
    finally:
        accounts.set_viewer_source(None)


def test_an_entry_removed_by_hand_comes_back_and_other_entries_stay(tmp_path):
    reg.save_dataset_info(tmp_path, {"mine": {"file_name": "mine.json"}})
    feedback.add_mark(_conv("a", "b"), True, CHATTED, data_dir=tmp_path)
    info = reg.read_dataset_info(tmp_path)
    assert set(info) == {"mine", "chat_feedback_kto"}
    del info["chat_feedback_kto"]
    reg.save_dataset_info(tmp_path, info)
    assert feedback.add_mark(_conv("c", "d"), False, CHATTED, data_dir=tmp_path).marks == 2
    assert set(reg.read_dataset_info(tmp_path)) == {"mine", "chat_feedback_kto"}


@pytest.mark.parametrize(
    ("conversation", "better", "key"),
    [
        ([{"role": "user", "content": "hi"}], "x", "data.feedback_no_answer"),
        (_conv("hi", "  "), "x", "data.feedback_empty_answer"),
        (_conv("hi", "yo"), " ", "data.feedback_empty_edit"),
        (_conv("hi", "yo"), "yo ", "data.feedback_same_edit"),
        ([{"role": "user", "content": "hi", "images": ["/tmp/a.png"]}, {"role": "assistant", "content": "a cat"}],
         "a dog", "data.feedback_images"),
    ],
)  # fmt: skip
def test_feedback_that_cannot_train_is_refused_and_nothing_written(tmp_path, conversation, better, key):
    with pytest.raises(feedback.FeedbackError) as err:
        feedback.add_edit(conversation, better, CHATTED, data_dir=tmp_path)
    assert err.value.args[0].key == key
    assert not (tmp_path / "chat_feedback_dpo.jsonl").exists() and not (tmp_path / "dataset_info.json").exists()


def test_concurrent_appends_lose_nothing(tmp_path):
    threads, per = 8, 25
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for j in range(per):
                text = f"answer {i}-{j} " + "x" * 2000  # long lines: a torn write would show
                if j % 2:
                    feedback.add_edit(_conv(f"q{i}-{j}", text), text + " better", CHATTED, data_dir=tmp_path)
                else:
                    feedback.add_mark(_conv(f"q{i}-{j}", text), bool(i % 2), CHATTED, data_dir=tmp_path)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    pool = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    assert not errors, errors
    edits = threads * (per // 2)
    marks = threads * per - edits
    assert feedback.counts(tmp_path).pairs == edits and feedback.counts(tmp_path).marks == marks
    assert len(reg.load_rows("chat_feedback_dpo", tmp_path, "dpo")) == edits
    assert len(reg.load_rows("chat_feedback_kto", tmp_path, "kto")) == marks
    prompts = {r["messages"][-1]["content"] for r in reg.load_rows("chat_feedback_dpo", tmp_path, "dpo")}
    assert len(prompts) == edits


def test_a_dpo_run_trains_on_a_feedback_set(demo_paths, tmp_path):
    """The spec Train on this feedback submits, on the demo model, through the real trainer subprocess."""
    ddir = tmp_path / "data"
    chatted = feedback.Chatted(model=demo_paths["model_dir"], template="default")
    for q, bad, good in [("Say hi.", "Bye.", "Hi!"), ("Count to 3.", "1 2", "1 2 3"), ("Yes or no?", "Maybe", "Yes")]:
        feedback.add_edit(_conv(q, bad), good, chatted, data_dir=ddir)
    spec = feedback.train_spec("dpo", {"name_or_path": chatted.model}, chatted.template)
    spec["data"]["dataset_dir"] = str(ddir)
    spec["output"]["report_to"] = ["none"]
    rc, events = run_trainer(RunSpec.model_validate(spec), tmp_path / "run", timeout=600)
    assert rc == 0 and events[-1]["type"] == "finished", events[-3:]
    ready = next(e for e in events if e["type"] == "data_ready")["payload"]
    assert ready["num_train"] == 3, ready
    logs = [e["payload"] for e in events if e["type"] == "log"]
    assert len(logs) == 9  # 3 epochs of 3 pairs, one pair a step
    assert all(math.isfinite(p["metrics"]["rewards/margins"]) for p in logs), logs
    assert all("rewards/chosen" in p["metrics"] and "rewards/rejected" in p["metrics"] for p in logs)
    assert any(p["metrics"]["rewards/margins"] != 0 for p in logs[1:])  # the policy moved from its reference


def test_a_kto_run_trains_on_marks_alone(demo_paths, tmp_path):
    """No pair yet, marks only: Train on this feedback's KTO spec trains on them (2 per step, as TRL's KTO needs)."""
    ddir = tmp_path / "data"
    chatted = feedback.Chatted(model=demo_paths["model_dir"], template="default")
    marks = [("Say hi.", "Hi!", True), ("Say hi.", "Bye.", False), ("2+2?", "4", True), ("2+2?", "5", False)]
    for q, a, good in marks:
        feedback.add_mark(_conv(q, a), good, chatted, data_dir=ddir)
    assert feedback.stage_for(feedback.counts(ddir)) == "kto"
    spec = feedback.train_spec("kto", {"name_or_path": chatted.model}, chatted.template)
    spec["data"]["dataset_dir"] = str(ddir)
    spec["output"]["report_to"] = ["none"]
    rc, events = run_trainer(RunSpec.model_validate(spec), tmp_path / "run", timeout=600)
    assert rc == 0 and events[-1]["type"] == "finished", events[-3:]
    ready = next(e for e in events if e["type"] == "data_ready")["payload"]
    assert (ready["desirable"], ready["undesirable"], ready["untagged"]) == (2, 2, 0), ready
    logs = [e["payload"] for e in events if e["type"] == "log"]
    assert len(logs) == 6 and all(math.isfinite(p["loss"]) for p in logs)  # 3 epochs of 4 marks, 2 a step
