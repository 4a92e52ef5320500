"""A member's own command line against a shared studio (issue 46 item 6), as a member uses it: a real studio in team
mode on 127.0.0.1, Ann's personal token, and `studio --server URL ...` run as a separate process from another folder.
Ann submits the demo spec, follows it to the end, sees its step and loss, fetches its adapter (the same bytes as on
the server); Bob's token sees none of it and cannot stop it; a revoked token is refused; the API answers nothing
without a token, and the page stays behind its login."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from engine.core import accounts, api_tokens
from tests.e2e.conftest import ROOT

pytestmark = pytest.mark.slow


def _studio(server, token: str, *args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("STUDIO_HOME", "STUDIO_SERVER", "STUDIO_TOKEN")}
    env.update(STUDIO_TOKEN=token, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", "--server", server.url, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_members_cli_submits_follows_fetches_and_stops_only_their_own_runs(tmp_path, monkeypatch, make_server):
    home, elsewhere = tmp_path / "home", tmp_path / "laptop"
    home.mkdir()
    elsewhere.mkdir()
    monkeypatch.setenv("STUDIO_HOME", str(home))
    accounts.add("ann", "ann's password")
    accounts.add("bob", "bob's password")
    with accounts.acting_for("ann"):
        ann_id, ann = api_tokens.create("laptop")
    with accounts.acting_for("bob"):
        _, bob = api_tokens.create("")
    srv = make_server(home)  # builds the demo workspace, then serves
    try:
        srv.wait_up()
        spec = yaml.safe_load((home / "demo_spec.yaml").read_text(encoding="utf-8"))
        spec["train"]["max_steps"] = 3
        spec["output"] = {**spec.get("output", {}), "run_name": "ann-from-her-laptop"}
        (elsewhere / "mine.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")

        done = _studio(srv, ann, "train", "mine.yaml", cwd=elsewhere)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        run_id = done.stdout.split(":", 1)[0].strip()
        assert done.stdout.rstrip().endswith(f"{run_id}: completed"), done.stdout[-500:]
        from engine.runs import store

        rec = store.get(run_id, refresh_status=False)
        assert rec.owner == "ann" and rec.status == "completed"
        assert "step" in done.stdout or "loss" in done.stdout  # the trainer's log, followed as it grew

        shown = _studio(srv, ann, "runs", "show", run_id, cwd=elsewhere).stdout
        logged = [json.loads(x) for x in (Path(rec.run_dir) / "events.jsonl").read_text().splitlines()]
        last = [e for e in logged if e["type"] == "log"][-1]
        assert f"step     {last['step']}" in shown and f"loss     {last['payload']['loss']}" in shown, shown

        fetched = _studio(srv, ann, "runs", "fetch", run_id, "--out", "got", cwd=elsewhere)
        assert fetched.returncode == 0, fetched.stderr
        server_files = {p.relative_to(rec.output_dir): p for p in Path(rec.output_dir).rglob("*") if p.is_file()}
        got = {p.relative_to(elsewhere / "got"): p for p in (elsewhere / "got").rglob("*") if p.is_file()}
        assert set(got) == set(server_files) and any(p.name == "adapter_model.safetensors" for p in got)
        assert all(_sha(got[k]) == _sha(server_files[k]) for k in got)

        listed = _studio(srv, bob, "runs", "list", cwd=elsewhere)
        assert listed.returncode == 0 and run_id not in listed.stdout and "no runs of yours" in listed.stdout
        refused = _studio(srv, bob, "runs", "stop", run_id, cwd=elsewhere)
        assert refused.returncode == 1 and f"no run with id {run_id!r}" in refused.stderr, refused.stderr
        stolen = _studio(srv, bob, "runs", "fetch", run_id, cwd=elsewhere)
        assert stolen.returncode == 1 and not (elsewhere / run_id).exists()
        from engine.runs import registry as runs

        with accounts.acting_for("ann"):  # shared read-only: Bob reads it and fetches it, and still cannot stop it
            runs.share(run_id, ["bob"])
        assert run_id in _studio(srv, bob, "runs", "list", cwd=elsewhere).stdout
        refused = _studio(srv, bob, "runs", "stop", run_id, cwd=elsewhere)
        assert refused.returncode == 1 and "shared with you read-only" in refused.stderr, refused.stderr
        assert _studio(srv, bob, "runs", "fetch", run_id, "--out", "bobs", cwd=elsewhere).returncode == 0
        assert any((elsewhere / "bobs").rglob("adapter_model.safetensors"))

        queued = _studio(srv, ann, "queue", "add", "mine.yaml", "--name", "second", cwd=elsewhere)
        second = queued.stdout.split(":", 1)[0].strip()
        assert queued.returncode == 0 and store.get(second, refresh_status=False).owner == "ann", queued.stderr
        assert _studio(srv, ann, "runs", "stop", second, cwd=elsewhere).returncode == 0

        with accounts.acting_for("ann"):
            api_tokens.revoke(ann_id)
        gone = _studio(srv, ann, "runs", "list", cwd=elsewhere)
        assert gone.returncode == 1 and "no valid token" in gone.stderr
        with pytest.raises(urllib.error.HTTPError) as no_token:
            urllib.request.urlopen(srv.url + "api/v1/runs", timeout=30)
        assert no_token.value.code == 401
        with pytest.raises(urllib.error.HTTPError) as page:  # a token opens the API, never the page
            request = urllib.request.Request(srv.url + "config", headers={"Authorization": f"Bearer {bob}"})
            urllib.request.urlopen(request, timeout=30)
        assert page.value.code == 401
    finally:
        srv.stop()
        from tests.e2e.conftest import stop_runs

        stop_runs(home)
