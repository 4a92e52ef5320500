"""GGUF export (issue 24, items 1 and 7): `studio export --format gguf-*` of a LoRA run (merged first, one job) and
of a model folder, as registry runs with progress, cancel and refusals before any work.

What is written is read back independently of the writer: the gguf package's reader for tensor names (llama.cpp's
names, written out here), shapes and types and for the tokenizer metadata (against the tokenizer's own files);
transformers' GGUF loader for the logits, compared with a merged model this test builds itself with peft. The
reported figures (sizes, the logit difference) are checked against those computations.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from engine.core import events as ev
from engine.core.units import file_size
from engine.export import convert_jobs as cj
from engine.export import convert_plan as cp
from engine.export import gguf_checks as gc
from engine.export.checks import ExportError
from engine.runs import registry as runs
from tests.engine import test_merge as tm

LLAMA_BLOCK = ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down", "attn_norm", "ffn_norm"]


pytestmark = pytest.mark.usefixtures("outputs_in_tmp")  # tests/engine/conftest.py


@pytest.fixture(scope="module")
def adapter(base, tmp_path_factory) -> Path:
    return tm.make_adapter(base, tmp_path_factory.mktemp("adapters") / "lora", seed=7)


def reader(path: Path):
    import gguf

    return gguf.GGUFReader(str(path))


def field(r, key):
    return r.fields[key].contents()


def merged_with_peft(base: str, adapter: Path):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    return PeftModel.from_pretrained(model, str(adapter)).merge_and_unload().eval()


def logits(model, ids):
    import torch

    with torch.no_grad():
        return model(input_ids=ids).logits.float()


def gguf_logits_diff(gguf_file: Path, reference, ids) -> float:
    import torch
    from transformers import AutoModelForCausalLM

    got = AutoModelForCausalLM.from_pretrained(str(gguf_file.parent), gguf_file=gguf_file.name, dtype=torch.float32)
    return float((logits(got.eval(), ids) - logits(reference, ids)).abs().max())


def check_file(path: Path, base: str, wanted_type: str) -> None:
    """Tensor names / shapes / types and the tokenizer metadata, read with gguf's reader."""
    cfg = json.loads((Path(base) / "config.json").read_text())
    r = reader(path)
    tensors = {t.name: t for t in r.tensors}
    names = {"token_embd.weight", "output_norm.weight", "output.weight"}
    names |= {f"blk.{i}.{n}.weight" for i in range(cfg["num_hidden_layers"]) for n in LLAMA_BLOCK}
    assert set(tensors) == names
    h, kv = cfg["hidden_size"], cfg["num_key_value_heads"] * cfg["hidden_size"] // cfg["num_attention_heads"]
    # GGUF writes dimensions innermost first: a (rows, cols) matrix is [cols, rows]
    assert list(tensors["token_embd.weight"].shape) == [h, cfg["vocab_size"]]
    assert list(tensors["blk.0.attn_k.weight"].shape) == [h, kv]
    assert list(tensors["blk.1.ffn_down.weight"].shape) == [cfg["intermediate_size"], h]
    for name, t in tensors.items():
        assert t.tensor_type.name == ("F32" if name.endswith("norm.weight") else wanted_type), name
    assert field(r, "general.architecture") == "llama"
    assert field(r, "llama.block_count") == cfg["num_hidden_layers"]
    assert field(r, "llama.attention.head_count_kv") == cfg["num_key_value_heads"]
    tj = json.loads((Path(base) / "tokenizer.json").read_text())
    by_id = {i: t for t, i in tj["model"]["vocab"].items()} | {a["id"]: a["content"] for a in tj["added_tokens"]}
    assert field(r, "tokenizer.ggml.tokens") == [by_id[i] for i in range(cfg["vocab_size"])]
    assert field(r, "tokenizer.ggml.merges")[:5] == [" ".join(m) if isinstance(m, list) else m for m in
                                                     tj["model"]["merges"][:5]]  # fmt: skip
    assert len(field(r, "tokenizer.ggml.merges")) == len(tj["model"]["merges"])
    tc = json.loads((Path(base) / "tokenizer_config.json").read_text())
    jinja = Path(base) / "chat_template.jinja"
    template = jinja.read_text() if jinja.is_file() else tc["chat_template"]
    assert field(r, "tokenizer.chat_template") == template
    types = field(r, "tokenizer.ggml.token_type")
    assert types[tj["model"]["vocab"]["<|im_end|>"]] == 3  # CONTROL: a special token is never text
    assert field(r, "tokenizer.ggml.eos_token_id") == cfg["eos_token_id"]
    assert field(r, "tokenizer.ggml.bos_token_id") == cfg["bos_token_id"]


