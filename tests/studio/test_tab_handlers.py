"""Handlers of the Runs, Datasets, Export and Chat tabs, without a browser."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.core import workspace
from engine.data.masked_samples import token_lengths
from studio.tabs import chat_sources, data, data_register, export, runs


@pytest.mark.parametrize("name", ["../../etc/passwd.json", "..\\..\\x.csv", "/abs/path/x.jsonl", "a/../../b.json"])
def test_upload_names_cannot_escape(studio_home, tmp_path, name):
    src = tmp_path / "up.json"
    src.write_text(json.dumps([{"instruction": "hi", "output": "yo"}]))
    dest = data_register.store_upload(src, name)
    assert dest.parent == workspace.uploads_dir().resolve() and ".." not in dest.name


def test_upload_rejects_types_and_size(studio_home, tmp_path, monkeypatch):
    src = tmp_path / "x.exe"
    src.write_text("x")
    with pytest.raises(ValueError, match="upload a"):
        data_register.store_upload(src)
    big = tmp_path / "big.json"
    big.write_text("[]" + " " * 2000)
    monkeypatch.setattr(data_register, "MAX_UPLOAD_BYTES", 1000)
    with pytest.raises(ValueError, match="upload limit"):
        data_register.store_upload(big)


def test_upload_map_register_preview(studio_home, tmp_path):
    src = tmp_path / "mine.csv"
    src.write_text("question,answer\nWhat is 2+2?,4\nCapital of France?,Paris\n")
    dest = data_register.store_upload(src)
    cols = data_register.file_columns(dest)
    mapping = data_register.guess_mapping(cols, "alpaca")
    assert mapping["prompt"] == "question" and mapping["response"] == "answer"
    msg = data_register.register(str(dest), "mine_csv", "alpaca", mapping)
    assert msg.startswith("✅"), msg
    frame = data.preview("mine_csv")
    assert len(frame) == 2
    assert data_register.register("/etc/passwd", "x", "alpaca", {}).startswith("❌")


def test_masked_sample_and_histogram(demo_paths):
    html_ = data.sample_html(demo_paths["datasets"][0], demo_paths["model_dir"], "auto")
    assert "tok-prompt" in html_ and "tok-train" in html_
    frame, note = data.lengths(demo_paths["datasets"][0], demo_paths["model_dir"], "auto", 16)
    assert frame["rows"].sum() > 0 and "truncated" in note and "over cutoff" in set(frame["cutoff"])


@pytest.mark.parametrize("packing", [False, True])
def test_pt_blocks_match_the_trainer(packing):
    """The Datasets tab's count of pt blocks and dropped tail tokens is what engine.trainer.packed_rows cuts from the
    same texts."""
    import random

    from datasets import Dataset

    from engine.trainer.packed_rows import split_into_blocks

    rng = random.Random(7)
    counts = [rng.randint(1, 70) for _ in range(300)] + [16, 32, 1]
    texts = Dataset.from_dict({"input_ids": [[1] * c for c in counts], "labels": [[1] * c for c in counts]})
    blocks, tail = split_into_blocks(texts, 16, concatenate=packing)
    cut = data.pt_blocks(counts, 16, packing)
    assert (cut["blocks"], cut["tail"]) == (len(blocks), tail) and cut["tokens"] == sum(counts)
    assert cut["split"] == sum(c > 16 for c in counts)


def test_length_histogram_follows_the_stage(demo_paths):
    """sft / dpo: the share truncated at the cutoff; pt: the blocks the texts become, nothing truncated; with
    packing, the tail tokens dropped (pt) or the packing efficiency (sft)."""
    name, model = "demo_pretrain", demo_paths["model_dir"]
    frame, note = data.lengths(name, model, "auto", 16, stage="sft")
    assert "truncated" in note and set(frame["cutoff"]) <= {"within cutoff", "over cutoff"}
    _, packed = data.lengths(name, model, "auto", 16, packing=True, stage="sft")
    assert "truncated" in packed and "packing efficiency" in packed
    frame, note = data.lengths(name, model, "auto", 16, stage="pt")
    assert "nothing truncated" in note and "% truncated" not in note and "packing" not in note
    assert set(frame["cutoff"]) == {"one block", "several blocks"}, set(frame["cutoff"])
    rows = data.reg.preview_rows(name, workspace.data_dir(), n=400)
    counts = token_lengths("auto", model, rows, "pt")
    cut = data.pt_blocks(counts, 16, False)
    assert f"**{cut['blocks']} blocks**" in note and f"{cut['split']} texts span several" in note
    frame, note = data.lengths(name, model, "auto", 16, packing=True, stage="pt")
    cut = data.pt_blocks(counts, 16, True)
    assert f"**{cut['blocks']} full blocks** of 16" in note and f"**{cut['tail']} tail tokens dropped**" in note
    assert set(frame["cutoff"]) == {"joined into blocks"} and "truncated" not in note
    _, short = data.lengths(name, model, "auto", sum(counts) + 8, packing=True, stage="pt")
    assert "fewer tokens than one block" in short
    zh_frame, zh = data.lengths(name, model, "auto", 16, packing=True, stage="pt", lang="zh")
    assert "丢弃末尾" in zh and set(zh_frame["cutoff"]) == {"拼接后分块"}
    # pt trains the whole text (with its EOS): longer than the sft rendering of the same row, all of it trained
    sft_counts = token_lengths("auto", model, rows)
    assert counts != sft_counts
    assert "tok-prompt" not in data.sample_html(name, model, "auto", stage="pt")
    _, dpo = data.lengths("demo_dpo", model, "auto", 16, packing=True, stage="dpo")
    assert "truncated" in dpo and "packing" not in dpo  # dpo does not pack


def test_export_paths_stay_in_workspace(studio_home):
    with pytest.raises(ValueError, match="inside the workspace"):
        export.inside_workspace("/etc")
    with pytest.raises(ValueError, match="inside the workspace"):
        export.inside_workspace("../../")
    job, msg = export.start("/etc", "", lang="en")
    assert job is None and msg.startswith("❌")
    job, msg = export.start(str(workspace.runs_dir() / "nope"), "", lang="en")
    assert job is None and msg.startswith("❌")
    assert export.estimate("/etc", "").startswith("❌ /etc: only folders inside the workspace")


def test_export_estimate_refusal_merge_and_reattach(demo_paths, run_registry, monkeypatch):
    """The page shows what a merge needs before the click, refuses one that will not fit unless forced, and a
    reloaded page (new handler calls, nothing kept in memory) finds the merge and its result."""
    import time

    import gradio as gr
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    assert export.attach()[:2] == (None, gr.skip())  # no merge yet: a late page load leaves the result box as it is
    adapter = run_registry / "uploads" / "my-adapter"
    model = AutoModelForCausalLM.from_pretrained(demo_paths["model_dir"], dtype=torch.float32)
    get_peft_model(model, LoraConfig(r=2, target_modules=["q_proj"])).save_pretrained(str(adapter))
    needs = export.estimate(str(adapter), "exports/mine", "bf16", "cpu")
    assert needs.startswith("✅ RAM: about") and "available" in needs and "(bf16, on cpu)" in needs
    monkeypatch.setenv("STUDIO_MEM_AVAILABLE", "100MB")
    assert export.estimate(str(adapter), "exports/mine").startswith("⚠️ not enough memory for this merge")
    job, msg = export.start(str(adapter), "exports/mine", "bf16", "cpu", False)
    assert job is None and "not enough memory" in msg and "0.10 GB is available" in msg
    job, msg = export.start(str(adapter), "exports/mine", "bf16", "cpu", True)
    assert job, msg
    reloaded_job, shown, _ = export.attach()  # a reload while it runs: the timer follows the same merge
    assert reloaded_job in (job, None)
    deadline = time.time() + 180
    while job and time.time() < deadline:
        job, shown, listed = export.poll(job)
        time.sleep(0.5)
    assert "merged-path" in shown and (run_registry / "exports" / "mine" / "config.json").is_file(), shown
    job, shown, listed = export.attach()  # a restarted studio: the newest merge's result and the list
    assert job is None and "merged-path" in shown and "| finished |" in listed and "max \\|logit diff\\|" in listed
    assert export.cancel(None)[1] == "nothing to cancel"
    _, shown, listed = export.attach("zh")  # the same merge on the Chinese page: its verification in Chinese
    assert "合并后的模型" in shown and "校验：最大 |logit 差|" in shown and "（bf16）" in shown, shown
    assert "| 已完成 |" in listed and "最大 \\|logit 差\\|" in listed, listed


def test_runs_table_and_diff_are_empty_safe(studio_home):
    assert list(runs.table().columns) == runs.COLUMNS
    assert runs.spec_diff([]).empty and runs.overlay([]).empty
    assert runs.act("delete", None) == "select a run first"


def test_runs_table_peak_is_the_trainers_and_says_so(tmp_path):
    """Issue 27 item 15: the table's peak (622 MiB) and the RAM chart's (~870) differed unexplained. The column says
    it is one training process's peak (torch's peak allocated on a GPU, the process's RSS on the CPU), and the note
    under the table says what the dashboard's charts count instead, in both languages."""
    from types import SimpleNamespace

    from engine.core import events
    from studio.i18n.page import t

    path = tmp_path / "events.jsonl"
    gpu = {"allocated_mib": 300.0, "max_allocated_mib": 622.0, "reserved_mib": 700.0, "rss_mib": 2000.0}
    events.append_event(
        path, "log", 1, loss=2.0, memory=[{"rank": 0, **gpu}, {"rank": 1, **gpu, "max_allocated_mib": 500}]
    )
    events.append_event(path, "log", 2, loss=1.5, memory={"0": {"rss_mib": 610.0}})
    rec = SimpleNamespace(
        id="r1", name="n", spec="", run_dir=str(tmp_path), started=1.0, ended=2.0, status="completed", kind="train"
    )
    row = runs.summarize(rec)
    assert row["trainer peak MiB"] == 622  # torch's peak of the rank that held most, not its RSS nor a moment's use
    assert "trainer peak MiB" in runs.COLUMNS and "训练进程峰值 MiB" in runs.table("zh", [row]).columns
    note, zh = t("runs_peak_note", "en"), t("runs_peak_note", "zh")
    assert "one training process" in note and "every process of the run" in note
    assert "单个训练进程" in zh and "全部进程" in zh
    assert "all the run's processes" in t("ram_mem", "en") and "all processes on the GPU" in t("gpu_mem", "en")
    assert "全部进程" in t("ram_mem", "zh") and "全部进程" in t("gpu_mem", "zh")


