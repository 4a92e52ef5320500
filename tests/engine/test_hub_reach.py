"""A hub that cannot be reached is found once per process and said in one line, then the command works offline
(issue 27, item 3); a hub model a run could not download is refused before launch (item 5). The commands run in
fresh interpreters (huggingface_hub reads HF_ENDPOINT and HF_HUB_OFFLINE when imported), without HF_HUB_OFFLINE,
against a port on 127.0.0.1 that accepts connections and never answers, or that is closed."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.hub_standin import COMMIT, HubStandin

ROOT = Path(__file__).resolve().parents[2]
TABLE_ID = "meta-llama/Llama-3.1-8B-Instruct"  # in Studio's table of published configs


@pytest.fixture
def silent_port():
    """A server that accepts the connection (the kernel's backlog) and never says a word."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    yield sock.getsockname()[1]
    sock.close()


@pytest.fixture
def closed_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now: connection refused
    return port


def _env(tmp_path: Path, home: str, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN")}
    env.update(
        HF_HUB_CACHE=str(tmp_path / "hf-cache"),
        HF_HOME=str(tmp_path / "hf-home"),
        HF_HUB_DISABLE_TELEMETRY="1",
        PYTHONPATH=str(ROOT),
        STUDIO_HOME=home,
    )
    env.update(extra)
    return env


def _spec(tmp_path: Path, model: str, dataset_dir: str) -> Path:
    path = tmp_path / f"spec-{model.replace('/', '_')}.yaml"
    path.write_text(
        f"model: {{name_or_path: {model}}}\n"
        "method: {finetuning: lora}\n"
        f"data: {{datasets: [demo_alpaca], dataset_dir: {dataset_dir}, cutoff_len: 256}}\n"
        "train: {per_device_batch_size: 1, max_steps: 2}\n",
        encoding="utf-8",
    )
    return path


def _studio(args: list[str], env: dict) -> tuple[subprocess.CompletedProcess, float]:
    start = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "engine.cli", *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    return out, time.monotonic() - start


def _hub_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "cannot be reached" in line and "working offline" in line]


@pytest.mark.parametrize("kind", ["silent", "closed"])
def test_an_unreachable_hub_is_said_once_and_the_command_goes_on_offline(
    kind, silent_port, closed_port, tmp_path, demo_paths
):
    port = silent_port if kind == "silent" else closed_port
    endpoint = f"http://127.0.0.1:{port}"
    env = _env(tmp_path, os.environ["STUDIO_HOME"], HF_ENDPOINT=endpoint)
    table_spec = _spec(tmp_path, TABLE_ID, demo_paths["data_dir"])
    unknown_spec = _spec(tmp_path, "someorg/not-in-the-table", demo_paths["data_dir"])

    # the same command with HF_HUB_OFFLINE: the interpreter's start and the work, measured on this machine now
    _, baseline = _studio(["plan", str(table_spec)], dict(env, HF_HUB_OFFLINE="1"))

    plan, took = _studio(["plan", str(table_spec)], env)
    assert plan.returncode in (0, 1), plan.stdout + plan.stderr
    assert "Studio's table of published configs" in plan.stdout, plan.stdout
    assert len(_hub_lines(plan.stderr)) == 1 and endpoint in plan.stderr, plan.stderr
    assert "Retrying" not in plan.stderr and "thrown while requesting" not in plan.stderr, plan.stderr
    assert took - baseline < 5.0, f"plan took {took:.1f} s, {baseline:.1f} s offline"

    validate, took = _studio(["validate", str(unknown_spec)], env)
    both = validate.stdout + validate.stderr
    assert validate.returncode == 1
    assert len(_hub_lines(both)) == 1, both
    assert "not a transformers model" not in both, "the hub said nothing: no verdict on the model"
    assert "someorg/not-in-the-table is not in the Hugging Face cache and the hub" in both, both
    assert took - baseline < 5.0, f"validate took {took:.1f} s, {baseline:.1f} s offline"

    # a model the table knows plans, but the run could not download it: validate judges the spec and warns
    # (issue 45 item 6), train refuses before launch (the next test)
    validate, _ = _studio(["validate", str(table_spec)], env)
    both = validate.stdout + validate.stderr
    assert validate.returncode == 0 and len(_hub_lines(both)) == 1, both
    assert "warning: model.name_or_path: the run could not download its model" in both and endpoint in both, both


def test_an_offline_hub_model_not_in_the_cache_is_refused_before_launch(tmp_path, demo_paths):
    env = _env(tmp_path, os.environ["STUDIO_HOME"], HF_HUB_OFFLINE="1")
    spec = _spec(tmp_path, TABLE_ID, demo_paths["data_dir"])
    plan, _ = _studio(["plan", str(spec)], env)  # the plan still answers from the table
    assert "Studio's table of published configs" in plan.stdout, plan.stdout + plan.stderr
    validate, _ = _studio(["validate", str(spec)], env)  # judged, with a warning that this machine cannot fetch it
    both = validate.stdout + validate.stderr
    assert validate.returncode == 0 and "OK" in validate.stdout, both
    refusal = f"model.name_or_path: the run could not download its model: {TABLE_ID} is not in the Hugging Face cache"
    assert f"warning: {refusal}" in both, both
    assert "HF_HUB_OFFLINE" in both
    preview, _ = _studio(["preview", str(spec)], env)
    assert preview.returncode == 0 and f"warning: {refusal}" in preview.stderr, preview.stdout + preview.stderr
    train, _ = _studio(["train", str(spec), "--detach"], env)
    assert train.returncode == 1 and refusal in train.stderr, train.stdout + train.stderr
    assert "warning:" not in train.stderr  # refused, not warned
    assert "run " not in train.stdout, "nothing was registered or launched"


def _cached_config(cache: Path, repo: str, config: dict) -> None:
    root = cache / f"models--{repo.replace('/', '--')}"
    (root / "snapshots" / COMMIT).mkdir(parents=True)
    (root / "snapshots" / COMMIT / "config.json").write_text(json.dumps(config), encoding="utf-8")
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text(COMMIT, encoding="utf-8")


def test_a_gated_hub_model_without_a_token_is_refused_before_launch(tmp_path, demo_paths):
    repo = "studio-test/gated-llama"
    config = json.loads((Path(demo_paths["model_dir"]) / "config.json").read_text(encoding="utf-8"))
    _cached_config(tmp_path / "hf-cache", repo, config)  # planned from the cache: only the weights are missing
    with HubStandin() as hub:
        hub.add_folder(repo, Path(demo_paths["model_dir"]))
        hub.gated.add(repo)
        env = _env(tmp_path, os.environ["STUDIO_HOME"], HF_ENDPOINT=hub.url)
        spec = _spec(tmp_path, repo, demo_paths["data_dir"])
        validate, _ = _studio(["validate", str(spec)], env)
        both = validate.stdout + validate.stderr
        assert validate.returncode == 0, both
        assert f"warning: model.name_or_path: the run could not download its model: {repo} is gated" in both, both
        assert "HF_TOKEN" in both and "cannot be reached" not in both
        train, _ = _studio(["train", str(spec), "--detach"], env)
        assert train.returncode == 1 and f"{repo} is gated" in train.stderr, train.stdout + train.stderr
        with_token, _ = _studio(["validate", str(spec)], dict(env, HF_TOKEN="hf_test"))
        assert with_token.returncode == 0 and "OK" in with_token.stdout, with_token.stdout + with_token.stderr
        assert "warning: model.name_or_path" not in with_token.stderr


def test_the_probe_is_asked_once_and_its_timeout_is_a_setting(silent_port, monkeypatch, capsys):
    from huggingface_hub import constants

    from engine.models import reach

    url = f"http://127.0.0.1:{silent_port}"
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", url)
    monkeypatch.setenv("STUDIO_HUB_TIMEOUT", "0.5")
    reach.forget()
    try:
        assert reach.reachable() is False and reach.reachable() is False
        lines = _hub_lines(capsys.readouterr().err)
        assert len(lines) == 1 and url in lines[0] and "0.5 s" in lines[0] and "timed out" in lines[0], lines
    finally:
        reach.forget()
