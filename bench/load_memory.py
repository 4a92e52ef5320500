"""Studio memory under load: N clients poll the dashboard of a live run for T seconds; the studio's RSS is sampled.

Usage: .venv/bin/python bench/load_memory.py [--clients 20] [--seconds 300] [--every 3] [--baseline DIR]
                                             [--churn N] [--tracemalloc] [--arena-max N] [--write] [--note TEXT]

What it runs (the same load as tests/reliability/test_serving.py): a temporary STUDIO_HOME with the demo built, a
long real demo run (logging every step) submitted to the registry, `studio webui --no-demo` on 127.0.0.1, and
N gradio_client clients that each call the dashboard's timer endpoint (`/tick`, what an open page calls every 0.5 s)
then sleep 0.5 s, until T seconds have passed. The studio's RSS is read every --every seconds. Per phase it prints
the RSS at start/quarters/end, the late-vs-early quarter difference (the test's measure), the slope over the second
half (MiB/min), polls, errors, sessions opened and the log events the run had written (the data every session
holds grows with it). --churn N: each client leaves after N polls and comes back as a new gradio session, as
reloaded pages do (the studio keeps a closed session's state for a while).

--baseline DIR measures another checkout first (e.g. `git worktree add /tmp/rss-base <commit>`), started with the
same Python, each phase with a fresh run from step 0, so the two are compared under the same load and duration.
--tracemalloc starts the studio through this script under tracemalloc (no change to the product): every
--every*10 s and at the end it writes the top allocation sites grown since the first snapshot (after warm-up) to
--out/tracemalloc-phaseN.txt. --arena-max sets MALLOC_ARENA_MAX for the studio (glibc fragmentation check).
--write puts the table into bench/results/load_memory.md (with the date, the machine and its load average).
Only processes this script started are stopped (its studios by process group, its runs through the registry).
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OFFLINE = {
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mib(pid: int) -> float:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return float("nan")
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# ------------------------------------------------------------------------------------- traced studio (child)
def serve_traced(argv: list[str]) -> None:
    """Runs in the studio process: tracemalloc on, a thread writing the growth since the first snapshot, then
    `engine.cli` with ``argv`` exactly as `python -m engine.cli` would."""
    import runpy
    import tracemalloc

    out, every = Path(os.environ["LOAD_MEMORY_TRACE_OUT"]), float(os.environ["LOAD_MEMORY_TRACE_EVERY"])
    warmup = float(os.environ.get("LOAD_MEMORY_TRACE_WARMUP", "30"))
    state: dict = {"first": None, "n": 0}
    # One frame per allocation by default: deeper tracebacks (LOAD_MEMORY_TRACE_FRAMES) make the busy studio's
    # snapshots take minutes on a small machine.
    frames = int(os.environ.get("LOAD_MEMORY_TRACE_FRAMES", "1"))

    def dump(final: bool = False) -> None:
        if not tracemalloc.is_tracing():
            return
        snap = tracemalloc.take_snapshot().filter_traces(
            [
                tracemalloc.Filter(False, tracemalloc.__file__),
                tracemalloc.Filter(False, "<frozen importlib._bootstrap>"),
            ]
        )
        if state["first"] is None:
            state["first"] = snap
            return
        state["n"] += 1
        current, peak = tracemalloc.get_traced_memory()
        lines = [
            f"== snapshot {state['n']}{' (final)' if final else ''} at {time.strftime('%H:%M:%S')}: traced "
            f"{current / 2**20:.1f} MiB (peak {peak / 2**20:.1f}); RSS {rss_mib(os.getpid()):.0f} MiB",
            "-- top growth by line since the first snapshot:",
            *(str(s) for s in snap.compare_to(state["first"], "lineno")[:25]),
        ]
        for stat in snap.compare_to(state["first"], "traceback")[:5] if frames > 1 else []:
            lines.append(f"-- {stat.size_diff / 2**20:+.2f} MiB, {stat.count_diff:+d} blocks, from:")
            lines.extend("    " + line for line in stat.traceback.format(limit=12))
        with open(out, "a") as fh:
            fh.write("\n".join(lines) + "\n\n")

    def loop() -> None:
        # Tracing starts after the warm-up (imports, page build, the clients' first ticks): growth after that is
        # what we look for, and tracing the imports would slow the start past any timeout.
        time.sleep(warmup)
        tracemalloc.start(frames)
        dump()
        while True:
            time.sleep(every)
            dump()

    threading.Thread(target=loop, daemon=True, name="load-memory-trace").start()
    signal.signal(signal.SIGUSR1, lambda *_: dump(final=True))
    sys.argv = ["engine.cli", *argv]
    runpy.run_module("engine.cli", run_name="__main__", alter_sys=True)


# ------------------------------------------------------------------------------------------------- phases
STARTUP_S = 20  # a studio answers within ~5 s; tracing starts this long plus a quarter of the load (<= 30 s) after


def start_studio(root: Path, home: Path, port: int, label: str, args: argparse.Namespace, out_dir: Path):
    env = {k: v for k, v in os.environ.items() if k not in ("STUDIO_AUTH", "STUDIO_HOST", "STUDIO_PORT")}
    env.update(OFFLINE, STUDIO_HOME=str(home), PYTHONPATH=str(root))
    if args.arena_max:
        env["MALLOC_ARENA_MAX"] = str(args.arena_max)
    webui = ["webui", "--port", str(port), "--no-demo"]
    if args.tracemalloc:
        trace = out_dir / f"tracemalloc-{label}.txt"
        trace.unlink(missing_ok=True)
        env.update(
            LOAD_MEMORY_TRACE_OUT=str(trace),
            LOAD_MEMORY_TRACE_EVERY=str(args.every * 10),
            LOAD_MEMORY_TRACE_WARMUP=str(STARTUP_S + min(30.0, args.seconds / 4)),
        )
        cmd = [sys.executable, str(Path(__file__).resolve()), "--serve-traced", *webui]
    else:
        cmd = [sys.executable, "-m", "engine.cli", *webui]
    log = open(out_dir / f"studio-{label}.log", "wb")  # noqa: SIM115 - the child owns it
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 180
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"studio from {root} exited: {(out_dir / f'studio-{label}.log').read_text()[-2000:]}")
        try:
            urllib.request.urlopen(url + "/", timeout=2)
            return proc, url
        except urllib.error.HTTPError:
            return proc, url
        except OSError:
            time.sleep(0.3)
    stop_studio(proc)
    raise SystemExit(f"studio from {root} did not answer within 180 s")


def stop_studio(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass


def start_run(demo_paths: dict, seconds: float) -> str:
    """A long demo run, logging every step (as the test's live run), started by the real scheduler."""
    import yaml

    from engine.core import events
    from engine.runs import registry as runs

    data = yaml.safe_load(Path(demo_paths["example_spec"]).read_text())
    data["train"].update(max_steps=100_000, logging_steps=1, save_steps=100_000)
    data["data"]["max_samples"] = 64
    rid = runs.submit(data, name="load-memory")
    deadline = time.time() + 300
    while not any(e["type"] == "log" for e in events.read_all(runs.get(rid).events_path)):
        if time.time() > deadline or runs.get(rid).status in ("failed", "stopped", "finished"):
            raise SystemExit(f"run {rid} logged nothing: {runs.log_tail(rid)[-2000:]}")
        time.sleep(0.5)
    return rid


def poll(
    url: str, run_id: str, clients: int, seconds: float, every: float, pid: int, churn: int = 0, on_tick=None
) -> dict:
    """N clients calling /tick as the page does; RSS samples of ``pid`` every ``every`` s until they stop. With
    ``churn`` each client leaves after that many polls and comes back as a new session (a reloaded page)."""
    from gradio_client import Client

    errors: list[str] = []
    polls = [0] * clients
    points = [0] * clients
    sessions = [0] * clients
    stop_at = time.time() + seconds

    def client(i: int) -> None:
        try:
            c = None
            while time.time() < stop_at:
                if c is None or (churn and polls[i] % churn == 0):
                    c = Client(url + "/", verbose=False)
                    sessions[i] += 1
                out = c.predict(run_id, "step", 0.0, False, "en", api_name="/tick")
                polls[i] += 1
                plot = out[0]
                if isinstance(plot, dict) and isinstance(plot.get("value"), dict):
                    plot = plot["value"]
                if isinstance(plot, dict) and plot.get("data"):
                    points[i] = len(plot["data"])
                time.sleep(0.5)
        except Exception as exc:  # noqa: BLE001 - counted and reported
            errors.append(f"client {i}: {type(exc).__name__}: {exc}")

    t0 = time.time()
    samples = [(0.0, rss_mib(pid))]
    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    for th in threads:
        th.start()
    while any(th.is_alive() for th in threads):
        time.sleep(every)
        samples.append((time.time() - t0, rss_mib(pid)))
        if on_tick:
            on_tick(samples[-1])
    return {
        "samples": samples,
        "errors": errors,
        "polls": sum(polls),
        "points": max(points),
        "sessions": sum(sessions),
    }


def summarize(label: str, res: dict, events_written: int) -> dict:
    res["samples"] = [(t, v) for t, v in res["samples"] if v == v]  # NaN: the studio had gone
    rss = [v for _, v in res["samples"]]
    q = max(1, len(rss) // 4)
    early, late = sum(rss[q : 2 * q]) / q, sum(rss[-q:]) / q  # the test's measure: 2nd quarter vs last quarter
    half = res["samples"][len(rss) // 2 :]
    n = len(half)
    mt, mv = sum(t for t, _ in half) / n, sum(v for _, v in half) / n
    den = sum((t - mt) ** 2 for t, _ in half) or 1.0
    slope = sum((t - mt) * (v - mv) for t, v in half) / den * 60
    return {
        "label": label,
        "start": rss[0],
        "q1": rss[q],
        "mid": rss[len(rss) // 2],
        "end": rss[-1],
        "max": max(rss),
        "growth": late - early,
        "slope": slope,
        "polls": res["polls"],
        "errors": len(res["errors"]),
        "sessions": res["sessions"],
        "events": events_written,
        "points": res["points"],
    }


def phase(label: str, root: Path, home: Path, demo_paths: dict, args, out_dir: Path) -> dict:
    from engine.core import events
    from engine.runs import registry as runs

    print(f"[load_memory] {label}: starting a run and the studio from {root}", flush=True)
    rid = start_run(demo_paths, args.seconds)
    proc, url = start_studio(root, home, free_port(), label, args, out_dir)
    try:
        res = poll(
            url,
            rid,
            args.clients,
            args.seconds,
            args.every,
            proc.pid,
            churn=args.churn,
            on_tick=lambda s: (
                print(f"[load_memory] {label} t={s[0]:5.0f}s RSS {s[1]:6.1f} MiB", flush=True)
                if int(s[0]) % 30 < args.every
                else None
            ),
        )
        if args.tracemalloc:
            os.kill(proc.pid, signal.SIGUSR1)
            time.sleep(5)
    finally:
        stop_studio(proc)
        runs.stop(rid, grace_s=30)
    n_events = sum(1 for e in events.read_all(runs.get(rid).events_path) if e["type"] == "log")
    for err in res["errors"][:5]:
        print(f"[load_memory] {label} error: {err}", flush=True)
    row = summarize(label, res, n_events)
    (out_dir / f"rss-{label}.tsv").write_text("".join(f"{t:.1f}\t{v:.1f}\n" for t, v in res["samples"]))
    print(f"[load_memory] {label}: {row}", flush=True)
    return row


def git_label(root: Path) -> str:
    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=root, capture_output=True, text=True).stdout.strip()

    dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench/results")
    return git("rev-parse", "--short", "HEAD") + (" + uncommitted changes" if dirty else "")


HEAD = (
    "| code | RSS start | after 1st quarter | middle | end | max | late-vs-early quarter | slope 2nd half "
    "| polls | errors | sessions | log events (points drawn) |"
)


def table(rows: list[dict]) -> list[str]:
    lines = [HEAD, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r['label']} | {r['start']:.0f} MiB | {r['q1']:.0f} MiB | {r['mid']:.0f} MiB | {r['end']:.0f} MiB "
            f"| {r['max']:.0f} MiB | {r['growth']:+.1f} MiB | {r['slope']:+.2f} MiB/min | {r['polls']} "
            f"| {r['errors']} | {r['sessions']} | {r['events']} ({r['points']}) |"
        )
    return lines


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve-traced":
        serve_traced(sys.argv[2:])
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=300)
    ap.add_argument("--every", type=float, default=3.0, help="seconds between RSS samples")
    ap.add_argument("--baseline", type=Path, help="another checkout of this repository, measured first")
    ap.add_argument("--churn", type=int, default=0, help="each client becomes a new session after this many polls")
    ap.add_argument("--tracemalloc", action="store_true")
    ap.add_argument("--arena-max", type=int, default=0, help="MALLOC_ARENA_MAX for the studio (0: unset)")
    ap.add_argument(
        "--out",
        type=Path,
        default=Path(tempfile.gettempdir()) / "load-memory-out",
        help="studio logs, RSS samples (rss-phaseN.tsv) and tracemalloc reports",
    )
    ap.add_argument("--write", action="store_true", help="write bench/results/load_memory.md")
    ap.add_argument("--note", default="", help="a line for the results file (what changed, what else ran)")
    args = ap.parse_args()

    os.environ.update(OFFLINE)
    load_before = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    with tempfile.TemporaryDirectory(prefix="load-memory-") as tmp:
        home = Path(tmp) / "home"
        os.environ["STUDIO_HOME"] = str(home)
        from engine.core import workspace
        from engine.trainer import demo

        demo.build_demo()
        paths = workspace.demo_paths()
        out_dir = args.out
        out_dir.mkdir(parents=True, exist_ok=True)
        checkouts = ([("baseline " + git_label(args.baseline), args.baseline.resolve())] if args.baseline else []) + [
            ("this checkout " + git_label(ROOT), ROOT)
        ]
        rows = []
        for i, (label, root) in enumerate(checkouts):
            row = phase(f"phase{i}", root, home, paths, args, out_dir)
            row["label"] = label
            rows.append(row)
    load_after = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    lines = table(rows)
    print("\n".join(lines))
    if args.write:
        out = ROOT / "bench" / "results" / "load_memory.md"
        extra = f"MALLOC_ARENA_MAX={args.arena_max}; " if args.arena_max else ""
        out.write_text(
            "\n".join(
                [
                    "# Studio memory under load (bench/load_memory.py)",
                    "",
                    f"- date: {time.strftime('%Y-%m-%dT%H:%M')}",
                    f"- machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs (shared with "
                    f"other engineers); Python {platform.python_version()}; load average (1, 5, 15 min) before "
                    f"{load_before}, after {load_after}",
                    f"- load: {args.clients} gradio_client clients calling `/tick` of one live demo run (a log "
                    f"event every step) then sleeping 0.5 s, for {args.seconds:.0f} s per row, one row after the "
                    f"other, each with a fresh run; RSS sampled every {args.every:.0f} s. {extra}"
                    + (
                        f"Churn: each client leaves after {args.churn} polls and comes back as a new session. "
                        if args.churn
                        else ""
                    )
                    + ("tracemalloc on (slower; RSS includes its overhead)." if args.tracemalloc else ""),
                    *([f"- note: {args.note}"] if args.note else []),
                    "",
                    *lines,
                    "",
                    "late-vs-early quarter: mean RSS of the last quarter of the samples minus that of the second "
                    "(what tests/reliability/test_serving.py checks); slope: least-squares fit over the second half.",
                    "",
                ]
            )
        )
        print(f"[load_memory] wrote {out}")


if __name__ == "__main__":
    main()
