"""Studio page benchmark: start to first page, RSS with a run active, event-to-drawn-point latency in a browser.

Usage: .venv/bin/python bench/ui_bench.py [--samples 20] [--repeats 5] [--baseline DIR] [--keep]
Prints a table with each measurement and its target (issue 6): first page < 5 s with no torch in the studio
process; studio RSS with a run active < 300 MB; event written -> point drawn p95 <= 1 s. Everything runs in a
temporary STUDIO_HOME on 127.0.0.1; only the processes this script started are stopped.

Start -> first page is timed from the `studio webui` process start to an HTTP 200 on `/` whose body is the studio
page, --repeats times, split by the lines the studio prints: python start + imports (up to the demo check's line),
page build (up to "studio: serving on"), launch -> first page served. --baseline DIR starts the studio from
another checkout of this repository (e.g. `git worktree add /tmp/ui-base <commit>`) with the same Python,
alternating with this checkout's, so both are measured under the same load.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from proc_cpu import cpu_s  # noqa: E402 - bench/, the script's folder

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
POINTS_JS = """() => { let n = 0; for (const p of document.querySelectorAll('#plot-loss g.mark-line path')) {
    n = Math.max(n, ((p.getAttribute('d') || '').match(/[ML]/g) || []).length); } return n; }"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def loads_torch(pid: int) -> bool:
    maps = Path(f"/proc/{pid}/maps").read_text()
    return "libtorch" in maps or "/torch/" in maps


PAGE_MARK = b"LLM Studio"  # the page's title (studio.i18n "title"), in the config gradio inlines into `/`
SPLIT = ("python start + imports", "page build", "launch -> first page served")


def git_label(root: Path) -> str:
    """The commit a checkout is at, '+ uncommitted changes' when the code the studio runs (engine/, studio/)
    differs from it."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True).stdout.strip()

    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "engine", "studio")
    return git("rev-parse", "--short", "HEAD") + (" + uncommitted changes" if dirty else "")


def start_studio(env: dict, port: int, root: Path = ROOT) -> tuple[subprocess.Popen, dict]:
    """Start `studio webui` from checkout ``root``; return it once `/` answers 200 with the studio page, with the
    times (s from process start) of: its first line (after imports), "serving on" (page built), the first page."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", "webui", "--port", str(port)],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    lines: list[tuple[float, str]] = []

    def read() -> None:  # drains stdout for the life of the process
        for raw in proc.stdout:
            lines.append((time.perf_counter() - t0, raw.decode(errors="replace").strip()))

    threading.Thread(target=read, daemon=True).start()
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"studio from {root} exited with {proc.returncode}: {[text for _, text in lines]}")
        try:
            body = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2).read()
        except OSError:  # not listening yet, or an HTTP error status
            time.sleep(0.05)
            continue
        served, cpu = time.perf_counter() - t0, cpu_s(proc.pid)
        if PAGE_MARK not in body:
            raise SystemExit(f"`/` of the studio from {root} answered 200 without {PAGE_MARK!r}")
        break
    time.sleep(0.1)  # the reader thread has the lines printed before the page was served
    first = lines[0][0] if lines else float("nan")
    serving = next((at for at, text in lines if text.startswith("studio: serving on")), float("nan"))
    return proc, {
        "total": served,
        SPLIT[0]: first,
        SPLIT[1]: serving - first,
        SPLIT[2]: served - serving,
        "cpu": cpu,
    }


def stop_studio(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def start_times(env: dict, roots: dict[str, Path], repeats: int) -> dict[str, list[dict]]:
    """Each checkout started and stopped ``repeats`` times, in turn, so the machine's load hits them alike."""
    out: dict[str, list[dict]] = {label: [] for label in roots}
    for i in range(repeats):
        for label, root in roots.items():
            proc, times = start_studio(env, free_port(), root)
            stop_studio(proc)
            out[label].append(times)
            print(
                f"[bench] start {i + 1}/{repeats} {label}: {times['total']:.2f} s, {times['cpu']:.2f} CPU s",
                flush=True,
            )
    return out


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s ({min(values):.2f}-{max(values):.2f})"


def latency_samples(url: str, run_dir: Path, n: int) -> list[float]:
    """Write one log event, time until the browser's loss line has one more vertex; n times."""
    from playwright.sync_api import sync_playwright

    from engine.core import events

    path = run_dir / "events.jsonl"
    events.append_event(path, "run_started", 0, total_steps=n + 1)
    events.append_event(path, "log", 1, loss=3.0, learning_rate=1e-3, progress=0.0)
    out = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(url)
        page.wait_for_selector("#run-picker input", timeout=60_000)
        # The page re-attaches to the active run on load; pick our run only after that has happened.
        page.wait_for_function("() => document.querySelector('#run-picker input').value !== ''", timeout=30_000)
        page.fill("#run-picker input", run_dir.name)
        page.keyboard.press("Enter")
        page.wait_for_function(f"({POINTS_JS})() >= 1", timeout=30_000)
        for i in range(n):
            before = page.evaluate(POINTS_JS)
            time.sleep(0.37 * (1 + i % 3))  # arrive at varying phases of the 1 s timer
            t0 = time.perf_counter()
            events.append_event(path, "log", i + 2, loss=3.0 / (i + 2), learning_rate=1e-3, progress=(i + 1) / n)
            page.wait_for_function(f"({POINTS_JS})() > {before}", timeout=10_000, polling=20)
            out.append(time.perf_counter() - t0)
        browser.close()
    return out


def p95(values: list[float]) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(0.95 * (len(s) - 1)))]


