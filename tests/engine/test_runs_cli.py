"""`studio runs|queue|replay` over the registry (command runs; training runs are in test_runs_train.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from engine.commands.runs_cli import cli, replay_differences
from engine.runs import registry as runs
from engine.runs import store
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
    assert cli(["runs", "delete", rid]) == 2  # no terminal here: asked for --yes in one line (not an EOFError)
    assert (
        capsys.readouterr().err == f"studio runs delete: no terminal to confirm on: pass --yes to delete run {rid}\n"
    )
    assert cli(["runs", "show", rid]) == 0
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


# ----------------------------------------------------------------------------------- issue 30.8: every view agrees
def test_show_says_what_list_and_the_page_say(home, monkeypatch):  # noqa: F811
    """A running training run that has written nothing past its stall limit: `runs list`, `runs show` and the Runs
    tab all read "stalled (no progress for ...)" (show used to print the bare "running")."""
    import time

    from engine.runs import watchdog
    from studio.tabs import runs as runs_tab

    monkeypatch.setenv("STUDIO_STALL_FLOOR", "1")
    rid = runs.submit_command(sleeper(120), name="quiet")
    wait_for(lambda: "start" in runs.log_tail(rid))
    past = time.time() - 600
    store.update(rid, kind="train", started=past)  # a training run that last wrote 10 minutes ago
    for path in (runs.get(rid).log_path, runs.get(rid).events_path):
        if Path(path).exists():
            os.utime(path, (past, past))
    expected = str(watchdog.status_text(runs.get(rid)))
    assert expected.startswith("stalled (no progress for ")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def studio(*args: str) -> str:
        cmd = [sys.executable, "-m", "engine.cli", *args]
        done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout

    listed = next(line for line in studio("runs", "list").splitlines() if line.startswith(rid))
    shown = next(line for line in studio("runs", "show", rid).splitlines() if line.startswith("status"))
    page = str(runs_tab.table("en").set_index("id").loc[rid]["status"])
    assert expected in listed and shown.split(None, 1)[1] == expected and page == expected, (listed, shown, page)
    runs.stop(rid, grace_s=2)


def test_a_closed_reader_ends_the_cli_quietly(home):  # noqa: F811
    """`studio runs list | head -1` and the like: the reader has gone before the command writes; it ends without a
    BrokenPipeError traceback (exit 141, as a tool ended by SIGPIPE)."""
    rid = runs.submit_command(sleeper(0.1), name="piped")
    wait_for(lambda: not runs.get(rid).active)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for args in (["runs", "list"], ["runs", "list", "--json"], ["runs", "show", rid], ["runs", "logs", rid], []):
        proc = subprocess.Popen(
            [sys.executable, "-m", "engine.cli", *args],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        proc.stdout.close()  # the reader leaves before the interpreter has even started
        err = proc.stderr.read().decode()
        code = proc.wait(timeout=120)
        assert "Traceback" not in err and "BrokenPipeError" not in err, (args, err)
        assert code in (0, 141), (args, code, err)


def test_logs_follow_starts_from_the_last_lines(home, tmp_path):  # noqa: F811
    """`runs logs -f -n 3` prints the log's last 3 lines, then what the run writes next, until it ends."""
    flag = tmp_path / "go"
    code = (
        "import os, time\n"
        "for i in range(10): print(f'line {i}', flush=True)\n"
        f"while not os.path.exists({str(flag)!r}): time.sleep(0.05)\n"
        "print('after', flush=True)\n"
    )
    rid = runs.submit_command([sys.executable, "-c", code], name="tail")
    wait_for(lambda: "line 9" in runs.log_tail(rid))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", "runs", "logs", rid, "-f", "-n", "3"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    first = [proc.stdout.readline() for _ in range(3)]
    flag.touch()
    rest, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert first == ["line 7\n", "line 8\n", "line 9\n"], first
    assert rest == "after\n", rest


def test_offline_dataset_download_speaks_of_a_dataset(home):  # noqa: F811
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    for args, word, other in (
        (["org/some-data", "--dataset"], "dataset", "model"),
        (["org/some-model"], "model", "dataset"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "engine.cli", "download", *args],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        out = done.stdout + done.stderr
        assert "HF_HUB_OFFLINE" in out and f"copy the {word} into" in out and other not in out.lower(), out


def test_overlong_dataset_names_are_refused_naming_the_field(tmp_path):
    """A 300-character dataset name: the spec refuses it naming data.datasets (and eval_datasets), registering
    refuses it naming the name; 100 characters are fine."""
    import pytest

    from engine.data import dataset_registry as reg
    from engine.spec import groups
    from engine.spec.schema import SpecError, parse_spec

    assert reg.MAX_DATASET_NAME == groups.MAX_DATASET_NAME == 100
    long = "d" * 300
    data = {"model": {"name_or_path": "m"}, "data": {"datasets": ["ok", long], "eval_datasets": [long]}}
    with pytest.raises(SpecError) as exc:
        parse_spec(data)
    fields = {path: str(msg) for path, msg in exc.value.problems}
    assert "at most 100 characters" in fields.get("data.datasets.1", ""), fields
    assert "at most 100 characters" in fields.get("data.eval_datasets.0", ""), fields
    parse_spec({"model": {"name_or_path": "m"}, "data": {"datasets": ["d" * 100]}})
    (tmp_path / "x.json").write_text('[{"instruction": "q", "output": "a"}]')
    with pytest.raises(ValueError, match="dataset name: 300 characters, at most 100"):
        reg.register_dataset(tmp_path, long, "x.json")
    reg.register_dataset(tmp_path, "d" * 100, "x.json")


def test_a_stall_alert_is_not_the_runs_progress(home, monkeypatch):  # noqa: F811
    """The wrapper's health watch writes an alert event and a train.log line when a run stalls; neither may read as
    the run's progress, or the run stops reading stalled the moment it is said (and the alert flaps)."""
    import json
    import time

    from engine.runs import watchdog

    monkeypatch.setenv("STUDIO_STALL_FLOOR", "1")
    rid = runs.submit_command(sleeper(120), name="quiet")
    wait_for(lambda: "start" in runs.log_tail(rid))
    past = time.time() - 600
    store.update(rid, kind="train", started=past)
    rec = runs.get(rid)
    with open(rec.events_path, "a", encoding="utf-8") as fh:  # the run's last step, ten minutes ago
        fh.write(json.dumps({"type": "log", "ts": past, "step": 3, "payload": {"loss": 1.0}}) + "\n")
    for path in (rec.log_path, rec.events_path):
        if Path(path).exists():
            os.utime(path, (past, past))
    assert watchdog.stalled_for(runs.get(rid)) >= 590
    alert = {"type": "alert", "ts": time.time(), "step": 3, "payload": {"rule": "stall", "action": "warn"}}
    with open(rec.events_path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(alert) + "\n")
    with open(rec.log_path, "a", encoding="utf-8") as fh:
        fh.write("[studio runner] health: step 3: stall (warn): no progress for 10m\n")
    assert watchdog.stalled_for(runs.get(rid)) >= 590  # still stalled, for as long as before
    with open(rec.log_path, "a", encoding="utf-8") as fh:
        fh.write("step 4 done\n")  # the run itself writes again: progress
    assert watchdog.stalled_for(runs.get(rid)) is None
    runs.stop(rid, grace_s=2)