def test_runs_tab_delete_says_what_it_removed(run_registry):
    """The Runs tab's Delete shows the registry's report (what was removed), in the page's language."""
    import sys

    from engine.runs import registry
    from tests.helpers import wait_for

    rid = registry.submit_command([sys.executable, "-c", "print('ok')"], name="quick")
    rdir = Path(wait_for(lambda: registry.get(rid).status == "completed" and registry.get(rid).run_dir, timeout=60))
    shown = runs.act("delete", rid, "zh")
    assert f"已删除运行 {rid}" in shown and f"已删除 {rdir}" in shown and not rdir.exists(), shown


def test_chat_refuses_adapter_outside_workspace(studio_home):
    from studio.tabs import chat

    with pytest.raises(ValueError):
        chat_sources.tuned_target("/etc")
    assert chat_sources.tuned_target("") is None
    assert Path(chat.ROOT, "engine", "trainer", "chat_worker.py").is_file()


class _FakeWorker:
    """Stands in for a chat_worker process: records what each Send passes, answers 'reply N'."""

    def __init__(self, model, adapter=None, template="auto", source=""):
        self.model, self.adapter, self.template, self.source = model, adapter, template, source or model
        self.requests: list[tuple[list, dict]] = []
        self.dead = False
        self.vision = False

    def wait_ready(self, timeout=180, lang="en"):
        return ""

    def alive(self):
        return not self.dead

    def generate(self, messages, options, lang="en"):
        self.requests.append((messages, options))
        n = len(self.requests)
        yield f"reply {n}"[:3]
        yield f"reply {n}"

    def close(self):
        pass


