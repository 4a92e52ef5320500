"""Shared test set-up: offline, one thread per process, a private workspace, the demo built once."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ.update(
    {
        "GRADIO_ANALYTICS_ENABLED": "False",
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "STUDIO_FORCE_CPU": "1",
    }
)

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@pytest.fixture(autouse=True)
def _signal_handlers_restored():
    """A test that runs a subprocess entry in-process (``gguf_export.main``, ``merge.main``) installs its SIGTERM
    handler, and SIG_IGN once it has published, in the pytest process. Every later child inherits an ignored SIGTERM
    and can no longer be stopped by it (the full-disk tests' writers, a webui): put the handlers back after each
    test."""
    import signal

    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield
    for sig, handler in saved.items():
        if signal.getsignal(sig) is not handler and handler is not None:
            signal.signal(sig, handler)


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    """A real one-host Slurm cluster for the session (tests/slurm_cluster.py); skipped where it cannot start."""
    from tests import slurm_cluster as cluster

    yield from cluster.session_cluster(tmp_path_factory)


@pytest.fixture(scope="session")
def studio_home(tmp_path_factory) -> Path:
    """A workspace for the whole session with the demo model and datasets built in it."""
    home = tmp_path_factory.mktemp("studio-home")
    os.environ["STUDIO_HOME"] = str(home)
    from engine.trainer import demo

    demo.build_demo()
    return home


@pytest.fixture(scope="session")
def demo_paths(studio_home) -> dict:
    from engine.core import workspace as workspace_mod

    return workspace_mod.demo_paths()


@pytest.fixture
def artifacts_dir() -> Path:
    path = ROOT / "test-artifacts"
    path.mkdir(exist_ok=True)
    return path


def _cuda_available() -> bool:
    import shutil

    if not shutil.which("nvidia-smi"):
        return False
    import torch

    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    """Tests marked gpu run on a CUDA machine (bench/gpu_check.sh); elsewhere they are skipped, saying why.
    The longest test files come first (tests/xdist_groups.py), so xdist's workers end close together."""
    from tests import xdist_groups

    items[:] = xdist_groups.longest_first(items)
    if not any("gpu" in item.keywords for item in items) or _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run bench/gpu_check.sh on a GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def run_registry(tmp_path, monkeypatch) -> Path:
    """A private workspace and run registry per test, one CPU slot; no run of the test outlives it."""
    monkeypatch.setenv("STUDIO_HOME", str(tmp_path))
    monkeypatch.setenv("STUDIO_CPU_SLOTS", "1")
    yield tmp_path
    from engine.runs import registry as runs

    for rec in runs.list_runs(refresh_status=False):  # never leave a process behind, whatever failed
        if rec.status in ("running", "queued"):
            runs.stop(rec.id, grace_s=1)


# The reliability table (tests/tally_table.py): each xdist worker hands its rows to the controller at its end; the
# controller (or a plain pytest process) prints the summary.
def pytest_sessionfinish(session, exitstatus):
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        from tests import tally_table

        workeroutput[tally_table.KEY] = tally_table.dump()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` (scripts/test.sh): whole files per worker, the Slurm cluster's files as one unit,
    longest first (tests/xdist_groups.py)."""
    if config.getvalue("dist") == "loadfile":
        from tests import xdist_groups

        return xdist_groups.make_scheduler(config, log)
    return None


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    text = getattr(node, "workeroutput", {}).get("studio_reliability_table")
    if text:
        from tests import tally_table

        tally_table.merge(text)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    from tests import tally_table

    tally_table.write_summary(terminalreporter, os.environ.get("STUDIO_SOAK") == "1")
