"""The trainer for real: the subprocess path on the demo, stop + exact resume, and every method x stage."""

from __future__ import annotations

import json
import math
import signal
from pathlib import Path

import pytest

from engine.core.events import read_all
from tests.helpers import demo_spec, losses, run_trainer, start_trainer, stop_and_wait, wait_for_event

STEPS = 24
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def baseline(demo_paths, tmp_path_factory):
    """An uninterrupted LoRA SFT run through the real launch (one process: the trainer itself)."""
    run_dir = tmp_path_factory.mktemp("baseline")
    spec = demo_spec(demo_paths, train={"max_steps": STEPS, "save_steps": 1000, "logging_steps": 1})
    rc, events = run_trainer(spec, run_dir)
    return spec, run_dir, rc, events


class TestSubprocessRun:
    def test_finishes_with_finite_losses(self, baseline):
        _, run_dir, rc, events = baseline
        assert rc == 0, (run_dir / "train.log").read_text()[-3000:]
        types = [e["type"] for e in events]
        assert types[0] == "data_ready" and "run_started" in types and types[-1] == "finished"
        started = next(e for e in events if e["type"] == "run_started")["payload"]
        # gradient checkpointing auto: the demo's plan fits this machine's RAM with room, so nothing is recomputed
        assert started["gradient_checkpointing_mode"] == "auto" and started["gradient_checkpointing"] is False
        assert "host memory" in started["gradient_checkpointing_reason"]
        logs = [e for e in events if e["type"] == "log"]
        assert len(logs) == STEPS
        for e in logs:
            p = e["payload"]
            assert math.isfinite(p["loss"]) and p["learning_rate"] is not None and p["grad_norm"] is not None
            assert p["tokens_per_second"] > 0 and p["tokens_seen"] > 0 and p["memory"][0]["rss_mib"] > 0
            assert 0 < p["progress"] <= 1 and p["eta_seconds"] is not None
        assert logs[-1]["payload"]["tokens_seen"] > logs[0]["payload"]["tokens_seen"]
        assert min(losses(events).values()) < logs[0]["payload"]["loss"]

    def test_lora_weights_changed_and_saved_in_peft_format(self, baseline):
        from safetensors.torch import load_file

        _, run_dir, _, _ = baseline
        adapter = run_dir / "adapter"
        config = json.loads((adapter / "adapter_config.json").read_text())
        assert config["peft_type"] == "LORA" and config["r"] == 8
        weights = load_file(str(adapter / "adapter_model.safetensors"))
        lora_b = [t for k, t in weights.items() if "lora_B" in k]
        assert lora_b and all(t.abs().max() > 0 for t in lora_b)  # B starts at zero: non-zero means it learned

    def test_record_and_launch_files(self, baseline):
        _, run_dir, _, _ = baseline
        record = json.loads((run_dir / "record.json").read_text())
        assert record["seed"] == 42 and record["versions"]["torch"] and record["tokenizer_hash"]
        assert record["dataset_hashes"]["demo_alpaca"]
        launch = json.loads((run_dir / "launch.json").read_text())
        assert launch["argv"][1:3] == ["-m", "engine.trainer.train"]  # one process: no launcher (engine.runs.launch)
        assert list((run_dir / "tensorboard").rglob("events.out.tfevents*"))


class TestStopAndResume:
    def test_sigterm_saves_then_resume_is_exact(self, baseline, demo_paths, tmp_path):
        spec, _, rc, base_events = baseline
        assert rc == 0
        proc = start_trainer(spec, tmp_path)
        wait_for_event(tmp_path, lambda e: e["type"] == "log" and e["step"] >= 3)
        stop_and_wait(proc)
        events = read_all(tmp_path / "events.jsonl")
        stopped = [e for e in events if e["type"] == "stopped"]
        assert stopped and not [e for e in events if e["type"] in ("finished", "failed")]
        k = stopped[0]["step"]
        assert k < STEPS and Path(stopped[0]["payload"]["checkpoint"]).is_dir()

        resumed = spec.model_copy(update={"train": spec.train.model_copy(update={"resume_from": "last"})})
        rc2, events2 = run_trainer(resumed, tmp_path)
        assert rc2 == 0 and events2[-1]["type"] == "finished"
        got, want = losses(events2), losses(base_events)
        assert sorted(got)[-1] == STEPS
        for step in range(k + 1, STEPS + 1):
            assert got[step] == pytest.approx(want[step], abs=1e-6), (
                f"step {step}: resumed {got[step]} vs {want[step]}"
            )


