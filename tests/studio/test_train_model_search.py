"""The Train tab's model picker (issue 27, item 6) without a browser: the search's table and its one line in both
languages, offline (Studio's table) and against the hub stand-in; a picked row's id is what the Model field gets,
and the plan panel plans it before anything is downloaded (offline too, saying Start would refuse it)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from engine.models import reach
from studio import forms
from studio.tabs import train, train_model_search
from tests.hub_standin import HubStandin

CJK = re.compile(r"[\u4e00-\u9fff]")


def test_offline_search_shows_the_tables_rows_and_says_where_they_came_from():
    note, table, found = train_model_search.find("qwen2.5 0.5b", "en")
    assert "Studio's table of published configs" in note and "HF_HUB_OFFLINE" in note and "\n" not in note
    assert table["headers"] == ["Model", "Parameters", "Weights", "Licence", "Gated", "Local cache"]
    assert table["data"] == [
        ["Qwen/Qwen2.5-0.5B", "494.0M", "≈ 988.1 MB", "apache-2.0", "no", "not downloaded"],
        ["Qwen/Qwen2.5-0.5B-Instruct", "494.0M", "≈ 988.1 MB", "apache-2.0", "no", "not downloaded"],
    ]
    note_zh, table_zh = train_model_search.shown(found, "zh")  # a language switch shows the same rows in Chinese
    assert CJK.search(note_zh) and "HF_HUB_OFFLINE" in note_zh
    assert table_zh["headers"] == ["模型", "参数量", "权重大小", "许可证", "访问授权", "本地缓存"]
    assert table_zh["data"][0][3:] == ["apache-2.0", "无需授权", "未下载"]
    _, llama, _ = train_model_search.find("llama-3.2-1b-instruct", "en")  # the table's terms of a gated model
    assert llama["data"][0][3:5] == ["llama3.2", "yes, approved by the authors"]
    assert train_model_search.shown(None, "zh") == ("", {"headers": table_zh["headers"], "data": []})
    note, table, _ = train_model_search.find("", "en")
    assert note.startswith("type part of a model id") and table["data"] == []


def test_hub_search_shows_licence_and_gating(tmp_path, monkeypatch):
    from huggingface_hub import constants

    with HubStandin() as hub:
        hub.repos["studio-test/gated-chat"] = {"config.json": b"{}"}
        hub.gated.add("studio-test/gated-chat")
        hub.meta["studio-test/gated-chat"] = {"license": "llama3.1"}
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        monkeypatch.setattr(constants, "ENDPOINT", hub.url)
        monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
        reach.forget()
        try:
            note, table, _ = train_model_search.find("gated", "en")
            note_zh, table_zh, _ = train_model_search.find("gated", "zh")
        finally:
            reach.forget()
    assert note == f"1 models on the hub ({hub.url}) match 'gated'; nothing is downloaded until a run starts"
    assert table["data"] == [
        [
            "studio-test/gated-chat",
            "not known",
            "not known",
            "llama3.1",
            "yes, approved by the authors",
            "not downloaded",
        ]
    ]
    assert CJK.search(note_zh) and table_zh["data"][0][4] == "需要，由作者审批"
    assert not [p for _, p in hub.requests if "/resolve/" in p]


def test_a_picked_row_fills_the_model_field_and_the_plan_plans_it(demo_paths):
    assert train_model_search.picked(["Qwen/Qwen2.5-0.5B", "494.0M"]) == "Qwen/Qwen2.5-0.5B"
    assert train_model_search.picked([]) is None and train_model_search.picked(None) is None
    values = forms.spec_to_values(yaml.safe_load(Path(demo_paths["example_spec"]).read_text(encoding="utf-8")))
    values["model.name_or_path"] = train_model_search.picked(["Qwen/Qwen2.5-0.5B", "494.0M"])
    shown = train.plan_html(values, 24, "en")
    assert "Studio&#x27;s table of published configs" in shown and "Qwen/Qwen2.5-0.5B" in shown, shown
    assert "GiB" in shown and 'id="plan-verdict"' in shown
    # offline, Start refuses the model (its weights cannot be downloaded here) and the panel says so above the plan
    assert shown.startswith("<p>⚠ the run could not download its model: Qwen/Qwen2.5-0.5B"), shown[:300]
    assert train.plan_html(values, 24, "zh").startswith("<p>⚠ ")
    assert json.dumps(values)  # plain values: what the page sends
