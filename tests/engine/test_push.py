"""`studio push` (issue 24, item 5): a folder uploaded by huggingface_hub's real client, as a registry run, to the
local hub stand-in on 127.0.0.1 (tests/hub_standin.py): the files land byte for byte, the repo is private when asked,
progress is reported per file, a cancel stops between files, the token reaches the hub but no file of the run, and
offline / tokenless / a bad repo id are refused before anything is queued.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from engine.export import push_jobs as pj
from engine.export.checks import ExportError
from engine.runs import registry as runs
from tests.hub_standin import HubStandin

TOKEN = "hf_studio_test_secret_7c1d"


@pytest.fixture
def hub(monkeypatch, tmp_path):
    with HubStandin() as standin:
        monkeypatch.setenv("HF_ENDPOINT", standin.url)
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)  # huggingface_hub reads it as HF_HUB_OFFLINE
        monkeypatch.setenv("HF_TOKEN", TOKEN)
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))  # no saved login of this machine
        yield standin


@pytest.fixture
def folder(demo_paths, tmp_path) -> Path:
    out = tmp_path / "to-push"
    shutil.copytree(demo_paths["model_dir"], out)
    return out


def test_push_lands_the_files_privately_with_progress(hub, folder, run_registry, capsys):
    assert pj.cli([str(folder), "--repo", "me/demo-gguf", "--private"]) == 0
    printed = capsys.readouterr().out
    local = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    assert hub.repos["me/demo-gguf"] == local
    assert hub.private["me/demo-gguf"] is True
    assert hub.auth_seen == {TOKEN}
    assert f"[push] {len(local)}/{len(local)} files, {sum(map(len, local.values()))}/" in printed
    assert f"pushed to {hub.url}/me/demo-gguf" in printed
    rec = runs.list_runs()[0]
    assert pj.PUSH_TAG in rec.tags and rec.status == "completed"
    for f in Path(run_registry).rglob("*"):  # the workspace: registry, run folder, log, launch record
        if f.is_file():
            assert TOKEN.encode() not in f.read_bytes(), f


def test_public_push_of_a_second_repo(hub, folder, run_registry):
    job = pj.start_push(str(folder), "me/public-one")
    status = job.wait(timeout=300)
    assert status["state"] == "finished" and hub.private["me/public-one"] is False
    assert status["done"] == status["total"] == sum(p.stat().st_size for p in folder.iterdir() if p.is_file())


def test_cancel_between_files(hub, folder, run_registry, monkeypatch):
    monkeypatch.setenv("STUDIO_PUSH_FILE_DELAY", "3")
    job = pj.start_push(str(folder), "me/cancelled")
    deadline = time.time() + 300
    while job.poll()["files_done"] < 1:
        assert time.time() < deadline and job.poll()["state"] in ("queued", "running")
        time.sleep(0.2)
    status = job.cancel(grace=10)
    assert status["state"] == "cancelled"
    assert 1 <= len(hub.repos["me/cancelled"]) < len(list(folder.iterdir()))


def test_refused_before_any_work(folder, run_registry, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ExportError, match="HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE is set"):
        pj.start_push(str(folder), "me/x")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE")
    monkeypatch.delenv("HF_TOKEN")
    with pytest.raises(ExportError, match="no Hugging Face token"):
        pj.start_push(str(folder), "me/x")
    with pytest.raises(ExportError, match="owner/name"):
        pj.start_push(str(folder), "no-owner")
    with pytest.raises(ExportError, match="no such file or folder"):
        pj.start_push(str(tmp_path / "missing"), "me/x")
    assert runs.list_runs() == []