def run_in_process(spec, run_dir: Path) -> list[dict]:
    """engine.trainer.train.train in this process (same code as the subprocess, in-process), for the
    matrix."""
    from engine.spec.schema import save_spec
    from engine.trainer.train import train

    old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        save_spec(spec, run_dir / "spec.yaml")
        assert train(spec, run_dir, run_dir / "events.jsonl") == 0
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
    return read_all(run_dir / "events.jsonl")


METHODS = {
    "full": {"finetuning": "full"},
    "freeze": {"finetuning": "freeze", "freeze": {"trainable_layers": 1}},
    "lora": {"finetuning": "lora"},
    "dora": {"finetuning": "lora", "lora": {"use_dora": True, "targets": ["q_proj", "v_proj"]}},
    "qlora4": {"finetuning": "lora", "quantization": {"bits": 4, "compute_dtype": "float32"}},
    "qlora8": {"finetuning": "lora", "quantization": {"bits": 8}},
}
STAGES = {"sft": "demo_sharegpt", "pt": "demo_pretrain", "dpo": "demo_dpo"}


@pytest.mark.parametrize("stage", list(STAGES))
@pytest.mark.parametrize("method", list(METHODS))
def test_method_by_stage_trains(demo_paths, tmp_path, method, stage):
    from safetensors.torch import load_file

    spec = demo_spec(
        demo_paths,
        method={"stage": stage, **METHODS[method]},
        data={"datasets": [STAGES[stage]], "max_samples": 16, "cutoff_len": 128},
        train={"max_steps": 3, "save_steps": 1000, "learning_rate": 5e-3, "warmup_steps": 0},
        output={"report_to": ["none"]},
    )
    events = run_in_process(spec, tmp_path)
    assert events[-1]["type"] == "finished", events[-1]
    logs = [e["payload"]["loss"] for e in events if e["type"] == "log"]
    assert len(logs) == 3 and all(math.isfinite(v) for v in logs)
    if METHODS[method]["finetuning"] == "lora":
        weights = load_file(str(tmp_path / "adapter" / "adapter_model.safetensors"))
        assert any(t.abs().max() > 0 for k, t in weights.items() if "lora_B" in k)
        return
    base = load_file(str(Path(demo_paths["model_dir"]) / "model.safetensors"))
    tuned = load_file(str(tmp_path / "model" / "model.safetensors"))
    changed = {k for k in base if k in tuned and not base[k].equal(tuned[k].to(base[k].dtype))}
    if method == "full":
        assert any(".layers.0." in k for k in changed) and any(".layers.3." in k for k in changed)
    else:  # freeze: only the last layer learns
        assert changed and all(".layers.3." in k for k in changed), sorted(changed)


@pytest.mark.parametrize("bits", [4, 8])
def test_quantized_oft_trains_its_rotations(demo_paths, tmp_path, bits):
    """OFT on a bitsandbytes-quantized base (LF's extras/qoft, peft's quantized OFT layers): the orthogonal blocks
    learn while the quantized base stays frozen."""
    from safetensors.torch import load_file

    spec = demo_spec(
        demo_paths,
        method={
            "finetuning": "oft",
            "oft": {"rank": 0, "block_size": 32, "targets": ["all"]},
            "quantization": {"bits": bits, "compute_dtype": "float32"},
        },
        data={"max_samples": 16, "cutoff_len": 128},
        train={"max_steps": 2, "save_steps": 1000, "learning_rate": 5e-3, "warmup_steps": 0},
        output={"report_to": ["none"]},
    )
    events = run_in_process(spec, tmp_path)
    assert events[-1]["type"] == "finished", events[-1]
    logs = [e["payload"]["loss"] for e in events if e["type"] == "log"]
    assert len(logs) == 2 and all(math.isfinite(v) for v in logs)
    weights = load_file(str(tmp_path / "adapter" / "adapter_model.safetensors"))
    rotations = {k: t for k, t in weights.items() if ".oft_" in k}
    assert rotations and any(t.abs().max() > 0 for t in rotations.values()), sorted(weights)[:5]


