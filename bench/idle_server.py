"""How much CPU an idle ``studio webui`` spends with nobody on the page, with Studio's queue polling and gradio's own.

Usage: .venv/bin/python bench/idle_server.py [--repeats 3] [--seconds 30] [--out FILE.md]

Two studios serve the demo workspace (each its own temporary STUDIO_HOME) on 127.0.0.1, one with this checkout's
default (``studio.gradio_setup.queue_poll_s``: an idle queue looks for events every 20 ms) and one with
``STUDIO_QUEUE_POLL_S=0.001`` (gradio's own 1 ms). Both are started, answer their page, then sit for --seconds with no
browser open, while the script reads each server process's user + system CPU time from ``/proc/PID/stat`` (an
independent reading: the kernel's, not anything the studio reports). Rounds alternate which studio is read first.
The two servers share the machine, so compare the variants of one run, not runs on different days.
Only the processes this script started are stopped.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from proc_cpu import cpu_s  # noqa: E402 - bench/, the script's folder

from tests.e2e.conftest import Server  # noqa: E402

VARIANTS = {"studio (20 ms)": {}, "gradio's poll (1 ms)": {"STUDIO_QUEUE_POLL_S": "0.001"}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    env = {"HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_DISABLE_TELEMETRY": "1"}
    shares: dict[str, list[float]] = {name: [] for name in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="idle-server-") as tmp:
        servers: dict[str, Server] = {}
        try:
            for name, extra in VARIANTS.items():
                home = Path(tmp) / str(len(servers))
                home.mkdir()
                servers[name] = Server(home, env={**env, **extra})
            for srv in servers.values():
                srv.wait_up(600)
            time.sleep(5)  # let start-up work (demo build, first watchdog look) finish before reading
            for round_no in range(args.repeats):
                order = list(servers) if round_no % 2 == 0 else list(reversed(servers))
                before = {name: cpu_s(servers[name].proc.pid) for name in order}
                t0 = time.monotonic()
                time.sleep(args.seconds)
                wall = time.monotonic() - t0
                for name in order:
                    shares[name].append(100 * (cpu_s(servers[name].proc.pid) - before[name]) / wall)
        finally:
            for srv in servers.values():
                srv.stop()
    lines = [
        f"Idle `studio webui`, no browser, {args.seconds:.0f} s per round, {args.repeats} rounds "
        f"({os.cpu_count()} cores, load {os.getloadavg()[0]:.1f} at the end)",
        "",
        "| variant | % of one core (median) | rounds |",
        "|---|---:|---|",
    ]
    for name, vals in shares.items():
        lines.append(f"| {name} | {statistics.median(vals):.1f} | {' / '.join(f'{v:.1f}' for v in vals)} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
