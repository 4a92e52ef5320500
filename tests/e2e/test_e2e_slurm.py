"""Slurm runs in the page like local runs (issue 17): on the session's real one-host Slurm cluster
(tests/slurm_cluster.py), a person submits the demo from the Train form with launch target slurm, sees its job id
and state go to running and then completed with the loss curve and the RAM chart drawn, finds the job in the Runs
tab and merges the run with the Export tab's button; a second cluster run stopped with the page's Stop reads
cancelled and names its last checkpoint. Skipped where Slurm cannot start (as tests/engine/test_slurm.py)."""

from __future__ import annotations

import re
import time

import pytest

from tests.e2e.conftest import Server, type_field
from tests.e2e.test_walking_skeleton import _wait_loss_points, merge_in_export_tab

pytestmark = pytest.mark.slow  # a real cluster, server and browser

ID_RE = r"\d{8}-\d{6}-[0-9a-f]+"
_RAM_POINTS_JS = """() => { let n = 0;
  for (const p of document.querySelectorAll('#plot-gpu-mem g.mark-line path')) {
    n = Math.max(n, ((p.getAttribute('d') || '').match(/[ML]/g) || []).length); }
  return n; }"""


@pytest.fixture(scope="module")
def cluster_server(slurm_cluster, tmp_path_factory):
    """A studio whose runs may go to the cluster: the shared run folder and partition set (SLURM_CONF comes with
    the session's cluster)."""
    shared = tmp_path_factory.mktemp("slurm-shared")
    srv = Server(
        tmp_path_factory.mktemp("e2e-slurm-home"),
        env={"STUDIO_SLURM_SHARED": str(shared), "STUDIO_SLURM_PARTITION": "debug"},
    )
    try:
        srv.wait_up()
        yield srv
    finally:
        srv.stop()
        jobs = slurm_cluster.run("squeue", "-h", "-o", "%i", check=False).stdout.split()
        if jobs:  # a job this module's runs left behind (tests run one at a time: nothing else is queued)
            slurm_cluster.run("scancel", *jobs, check=False)


@pytest.fixture
def cluster_page(browser, cluster_server):
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    pg = ctx.new_page()
    pg.goto(cluster_server.url)
    pg.wait_for_selector("#start-btn:not([disabled])", timeout=120_000)
    yield pg
    ctx.close()


def _fill(page, widget: str, value: str) -> None:
    type_field(page, f"#{widget} input", value)  # after the field is drawn: a just-opened section re-sets it


def _submit_to_slurm(page, name: str, steps: int) -> str:
    """Fill the form for a cluster run of the demo and press Start; the run's id."""
    if not page.locator("#f-output-run-name input").is_visible():
        page.click("#sec-output >> text=Output")
    _fill(page, "f-output-run-name", name)
    _fill(page, "f-train-max-steps", str(steps))
    if not page.locator("#f-launch-target input").is_visible():
        page.click("#sec-launch >> text=Launch")
    page.click("#f-launch-target input")
    page.get_by_role("option", name="slurm", exact=True).click()
    page.wait_for_function("document.querySelector('#f-launch-target input').value === 'slurm'", timeout=90_000)
    try:
        page.wait_for_selector("#start-btn:not([disabled])", timeout=90_000)
    except Exception as exc:  # the form refuses: say what it says
        raise AssertionError(f"Start stays disabled: {page.inner_text('#spec-problems')}") from exc
    before = re.findall(ID_RE, page.inner_text("#action-msg"))
    page.click("#start-btn")
    try:
        page.wait_for_function(
            "([re, before]) => { const m = document.querySelector('#action-msg').innerText"
            ".match(new RegExp('Started run (' + re + ')')); return !!m && !before.includes(m[1]); }",
            arg=[ID_RE, before],
            timeout=60_000,
        )
    except Exception as exc:  # refused at Start (sbatch, the shared folder): say what the page says
        raise AssertionError(f"not started: {page.inner_text('#action-msg')}") from exc
    return re.search(f"Started run ({ID_RE})", page.inner_text("#action-msg")).group(1)


def _wait_status(page, run_id: str, *parts: str, timeout_ms: int = 240_000) -> str:
    """Wait until the dashboard's status line names the run and says every one of ``parts``; the line."""
    page.wait_for_function(
        "([id, parts]) => { const s = document.querySelector('#run-status').innerText;"
        " return s.includes(id) && parts.every(p => s.includes(p)); }",
        arg=[run_id, list(parts)],
        timeout=timeout_ms,
    )
    return page.inner_text("#run-status")


def test_a_cluster_run_from_the_page_runs_completes_and_merges(cluster_page, shots):
    page = cluster_page
    run_id = _submit_to_slurm(page, "on-the-cluster", steps=4)
    status = _wait_status(page, run_id, "Slurm job", ": running")
    job = re.search(r"Slurm job (\d+)", status).group(1)
    status = _wait_status(page, run_id, f"Slurm job {job}: completed")
    assert status.split("·")[1].strip() == "completed", status  # the run's own status beside its job's
    assert _wait_loss_points(page, 4) >= 4, "the loss curve of the 4 steps was not drawn"
    page.wait_for_function(f"({_RAM_POINTS_JS})() >= 2", timeout=90_000)  # the node's samples: the RAM chart
    page.screenshot(path=str(shots / "slurm-completed.png"), full_page=True)

    page.get_by_role("tab", name="Runs").click()  # its row: the job and its state in the cluster column
    deadline, want = time.time() + 60, f"Slurm job {job}: completed"
    while True:
        page.click("#runs-refresh")
        page.wait_for_timeout(1_500)  # between polls of the condition below
        rows = page.locator("#runs-table").get_by_role("row").all_inner_texts()
        if any(run_id in r and want in r for r in rows):
            break
        assert time.time() < deadline, rows

    merged = merge_in_export_tab(page, run_id, timeout=240_000)
    page.wait_for_function(  # the merged model is listed among the recent merges
        "(path) => (document.querySelector('#export-recent')?.innerText ?? '').includes(path)",
        arg=merged,
        timeout=90_000,
    )
    assert "verification" in page.inner_text("#export-result")


def test_a_cluster_run_stopped_from_the_page_reads_cancelled_with_its_checkpoint(cluster_page, shots):
    page = cluster_page
    run_id = _submit_to_slurm(page, "stopped-on-the-cluster", steps=100000)
    status = _wait_status(page, run_id, ": running")
    job = re.search(r"Slurm job (\d+)", status).group(1)
    assert _wait_loss_points(page, 1, timeout_ms=240_000) >= 1  # it trains: there is a step to save
    page.click("#stop-btn")
    page.wait_for_function(
        "(id) => { const s = document.querySelector('#action-msg').innerText;"
        " return s.includes(id) && s.includes('checkpoint saved at'); }",
        arg=run_id,
        timeout=240_000,
    )
    saved = page.inner_text("#action-msg")
    status = _wait_status(page, run_id, f"Slurm job {job}: cancelled")
    page.screenshot(path=str(shots / "slurm-cancelled.png"), full_page=True)
    assert "checkpoint-" in saved and "stopped" in status, (saved, status)