LF_DATA = Path(__file__).resolve().parents[1] / "fixtures" / "lf" / "data"


@pytest.mark.parametrize(
    ("stage", "method", "dataset"),
    [("kto", "full", "kto_en_demo"), ("rm", "freeze", "dpo_en_demo")],
    ids=["kto-full", "rm-freeze"],
)
def test_preference_stage_without_lora_trains(demo_paths, tmp_path, stage, method, dataset):
    """The paths LoRA does not take (the LF-YAML runs of tests/engine/test_lf_preference.py train LoRA): kto with
    every weight trained keeps TRL's reference copy; rm with frozen layers still trains its new score head."""
    from safetensors.torch import load_file

    spec = demo_spec(
        demo_paths,
        method={"stage": stage, **METHODS[method]},
        data={"dataset_dir": str(LF_DATA), "datasets": [dataset], "cutoff_len": 128},
        train={"max_steps": 2, "per_device_batch_size": 2, "save_steps": 1000, "learning_rate": 5e-3},
        output={"report_to": ["none"]},
    )
    events = run_in_process(spec, tmp_path)
    assert events[-1]["type"] == "finished", events[-1]
    logs = [e["payload"]["loss"] for e in events if e["type"] == "log"]
    assert len(logs) == 2 and all(math.isfinite(v) for v in logs)
    tuned = load_file(str(tmp_path / "model" / "model.safetensors"))
    base = load_file(str(Path(demo_paths["model_dir"]) / "model.safetensors"))
    changed = {k for k in base if k in tuned and not base[k].equal(tuned[k].to(base[k].dtype))}
    if stage == "rm":
        assert "score.weight" in tuned and "lm_head.weight" not in tuned
        assert changed and all(".layers.3." in k for k in changed), sorted(changed)
    else:
        assert any(".layers.0." in k for k in changed) and any(".layers.3." in k for k in changed)


def test_evaluation_writes_eval_events(demo_paths, tmp_path):
    spec = demo_spec(
        demo_paths,
        data={"val_size": 0.25, "max_samples": 40},
        train={"max_steps": 4, "eval_steps": 2, "save_steps": 1000},
        output={"report_to": ["none"]},
    )
    events = run_in_process(spec, tmp_path)
    ready = next(e for e in events if e["type"] == "data_ready")["payload"]
    assert ready["num_eval"] == 10 and ready["num_train"] == 30
    evals = [e for e in events if e["type"] == "eval"]
    assert [e["step"] for e in evals] == [2, 4]
    assert all(math.isfinite(e["payload"]["eval_loss"]) for e in evals)


def test_eval_datasets_are_evaluated_at_the_eval_strategy(demo_paths, tmp_path):
    """LF's eval_dataset: a separate registered dataset is the evaluation set (no split of the training data)."""
    spec = demo_spec(
        demo_paths,
        data={"max_samples": 8, "eval_datasets": ["demo_sharegpt"]},
        train={"max_steps": 2, "eval_steps": 2, "save_steps": 1000},
        output={"report_to": ["none"]},
    )
    events = run_in_process(spec, tmp_path)
    ready = next(e for e in events if e["type"] == "data_ready")["payload"]
    assert ready["num_train"] == 8 and ready["num_eval"] > 0
    (ev,) = [e for e in events if e["type"] == "eval"]
    assert ev["step"] == 2 and math.isfinite(ev["payload"]["eval_loss"])