def load_line() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def write_results(rows: list[tuple], starts: dict[str, list[dict]], labels: dict[str, str], load: str) -> None:
    """bench/results/ui.md: the tables with the date, the machine and its load while measured."""
    import platform

    out = ROOT / "bench" / "results" / "ui.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    n = len(next(iter(starts.values())))
    lines = [
        "# Studio page: start, memory, live latency (bench/ui_bench.py)",
        "",
        f"- date: {time.strftime('%Y-%m-%dT%H:%M')}",
        f"- machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; Python "
        f"{platform.python_version()}; load average (1, 5, 15 min) {load}",
        "",
        "| measure | value | target | met |",
        "|---|---:|---:|---|",
        *[f"| {name} | {value} | {target} | {'yes' if ok else 'NO'} |" for name, value, target, ok in rows],
        "",
        f"Start -> first page served (HTTP 200 on `/` with the page), median (min-max) of {n} starts; the code "
        "started in turn under the same load. The last column is the CPU time the studio process used until then "
        "(user + system), which other work on the machine moves far less than the wall time:",
        "",
        f"| code | total | {' | '.join(SPLIT)} | studio CPU time |",
        "|---|---:|" + "---:|" * (len(SPLIT) + 1),
        *[
            f"| {label} ({labels[label]}) | {spread([t['total'] for t in times])} | "
            + " | ".join(spread([t[k] for t in times]) for k in (*SPLIT, "cpu"))
            + " |"
            for label, times in starts.items()
        ],
        "",
    ]
    out.write_text("\n".join(lines), encoding="utf-8")
    print(f"[bench] wrote {out}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=5, help="starts timed per checkout (default 5)")
    ap.add_argument("--baseline", type=Path, help="another checkout of this repository to time the start of too")
    ap.add_argument("--keep", action="store_true", help="keep the temporary workspace")
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error("--repeats must be at least 1")
    if args.baseline and not (args.baseline / "engine" / "cli.py").is_file():
        ap.error(f"--baseline {args.baseline} is not a checkout of this repository (no engine/cli.py)")
    home = Path(tempfile.mkdtemp(prefix="studio-bench-"))
    env = {
        **os.environ,
        "STUDIO_HOME": str(home),
        "GRADIO_ANALYTICS_ENABLED": "False",
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "STUDIO_FORCE_CPU": os.environ.get("STUDIO_FORCE_CPU", "1"),
    }
    env.pop("STUDIO_AUTH", None)
    os.environ.update({"STUDIO_HOME": str(home)})
    subprocess.run(
        [sys.executable, "-m", "engine.cli", "demo"], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL
    )  # built once, so the start time measures the studio alone
    roots = {"this checkout": ROOT}
    if args.baseline:
        roots = {"baseline": args.baseline.resolve(), **roots}
    labels = {label: git_label(root) for label, root in roots.items()}
    load = load_line()
    starts = start_times(env, roots, args.repeats)
    load += f" before, {load_line()} after the starts"
    first_page = statistics.median(t["total"] for t in starts["this checkout"])
    port = free_port()
    proc, _ = start_studio(env, port)
    rows = [(f"start -> first page served (median of {args.repeats})", f"{first_page:.2f} s", "< 5 s", first_page < 5)]
    try:
        torch_in = loads_torch(proc.pid)
        rows.append(("torch loaded by studio", str(torch_in), "False", not torch_in))
        from engine.runs import registry as runs
        from engine.spec.schema import load_spec

        run_id = runs.submit(load_spec(home / "demo_spec.yaml"), name="bench")
        time.sleep(8)
        rss = rss_mib(proc.pid)
        rows.append(("studio RSS, run active", f"{rss:.0f} MiB", "< 300 MB", rss < 286))
        fake = home / "runs" / "bench-latency"
        fake.mkdir(parents=True, exist_ok=True)
        lat = latency_samples(f"http://127.0.0.1:{port}/", fake, args.samples)
        rows.append((f"event -> drawn point p95 (n={len(lat)})", f"{p95(lat):.2f} s", "<= 1 s", p95(lat) <= 1.0))
        rows.append(("event -> drawn point median", f"{sorted(lat)[len(lat) // 2]:.2f} s", "", True))
        runs.stop(run_id, grace_s=5)
    finally:
        stop_studio(proc)
    width = max(len(r[0]) for r in rows)
    print(f"{'measure'.ljust(width)}  {'value':>10}  {'target':>9}  ok")
    for name, value, target, ok in rows:
        print(f"{name.ljust(width)}  {value:>10}  {target:>9}  {'yes' if ok else 'NO'}")
    for label, times in starts.items():
        split = ", ".join(f"{k} {spread([t[k] for t in times])}" for k in (*SPLIT, "cpu"))
        print(f"start, {label} ({labels[label]}): {spread([t['total'] for t in times])}: {split}")
    write_results(rows, starts, labels, load)
    if not args.keep:
        import shutil

        shutil.rmtree(home, ignore_errors=True)
    return 0 if all(r[3] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