def _browser_round_trip(hist):
    """What gradio 6 hands the next event after the Chatbot showed ``hist``: its messages with content as a list of
    parts ({"type": "text", "text": ...}) plus metadata/options keys, as the browser sends them back."""
    import gradio as gr

    box = gr.Chatbot()
    return box.preprocess(box.data_model.model_validate(box.postprocess(hist).model_dump()))


def test_chat_send_passes_the_whole_conversation_to_each_worker(monkeypatch):
    from studio.tabs import chat

    base, tuned = _FakeWorker("m"), _FakeWorker("m", "a")
    monkeypatch.setattr(chat, "_BY_OWNER", {"": {"base": base, "tuned": tuned}})
    hists = ([], [])
    for turn, prompt in enumerate(["first", "second", "third"], start=1):
        *_, (b, tu, box, image) = chat.send(prompt, None, *hists, "be brief", 0.5, 0.8, 32, "###, \\n\\n", "en")
        assert box == "" and image is None
        assert [m["content"] for m in b] == [m["content"] for m in tu]
        assert [m["role"] for m in b] == ["user", "assistant"] * turn
        assert b[-1]["content"] == f"reply {turn}" and b[-2]["content"] == prompt
        hists = (_browser_round_trip(b), _browser_round_trip(tu))
        assert isinstance(hists[0][0]["content"], list)  # gradio 6: a list of parts, not a str
    for worker in (base, tuned):
        messages, options = worker.requests[-1]
        assert messages == [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "reply 1"},
            {"role": "user", "content": "second"},
            {"role": "assistant", "content": "reply 2"},
            {"role": "user", "content": "third"},
        ]
        assert options == {
            "system": "be brief",
            "max_new_tokens": 32,
            "temperature": 0.5,
            "top_p": 0.8,
            "stop": ["###", "\n\n"],
        }


