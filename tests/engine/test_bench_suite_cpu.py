"""bench/suite_cpu.py (issue 29): a command's CPU by kind of process, read from /proc while it runs.

The figure is checked against the child's own count of its CPU (``time.process_time`` printed at its end), not
against the bench: a process the bench saw start is counted whole, less at most what it used after the last read."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import suite_cpu  # noqa: E402 - bench/ is not a package

# A child whose command line names it ("engine.trainer.probe" in a comment): CPU spent in two grandchildren too,
# each reaped before the child ends, so each is read by the bench on its own.
PROBE = (
    "# engine.trainer.probe\n"
    "import subprocess, sys, time\n"
    "spin = 'import time\\nt = time.process_time()\\nwhile time.process_time() - t < 0.6: pass'\n"
    "spin += '\\n# engine.trainer.spin'\n"
    "for _ in range(2):\n"
    "    subprocess.run([sys.executable, '-c', spin], check=True)\n"
    "t = time.process_time()\n"
    "while time.process_time() - t < 1.2: pass\n"
    "print(f'CPU {time.process_time():.3f}', flush=True)\n"
)


def test_kind_of_names_the_processes_the_suite_starts():
    assert suite_cpu.kind_of("/v/bin/python -m engine.trainer.train /r/spec.yaml --run-dir /r") == "trainer train"
    assert suite_cpu.kind_of("/v/bin/python -m engine.runs.runner --detach /r") == "run wrapper (engine.runs.runner)"
    assert suite_cpu.kind_of("/v/bin/python -m engine.cli webui --port 5") == "studio server (studio webui)"
    assert suite_cpu.kind_of("/usr/lib/chromium/chromium --type=renderer") == "browser (chromium)"
    assert suite_cpu.kind_of("/usr/sbin/slurmctld -D") == "Slurm daemons and steps"
    assert suite_cpu.kind_of("[kworker/0:1]") == "other"
    # a path in the arguments does not name the program
    cli = "/v/bin/python -m engine.cli train /tmp/pytest-of-root/pytest-3/test_slurm_x0/spec.yaml"
    assert suite_cpu.kind_of(cli) == "studio CLI"
    assert suite_cpu.kind_of("/v/bin/python -m pytest -q tests/engine/test_slurm.py") == "pytest"


def test_a_commands_cpu_is_counted_by_kind(tmp_path, capfd):
    res = suite_cpu.run([sys.executable, "-c", PROBE], interval=0.2)
    assert res["rc"] == 0
    own = float(capfd.readouterr().out.split("CPU ")[1].split()[0])  # the probe's own CPU (not its children's)
    probe_s, probe_n = res["kinds"]["trainer probe"]
    assert probe_n == 1
    assert own - 0.25 <= probe_s <= own + 0.05, (probe_s, own)
    spin_s, spin_n = res["kinds"]["trainer spin"]
    assert spin_n == 2 and 1.2 - 0.5 <= spin_s <= 1.2 + 0.3, res["kinds"]
    text = suite_cpu.table(res)
    assert "| trainer probe |" in text and "| trainer spin |" in text
    assert text.splitlines()[0].endswith("counted below.")
    # each process is put on the test that started it: pytest names this one in the environment the probe inherits
    here = os.environ["PYTEST_CURRENT_TEST"].rsplit(" (", 1)[0]
    assert here.endswith("::test_a_commands_cpu_is_counted_by_kind"), here
    assert res["tests"][here]["trainer probe"] == probe_s and res["tests"][here]["trainer spin"] == spin_s
    assert f"| {here} | {probe_s + spin_s:.0f} | trainer" in text, text  # a test beside it may add to the file's row


# A grandchild that names itself, burns CPU, says how much, and waits for its stdin to close.
NAMED = (
    "import ctypes, sys, time\n"
    "ctypes.CDLL(None).prctl(15, b'studio-cputest', 0, 0, 0)\n"  # PR_SET_NAME: its command name in /proc
    "t = time.process_time()\n"
    "while time.process_time() - t < 0.8: pass\n"
    "print(f'CPU {time.process_time():.3f}', flush=True)\n"
    "sys.stdin.read()\n"
)


def test_tree_cpu_counts_the_named_processes_under_a_root():
    """bench/proc_cpu.tree_cpu_s (bench/page_events.py's browser CPU): a named grandchild's CPU, read while it runs,
    against its own count; a root that is not its ancestor and another name count nothing."""
    import subprocess

    import proc_cpu

    middle = subprocess.Popen(
        [sys.executable, "-c", f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {NAMED!r}])"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        own = float(middle.stdout.readline().split()[1])
        got = proc_cpu.tree_cpu_s(middle.pid, "studio-cputest")
        assert own - 0.05 <= got <= own + 0.3, (got, own)
        assert proc_cpu.tree_cpu_s(middle.pid, "no-such-name") == 0.0
        sibling = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
        try:  # a root the named process is not under
            assert proc_cpu.tree_cpu_s(sibling.pid, "studio-cputest") == 0.0
        finally:
            sibling.stdin.close()
            sibling.wait(timeout=60)
    finally:
        middle.stdin.close()
        middle.wait(timeout=60)


def test_a_run_process_without_the_tests_name_is_put_on_its_workspace(tmp_path):
    """A run's processes get an explicit environment (engine.runs.launch.subprocess_env) without PYTEST_CURRENT_TEST:
    its STUDIO_HOME, under the test's temporary folder, names whose it is."""
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env["STUDIO_HOME"] = str(tmp_path / "home")
    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass\n# engine.trainer.homespin"
    res = suite_cpu.run(["env", "-i", *(f"{k}={v}" for k, v in env.items()), sys.executable, "-c", spin], 0.1)
    assert res["rc"] == 0
    assert any(q.startswith("pytest-of-") for q in tmp_path.parts), tmp_path  # the layout the label is read from
    assert res["tests"][f"home {tmp_path.name}"]["trainer homespin"] > 0.3, res["tests"]