# ----------------------------------------------------------------------------------------------- in process
def test_f16_and_bf16_of_a_model_folder(base, tmp_path, run_registry):
    """A model folder converts as it is: F16 and BF16 files read back with the right types, their logits within the
    stated tolerance of the model's, the report's figure equal to the test's own."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from engine.trainer import convert

    ref = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32).eval()
    ids = AutoTokenizer.from_pretrained(base)("The sea is calm tonight. 你好", return_tensors="pt").input_ids
    for fmt, wanted in (("gguf-f16", "F16"), ("gguf-bf16", "BF16")):
        out = tmp_path / fmt
        plan = cp.plan_convert(base, fmt, str(out))
        assert not plan.needs_merge
        argv = cp.convert_argv(plan, tmp_path / f".{fmt}.tmp", str(tmp_path / f"{fmt}.jsonl"), overwrite=False,
                               force=False)  # fmt: skip
        assert convert.main(argv[3:]) == 0
        gguf_file = out / f"{fmt}.gguf"
        check_file(gguf_file, base, wanted)
        report = json.loads((out / "verify.json").read_text())
        diff = gguf_logits_diff(gguf_file, ref, ids)
        assert report["passed"] and diff <= report["tolerance"] and report["max_abs_diff"] <= report["tolerance"]
        assert diff > 0  # really rounded: the file is not the float32 model
        assert sorted(os.listdir(out)) == sorted(["Modelfile", "verify.json", gguf_file.name, ".studio-written.json"])
        check_llama_cpp(report, gguf_file, ref, AutoTokenizer.from_pretrained(base))


def check_llama_cpp(report: dict, gguf_file: Path, ref, tok) -> None:
    """llama.cpp (llama-cpp-python, installed by the test set-up) read the file: the report's llama.cpp figures
    against the test's own run of llama.cpp on the report's prompts (logits beside transformers' float32 model's, the
    greedy continuation, llama.cpp's tokenizer on the text)."""
    import numpy as np
    import torch
    from llama_cpp import Llama

    from engine.trainer.gguf_verify import NEW_TOKENS, PROMPTS

    cpp = report["llama_cpp"]
    assert cpp is not None, "llama-cpp-python is not installed here: run scripts/bootstrap.sh --test"
    assert cpp["passed"] and cpp["tokenizer_same"], cpp
    llm = Llama(model_path=str(gguf_file), n_ctx=256, logits_all=True, verbose=False, n_threads=1)
    diff, same = 0.0, 0
    for prompt, row in zip(PROMPTS, cpp["greedy"]):
        ids = tok(prompt).input_ids
        llm.reset()
        llm.eval(ids)
        with torch.no_grad():
            want = ref(input_ids=torch.tensor([ids])).logits[0].float().numpy()
        diff = max(diff, float(np.abs(np.array(llm.scores[: len(ids)]) - want).max()))
        with torch.no_grad():
            hf = ref.generate(torch.tensor([ids]), max_new_tokens=NEW_TOKENS, do_sample=False)[0, len(ids) :].tolist()
        new = []
        for _ in range(NEW_TOKENS):
            nxt = int(np.argmax(llm.scores[llm.n_tokens - 1]))
            if nxt == llm.token_eos():
                break
            new.append(nxt)
            llm.eval([nxt])
        assert new == row["ids"], (prompt, new, row)
        same += new == (hf[:-1] if hf[-1:] == [tok.eos_token_id] else hf)  # llama.cpp's loop stops before it
    assert diff <= report["tolerance"] and abs(diff - cpp["max_abs_diff"]) <= 1e-4, (diff, cpp["max_abs_diff"])
    assert cpp["greedy_same"] == same


def test_a_wrong_conversion_fails_verification_and_leaves_nothing(base, tmp_path, monkeypatch, run_registry):
    """Without llama.cpp's rotary permutation of q/k the GGUF computes something else: the check catches it."""
    from engine.trainer import convert, gguf_write

    monkeypatch.setattr(gguf_write, "permute_qk", lambda w, n, kv: w)
    out = tmp_path / "bad"
    plan = cp.plan_convert(base, "gguf-f16", str(out))
    events = tmp_path / "bad.jsonl"
    argv = cp.convert_argv(plan, tmp_path / ".bad.tmp", str(events), overwrite=False, force=False)
    assert convert.main(argv[3:]) == 1
    last = ev.last_event(events)
    assert last["type"] == "export_failed" and last["payload"]["cause"] == "verification"
    assert last["payload"]["report"]["max_abs_diff"] > last["payload"]["report"]["tolerance"]
    assert not out.exists() and not (tmp_path / ".bad.tmp").exists()


def test_q4_k_m_through_llama_cpp(base, tmp_path, run_registry, monkeypatch):
    """Q4_K_M without a llama-quantize binary: llama.cpp's own quantizer (llama-cpp-python) writes K-quant tensors (the
    gguf reader's types: Q4_K where a row holds whole 256-value blocks, llama.cpp's fallback types elsewhere), and the
    file reads back in transformers and llama.cpp within the Q4_K_M tolerance."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from engine.trainer import convert

    monkeypatch.setenv("PATH", os.path.dirname(os.__file__))  # no llama-quantize on PATH
    monkeypatch.delenv("STUDIO_LLAMA_QUANTIZE", raising=False)
    assert gc.quantizer() == gc.IN_PROCESS
    fmt, out = "gguf-q4_k_m", tmp_path / "q4"
    plan = cp.plan_convert(base, fmt, str(out))
    argv = cp.convert_argv(plan, tmp_path / ".q4.tmp", str(tmp_path / "q4.jsonl"), overwrite=False, force=False)
    assert convert.main(argv[3:]) == 0
    gguf_file = out / "q4.gguf"
    types = {t.name: t.tensor_type.name for t in reader(gguf_file).tensors}
    cols = {t.name: int(t.shape[0]) for t in reader(gguf_file).tensors}
    assert any(v == "Q4_K" for v in types.values()), types
    assert all(types[n] in ("F32",) for n in types if n.endswith("norm.weight"))
    assert all(cols[n] % 256 == 0 for n, v in types.items() if v.endswith("_K")), (types, cols)
    report = json.loads((out / "verify.json").read_text())
    ref = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(base)
    ids = tok("The sea is calm tonight. 你好", return_tensors="pt").input_ids
    diff = gguf_logits_diff(gguf_file, ref, ids)
    assert report["passed"] and diff <= report["tolerance"], (diff, report["tolerance"])
    assert gguf_file.stat().st_size < gc.estimate_bytes(base, "gguf-q8_0")  # smaller than Q8_0 would be
    check_llama_cpp(report, gguf_file, ref, tok)


# ----------------------------------------------------------------------------------------------- refusals
def test_refusals_before_any_work(base, tmp_path, run_registry, monkeypatch):
    gemma = tmp_path / "gemma"
    gemma.mkdir()
    (gemma / "config.json").write_text(json.dumps({"model_type": "gemma3", "architectures": ["Gemma3ForCausalLM"]}))
    with pytest.raises(ExportError, match="architecture 'gemma3' cannot be converted to GGUF"):
        cj.start_export(str(gemma), "gguf-q8_0", str(tmp_path / "g"))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("STUDIO_LLAMA_QUANTIZE", raising=False)
    monkeypatch.setattr(gc, "llama_cpp_installed", lambda: False)  # a machine without llama-cpp-python
    with pytest.raises(ExportError, match="needs llama.cpp: `pip install llama-cpp-python`"):
        cj.start_export(base, "gguf-q4_k_m", str(tmp_path / "q4"))
    with pytest.raises(ExportError, match="choose one of"):
        cp.plan_convert(base, "gguf-q2", str(tmp_path / "q2"))
    monkeypatch.setattr("engine.export.checks.free_bytes", lambda p: 1000)
    need = gc.estimate_bytes(base, "gguf-q8_0")
    with pytest.raises(ExportError, match=f"the gguf-q8_0 export needs about {need / 1e6:.1f} MB"):
        cj.start_export(base, "gguf-q8_0", str(tmp_path / "nodisk"))
    (tmp_path / "exists").mkdir()
    with pytest.raises(ExportError, match="already exists"):
        cp.plan_convert(base, "gguf-f16", str(tmp_path / "exists"))
    assert runs.list_runs() == []  # nothing was queued


def test_size_estimate_is_close_to_the_written_file(base, tmp_path):
    """The disk check's estimate against the files this format writes (written here by the converter)."""
    from engine.trainer import gguf_write

    for fmt in ("gguf-f16", "gguf-q8_0"):
        path = tmp_path / f"{fmt}.gguf"
        gguf_write.write_gguf(Path(base), path, fmt)
        assert path.stat().st_size <= gc.estimate_bytes(base, fmt) <= 1.15 * path.stat().st_size


# ----------------------------------------------------------------------------------------------- jobs
def wait_for(job, pred, timeout=240):
    deadline = time.time() + timeout
    while time.time() < deadline:
        status = job.poll()
        if pred(status):
            return status
        assert status["state"] in ("queued", "running"), status
        time.sleep(0.2)
    raise AssertionError(f"condition never met: {job.poll()}")


def test_cli_exports_a_lora_run_as_q8_0_in_one_job(base, adapter, tmp_path, run_registry, capsys):
    """`studio export RUN --format gguf-q8_0`: merged and converted in one registry run; the file read back, its logits
    against a merge made here with peft, the printed sizes those of the files."""
    run = tm.make_run(tmp_path / "runs", "r1", base, adapter_from=adapter)
    out = tmp_path / "q8"
    assert cj.cli([str(run), "--format", "gguf-q8_0", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    job = cj.list_exports()[0]
    status = job.poll()
    assert status["state"] == "finished" and runs.get(job.run_id).status == "completed"
    stages = [e["payload"]["stage"] for e in status["events"] if e["type"] == "export_progress"]
    assert stages[0] == "loading" and "merging" in stages and "converting" in stages and stages[-1] == "verifying"
    gguf_file = out / "q8.gguf"
    check_file(gguf_file, base, "Q8_0")
    for f in status["result"]["files"]:
        assert f["bytes"] == (out / f["name"]).stat().st_size
        assert f"{f['name']}  {file_size(f['bytes'])}" in printed
    import torch

    merged = merged_with_peft(base, adapter)
    ids = torch.tensor([[5, 17, 300, 42, 901, 7, 1200, 64]])
    report = status["result"]["report"]
    diff = gguf_logits_diff(gguf_file, merged, ids)
    assert diff <= report["tolerance"] and report["passed"]
    from transformers import AutoModelForCausalLM

    plain = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32).eval()
    assert float((logits(plain, ids) - logits(merged, ids)).abs().max()) > 5 * report["tolerance"]  # can fail
    assert report["merge"]["passed"]
    assert f"max |logit diff| {report['max_abs_diff']:.3g} <=" in printed
    assert "ollama create q8 -f Modelfile" in printed


def test_cancel_mid_conversion_leaves_nothing(base, tmp_path, run_registry, monkeypatch):
    monkeypatch.setenv("STUDIO_EXPORT_TENSOR_DELAY", "1")
    out = tmp_path / "cancelled"
    job = cj.start_export(base, "gguf-f16", str(out))
    wait_for(job, lambda s: s["progress"] and s["progress"]["stage"] == "converting")
    assert job.tmp_dir.is_dir()
    status = job.cancel()
    assert status["state"] == "cancelled"
    assert not out.exists() and not job.tmp_dir.exists()
    assert ev.last_event(job.events_path)["payload"]["cause"] == "cancelled"
    assert runs.get(job.run_id).status == "stopped"


# ----------------------------------------------------------------------------------------------- bitsandbytes
@pytest.mark.parametrize(("fmt", "bits"), [("bnb-4bit", 4), ("bnb-8bit", 8)])
def test_bitsandbytes_export_loads_quantized(base, tmp_path, run_registry, fmt, bits):
    """The saved folder loads in transformers as a bitsandbytes model; its logits move from the float32 model by
    what the report says quantizing cost (the test's own reload against the test's own float32 forward)."""
    import bitsandbytes as bnb
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from engine.trainer import convert

    out = tmp_path / fmt
    plan = cp.plan_convert(base, fmt, str(out))
    argv = cp.convert_argv(plan, tmp_path / f".{fmt}.tmp", str(tmp_path / "e.jsonl"), overwrite=False, force=False)
    assert convert.main(argv[3:]) == 0
    report = json.loads((out / "verify.json").read_text())
    assert report["passed"] and (out / "tokenizer.json").is_file()
    loaded = AutoModelForCausalLM.from_pretrained(str(out), device_map="cpu").eval()
    layer = {4: bnb.nn.Linear4bit, 8: bnb.nn.Linear8bitLt}[bits]
    assert isinstance(loaded.model.layers[0].self_attn.q_proj, layer)
    assert json.loads((out / "config.json").read_text())["quantization_config"][f"load_in_{bits}bit"] is True
    ids = AutoTokenizer.from_pretrained(base)("The sea is calm tonight. 你好", return_tensors="pt").input_ids
    ref = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32).eval()
    with torch.no_grad():
        moved = float((loaded(input_ids=ids).logits.float() - ref(input_ids=ids).logits).abs().max())
    assert moved > 0 and abs(moved - report["quantization_error_max_abs"]) <= report["tolerance"] + 1e-6
    assert not (tmp_path / f".{fmt}.tmp").exists()


def test_an_export_recorded_before_the_writer_was_renamed_still_reads_as_an_export(tmp_path, run_registry):
    """Export runs of a workspace made before issue 48 ran ``-m engine.trainer.gguf_export``: the Export tab and
    `studio runs` still read them back as exports (here one whose module is gone, so it failed), not as strangers."""
    argv = [sys.executable, "-m", cj.EARLIER_MODULES[0], str(tmp_path / "model"), "--format", "gguf-q8_0"]
    argv += ["--out", str(tmp_path / "out"), "--tmp-dir", str(tmp_path / "tmp"), "--events", "{run_dir}/events.jsonl"]
    rid = runs.submit_command(argv, name="export model → gguf-q8_0", tags=[cj.EXPORT_TAG])
    job = cj.ExportJob(rid)
    assert job.fmt == "gguf-q8_0" and job.wait(timeout=120)["state"] == "failed"
    assert [j.run_id for j in cj.list_exports()] == [rid]
    with pytest.raises(ExportError, match="not an export"):
        cj.ExportJob(runs.submit_command([sys.executable, "-c", "pass"], name="other"))
