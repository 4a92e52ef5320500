"""Hold the machine's cores busy while the test suite runs (``scripts/test.sh --under-load``).

Starts N processes (default 2: both cores of the development machine) that spin on arithmetic until this process is
stopped (SIGTERM / SIGINT / its parent shell ending), so every timing assumption of the suite meets a machine whose
cores are taken, as CI's shared runners and a developer's busy laptop are. Ends its own children only.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys


def spin() -> None:
    x = 0
    while True:
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    procs = [multiprocessing.Process(target=spin, daemon=True) for _ in range(n)]
    for p in procs:
        p.start()
    print(f"[busy] {n} spinning processes: {' '.join(str(p.pid) for p in procs)} (parent {os.getpid()})", flush=True)

    def stop(*_):
        for p in procs:
            p.terminate()
        for p in procs:
            p.join(5)
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while True:
        signal.pause()


if __name__ == "__main__":
    raise SystemExit(main())
