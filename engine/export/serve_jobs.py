"""``studio serve``: an OpenAI-compatible server for a run or a model folder, as a registry run (tag ``serve``).
Light: stdlib, engine.export / engine.runs; the server itself is ``engine.trainer.serve`` (heavy).

``start_serve`` checks the source (a run with an adapter or a model, an adapter folder, a model folder) and the port
(free on 127.0.0.1) before anything is queued; ``ServeJob`` reads the run back (its URL from the ``serve_ready``
event) and stops it like any run (SIGTERM to its process group), from the CLI (Ctrl-C), the Export tab or the Runs tab.
"""

from __future__ import annotations

import argparse
import socket
import sys
import time
from pathlib import Path

from engine.core import events as ev
from engine.export import checks as xp
from engine.export import convert_plan as cp
from engine.export.checks import ExportError
from engine.export.jobs import job_record
from engine.export.messages import message
from engine.runs import registry as runs
from engine.runs.command_job import CommandJob, newest_jobs

SERVE_TAG = "serve"
MODULE = "engine.trainer.serve"
HOST = "127.0.0.1"


def port_free(port: int, host: str = HOST) -> bool:
    """Whether a server can bind ``port`` now (as the server does: connections in TIME_WAIT do not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = HOST) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def check_source(source: str) -> str:
    """The folder served (a model folder, or a run / adapter on its base); ExportError naming what is missing."""
    if cp.is_model_folder(source):
        return str(Path(source).expanduser().resolve())
    src = xp.resolve_source(source)
    return src.weights_dir


class ServeJob(CommandJob):
    what = "server"

    def __init__(self, run_id: str):
        rec, args = job_record(run_id, MODULE, "export.not_serve")
        self.run_id, self.source = rec.id, args[0]
        self.port = int(args[args.index("--port") + 1])
        self.events_path = Path(args[args.index("--events") + 1])
        self.log_path = rec.log_path

    def poll(self) -> dict:
        """{"state": queued|running(loading)|serving|stopped|failed, "url", "model", ...}."""
        rec = runs.get(self.run_id)
        ready = ev.last_event(self.events_path, ("serve_ready",)) if self.events_path.is_file() else None
        state = {"queued": "queued", "running": "running", "completed": "stopped", "stopped": "stopped"}.get(
            rec.status, "failed"
        )
        if state == "running" and ready:
            state = "serving"
        url = ready["payload"]["url"] if ready else f"http://{HOST}:{self.port}/v1"
        return {
            "run_id": self.run_id,
            "state": state,
            "url": url,
            "model": ready["payload"]["model"] if ready else None,
            "source": self.source,
            "error": rec.reason if state == "failed" else None,
            "log_path": str(self.log_path),
        }

    def wait_ready(self, timeout: float = 300.0, interval: float = 0.3) -> dict:
        deadline = time.time() + timeout
        while True:
            status = self.poll()
            if status["state"] not in ("queued", "running"):
                return status
            if time.time() > deadline:
                raise TimeoutError(f"server {self.run_id} still {status['state']} after {timeout} s")
            time.sleep(interval)

    def stop(self, grace: float = 10.0) -> dict:
        runs.stop(self.run_id, grace_s=grace)
        return self.poll()


def start_serve(source: str, port: int | None = None) -> ServeJob:
    check_source(source)
    port = free_port() if not port else int(port)
    if not port_free(port):
        raise ExportError(message("export.port_busy", port=port))
    argv = [sys.executable, "-m", MODULE, source, "--host", HOST, "--port", str(port)]
    argv += ["--events", "{run_dir}/events.jsonl"]
    name = f"serve {Path(str(source).rstrip('/')).name} :{port}"
    return ServeJob(runs.submit_command(argv, name=name, tags=[SERVE_TAG]))


def list_servers(limit: int = 10) -> list[ServeJob]:
    return newest_jobs(SERVE_TAG, ServeJob, ExportError, limit)


def curl_example(url: str, model: str) -> str:
    return (
        f"curl {url}/chat/completions -H 'Content-Type: application/json' "
        f'-d \'{{"model": "{model}", "messages": [{{"role": "user", "content": "Hello"}}]}}\''
    )


def cli(argv: list[str]) -> int:
    """``studio serve``: serves until Ctrl-C (then stops the run); 0 on a clean stop, 1 failed, 2 bad input."""
    ap = argparse.ArgumentParser(prog="studio serve", description="Serve a run or model with an OpenAI-style API.")
    ap.add_argument("source", metavar="RUN_ID|DIR", help="a run id or folder, an adapter folder or a model folder")
    ap.add_argument("--port", type=int, default=8000, help="port on 127.0.0.1 (default 8000; 0: any free port)")
    args = ap.parse_args(argv)
    try:
        job = start_serve(args.source, args.port)
    except ExportError as exc:
        print(f"studio serve: {exc}", file=sys.stderr)
        return 2
    print(f"[serve] run {job.run_id}: loading {args.source}", flush=True)
    try:
        status = job.wait_ready()
        if status["state"] != "serving":
            print(f"studio serve: {status['state']}: {status['error']} (log: {status['log_path']})", file=sys.stderr)
            return 1
        print(f"serving {status['model']} at {status['url']}", flush=True)
        print(curl_example(status["url"], status["model"]), flush=True)
        print("Ctrl-C stops it (or `studio runs stop " + job.run_id + "`)", flush=True)
        while job.poll()["state"] == "serving":
            time.sleep(0.5)
    except KeyboardInterrupt:
        job.stop()
        print("stopped", flush=True)
        return 0
    status = job.poll()
    return 0 if status["state"] == "stopped" else 1
