"""Downloads as registry runs against a local stand-in of the hub's file API (tests/hub_standin.py) served to the real
``huggingface_hub`` client: progress, cancel and resume, a repo that is not there, a gated one (with and without
HF_TOKEN), a checksum mismatch, a server that stalls, a disk too small, and a training run whose model is a hub id:
it downloads, then trains. huggingface_hub reads HF_ENDPOINT / HF_HUB_CACHE when imported, so everything that talks
to the hub runs in a subprocess (or a run's own processes) with those set."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from engine.core import events
from engine.jobs import downloads
from engine.runs import registry as runs
from tests import helpers
from tests.hub_standin import COMMIT, HubStandin

ROOT = Path(__file__).resolve().parents[2]
REPO = "studio-test/tiny-llama"
SNAPSHOT = f"models--studio-test--tiny-llama/snapshots/{COMMIT}"


@pytest.fixture
def hub(demo_paths):
    with HubStandin() as standin:
        standin.add_folder(REPO, Path(demo_paths["model_dir"]))
        yield standin


@pytest.fixture
def hub_env(tmp_path, hub, monkeypatch) -> dict:
    """The environment of everything that talks to the stand-in: online, its URL, a fresh cache and workspace. Set
    in this process too, so the runs this test submits (their environment comes from ours) get it."""
    for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    values = {
        "HF_ENDPOINT": hub.url,
        "HF_HUB_CACHE": str(tmp_path / "hf-cache"),
        "HF_HOME": str(tmp_path / "hf-home"),
        "STUDIO_HOME": str(tmp_path / "home"),
        "STUDIO_CPU_SLOTS": "1",
        "STUDIO_DOWNLOAD_INTERVAL": "0.2",
        "HF_HUB_DOWNLOAD_TIMEOUT": "1",
    }
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    yield {**os.environ, "PYTHONPATH": str(ROOT)}
    for rec in runs.list_runs(refresh_status=False):  # never leave a process behind, whatever failed
        if rec.status in ("running", "queued"):
            runs.stop(rec.id, grace_s=1)


def studio(args: list[str], env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def worker(args: list[str], env: dict, events_path: Path) -> tuple[int, list[dict], str]:
    """The download worker alone (what a download run runs), its events and stderr."""
    out = subprocess.run(
        [sys.executable, "-m", "engine.models.download", *args, "--events", str(events_path)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return out.returncode, events.read_all(events_path), out.stderr


def same_files(snapshot: Path, source: Path) -> bool:
    names = sorted(p.name for p in source.iterdir() if p.is_file())
    got = sorted(p.name for p in snapshot.iterdir())
    return got == names and all((snapshot / n).read_bytes() == (source / n).read_bytes() for n in names)


def test_studio_download_shows_progress_lists_and_deletes(hub, hub_env, demo_paths):
    hub.throttle = 2_000_000  # ~2 s for the weights: several progress events
    out = studio(["download", REPO], hub_env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "downloaded: 7 files" in out.stdout and "%" in out.stdout
    cache = Path(hub_env["HF_HUB_CACHE"])
    assert same_files(cache / SNAPSHOT, Path(demo_paths["model_dir"]))
    assert (cache / "models--studio-test--tiny-llama/refs/main").read_text() == COMMIT

    (rec,) = [r for r in runs.list_runs() if downloads.DOWNLOAD_TAG in r.tags]
    assert rec.status == "completed" and rec.kind == "command"
    progress = [e["payload"] for e in events.read_all(rec.events_path) if e["type"] == "download_progress"]
    assert len(progress) >= 3
    done = [p["done"] for p in progress]
    assert done == sorted(done) and done[-1] == progress[-1]["total"] > 4_000_000
    assert any(0 < p["progress"] < 1 and p["speed"] > 0 and p["eta_seconds"] is not None for p in progress)

    # the cache's own readers find it (transformers loads it offline the same way)
    code = f"from huggingface_hub import try_to_load_from_cache as t; print(t({REPO!r}, 'model.safetensors'))"
    found = subprocess.run([sys.executable, "-c", code], env=dict(hub_env, HF_HUB_OFFLINE="1"), capture_output=True)
    assert found.stdout.decode().strip() == str(cache / SNAPSHOT / "model.safetensors")

    again = studio(["download", REPO], hub_env)  # complete already: the weights are not fetched again
    assert again.returncode == 0 and "already complete" in again.stdout, again.stdout + again.stderr
    assert sum(1 for m, p in hub.requests if m == "GET" and p.endswith("/model.safetensors")) == 1

    listed = studio(["models"], hub_env)
    assert REPO in listed.stdout and "4.1 MB" in listed.stdout, listed.stdout
    gone = studio(["models", "delete", REPO], hub_env)
    assert gone.returncode == 0 and "freed" in gone.stdout, gone.stdout + gone.stderr
    assert not (cache / "models--studio-test--tiny-llama").exists()


def test_cancel_mid_download_then_resume_completes_with_identical_files(hub, hub_env, demo_paths):
    hub.throttle = 400_000  # ~10 s for the 4 MB of weights
    job = downloads.DownloadJob(downloads.submit_download(REPO))
    blobs = Path(hub_env["HF_HUB_CACHE"]) / "models--studio-test--tiny-llama" / "blobs"

    def partial_bytes() -> int:
        return sum(p.stat().st_size for p in blobs.glob("*.incomplete")) if blobs.is_dir() else 0

    helpers.wait_for(lambda: partial_bytes() >= 1 << 20, timeout=120)
    status = job.cancel(grace=10)
    assert status["state"] == "cancelled", status
    assert "cancelled" in str(status["error"]) and "kept for a resume" in str(status["error"])
    kept = partial_bytes()
    assert kept >= 1 << 20, "the partial file stays for the resume"

    hub.throttle = None
    resumed = downloads.DownloadJob(downloads.submit_download(REPO)).wait(timeout=120)
    assert resumed["state"] == "finished", resumed
    assert same_files(Path(hub_env["HF_HUB_CACHE"]) / SNAPSHOT, Path(demo_paths["model_dir"]))
    assert (REPO_PATH := f"/{REPO}/resolve/{COMMIT}/model.safetensors") and any(
        path == REPO_PATH and int(rng[6:].split("-")[0]) >= kept for path, rng in hub.ranges
    ), f"resumed from byte {kept} with a Range request: {hub.ranges}"
    assert partial_bytes() == 0


def test_unknown_and_gated_repos_say_what_to_do(hub, hub_env):
    missing = studio(["download", "studio-test/no-such-model"], hub_env)
    assert missing.returncode == 1 and "was not found on the hub" in missing.stderr, missing.stderr

    hub.repos["studio-test/gated-model"] = dict(hub.repos[REPO])
    hub.gated.add("studio-test/gated-model")
    hub.tokens.add("hf_good_token")
    gated = studio(["download", "studio-test/gated-model"], hub_env)
    assert gated.returncode == 1 and "gated" in gated.stderr and "set HF_TOKEN" in gated.stderr, gated.stderr
    wrong = studio(["download", "studio-test/gated-model"], dict(hub_env, HF_TOKEN="hf_wrong_token"))
    assert wrong.returncode == 1 and "the token in HF_TOKEN has no access" in wrong.stderr, wrong.stderr

    good = studio(["download", "studio-test/gated-model"], dict(hub_env, HF_TOKEN="hf_good_token"))
    assert good.returncode == 0, good.stdout + good.stderr
    for rec in runs.list_runs():  # the token went to the processes in memory, never into a run folder
        for path in Path(rec.run_dir).rglob("*"):
            assert path.is_dir() or b"hf_good_token" not in path.read_bytes(), path


def test_checksum_mismatch_is_reported_and_nothing_corrupt_is_kept(hub, hub_env, tmp_path):
    hub.corrupt.add("model.safetensors")
    rc, evs, err = worker([REPO], hub_env, tmp_path / "events.jsonl")
    failed = [e["payload"] for e in evs if e["type"] == "download_failed"]
    assert rc == 1 and failed and failed[0]["cause"] == "checksum", err
    assert "model.safetensors" in failed[0]["error"] and "does not match the hub's checksum" in failed[0]["error"]
    storage = Path(hub_env["HF_HUB_CACHE"]) / "models--studio-test--tiny-llama"
    assert not (storage / "snapshots" / COMMIT / "model.safetensors").exists()
    assert not list((storage / "blobs").glob("*.incomplete")), "a corrupt partial would poison the resume"


def test_a_stalling_server_times_out_with_a_message(hub, hub_env, tmp_path):
    hub.stall.add("model.safetensors")
    rc, evs, err = worker([REPO], hub_env, tmp_path / "events.jsonl")
    failed = [e["payload"] for e in evs if e["type"] == "download_failed"]
    assert rc == 1 and failed and failed[0]["cause"] == "stalled", err
    assert "stopped sending model.safetensors" in failed[0]["error"] and "resume" in failed[0]["error"]


def test_too_little_disk_space_is_refused_before_any_byte(hub, hub_env, tmp_path):
    hub.sizes["model.safetensors"] = 10**18  # what the repo info claims: an exabyte
    rc, evs, err = worker([REPO], hub_env, tmp_path / "events.jsonl")
    failed = [e["payload"] for e in evs if e["type"] == "download_failed"]
    assert rc == 1 and failed and failed[0]["cause"] == "disk", err
    assert "not enough disk space" in failed[0]["error"] and "1000000.0 TB" in failed[0]["error"]
    assert not [p for m, p in hub.requests if "/resolve/" in p], "nothing fetched"


def test_a_training_run_on_a_hub_id_downloads_then_trains(hub, hub_env, demo_paths, tmp_path):
    """The issue's check: a run on a hub id served by the stand-in downloads with visible progress, then trains."""
    hub.throttle = 2_000_000
    data = yaml.safe_load(Path(demo_paths["example_spec"]).read_text())
    data["model"]["name_or_path"] = REPO
    data["data"].update(dataset_dir=demo_paths["data_dir"], max_samples=32)
    data["train"].update(max_steps=2, logging_steps=1, save_steps=1000)
    data["output"]["report_to"] = ["none"]
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(data))
    out = studio(["train", str(spec)], hub_env, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "[download]" in out.stdout and "downloaded: 7 files" in out.stdout

    (rec,) = runs.list_runs()
    assert rec.kind == "train" and rec.status == "completed"
    types = [e["type"] for e in events.read_all(rec.events_path)]
    assert "download_progress" in types and "download_finished" in types
    assert types.index("download_finished") < types.index("run_started") < types.index("finished")
    assert [t for t in types if t == "log"], "it trained"
    assert same_files(Path(hub_env["HF_HUB_CACHE"]) / SNAPSHOT, Path(demo_paths["model_dir"]))


def test_a_training_run_whose_download_fails_says_why(hub, hub_env, demo_paths, tmp_path):
    hub.corrupt.add("model.safetensors")  # config.json validates the spec; the weights do not arrive intact
    data = yaml.safe_load(Path(demo_paths["example_spec"]).read_text())
    data["model"]["name_or_path"] = REPO
    data["data"]["dataset_dir"] = demo_paths["data_dir"]
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(data))
    out = studio(["train", str(spec)], hub_env)
    assert out.returncode == 1, out.stdout + out.stderr
    (rec,) = runs.list_runs()
    assert rec.status == "failed"
    last = events.last_event(rec.events_path, events.TERMINAL_TYPES)
    assert last["type"] == "failed" and last["payload"]["cause"] == "download", last
    assert "does not match the hub's checksum" in last["payload"]["error"]
    assert "run_started" not in [e["type"] for e in events.read_all(rec.events_path)], "no trainer was started"