def test_chat_conversation_from_gradio_content_forms():
    from studio.tabs import chat

    hist = [
        {"role": "user", "content": "plain str"},
        {"role": "assistant", "content": [{"type": "text", "text": "parts"}, {"type": "text", "text": " joined"}]},
        {"role": "user", "content": {"type": "text", "text": "one part"}},
        {"role": "assistant", "content": chat.t("chat_empty", "zh")},  # the empty-reply note is an empty reply
        {"role": "user", "content": [{"type": "text", "text": "failed"}]},
        {"role": "assistant", "content": f"half\n\n{chat.ERROR_MARK}worker exited"},  # left out with its prompt
        {"role": "user", "content": [{"type": "file", "file": {"path": "/x.png"}}, {"type": "text", "text": "pic"}]},
        {"role": "assistant", "content": "ok", "metadata": None, "options": None},
    ]
    assert chat.conversation(hist) == [
        {"role": "user", "content": "plain str"},
        {"role": "assistant", "content": "parts joined"},
        {"role": "user", "content": "one part"},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "pic"},  # /x.png is named but is no file gradio received nor one in the workspace
        {"role": "assistant", "content": "ok"},
    ]
    assert chat.images_of(hist[6]["content"]) == ["/x.png"]
    assert chat.parse_stop(" a , b,,\\n") == ["a", "b", "\n"] and chat.parse_stop("") == []


