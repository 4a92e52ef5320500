"""Where a command's CPU goes, by kind of process: the trainers, the browser, the studio servers, the test workers...

Usage: python3 bench/suite_cpu.py [--interval 1] [--out FILE.md] [-- COMMAND ...]
(default command: ``bash scripts/test.sh``, the whole suite). Standard library only, so it runs on a fresh clone
before ``.venv`` exists (``-- bash .ci/run``: CI's run, its set-up included).

Written for issue 29 (the suite's time on 2 cores): the suite is CPU-bound (a third xdist worker made it slower), so
the way to a shorter run is less CPU, and this says whose. While COMMAND runs, every process on the machine is read
from /proc every --interval seconds (user + system time, children not included); at the end each process counts the
CPU it used after it was first seen (all of it for one started meanwhile), grouped by kind (``KINDS``: the first
marker found in its command line). A process that ends between two reads loses what it used since the last read (at
most --interval seconds each): the table is a lower bound. The machine's CPU in the same time (from /proc/stat) is
given beside it, so what no process accounts for shows. Nothing is stopped but COMMAND, and only if interrupted.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

from proc_cpu import CLK_TCK as HZ
from proc_cpu import start_and_ticks

ROOT = Path(__file__).resolve().parents[1]

# (marker in the command line, kind): the first that matches names the process; "engine.trainer.X" is "trainer X".
# Markers name the program, not a path: the tests' temporary folders (/tmp/pytest-of-*/test_slurm...) are in many
# command lines.
KINDS = (
    ("engine.runs.runner", "run wrapper (engine.runs.runner)"),
    (" webui", "studio server (studio webui)"),
    ("chromium", "browser (chromium)"),
    ("playwright/driver", "browser driver (playwright)"),
    ("exec(eval(sys.stdin", "test worker (xdist)"),
    ("engine.cli", "studio CLI"),
    ("bin/accelerate ", "accelerate launch"),
    ("accelerate.commands", "accelerate launch"),
    (" -m pytest", "pytest"),
    ("bin/pytest", "pytest"),
    ("slurmctld", "Slurm daemons and steps"),
    ("slurmd", "Slurm daemons and steps"),
    ("slurmstepd", "Slurm daemons and steps"),
    ("munged", "Slurm daemons and steps"),
    (" -m pip", "pip"),
    ("bin/pip", "pip"),
)


# Started once and used by many tests: not put on the test that happened to start them.
SHARED_KINDS = (
    "browser (chromium)",
    "browser driver (playwright)",
    "test worker (xdist)",
    "studio server (studio webui)",
)


def kind_of(cmdline: str) -> str:
    if "engine.trainer." in cmdline:
        return "trainer " + cmdline.split("engine.trainer.", 1)[1].split()[0]
    for marker, kind in KINDS:
        if marker in cmdline:
            return kind
    return "other"


def _cmdline(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            text = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        if text:
            return text
        with open(f"/proc/{pid}/comm") as f:  # a kernel thread
            return f"[{f.read().strip()}]"
    except OSError:
        return ""


def _test_of(pid: str) -> str:
    """The test that started the process, as ``file::name``: pytest sets ``PYTEST_CURRENT_TEST`` in its environment
    and children inherit it. A run's processes get an explicit environment without it (engine.runs.launch
    ``subprocess_env``); their workspace then says whose they are: a test's own (its temporary folder, named after the
    test, as ``home <folder>``) or a session's shared one (``home studio-home0``, ...). "" for a process started
    under no test."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)
    except OSError:
        return ""
    test = env.get(b"PYTEST_CURRENT_TEST", b"").decode(errors="replace")
    if test:
        return test.rsplit(" (", 1)[0]
    home = env.get(b"STUDIO_HOME", b"").decode(errors="replace")
    parts = Path(home).parts
    for i, part in enumerate(parts):  # /tmp/pytest-of-USER/pytest-N[/popen-gwK]/<folder>/...
        if part.startswith("pytest-of-"):
            rest = [q for q in parts[i + 2 :] if not q.startswith("popen-gw")]
            return "home " + rest[0] if rest else ""
    return ""


def _machine_ticks() -> tuple[int, int]:
    """(busy, total) ticks of all CPUs since boot."""
    with open("/proc/stat") as f:
        vals = [int(v) for v in f.readline().split()[1:9]]
    idle = vals[3] + vals[4]
    return sum(vals) - idle, sum(vals)


