"""The Models tab's handlers: local models with sizes, delete (refused while a run trains on the model), a bad hub id
answered in the page's language. Downloads themselves are tested against the hub stand-in (tests/engine/
test_download.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

from studio.tabs import models as tab


def test_lists_deletes_and_refuses(run_registry, demo_paths):
    folder = run_registry / "models" / "my-copy"
    shutil.copytree(demo_paths["model_dir"], folder)
    frame = tab.models_frame("en")
    row = frame[frame["name"] == "models/my-copy"].iloc[0]
    assert row["where"] == "workspace" and row["size"] == "4.1 MB" and row["state"] == "complete"
    zh = tab.models_frame("zh")
    assert zh.columns[0] == "名称"
    assert zh[zh["名称"] == "models/my-copy"].iloc[0]["位置"] == "工作区"  # in Chinese too (issue 27 item 12)
    # every place engine.models.local gives has its words
    assert [tab._where(s, "zh") for s in ("cache", "modelscope")] == ["Hugging Face 缓存", "ModelScope 缓存"]

    assert "没有本地模型" in tab.delete_model("models/nothing-here", "zh")
    assert tab.downloads_text("en") == "no downloads"
    assert "neither a local folder nor a hub id" in tab.start_download("not a valid id!", "en")

    out = tab.delete_model("models/my-copy", "en")
    assert "freed" in out and not folder.exists()
    assert "models/my-copy" not in set(tab.models_frame("en")["name"])
    assert Path(demo_paths["model_dir"]).is_dir(), "only the named folder goes"


def test_the_downloads_timer_sends_the_list_when_it_changed_and_slows_down_with_none_going(run_registry):
    """Each tick is an event the whole page handles: with no download going the timer ticks every IDLE_S (a download
    started from the command line still shows), and a tick that finds the list as it was sends nothing."""
    import gradio as gr

    shown, seen, timer = tab.poll_downloads("en", {})
    assert shown == "no downloads" and timer == gr.update(value=tab.IDLE_S)
    shown, seen, timer = tab.poll_downloads("en", seen)
    assert shown == gr.skip() and timer == gr.skip()
    shown, seen, timer = tab.poll_downloads("zh", seen)  # the language changed: the list in its words
    assert shown == "没有下载任务" and timer == gr.skip()


def test_a_gguf_import_refused_is_said_in_the_pages_language_and_queues_nothing(run_registry, tmp_path):
    """The Models tab's Import GGUF: a file that is not GGUF, one whose architecture the loader does not map, in
    English and Chinese; a folder being built (hidden, a dot-name) is not listed as a model."""
    from engine.runs import registry as runs
    from tests.engine.test_gguf_import import tiny_gguf

    (tmp_path / "notes.gguf").write_text("not a model")
    assert "notes.gguf is not a GGUF file" in tab.start_gguf_import(str(tmp_path / "notes.gguf"), "", "en")
    rwkv = tiny_gguf(tmp_path / "rwkv.gguf", "rwkv6")
    said = tab.start_gguf_import(str(rwkv), "", "zh")
    assert said.startswith("rwkv.gguf：架构 'rwkv6' 无法导入"), said
    outside = tiny_gguf(tmp_path.parent / f"{tmp_path.name}-elsewhere.gguf", "llama")
    said = tab.start_gguf_import(str(outside), "", "en")  # a file elsewhere on the server is not the page's to read
    assert said.startswith(f"{outside} is outside the workspace ({run_registry}): the page reads files only"), said
    assert runs.list_runs() == []
    (run_registry / "models" / ".x.importing-1").mkdir(parents=True)
    assert not [n for n in tab.models_frame("en")["name"] if ".x" in n]