def test_chat_send_with_an_image(monkeypatch, studio_home, tmp_path):
    """An image sent with a message goes to a vision-language model with that turn (and with it in later turns),
    is shown in the pane before the text and survives gradio's round trip; a text-only model's pane says it cannot
    read it, in the page's language, and that turn is not sent to it later. A path the browser sends back that is
    neither an upload nor in the workspace is never read."""
    from PIL import Image

    from engine.core import workspace
    from studio.tabs import chat

    (workspace.home() / "uploads").mkdir(parents=True, exist_ok=True)
    pic = workspace.home() / "uploads" / "red.png"
    Image.new("RGB", (8, 8), "red").save(pic)
    outside = tmp_path / "secret.png"
    Image.new("RGB", (8, 8), "blue").save(outside)
    assert chat.readable_image(str(pic)) and not chat.readable_image(str(outside))
    assert not chat.readable_image("/etc/passwd")
    vlm, text_only = _FakeWorker("vlm"), _FakeWorker("m", "a")
    vlm.vision = True
    monkeypatch.setattr(chat, "_BY_OWNER", {"": {"base": vlm, "tuned": text_only}})
    *_, (b, tu, box, image) = chat.send("what colour?", str(pic), [], [], "", 0.0, 1.0, 8, "", "zh")
    assert box == "" and image is None  # the prompt and the image are cleared for the next message
    assert vlm.requests[-1][0] == [{"role": "user", "content": "what colour?", "images": [str(pic)]}]
    assert text_only.requests == []
    assert tu[-1]["content"] == chat.ERROR_MARK + chat.t("chat_text_only", "zh")
    b, tu = _browser_round_trip(b), _browser_round_trip(tu)
    assert chat.images_of(b[0]["content"]) == [str(pic)] and chat.text_of(b[0]["content"]) == "what colour?"
    *_, (b, tu, _, _) = chat.send("and now?", None, b, tu, "", 0.0, 1.0, 8, "", "en")
    assert vlm.requests[-1][0] == [
        {"role": "user", "content": "what colour?", "images": [str(pic)]},
        {"role": "assistant", "content": "reply 1"},
        {"role": "user", "content": "and now?"},
    ]
    assert text_only.requests[-1][0] == [{"role": "user", "content": "and now?"}]
    assert chat.images_of(b[0]["content"]) == [str(pic)]  # the first turn's image is still shown
    # an image alone is a message too
    *_, (b, _, _, _) = chat.send("", str(pic), b, tu, "", 0.0, 1.0, 8, "", "en")
    assert vlm.requests[-1][0][-1] == {"role": "user", "content": "", "images": [str(pic)]}
    # a crafted history or image path outside: left out, the text still goes
    forged = [{"role": "user", "content": [{"type": "file", "file": {"path": str(outside)}}, "look"]}]
    forged.append({"role": "assistant", "content": "?"})
    *_, (b, _, _, _) = chat.send("again", str(outside), forged, [], "", 0.0, 1.0, 8, "", "en")
    assert vlm.requests[-1][0] == [
        {"role": "user", "content": "look"},
        {"role": "assistant", "content": "?"},
        {"role": "user", "content": "again"},
    ]


def _chat_workspace(home: Path) -> dict:
    """A workspace with a base model, finished / failed / unsaved training runs and finished / failed merges, as
    registry rows (merges are command runs tagged 'merge', engine.export.merge_jobs)."""
    import sys
    import time

    import yaml

    from engine.runs import records as records_mod
    from engine.runs import store

    store.list_runs(refresh_status=False)  # the registry exists first: a missing one is rebuilt from the folders
    base = home / "models" / "base"
    base.mkdir(parents=True)
    (base / "config.json").write_text("{}")
    made: dict = {"base": base}
    for i, (name, status, saved) in enumerate(
        [("good", "completed", True), ("bad", "failed", False), ("gone", "completed", False)]
    ):
        rdir = home / "runs" / name
        (rdir / "adapter").mkdir(parents=True)
        spec = {"model": {"name_or_path": str(base)}, "data": {"template": "chatml"}}
        (rdir / "spec.yaml").write_text(yaml.safe_dump(spec))
        if saved:
            (rdir / "adapter" / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(base)}))
            (rdir / "adapter" / "adapter_model.safetensors").write_bytes(b"")
        store._insert(
            records_mod.RunRecord(
                id=name,
                name=name,
                status=status,
                created=time.time() + i,
                run_dir=str(rdir),
                output_dir=str(rdir),
                spec=yaml.safe_dump(spec),
            )
        )
        made[name] = rdir
    exports = home / "exports"
    for i, (name, status) in enumerate([("good-merged", "completed"), ("bad-merged", "failed")]):
        rdir = home / "runs" / f"merge-{name}"
        rdir.mkdir(parents=True)
        out = exports / name
        argv = [
            sys.executable,
            "-m",
            "engine.trainer.merge",
            str(made["good"]),
            "--out",
            str(out),
            "--tmp-dir",
            str(exports / f".{name}.tmp-1"),
            "--events",
            str(rdir / "events.jsonl"),
        ]
        if status == "completed":
            out.mkdir(parents=True)
            (out / "config.json").write_text("{}")
        store._insert(
            records_mod.RunRecord(
                id=f"m-{name}",
                name=f"merge {name}",
                status=status,
                created=time.time() + 5 + i,
                run_dir=str(rdir),
                output_dir=str(rdir),
                kind="command",
                command=argv,
                tags=["merge"],
            )
        )
        made[name] = out
    hidden = exports / ".good-merged.tmp-2"  # a merge's temp folder: never offered
    hidden.mkdir()
    (hidden / "config.json").write_text("{}")
    return made


