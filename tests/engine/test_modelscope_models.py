"""ModelScope models (issue 27 item 4), as LLaMA-Factory takes them (``use_modelscope_hub`` / ``USE_MODELSCOPE_HUB``):
the spec's ``model.hub: modelscope`` makes ``name_or_path`` a ModelScope id, checked before launch against ModelScope,
downloaded by the real ``modelscope`` client into ModelScope's cache as a registry run (progress events), then loaded
from that folder. Everything talks to tests/modelscope_standin.py on 127.0.0.1 (``MODELSCOPE_ENDPOINT``), serving the
demo model's files as a ModelScope repository; ``MODELSCOPE_CACHE`` is a fresh folder per test.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from engine.core import events
from engine.lf import compat
from engine.lf.to_lf import spec_to_lf_text
from engine.models import local, ms_models, reach
from engine.models.resolve import MS_CACHE, MS_HUB, resolve_model
from engine.runs import registry as runs
from engine.spec.rules import check_context
from engine.spec.schema import parse_spec
from studio.tabs import models as models_tab
from tests import helpers
from tests.modelscope_standin import ModelScopeStandin

ROOT = Path(__file__).resolve().parents[2]
REPO = "studio-test/tiny-llama-ms"


def _forget() -> None:
    ms_models.fetch_config.cache_clear()
    ms_models.launch_problem.cache_clear()
    reach.forget()


@pytest.fixture
def standin(tmp_path, monkeypatch, demo_paths):
    model_dir = Path(demo_paths["model_dir"])
    with ModelScopeStandin() as server:
        server.repos[REPO] = {p.name: p.read_bytes() for p in model_dir.iterdir() if p.is_file()}
        monkeypatch.setenv("MODELSCOPE_ENDPOINT", server.url)
        monkeypatch.setenv("MODELSCOPE_CACHE", str(tmp_path / "ms-cache"))
        monkeypatch.delenv("USE_MODELSCOPE_HUB", raising=False)
        _forget()
        yield server
        _forget()


def _ms_spec(demo_paths, name: str = REPO):
    return helpers.demo_spec(demo_paths, model={"name_or_path": name, "hub": "modelscope"})


def _model_problems(spec) -> list[str]:
    return [str(m) for path, m in check_context(spec) if path == "model.name_or_path"]


def _weights_fetched(server) -> bool:
    return any("FilePath=model.safetensors" in p for _, p in server.requests)


def _worker(args: list[str], events_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "engine.models.ms_download", *args, "--events", str(events_path)],
        env={**os.environ, "PYTHONPATH": str(ROOT), "STUDIO_DOWNLOAD_INTERVAL": "0.1"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_modelscope_model_validates_downloads_and_resolves_to_its_folder(standin, demo_paths, tmp_path):
    spec = _ms_spec(demo_paths)
    res = resolve_model(spec.model)  # config.json from ModelScope, into its cache: the plan's figures
    assert res.source == MS_HUB and res.config["model_type"] == "llama", res
    assert resolve_model(spec.model).source == MS_CACHE  # asked once
    assert _model_problems(spec) == []  # listed by ModelScope: the run downloads it
    assert not _weights_fetched(standin), "validation fetches config.json only"
    assert ms_models.complete_folder(REPO) is None

    events_path = tmp_path / "events.jsonl"
    out = _worker([REPO], events_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "asking ModelScope (" in out.stdout and f"{REPO} downloaded:" in out.stdout
    got = events.read_all(events_path)
    progress = [e["payload"] for e in got if e["type"] == "download_progress"]
    (finished,) = [e["payload"] for e in got if e["type"] == "download_finished"]
    assert progress and progress[-1]["done"] == progress[-1]["total"] == finished["bytes"] > 1_000_000
    folder = Path(finished["where"])
    assert folder.is_relative_to(tmp_path / "ms-cache")
    model_dir = Path(demo_paths["model_dir"])
    assert sorted(p.name for p in folder.iterdir()) == sorted(p.name for p in model_dir.iterdir() if p.is_file())
    assert (folder / "model.safetensors").read_bytes() == (model_dir / "model.safetensors").read_bytes()

    _forget()
    assert ms_models.complete_folder(REPO) == folder
    res = resolve_model(spec.model)
    assert (res.source, Path(res.where)) == (MS_CACHE, folder)
    assert _model_problems(spec) == []
    (listed,) = [m for m in local.list_local() if m.source == local.MODELSCOPE]
    assert (listed.name, listed.complete) == (REPO, True)
    frame = models_tab.models_frame("en")  # the Models tab: the model, its source, complete
    assert [REPO, "ModelScope cache"] in frame.iloc[:, :2].values.tolist()
    assert models_tab.modelscope_text("en") == f"ModelScope: {standin.url} (cache {tmp_path / 'ms-cache'})"

    # what the trainer loads (engine.trainer.model.model_location): the folder, read by transformers offline
    from transformers import AutoConfig, AutoTokenizer

    from engine.trainer.model import model_location

    assert model_location(spec) == str(folder)
    assert AutoConfig.from_pretrained(model_location(spec)).model_type == "llama"
    assert AutoTokenizer.from_pretrained(model_location(spec)).encode("hello")

    again = _worker([REPO], tmp_path / "again.jsonl")  # complete already: nothing fetched again
    assert again.returncode == 0 and "already complete in ModelScope's cache" in again.stdout, again.stdout
    assert sum(1 for _, p in standin.requests if "FilePath=model.safetensors" in p) == 1


def test_an_unknown_modelscope_id_is_refused_in_one_line(standin, demo_paths, tmp_path):
    (problem,) = _model_problems(_ms_spec(demo_paths, "studio-test/nothing-here"))
    assert "studio-test/nothing-here was not found on ModelScope (http://127.0.0.1:" in problem
    assert "\n" not in problem
    out = _worker(["studio-test/nothing-here"], tmp_path / "events.jsonl")
    assert out.returncode == 1 and "studio-test/nothing-here was not found on ModelScope" in out.stderr
    (failed,) = [e for e in events.read_all(tmp_path / "events.jsonl") if e["type"] == "download_failed"]
    assert failed["payload"]["cause"] == "not_found"


def test_modelscope_that_does_not_answer_refuses_the_model_in_one_line(demo_paths, tmp_path, monkeypatch):
    monkeypatch.setenv("MODELSCOPE_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("MODELSCOPE_CACHE", str(tmp_path / "ms-cache"))
    _forget()
    try:
        (problem,) = _model_problems(_ms_spec(demo_paths, "org/some-model"))
    finally:
        _forget()
    said = "org/some-model is not in ModelScope's cache and ModelScope (http://127.0.0.1:9) cannot be reached"
    assert said in problem
    assert "\n" not in problem


LF_YAML = """\
model_name_or_path: {model}
use_modelscope_hub: true
stage: sft
do_train: true
finetuning_type: lora
lora_target: all
dataset: {dataset}
dataset_dir: {data_dir}
template: {template}
cutoff_len: 64
max_steps: 2
output_dir: {out}
"""


def _lf_fields(demo_paths, tmp_path: Path) -> dict:
    """LF_YAML's fields for the demo's data (the model is each test's)."""
    example = helpers.demo_spec(demo_paths)
    return dict(
        dataset=example.data.datasets[0],
        data_dir=demo_paths["data_dir"],
        template=example.data.template,
        out=tmp_path / "saves",
    )


def test_an_lf_yaml_with_use_modelscope_hub_validates_against_modelscope(standin, demo_paths, tmp_path, monkeypatch):
    monkeypatch.setenv("STUDIO_OUTPUT_ROOTS", str(tmp_path))
    fields = _lf_fields(demo_paths, tmp_path)
    path = tmp_path / "lf.yaml"
    path.write_text(LF_YAML.format(model=REPO, **fields))
    spec = compat.load_any(path)  # with the context rules: the model is checked against the stand-in
    assert (spec.model.name_or_path, spec.model.hub) == (REPO, "modelscope")
    assert "use_modelscope_hub: true" in spec_to_lf_text(spec)[0]  # and back, for LF itself

    path.write_text(LF_YAML.format(model="studio-test/nothing-here", **fields))
    with pytest.raises(Exception, match="studio-test/nothing-here was not found on ModelScope"):
        compat.load_any(path)

    # LF's default for the key is the environment's USE_MODELSCOPE_HUB
    path.write_text(LF_YAML.format(model=REPO, **fields).replace("use_modelscope_hub: true\n", ""))
    assert compat.load_any(path, context=False).model.hub == "huggingface"
    monkeypatch.setenv("USE_MODELSCOPE_HUB", "1")
    assert compat.load_any(path).model.hub == "modelscope"


def test_an_lf_yaml_on_the_openmind_hub_is_refused_naming_the_key(demo_paths, tmp_path, monkeypatch):
    """LF's use_openmind_hub (the Modelers hub): Studio does not download from there, and says so before anything
    runs, with what to do instead; at its default (false) the key is accepted."""
    monkeypatch.setenv("STUDIO_OUTPUT_ROOTS", str(tmp_path))
    model = helpers.demo_spec(demo_paths).model.name_or_path
    text = LF_YAML.format(model=model, **_lf_fields(demo_paths, tmp_path)).replace("use_modelscope_hub: true\n", "")
    path = tmp_path / "lf.yaml"
    path.write_text(text + "use_openmind_hub: true\n")
    with pytest.raises(Exception, match="use_openmind_hub: downloads from the openMind hub") as refused:
        compat.load_any(path, context=False)
    assert "model_name_or_path to its folder" in str(refused.value)
    path.write_text(text + "use_openmind_hub: false\n")
    assert compat.load_any(path, context=False).model.hub == "huggingface"
    # LF's default for the key is USE_OPENMIND_HUB: set, and the key not written, LF would use openMind too
    path.write_text(text)
    monkeypatch.setenv("USE_OPENMIND_HUB", "1")
    with pytest.raises(Exception, match="USE_OPENMIND_HUB is set, so LLaMA-Factory would download"):
        compat.load_any(path, context=False)


def test_the_hub_field_takes_only_known_hubs(demo_paths):
    data = helpers.demo_spec(demo_paths).model_dump(mode="json")
    data["model"]["hub"] = "openmind"
    with pytest.raises(Exception, match="model.hub"):
        parse_spec(data)


def test_a_training_run_on_a_modelscope_model_downloads_then_trains(standin, demo_paths, tmp_path, monkeypatch):
    """`studio train` on a ModelScope id: the run's first phase downloads it with progress, then the trainer loads
    the folder from ModelScope's cache and trains; `studio models` lists it with its source, and `studio download
    --modelscope` finds it complete."""
    for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):  # the Hugging Face hub is never asked: leave them set
        assert os.environ.get(key)
    monkeypatch.setenv("STUDIO_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("STUDIO_CPU_SLOTS", "1")
    monkeypatch.setenv("STUDIO_DOWNLOAD_INTERVAL", "0.2")
    data = yaml.safe_load(Path(demo_paths["example_spec"]).read_text())
    data["model"].update(name_or_path=REPO, hub="modelscope")
    data["data"].update(dataset_dir=demo_paths["data_dir"], max_samples=16)
    data["train"].update(max_steps=2, logging_steps=1, save_steps=1000)
    data["output"]["report_to"] = ["none"]
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(data))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def studio(*args: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "engine.cli", *args]
        return subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)

    try:
        out = studio("train", str(spec))
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
        assert f"{REPO} downloaded:" in out.stdout
        (rec,) = runs.list_runs()
        assert rec.kind == "train" and rec.status == "completed"
        types = [e["type"] for e in events.read_all(rec.events_path)]
        assert "download_progress" in types
        assert types.index("download_finished") < types.index("run_started") < types.index("finished")
        assert "log" in types, "it trained"
    finally:
        for rec in runs.list_runs(refresh_status=False):
            if rec.status in ("running", "queued"):
                runs.stop(rec.id, grace_s=1)

    listed = studio("models", "list")
    assert any(line.split()[:2] == [REPO, "modelscope"] for line in listed.stdout.splitlines()), listed.stdout
    again = studio("download", "--modelscope", REPO)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "ModelScope: http://127.0.0.1:" in again.stdout and "already complete in ModelScope's cache" in again.stdout

    # the trained run merges into its base, found in ModelScope's cache (the Hugging Face hub is still never asked)
    merged = tmp_path / "home" / "exports" / "ms-merged"
    out = studio("merge", rec.id, "--out", str(merged))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    base = helpers.safetensors_shapes(ms_models.complete_folder(REPO))
    got = helpers.safetensors_shapes(merged)
    assert base and got == base, sorted(set(got) ^ set(base))  # the adapter folded in: the base's tensors, no LoRA
