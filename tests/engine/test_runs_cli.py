"""`studio runs|queue|replay` over the registry (command runs; training runs are in test_runs_train.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from engine.runs import registry as runs
from engine.runs.cli import cli, replay_differences
from tests.engine.test_runs import home, sleeper, wait_for  # noqa: F401 - the fixture

ROOT = Path(__file__).resolve().parents[2]


def test_runs_list_show_logs_rename_tag_stop_delete(home, capsys):  # noqa: F811
    rid = runs.submit_command(sleeper(30), name="cli-run")
    queued = runs.submit_command(sleeper(30), name="waiting")
    wait_for(lambda: "start" in runs.log_tail(rid))
    assert cli(["runs", "list"]) == 0
    out = capsys.readouterr().out
    assert rid in out and "running" in out and queued in out and "queued" in out
    assert cli(["queue", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert rid in lines[1] and queued in lines[2]  # running first, then queue order
    assert cli(["runs", "rename", rid, "better name"]) == 0
    assert cli(["runs", "tag", rid, "x,y"]) == 0
    assert cli(["runs", "show", rid]) == 0
    out = capsys.readouterr().out
    assert "better name" in out and "x, y" in out and "running" in out
    assert cli(["runs", "logs", rid]) == 0
    assert "start" in capsys.readouterr().out
    assert cli(["queue", "remove", rid]) == 1  # running, not queued
    assert "not queued" in capsys.readouterr().err
    assert cli(["queue", "remove", queued]) == 0
    assert cli(["runs", "delete", rid, "--yes"]) == 1
    assert "stop it first" in capsys.readouterr().err
    assert cli(["runs", "stop", rid, "--grace", "2"]) == 0
    assert "stopped" in capsys.readouterr().out
    assert cli(["runs", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {r["id"]: r["status"] for r in listed} == {rid: "stopped", queued: "stopped"}
    assert cli(["runs", "delete", rid, "--yes"]) == 0
    assert cli(["runs", "show", rid]) == 1
    assert "no run with id" in capsys.readouterr().err


def test_logs_follow_ends_with_the_run(home):  # noqa: F811
    rid = runs.submit_command(sleeper(1.0), name="follow")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run(
        [sys.executable, "-m", "engine.cli", "runs", "logs", rid, "-f"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert res.returncode == 0 and "start" in res.stdout and "done" in res.stdout


def test_queue_add_reports_every_spec_problem(home, tmp_path, capsys):  # noqa: F811
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: {name_or_path: /nowhere}\ndata: {datasets: []}\ntrain: {learning_rate: -1}\n")
    assert cli(["queue", "add", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "train.learning_rate" in err and "data.datasets" in err
    assert runs.list_runs() == []


def test_replay_lists_what_changed(tmp_path):
    (tmp_path / "record.json").write_text(
        json.dumps(
            {
                "versions": {"pyyaml": "0.0.1", "pydantic": __import__("pydantic").VERSION},
                "dataset_hashes": {},
                "tokenizer_hash": None,
            }
        )
    )
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    spec = {"model": {"name_or_path": str(model)}, "data": {"datasets": ["d"], "dataset_dir": str(tmp_path)}}
    diffs = replay_differences(tmp_path, spec)
    assert any(d.startswith("pyyaml was 0.0.1, now ") for d in diffs)
    assert not any("pydantic" in d for d in diffs)
    assert "no record.json" in replay_differences(tmp_path / "nothing", spec)[0]