def test_chat_tuned_list_is_finished_runs_and_exports(run_registry):

    made = _chat_workspace(run_registry)
    choices = chat_sources.tuned_choices()
    assert [v for _, v in choices] == [str(made["good"]), str(made["good-merged"])], choices
    assert [label.split(":")[0] for label, _ in choices] == ["run", "export"]
    assert not any("merge" in v for _, v in choices[:1]) and all("runs/merge-" not in v for _, v in choices)
    assert [label.split("：")[0] for label, _ in chat_sources.tuned_choices("zh")] == ["运行", "导出"]
    # what each loads: the run's adapter on the base it was trained from; the merged export as a model
    assert chat_sources.tuned_target(str(made["good"])) == (str(made["base"]), str(made["good"] / "adapter"))
    assert chat_sources.tuned_target(str(made["good-merged"])) == (str(made["good-merged"]), None)
    with pytest.raises(ValueError, match="adapter"):
        chat_sources.tuned_target(str(made["gone"]))
    # the template it was trained with, for the export too (read from the run it was merged from)
    assert (
        chat_sources.template_for(str(made["good"])) == chat_sources.template_for(str(made["good-merged"])) == "chatml"
    )
    assert chat_sources.template_for("") == "auto"
    # picking the run (or its merged export) sets the base model it was trained on; a bare model sets none
    assert (
        chat_sources.base_for(str(made["good"]))
        == chat_sources.base_for(str(made["good-merged"]))
        == str(made["base"])
    )
    assert chat_sources.base_for(str(made["base"])) is None and chat_sources.base_for("") is None
    # the same for every choice at once, which the page applies in the browser when one is picked
    assert chat_sources.picks_for(choices) == {
        str(made["good"]): ["chatml", str(made["base"])],
        str(made["good-merged"]): ["chatml", str(made["base"])],
    }
    assert (
        str(made["good-merged"]) in chat_sources.model_choices() and str(made["base"]) in chat_sources.model_choices()
    )


def test_chat_reload_shows_what_is_loaded(run_registry, monkeypatch):
    from studio.tabs import chat

    made = _chat_workspace(run_registry)
    monkeypatch.setattr(chat, "_BY_OWNER", {})
    monkeypatch.setattr(chat, "Worker", _FakeWorker)
    # a fresh page: nothing loaded, the pickers keep their defaults
    model_u, tuned_u, template_u, status = chat.restore("en")
    assert "value" not in model_u and "value" not in tuned_u and status == ""
    shown = chat.load(str(made["good-merged"]), str(made["good"]), "en", template="chatml")
    assert (
        shown.startswith("✅ loaded base, tuned") and "exports/good-merged" in shown and "runs/good/adapter" in shown
    )
    # a reload: the page shows the merged model the base worker runs, not the default (demo) model
    model_u, tuned_u, template_u, status = chat.restore("en")
    assert model_u["value"] == str(made["good-merged"]) and str(made["good-merged"]) in model_u["choices"]
    assert tuned_u["value"] == str(made["good"]) and template_u["value"] == "chatml"
    assert status == shown
    assert "已加载" in chat.restore("zh")[3]
    # a worker that died is dropped, and the page says what is left
    chat.workers()["tuned"].dead = True
    model_u, tuned_u, _, status = chat.restore("en")
    assert tuned_u["value"] is None and "tuned" not in status and "loaded base" in status
    assert chat.unload() == "unloaded 1 worker(s)"
    assert chat.restore("en")[3] == "" and chat.loaded_text() == "no model loaded"


def test_packing_efficiency():
    assert data.packing_efficiency([50, 50, 100], 100) == 1.0
    assert data.packing_efficiency([60, 60], 100) == 0.6
    assert data.packing_efficiency([500], 100) == 1.0  # truncated to the cutoff first