class Sampler:
    """Per process: its kind, its ticks when first seen (0 if it started after the sampler), its last ticks and the
    test that started it."""

    def __init__(self) -> None:
        self.procs: dict[tuple[str, str], list] = {}
        self.first = True

    def read(self) -> None:
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                start, ticks = start_and_ticks(pid)
            except OSError:  # gone
                continue
            row = self.procs.get((pid, start))
            if row is None:
                self.procs[(pid, start)] = [kind_of(_cmdline(pid)), ticks if self.first else 0, ticks, _test_of(pid)]
            else:
                row[2] = ticks
        self.first = False

    def by_kind(self) -> dict[str, tuple[float, int]]:
        """CPU seconds and number of processes with any CPU, per kind."""
        out: dict[str, list] = defaultdict(lambda: [0.0, 0])
        for kind, first, last, _test in self.procs.values():
            if last > first:
                out[kind][0] += (last - first) / HZ
                out[kind][1] += 1
        return {k: (v[0], v[1]) for k, v in out.items()}

    def by_test(self) -> dict[str, dict[str, float]]:
        """CPU seconds of the processes each test started (its own and its fixtures' set-up), per kind: the browser,
        the session servers and the workers are shared by many tests and left out."""
        out: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        for kind, first, last, test in self.procs.values():
            if test and last > first and kind not in SHARED_KINDS:
                out[test][kind] += (last - first) / HZ
        return out


def run(command: list[str], interval: float) -> dict:
    sampler = Sampler()
    sampler.read()
    busy0, total0 = _machine_ticks()
    t0 = time.monotonic()
    done = threading.Event()

    def loop() -> None:
        while not done.wait(interval):
            sampler.read()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    proc = subprocess.Popen(command, cwd=ROOT)
    try:
        rc = proc.wait()
    except KeyboardInterrupt:
        proc.terminate()
        rc = proc.wait()
    done.set()
    thread.join()
    sampler.read()
    busy1, total1 = _machine_ticks()
    wall = time.monotonic() - t0
    return {
        "command": command,
        "rc": rc,
        "wall_s": wall,
        "cores": os.cpu_count() or 1,
        "machine_busy_s": (busy1 - busy0) / HZ,
        "machine_total_s": (total1 - total0) / HZ,
        "kinds": sampler.by_kind(),
        "tests": sampler.by_test(),
    }


def table(res: dict) -> str:
    kinds = sorted(res["kinds"].items(), key=lambda kv: -kv[1][0])
    counted = sum(s for s, _ in res["kinds"].values())
    busy = res["machine_busy_s"]
    command = " ".join(res["command"]).replace("\n", "; ")
    lines = [
        f"`{command}`: exit {res['rc']}, {res['wall_s'] / 60:.1f} min on {res['cores']} cores; the "
        f"machine's CPUs were busy {busy / 60:.1f} of {res['machine_total_s'] / 60:.1f} CPU-minutes "
        f"({100 * busy / max(res['machine_total_s'], 1e-9):.0f}%), {counted / 60:.1f} of them counted below.",
        "",
        "| kind of process | CPU min | share of counted | processes | CPU s each |",
        "|---|---:|---:|---:|---:|",
    ]
    for kind, (secs, n) in kinds:
        lines.append(f"| {kind} | {secs / 60:.2f} | {100 * secs / max(counted, 1e-9):.1f}% | {n} | {secs / n:.1f} |")
    return "\n".join(lines) + "\n" + by_test_table(res.get("tests") or {})


def by_test_table(tests: dict, top: int = 40) -> str:
    """The test files, then the tests, whose own processes (trainers, CLI commands, Slurm, ...) used the most CPU."""
    if not tests:
        return ""
    files: dict[str, float] = defaultdict(float)
    for test, kinds in tests.items():
        files[test.split("::", 1)[0]] += sum(kinds.values())
    lines = ["", "| test file (or workspace) | CPU min of the processes its tests started |", "|---|---:|"]
    lines += [f"| {f} | {s / 60:.2f} |" for f, s in sorted(files.items(), key=lambda kv: -kv[1])[:top]]
    lines += ["", "| test | CPU s | of which |", "|---|---:|---|"]
    ranked = sorted(tests.items(), key=lambda kv: -sum(kv[1].values()))[:top]
    for test, kinds in ranked:
        parts = ", ".join(f"{k} {s:.0f}" for k, s in sorted(kinds.items(), key=lambda kv: -kv[1]) if s >= 1)
        lines.append(f"| {test} | {sum(kinds.values()):.0f} | {parts} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = ["bash", "scripts/test.sh"]
    if "--" in argv:
        at = argv.index("--")
        argv, command = argv[:at], argv[at + 1 :] or command
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--interval", type=float, default=1.0, help="seconds between two reads of /proc")
    ap.add_argument("--out", type=Path, help="also write the table (markdown) here")
    args = ap.parse_args(argv)
    res = run(command, args.interval)
    text = table(res)
    print(text)
    if args.out:
        args.out.write_text(text)
    return res["rc"]


if __name__ == "__main__":
    sys.exit(main())