def test_the_hub_a_download_comes_from_is_said(hub, hub_env, monkeypatch):
    """Issue 27 item 4 (its HF_ENDPOINT part): `studio download`, the download run's log and the Models tab name the
    hub they talk to, a mirror named by HF_ENDPOINT here (the stand-in), or say it is not asked when offline."""
    out = studio(["download", REPO], hub_env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.splitlines()[0] == f"[download] hub: {hub.url} (HF_ENDPOINT: a mirror or a private hub)"
    (rec,) = runs.list_runs()
    log = (Path(rec.run_dir) / "train.log").read_text(encoding="utf-8")
    assert f"asking the hub ({hub.url}) for the files of {REPO}" in log, log

    from huggingface_hub import constants

    from studio.tabs import models as tab

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", hub.url)
    assert tab.hub_text("en") == f"hub: {hub.url} (HF_ENDPOINT: a mirror or a private hub)"
    assert tab.hub_text("zh") == f"模型来源 Hub：{hub.url}（HF_ENDPOINT：镜像或私有 Hub）"
    monkeypatch.setattr(constants, "ENDPOINT", "https://huggingface.co")
    assert tab.hub_text("en") == "hub: https://huggingface.co"
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert "not asked (HF_HUB_OFFLINE is set)" in tab.hub_text("en")