def test_overlay_and_diff_of_two_runs(studio_home, monkeypatch):
    from types import SimpleNamespace

    from engine.core import events

    specs = {}
    for rid, lr in (("run-a", 1e-3), ("run-b", 5e-4)):
        rdir = workspace.runs_dir() / rid
        rdir.mkdir(parents=True, exist_ok=True)
        for s in (1, 2):
            events.append_event(rdir / "events.jsonl", "log", s, loss=2.0 / s)
        specs[rid] = f"model: {{name_or_path: m}}\ndata: {{datasets: [d]}}\ntrain: {{learning_rate: {lr}}}\n"
    frame = runs.overlay(["run-a", "run-b"])
    assert set(frame["run"]) == {"run-a", "run-b"} and len(frame) == 4  # unregistered: named by id

    fake = SimpleNamespace(get=lambda rid: SimpleNamespace(spec=specs[rid]))
    monkeypatch.setattr(runs, "runs", fake)
    diff = runs.spec_diff(["run-a", "run-b"])
    assert list(diff["field"]) == ["train.learning_rate"]
    assert list(diff.iloc[0][["run-a", "run-b"]]) == ["0.001", "0.0005"]


def test_overlay_names_runs_and_the_picker_tells_them_apart(studio_home, monkeypatch):
    """The overlay's legend is the runs' names (the id added where a name repeats or is empty); the compare picker
    shows name, status, start and final loss before the id."""
    from types import SimpleNamespace

    from engine.core import events

    records = {"r1": "lr-high", "r2": "lr-low", "r3": "lr-low", "r4": ""}
    for rid in records:
        rdir = workspace.runs_dir() / rid
        rdir.mkdir(parents=True, exist_ok=True)
        events.append_event(rdir / "events.jsonl", "log", 1, loss=1.5)
        events.append_event(rdir / "events.jsonl", "eval", 1, eval_loss=1.7)
    fake = SimpleNamespace(get=lambda rid: SimpleNamespace(name=records[rid]))
    monkeypatch.setattr(runs, "runs", fake)
    assert runs.run_names(list(records)) == {"r1": "lr-high", "r2": "lr-low (r2)", "r3": "lr-low (r3)", "r4": "r4"}
    frame = runs.overlay(["r1", "r4"])
    assert list(frame.columns) == ["x", "value", "run"]
    assert set(frame["run"]) == {"lr-high", "lr-high (eval)", "r4", "r4 (eval)"}
    assert set(runs.overlay(["r1"], lang="zh")["run"]) == {"lr-high", "lr-high（验证）"}
    rows = [
        {"id": "r1", "name": "lr-high", "status": "completed", "started": "11-30 10:00", "final loss": 1.5},
        {"id": "r4", "name": "", "status": "running", "started": "", "final loss": None},
    ]
    assert runs.compare_choices(rows) == [
        ("lr-high · completed · 11-30 10:00 · loss 1.5 · r1", "r1"),
        ("running · r4", "r4"),
    ]
    assert runs.compare_choices(rows, "zh")[0][0].startswith("lr-high · 已完成 · 11-30 10:00 · 损失 1.5")


def test_doctor_table_is_hidden_until_it_has_results(monkeypatch):
    from types import SimpleNamespace

    from studio.tabs import doctor

    check = SimpleNamespace(name="gpus", status="WARN", detail="no GPU", fix="install a driver")
    monkeypatch.setattr(doctor, "run_checks", lambda: [check])
    shown = doctor.show_checks("en")
    assert shown["visible"] is True and list(shown["value"].columns) == ["check", "status", "detail", "fix"]
    assert len(doctor.COLUMN_WIDTHS) == len(doctor.COLUMNS)