class TestFailureClassification:
    def test_causes(self):
        import torch

        from engine.data.rows import DataError
        from engine.spec.schema import SpecError
        from engine.trainer.train import classify

        assert classify(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")) == "oom"
        assert classify(RuntimeError("NCCL error in: ProcessGroupNCCL.cpp, unhandled system error")) == "communication"
        assert (
            classify(RuntimeError("[../third_party/gloo/transport/tcp/pair.cc:534] Connection closed by peer"))
            == "communication"
        )
        assert classify(DataError([])) == "data"
        assert classify(SpecError([("train.learning_rate", "bad")])) == "config"
        assert classify(ValueError("something else")) == "other"

    def test_a_failing_run_ends_with_a_classified_failed_event(self, demo_paths, tmp_path):
        spec = demo_spec(
            demo_paths,
            train={"max_steps": 2, "resume_from": str(tmp_path / "missing-checkpoint")},
            output={"report_to": ["none"]},
        )
        rc, events = run_trainer(spec, tmp_path / "run")
        assert rc != 0
        failed = events[-1]
        assert failed["type"] == "failed" and failed["payload"]["cause"] == "config"
        assert "train.resume_from" in failed["payload"]["error"] and "Traceback" in failed["payload"]["traceback"]


@pytest.mark.parametrize("stage", ["sft", "pt"])
def test_packed_run_trains(demo_paths, tmp_path, stage):
    spec = demo_spec(
        demo_paths,
        method={"stage": stage},
        data={"datasets": [STAGES[stage]], "packing": True, "max_samples": 60, "cutoff_len": 256},
        train={"max_steps": 3, "save_steps": 1000},
        output={"report_to": ["none"]},
    )
    events = run_in_process(spec, tmp_path)
    ready = next(e for e in events if e["type"] == "data_ready")["payload"]
    assert ready["packed"] and ready["num_samples"] == 60 and ready["num_train"] < 60
    logs = [e["payload"] for e in events if e["type"] == "log"]
    assert events[-1]["type"] == "finished" and len(logs) == 3 and all(math.isfinite(p["loss"]) for p in logs)
    assert all(p["tokens_per_second"] > 0 for p in logs)


def test_pt_blocks_grouped_by_length_train(demo_paths, tmp_path):
    """Stage pt on texts longer than the cutoff (cut into blocks, not truncated) with length-grouped batches: the
    Trainer gets transformers 5's group_by_length sampler over the rows' lengths, and the run trains."""
    from transformers.trainer_pt_utils import LengthGroupedSampler

    from engine.data.dataset_registry import save_dataset_info
    from engine.trainer import model as model_lib
    from engine.trainer.dataset import build_train_data
    from engine.trainer.trainers import build_trainer, training_arguments

    texts = [" ".join(f"{i} plus {j} is {i + j}." for j in range(n)) for i, n in ((3, 40), (5, 3), (7, 25), (9, 12))]
    (tmp_path / "long.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    save_dataset_info(tmp_path, {"long": {"file_name": "long.jsonl", "columns": {"prompt": "text"}}})
    spec = demo_spec(
        demo_paths,
        method={"stage": "pt"},
        data={"datasets": ["long"], "dataset_dir": str(tmp_path), "cutoff_len": 48, "group_by_length": True},
        train={"max_steps": 3, "save_steps": 1000, "per_device_batch_size": 2, "gradient_accumulation": 1},
        output={"report_to": ["none"]},
    )
    tokenizer = model_lib.load_tokenizer(spec)
    data = build_train_data(spec, tokenizer, log=lambda _m: None)
    targs = training_arguments(spec, tmp_path / "out", tmp_path, "cpu", "fp32", has_eval=False)
    assert targs.train_sampling_strategy == "group_by_length"
    model = model_lib.load_model(spec, device="cpu", precision="fp32")
    sampler = build_trainer(spec, model, tokenizer, data, targs, [])._get_train_sampler()
    assert isinstance(sampler, LengthGroupedSampler)
    assert sampler.lengths == [len(x) for x in data.train_dataset["input_ids"]] and len(set(sampler.lengths)) > 1

    events = run_in_process(spec, tmp_path / "run")
    ready = next(e for e in events if e["type"] == "data_ready")["payload"]
    assert ready["num_samples"] == 4 and ready["num_train"] > 4 and ready["truncated"] == 0
    assert ready["tail_dropped"] == 0 and ready["total_tokens"] == ready["trainable_tokens"]
    logs = [e["payload"]["loss"] for e in events if e["type"] == "log"]
    assert events[-1]["type"] == "finished" and len(logs) == 3 and all(math.isfinite(v) for v in logs)


def test_trainer_arguments_from_the_spec_and_extra_args(demo_paths, tmp_path):
    """The spec's save / eval / loader / NEFTune / timeout fields and train.extra_args reach TrainingArguments."""
    from engine.trainer.trainers import training_arguments

    spec = demo_spec(
        demo_paths,
        data={"dataloader_workers": 2, "val_size": 0.2},
        train={
            "save_strategy": "epoch",
            "save_only_model": True,
            "eval_strategy": "epoch",
            "per_device_eval_batch_size": 3,
            "neftune_noise_alpha": 5.0,
            "count_input_tokens": "all",
            "extra_args": {"adam_beta2": 0.95, "logging_first_step": True, "lr_scheduler_kwargs": {"power": 2.0}},
        },
        launch={"ddp_timeout": 180000000},
    )
    targs = training_arguments(spec, tmp_path / "out", tmp_path, "cpu", "fp32", has_eval=True)
    assert (targs.save_strategy, targs.save_only_model, targs.eval_strategy) == ("epoch", True, "epoch")
    assert (targs.per_device_eval_batch_size, targs.dataloader_num_workers, targs.ddp_timeout) == (3, 2, 180000000)
    assert (targs.neftune_noise_alpha, targs.include_num_input_tokens_seen) == (5.0, "all")
    assert (targs.adam_beta2, targs.logging_first_step, targs.lr_scheduler_kwargs) == (0.95, True, {"power": 2.0})
    demo = demo_spec(demo_paths)
    plain = training_arguments(demo, tmp_path / "out", tmp_path, "cpu", "fp32", has_eval=False)
    batch = demo.train.per_device_batch_size
    assert (plain.eval_strategy, plain.per_device_eval_batch_size, plain.ddp_timeout) == ("no", batch, 1800)
    # padding-free batches hold no pad token: every token is a non-pad one (transformers' own count of a batch without
    # attention_mask, input_ids != pad id, would drop each eos of a tokenizer whose pad token is its eos)
    assert plain.include_num_input_tokens_seen == "all" and plain.adam_beta2 == 0.999
    padded = demo_spec(demo_paths, data={"padding_free": "off"})
    targs = training_arguments(padded, tmp_path / "out", tmp_path, "cpu", "fp32", has_eval=False)
    assert targs.include_num_input_tokens_seen == "non_padding"


def test_padding_free_batches_and_trained_logits_train_like_padded_ones(demo_paths, tmp_path):
    """20 steps of the demo LoRA SFT with padded batches and with padding-free ones (the batch's samples in one row,
    positions restarting, no attention across samples), each with the logits computed only at trained positions
    (the default), padding-free with logits at every position, and padding-free attending under transformers'
    block-diagonal mask instead of per sample: the same samples per step, the same loss per step (fp32)."""
    runs = {}
    for mode, trained_only, attention in (
        ("off", True, "auto"),
        ("on", True, "auto"),
        ("on", False, "auto"),
        ("on", True, "mask"),
    ):
        spec = demo_spec(
            demo_paths,
            model={"packed_attention": attention},
            data={"padding_free": mode, "max_samples": 160},
            train={
                "max_steps": 20,
                "per_device_batch_size": 4,
                "logging_steps": 1,
                "save_steps": 1000,
                "trained_logits_only": trained_only,
            },
            launch={"device": "cpu"},
        )
        events = run_in_process(spec, tmp_path / f"{mode}-{trained_only}-{attention}")
        ready = next(e for e in events if e["type"] == "data_ready")["payload"]
        assert ready["padding_free"] is (mode == "on")
        started = next(e for e in events if e["type"] == "run_started")["payload"]
        assert started["trained_logits_only"] is trained_only, started["trained_logits_reason"]
        # per-sample sdpa on the CPU by default, for padding-free rows only; the block-diagonal mask when asked
        per_sample = mode == "on" and attention == "auto"
        assert started["per_sample_attention"] is per_sample, started["per_sample_attention_reason"]
        runs[(mode, trained_only, attention)] = losses(events)
    reference = runs[("on", False, "auto")]
    assert sorted(reference) == list(range(1, 21))
    for key, run in runs.items():
        assert sorted(run) == sorted(reference)
        worst = max(abs(run[s] - reference[s]) for s in reference)
        assert worst < 1e-4, f"{key}: losses differ from padding-free, all logits by {worst:.2e}"


def test_trained_logits_collator_same_loss_and_gradients():
    """The wrapped batch gives the model's own loss the same value and the same gradients, padded or flattened,
    while the logits it returns are only the trained positions'."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    from engine.trainer.collators import (
        IGNORE,
        FlatteningCollator,
        PadCollator,
        TrainedLogitsCollator,
        trained_logits_supported,
    )

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=300,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
    )
    model = get_peft_model(
        LlamaForCausalLM(config), LoraConfig(r=4, target_modules="all-linear", init_lora_weights=False)
    )
    assert trained_logits_supported(model)[0]
    features = []
    for n in (9, 17, 5):
        ids = torch.randint(3, 300, (n,)).tolist()
        features.append({"input_ids": ids, "labels": [IGNORE] * (n // 2) + ids[n // 2 :]})
    trained = sum(n - n // 2 for n in (9, 17, 5))  # every trained label has a position before it that predicts it
    for inner in (FlatteningCollator(), PadCollator(0)):
        plain, wrapped = inner(features), TrainedLogitsCollator(inner)(features)
        kept = wrapped["logits_to_keep"]
        assert kept.dtype == torch.long and kept.shape == wrapped["shift_labels"].shape  # positions, not a mask
        assert int((wrapped["shift_labels"] != IGNORE).sum()) == trained
        results = []
        for batch, count in (
            (plain, (plain["labels"][:, 1:] != IGNORE).sum()),
            (wrapped, (wrapped["shift_labels"] != IGNORE).sum()),
        ):
            model.zero_grad()
            out = model(**batch, num_items_in_batch=count)
            out.loss.backward()
            grads = [p.grad.clone() for p in model.parameters() if p.requires_grad]
            results.append((out.loss.item(), grads, out.logits.shape))
        (loss_a, grads_a, shape_a), (loss_b, grads_b, shape_b) = results
        assert abs(loss_a - loss_b) < 1e-6
        assert max((a - b).abs().max().item() for a, b in zip(grads_a, grads_b)) < 1e-6
        assert shape_b == (*wrapped["shift_labels"].shape, 300) and shape_b[0] * shape_b[1] < shape_a[0] * shape_a[1]


def test_flattening_collator_keeps_samples_apart():
    from engine.trainer.collators import IGNORE, FlatteningCollator

    batch = FlatteningCollator()(
        [{"input_ids": [5, 6, 7], "labels": [IGNORE, 6, 7]}, {"input_ids": [8, 9], "labels": [8, 9]}]
    )
    assert batch["input_ids"].tolist() == [[5, 6, 7, 8, 9]]
    assert batch["position_ids"].tolist() == [[0, 1, 2, 0, 1]]
    assert batch["labels"].tolist() == [[IGNORE, 6, 7, IGNORE, 9]]  # never predict a sample from the one before
    assert "attention_mask" not in batch and batch["use_cache"] is False


PROBE = """
import sys, torch
from engine.spec.schema import RunSpec
from engine.trainer.trainers import without_deepspeed_probe
from accelerate.utils.other import extract_model_from_parallel
spec = RunSpec.model_validate({"model": {"name_or_path": "org/model"}, "data": {"datasets": ["d"]},
                               "launch": {"backend": sys.argv[1], "num_processes": 2, "device": "cpu"}})
without_deepspeed_probe(spec)
extract_model_from_parallel(torch.nn.Linear(2, 2))  # what the Trainer's unwrap_model calls
print("deepspeed" in sys.modules)
"""


@pytest.mark.parametrize("backend, imported", [("ddp", "False"), ("deepspeed", "True")])
def test_only_a_deepspeed_run_imports_deepspeed_to_unwrap_its_model(backend, imported):
    """accelerate's unwrap imports DeepSpeed whenever it is installed (seconds of every run's start); a run without
    DeepSpeed skips that probe. The DeepSpeed case shows the probe is real, so the other one is not passing by luck."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "DS_ACCELERATOR": "cpu", "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, backend], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300
    )
    assert out.returncode == 0 and out.stdout.strip().splitlines()[-1] == imported, out.stdout + out.stderr[-2000:]
