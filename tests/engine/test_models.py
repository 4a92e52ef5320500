"""Model resolution: a local folder, the Hugging Face cache (its real layout, read by huggingface_hub), the hub (a
local stand-in served over HTTP for the real client), and the table of published configs; planning and validation
of hub ids offline; ``org/name@revision``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine.models import known
from engine.models.resolve import resolve_config, split_revision
from engine.plan.model_shape import param_counts
from engine.spec.schema import SpecError, parse_spec
from tests.hub_standin import COMMIT, HubStandin

ROOT = Path(__file__).resolve().parents[2]

# Parameter totals the hub reports for these models' safetensors (model card "Model size"): the table's figures must
# give exactly these through the planner's own shape code, so a typo in the table cannot hide.
PUBLISHED_TOTALS = {
    "meta-llama/Llama-3.2-1B": 1_235_814_400,
    "meta-llama/Llama-3.2-3B": 3_212_749_824,
    "meta-llama/Llama-3.1-8B": 8_030_261_248,
    "meta-llama/Llama-3.1-70B": 70_553_706_496,
    "Qwen/Qwen2.5-0.5B": 494_032_768,
    "Qwen/Qwen2.5-1.5B": 1_543_714_304,
    "Qwen/Qwen2.5-3B": 3_085_938_688,
    "Qwen/Qwen2.5-7B": 7_615_616_512,
    "Qwen/Qwen2.5-14B": 14_770_033_664,
    "Qwen/Qwen2.5-32B": 32_763_876_352,
    "Qwen/Qwen2.5-72B": 72_706_203_648,
    "Qwen/Qwen3-0.6B": 596_049_920,
    "Qwen/Qwen3-4B": 4_022_468_096,
    "Qwen/Qwen3-8B": 8_190_735_360,
    "Qwen/Qwen3-14B": 14_768_307_200,
    "Qwen/Qwen3-32B": 32_762_123_264,
    "Qwen/Qwen3-30B-A3B": 30_532_122_624,
    "google/gemma-2-2b": 2_614_341_888,
    "google/gemma-2-9b": 9_241_705_984,
    "google/gemma-2-27b": 27_227_128_320,
    "google/gemma-3-1b-it": 999_885_952,
    "mistralai/Mistral-7B-v0.3": 7_248_023_552,
    "mistralai/Mistral-Nemo-Base-2407": 12_247_782_400,
    "microsoft/Phi-3-mini-4k-instruct": 3_821_079_552,
    "microsoft/phi-4": 14_659_507_200,
}


@pytest.mark.parametrize(("repo", "total"), sorted(PUBLISHED_TOTALS.items()))
def test_table_figures_give_the_published_parameter_count(repo, total):
    assert param_counts(known.lookup(repo))["total"] == total


def test_every_table_entry_plans():
    for repo in known.KNOWN:
        counts = param_counts(known.lookup(repo))
        assert counts["total"] > 100_000_000, repo


def test_revision_in_the_name():
    assert split_revision("Qwen/Qwen2.5-7B@v1.0") == ("Qwen/Qwen2.5-7B", "v1.0")
    assert split_revision("Qwen/Qwen2.5-7B") == ("Qwen/Qwen2.5-7B", None)
    spec = parse_spec({"model": {"name_or_path": "Qwen/Qwen2.5-7B@abc123"}, "data": {"datasets": ["d"]}})
    assert (spec.model.name_or_path, spec.model.revision) == ("Qwen/Qwen2.5-7B", "abc123")


def test_local_folder_first(demo_paths):
    res = resolve_config(demo_paths["model_dir"])
    assert res.source == "local" and res.config["model_type"] == "llama"


def test_offline_hub_id_from_the_table(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    res = resolve_config("meta-llama/Llama-3.1-8B-Instruct")
    assert res.source == "table" and res.config["num_hidden_layers"] == 32
    assert "meta-llama/Llama-3.1-8B-Instruct/blob/main/config.json" in res.where


def test_offline_unknown_hub_id_is_refused_before_launch(monkeypatch, demo_paths):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    data = parse_spec({"model": {"name_or_path": "demo"}, "data": {"datasets": ["demo_alpaca"]}}).model_dump()
    data["model"]["name_or_path"] = "nobody-here/no-such-model"
    data["data"]["dataset_dir"] = demo_paths["data_dir"]
    with pytest.raises(SpecError) as info:
        parse_spec(data, context=True)
    problems = dict(info.value.problems)
    assert "not in Studio's table" in problems["model.name_or_path"]


def _fake_cache(cache: Path, repo: str, config: dict) -> Path:
    """The Hugging Face cache's real layout: models--org--name/{refs/main, snapshots/<commit>/config.json}."""
    root = cache / f"models--{repo.replace('/', '--')}"
    snap = root / "snapshots" / COMMIT
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps(config), encoding="utf-8")
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text(COMMIT, encoding="utf-8")
    return snap / "config.json"