def test_a_file_without_answers_registers_saying_only_pt_can_use_it(studio_home, tmp_path):
    """Issue 27 item 10: an alpaca file without an output column registered with ✅ although sft has nothing to learn
    from it; now Register says it is plain text for stage pt, and how to make it sft data."""
    src = tmp_path / "no_answers.jsonl"
    src.write_text("\n".join(json.dumps({"instruction": f"Say {i}", "input": ""}) for i in range(5)))
    dest = data_register.store_upload(str(src))
    mapping = data_register.guess_mapping(data_register.file_columns(dest), "alpaca")
    msg = data_register.register(str(dest), "no_answers", "alpaca", mapping)
    assert msg.startswith("⚠") and "only stage pt" in msg and "response column" in msg, msg
    zh = data_register.register(str(dest), "no_answers_zh", "alpaca", mapping, lang="zh")
    assert "只有 pt 阶段" in zh, zh
    with_answers = tmp_path / "with_answers.jsonl"
    with_answers.write_text("\n".join(json.dumps({"instruction": f"Say {i}", "output": f"{i}"}) for i in range(5)))
    dest = data_register.store_upload(str(with_answers))
    mapping = data_register.guess_mapping(data_register.file_columns(dest), "alpaca")
    assert data_register.register(str(dest), "with_answers", "alpaca", mapping).startswith("✅")


def test_training_run_pickers_list_training_runs_only(run_registry):
    """The dashboard's, the compare and the Evaluate pickers offer training runs, never a merge job (nor an
    evaluation, export or serve job: command runs of the registry); the Runs table still lists every job."""
    from studio import backend
    from studio.app import Ctx
    from studio.tabs import eval as eval_tab

    _chat_workspace(run_registry)
    jobs = {"m-good-merged", "m-bad-merged"}
    assert jobs <= {r.id for r in backend.list_runs()}
    assert {v for _, v in Ctx.run_choices()} == {"good", "bad", "gone"}
    assert Ctx.default_run() in {"good", "bad", "gone"}
    rows = [runs.summarize(r) for r in backend.list_runs()]
    assert {v for _, v in runs.compare_choices(rows)} == {"good", "bad", "gone"}
    assert jobs <= set(runs.table()["id"])
    assert {v for _, v in eval_tab.run_choices()} == {"good", "gone"}


def test_chat_starts_on_a_text_model_and_answers_show_as_plain_text(run_registry):
    """The Chat tab's default base was the newest model, the demo's vision-language one; it is SmolLM2 when the demo
    imported it, else the demo's text model. Answers are plain text (a model's "~~" struck its words through)."""
    from engine.core import workspace
    from engine.models import gguf_file as gf

    text, vlm = workspace.demo_model_dir(), workspace.demo_vlm_model_dir()
    for folder in (text, vlm):  # the vision model built last: the newest
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")
    models = chat_sources.model_choices()
    assert models[0] == str(vlm) and chat_sources.default_model(models) == str(text)
    smol = workspace.models_dir() / gf.DEMO_NAME
    smol.mkdir()
    (smol / "config.json").write_text("{}")
    assert chat_sources.default_model(chat_sources.model_choices()) == str(smol)
    assert chat_sources.default_model([]) is None


def test_chat_models_are_each_accounts_own_in_team_mode(run_registry, monkeypatch):
    """Team mode: what Ann loads in Chat is hers: Bob's page shows nothing loaded, his Send gets no answer from her
    model, his Unload leaves hers running; single-user pages share the operator's slots as before."""
    from engine.core import accounts
    from studio.tabs import chat

    made = _chat_workspace(run_registry)
    monkeypatch.setattr(chat, "_BY_OWNER", {})
    monkeypatch.setattr(chat, "Worker", _FakeWorker)
    accounts.add("ann", "correct horse")
    accounts.add("bob", "battery staple")
    who = {"name": "ann"}
    accounts.set_viewer_source(lambda: who["name"])
    try:
        assert chat.load(str(made["base"]), "", "en").startswith("✅ loaded base")
        who["name"] = "bob"
        assert chat.restore("en")[3] == "" and chat.loaded_text() == "no model loaded"
        replies = list(chat.send("hello", None, [], [], "", 0.0, 1.0, 16, "", "en"))
        assert replies and all(not base and not tuned for base, tuned, *_ in replies)
        assert chat.unload() == "unloaded 0 worker(s)"
        who["name"] = "ann"
        assert made["base"].name in chat.loaded_text() and chat.workers()["base"].alive()
    finally:
        accounts.set_viewer_source(None)
