"""Chat templates: every template renders, segments concatenate to the full chat, fit warnings, light import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from engine.data import templates as T
from engine.data.masked_samples import render_sample, token_lengths
from engine.data.template_table import TEMPLATE_NAMES, TemplateError

ROOT = Path(__file__).resolve().parents[2]
CONV = {
    "system": "Be brief.",
    "messages": [
        {"role": "user", "content": "Q1"},
        {"role": "assistant", "content": "A1"},
        {"role": "user", "content": "Q2"},
        {"role": "assistant", "content": "A2"},
    ],
}


@pytest.mark.parametrize("name", TEMPLATE_NAMES)
def test_every_template_renders_each_turn(name, demo_paths):
    info = T.tokenizer_info(demo_paths["model_dir"])
    segs = T.conversation_segments(name, info, CONV["system"], CONV["messages"])
    assert len(segs) == 2
    assert "A1" in segs[0][1] and "A2" in segs[1][1]  # after mistral's space, qwen3's empty thought
    assert "Q1" in segs[0][0] and "Q2" in segs[1][0] and "Be brief." in segs[0][0]
    assert "A1" not in segs[1][0]  # the second prompt holds only the new turn


def test_auto_matches_transformers_apply_chat_template(demo_paths):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(demo_paths["model_dir"])
    segs = T.conversation_segments("auto", T.tokenizer_info(tok), CONV["system"], CONV["messages"])
    msgs = [{"role": "system", "content": "Be brief."}, *CONV["messages"]]
    assert "".join(p + r for p, r in segs) == tok.apply_chat_template(msgs, tokenize=False)
    assert T.prompt_text("auto", T.tokenizer_info(tok), "", msgs[1:2]) == tok.apply_chat_template(
        msgs[1:2], tokenize=False, add_generation_prompt=True
    )


def test_auto_without_chat_template_is_default():
    # LF's `default`: every turn, the user's too, ends with EOS (Studio's own had none after the user turn)
    info = T.TokenizerInfo(chat_template=None, special={"eos_token": "</s>"})
    segs = T.conversation_segments("auto", info, "", CONV["messages"][:2])
    assert segs == [("Human: Q1</s>\nAssistant:", "A1</s>\n")]


def test_llama3_on_chatml_tokenizer_warns(demo_paths):
    info = T.tokenizer_info(demo_paths["model_dir"])
    warn = T.template_warning("llama3", info)
    assert warn and "<|start_header_id|>" in warn and "'auto'" in warn
    assert T.template_warning("auto", info) is None and T.template_warning("chatml", info) is None


def test_unknown_template_names_the_choices():
    with pytest.raises(TemplateError, match="llama3"):
        T.conversation_segments("llama2-chat", T.TokenizerInfo(), "", CONV["messages"])


def test_suggest_template(tmp_path, demo_paths):
    assert T.suggest_template(demo_paths["model_dir"]) == "auto"
    (tmp_path / "config.json").write_text('{"model_type": "qwen2"}')
    (tmp_path / "tokenizer.json").write_text('{"added_tokens": [{"content": "<|im_start|>"}], "model": {}}')
    assert T.suggest_template(tmp_path) == "qwen"
    (tmp_path / "tokenizer.json").write_text('{"added_tokens": [{"content": "<|start_header_id|>"}], "model": {}}')
    assert T.suggest_template(tmp_path) == "llama3"
    (tmp_path / "tokenizer.json").write_text('{"added_tokens": [], "model": {}}')
    assert T.suggest_template(tmp_path) == "default"


def test_render_sample_marks_trained_pieces(demo_paths):
    pieces = render_sample("chatml", demo_paths["model_dir"], CONV)
    assert [t for _, t in pieces] == [False, True, False, True]
    assert token_lengths("chatml", demo_paths["model_dir"], [CONV])[0] > 10


def test_templates_module_is_light():
    code = (
        "import sys, engine.data.templates, engine.data.masked_samples, engine.data.dataset_registry, "
        "engine.data.files, engine.data.rows; "
        "print([m for m in ('torch', 'transformers', 'datasets') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
