"""A run folder read back into the registry (registry missing, or a folder it did not know) is queued again only when
it holds no training output: a folder that already has final weights or checkpoints, but no launch record (copied
in by hand, or left by an older studio), is listed as it ended, never trained over (issue 27)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import yaml

from engine.core import workspace
from engine.runs import heal
from engine.runs import registry as runs

SPEC = {
    "model": {"name_or_path": "demo-tiny-llama"},
    "method": {"stage": "sft", "finetuning": "lora"},
    "output": {"run_name": "x"},
}


def folder(run_id: str, name: str, *, notes: bool = False) -> Path:
    rdir = workspace.runs_dir() / run_id
    rdir.mkdir(parents=True)
    (rdir / "spec.yaml").write_text(yaml.safe_dump({**SPEC, "output": {"run_name": name}}), encoding="utf-8")
    if notes:  # a submit writes run.json with its row: a folder the registry missed is read back once it has one
        (rdir / "run.json").write_text(json.dumps({"name": name, "created": time.time()}), encoding="utf-8")
    return rdir


def test_folders_with_weights_or_checkpoints_are_not_queued_again(run_registry):
    done = folder("20261201-100000-aaaaaa", "has-adapter")
    (done / "adapter").mkdir()
    (done / "adapter" / "adapter_model.safetensors").write_bytes(b"\0" * 64)
    (done / "adapter" / "adapter_config.json").write_text('{"peft_type": "LORA"}', encoding="utf-8")
    event = {"type": "finished", "ts": time.time(), "step": 4, "payload": {}}
    (done / "events.jsonl").write_text(json.dumps(event) + "\n", encoding="utf-8")
    half = folder("20261201-100100-bbbbbb", "has-checkpoints")
    for step in (2, 10):
        (half / "checkpoints" / f"checkpoint-{step}").mkdir(parents=True)
    bare = folder("20261201-100200-cccccc", "bare")

    got = {r.name: r for r in runs.list_runs(refresh_status=False)}  # no registry yet: rebuilt from the folders
    assert sorted(got) == ["bare", "has-adapter", "has-checkpoints"], sorted(got)
    assert got["has-adapter"].status == "completed", got["has-adapter"].reason
    assert got["has-checkpoints"].status == "failed"
    assert str(half / "checkpoints" / "checkpoint-10") in got["has-checkpoints"].reason  # the newest, by its step
    assert "not queued again" in got["has-checkpoints"].reason
    assert got["bare"].status == "queued"  # a queued run whose row was lost is queued again, as before
    assert bare.name == got["bare"].id

    # a folder the registry did not know, added while it exists: the same rule
    late = folder("20261201-100300-dddddd", "late", notes=True)
    (late / "model").mkdir()
    (late / "model" / "model.safetensors").write_bytes(b"\0" * 64)
    (late / "model" / "config.json").write_text('{"model_type": "llama"}', encoding="utf-8")
    assert heal.sync_folders() == 1  # what every refresh of all runs calls
    got = {r.name: r for r in runs.list_runs(refresh_status=False)}
    assert got["late"].status == "failed" and str(late / "model") in got["late"].reason, got["late"].reason
