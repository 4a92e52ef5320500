"""output.report_to beyond TensorBoard: one real demo run reporting to MLflow (file store), Trackio (local store) and
W&B (offline), each read back through its own reading API or its own file format, against the run's events.jsonl;
the spec as each tracker's config; every tracker's folder inside the run folder."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from engine.watch.trackers import tracker_env
from tests.helpers import demo_spec, losses, run_trainer

pytest.importorskip("mlflow")
pytest.importorskip("trackio")
pytest.importorskip("wandb")

STEPS = 6


@pytest.fixture(scope="module")
def tracked(demo_paths, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("tracked")
    spec = demo_spec(
        demo_paths,
        train={"max_steps": STEPS, "save_steps": 1000, "logging_steps": 1},
        output={"report_to": ["mlflow", "trackio", "wandb"], "run_name": "tracked-run"},
    )
    rc, events = run_trainer(spec, run_dir, timeout=900)
    assert rc == 0, (run_dir / "train.log").read_text()[-3000:]
    series = losses(events)
    assert sorted(series) == list(range(1, STEPS + 1))
    assert all((run_dir / name).is_dir() for name in ("mlruns", "trackio", "wandb"))
    return run_dir, series


def test_mlflow_file_store_holds_the_loss_series_and_the_spec(tracked, monkeypatch):
    from mlflow.tracking import MlflowClient

    run_dir, series = tracked
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    client = MlflowClient(tracking_uri=(run_dir / "mlruns").as_uri())
    experiment = client.get_experiment_by_name("tracked-run")
    (run,) = client.search_runs([experiment.experiment_id])
    logged = {m.step: m.value for m in client.get_metric_history(run.info.run_id, "loss")}
    assert logged == series
    assert run.data.params["spec.train.max_steps"] == str(STEPS)
    assert json.loads(run.data.params["spec.output.report_to"]) == ["mlflow", "trackio", "wandb"]


def test_trackio_local_store_holds_the_loss_series_and_the_spec(tracked):
    run_dir, series = tracked
    # Trackio reads TRACKIO_DIR when imported: its reading API runs in a process of its own
    code = (
        "import json; from trackio.sqlite_storage import SQLiteStorage as S; "
        "print(json.dumps({'logs': S.get_logs('huggingface', 'tracked-run'), "
        "'config': S.get_run_config('huggingface', 'tracked-run')}, default=str))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"TRACKIO_DIR": str(run_dir / "trackio"), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    logged = {r["train/global_step"]: r["train/loss"] for r in got["logs"] if "train/loss" in r}
    assert logged == series
    assert got["config"]["studio_spec"]["train"]["max_steps"] == STEPS


def _wandb_records(path: Path):
    """W&B's offline run file: its header (":W&B", magic 0xBEE1, version), then LevelDB-log records in 32 KiB
    blocks (crc, length, type: full / first / middle / last), each a wandb_internal_pb2.Record."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    ident, magic, _version = struct.unpack("<4sHB", data[:7])
    assert ident == b":W&B" and magic == 0xBEE1
    pos, block, buf = 7, 32768, b""
    while pos + 7 <= len(data):
        room = block - pos % block
        if room < 7:
            pos += room
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind == 0:
            continue
        buf = chunk if kind in (1, 2) else buf + chunk
        if kind in (1, 4):
            rec = wandb_internal_pb2.Record()
            rec.ParseFromString(buf)
            yield rec
            buf = b""


def test_wandb_offline_run_holds_the_loss_series_and_the_spec(tracked):
    run_dir, series = tracked
    (offline,) = (run_dir / "wandb").glob("offline-run-*/run-*.wandb")
    logged, config = {}, {}
    for rec in _wandb_records(offline):
        kind = rec.WhichOneof("record_type")
        if kind == "history":
            # a key with a slash may be stored split (nested_key): join it back
            items = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in rec.history.item}
            if "train/loss" in items:
                logged[items["train/global_step"]] = items["train/loss"]
        elif kind == "config":
            config.update({u.key or "/".join(u.nested_key): json.loads(u.value_json) for u in rec.config.update})
    assert logged == series
    assert config["studio_spec"]["output"]["run_name"] == "tracked-run"


def test_every_tracker_writes_inside_the_run_folder(tmp_path):
    env = tracker_env(["tensorboard", "mlflow", "trackio", "wandb", "swanlab"], tmp_path, "r")
    folders = [
        env["TENSORBOARD_LOGGING_DIR"],
        env["MLFLOW_TRACKING_URI"].removeprefix("file://"),
        env["TRACKIO_DIR"],
        env["WANDB_DIR"],
        env["SWANLAB_LOG_DIR"],
    ]
    assert all(Path(f).resolve().is_relative_to(tmp_path.resolve()) for f in folders)
    assert env["WANDB_MODE"] == "offline" and env["SWANLAB_MODE"] == "local"