def _resolve_in_subprocess(name: str, env: dict) -> dict:
    """huggingface_hub reads HF_ENDPOINT / HF_HUB_CACHE when imported: resolve in a fresh interpreter."""
    code = (
        "import json, sys; from engine.models.resolve import resolve_config; "
        "r = resolve_config(sys.argv[1]); "
        "print(json.dumps({'source': r.source, 'where': r.where, 'layers': (r.config or {}).get('num_hidden_layers'),"
        " 'problem': str(r.problem or '')}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, name], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture
def hub_env(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN")}
    env.update(HF_HUB_CACHE=str(tmp_path / "hf-cache"), HF_HOME=str(tmp_path / "hf-home"), PYTHONPATH=str(ROOT))
    env["HF_HUB_DISABLE_TELEMETRY"] = "1"
    return env


def test_a_model_in_the_hf_cache_is_found_without_network(tmp_path, hub_env):
    hub_env["HF_HUB_OFFLINE"] = "1"
    cfg = dict(known.lookup("Qwen/Qwen2.5-0.5B"), num_hidden_layers=7)  # not the table's figure: read from the cache
    _fake_cache(Path(hub_env["HF_HUB_CACHE"]), "someone/private-model", cfg)
    got = _resolve_in_subprocess("someone/private-model", hub_env)
    assert got["source"] == "cache" and got["layers"] == 7


def test_the_hub_is_asked_for_config_json_only(demo_paths, hub_env):
    with HubStandin() as hub:
        hub.add_folder("studio-test/tiny-llama", Path(demo_paths["model_dir"]))
        hub.repos["studio-test/gated-model"] = {"config.json": b"{}"}
        hub.gated.add("studio-test/gated-model")
        hub_env["HF_ENDPOINT"] = hub.url

        got = _resolve_in_subprocess("studio-test/tiny-llama", hub_env)
        assert got["source"] == "hub" and got["layers"] == 4, got
        # (the one probe of the process, HEAD /, asks whether the hub answers: engine.models.reach)
        fetched = {path.rsplit("/", 1)[-1] for _, path in hub.requests if path != "/"}
        assert fetched == {"config.json"}, "only the config is fetched to plan, never the weights"
        # now it is in the cache: found there with the hub gone
        offline = dict(hub_env, HF_HUB_OFFLINE="1")
        assert _resolve_in_subprocess("studio-test/tiny-llama", offline)["source"] == "cache"

        missing = _resolve_in_subprocess("studio-test/no-such-model", hub_env)
        assert missing["source"] == "none" and "not found on the hub" in missing["problem"], missing

        gated = _resolve_in_subprocess("studio-test/gated-model", hub_env)
        assert gated["source"] == "none" and "gated" in gated["problem"] and "HF_TOKEN" in gated["problem"], gated


def test_studio_plan_prints_a_plan_for_a_hub_id_offline(tmp_path):
    """The issue's check: Llama-3.1-8B-Instruct, QLoRA, 8 GPUs, ZeRO-3, on a fresh machine with no network."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "model: {name_or_path: meta-llama/Llama-3.1-8B-Instruct}\n"
        "method: {finetuning: lora, quantization: {bits: 4}}\n"
        "data: {datasets: [anything], cutoff_len: 2048}\n"
        "train: {per_device_batch_size: 1, precision: bf16}\n"
        "launch: {device: cuda, backend: deepspeed, num_processes: 8, deepspeed: {zero_stage: 3}}\n",
        encoding="utf-8",
    )
    env = dict(os.environ, HF_HUB_OFFLINE="1", STUDIO_HOME=str(tmp_path / "fresh"), PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-m", "engine.cli", "plan", str(spec), "--gpu-mem", "80GiB"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "8030.3M params" in out.stdout and "world size 8" in out.stdout
    assert "Studio's table of published configs" in out.stdout


def test_plan_of_a_local_copy_without_config_says_why(tmp_path, demo_paths):
    folder = tmp_path / "broken"
    shutil.copytree(demo_paths["model_dir"], folder)
    (folder / "config.json").unlink()
    res = resolve_config(str(folder))
    assert res.source == "none" and "no config.json" in res.problem
