"""``studio serve``: an OpenAI-compatible server for a run or a model folder, as a registry run (tag ``serve``).
Light: stdlib, engine.export / engine.runs; the server itself is ``engine.trainer.serve`` (heavy).

``start_serve`` checks the source (a run with an adapter or a model, an adapter folder, a model folder), the host,
the port (free there) and the key (``engine.export.serve_rules``: a host that is not loopback needs ``--api-key-env
NAME``, whose value the scheduler hands to the server in memory) before anything is queued; ``ServeJob`` reads the
run back (its URL from the ``serve_ready`` event) and stops it like any run (SIGTERM to its process group), from the
CLI (Ctrl-C), the Export tab or the Runs tab.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time
from pathlib import Path

from engine.core import events as ev
from engine.core import member_secrets
from engine.export import convert_plan as cp
from engine.export import serve_rules as rules
from engine.export import sources
from engine.export.checks import ExportError
from engine.export.messages import message
from engine.jobs.command_job import CommandJob, job_record, newest_jobs
from engine.runs import registry as runs
from engine.runs.scheduler import SERVE_TAG  # its runs take no CPU slot

MODULE = "engine.trainer.serve"
HOST = rules.HOST


def port_free(port: int, host: str = HOST) -> bool:
    """Whether a server can bind ``port`` now (as the server does: connections in TIME_WAIT do not count)."""
    return rules.bind_problem(host, port) is None


def free_port(host: str = HOST) -> int:
    family, _, _, _, address = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)[0]
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind(address)
        return s.getsockname()[1]


def check_source(source: str) -> str:
    """The folder served (a model folder, or a run / adapter on its base); ExportError naming what is missing."""
    if cp.is_model_folder(source):
        folder = config_dir = str(Path(source).expanduser().resolve())
    else:
        src = sources.resolve_source(source)
        folder, config_dir = src.weights_dir, (src.base if src.kind == "adapter" else src.weights_dir)
    try:
        config = json.loads((Path(config_dir) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        config = {}
    if isinstance(config, dict) and isinstance(config.get("vision_config"), dict):  # LLaVA, Qwen2-VL, ...
        raise ExportError(message("export.serve_vision", source=source, model_type=config.get("model_type", "?")))
    return folder


class ServeJob(CommandJob):
    what = "server"

    def __init__(self, run_id: str):
        rec, args = job_record(run_id, MODULE, ExportError, message("export.not_serve", id=run_id))
        self.run_id, self.source = rec.id, args[0]
        self.port = int(args[args.index("--port") + 1])
        self.host = args[args.index("--host") + 1] if "--host" in args else HOST
        self.key_env = args[args.index("--api-key-env") + 1] if "--api-key-env" in args else None
        self.events_path = Path(args[args.index("--events") + 1])
        self.log_path = rec.log_path

    def poll(self) -> dict:
        """{"state": queued|running(loading)|serving|stopped|failed, "url", "model", "key_env", ...}."""
        rec = runs.get(self.run_id)
        ready = ev.last_event(self.events_path, ("serve_ready",)) if self.events_path.is_file() else None
        state = {"queued": "queued", "running": "running", "completed": "stopped", "stopped": "stopped"}.get(
            rec.status, "failed"
        )
        if state == "running" and ready:
            state = "serving"
        url = ready["payload"]["url"] if ready else rules.url(self.host, self.port)
        return {
            "run_id": self.run_id,
            "state": state,
            "url": url,
            "model": ready["payload"]["model"] if ready else None,
            "source": self.source,
            "host": self.host,
            "key_env": self.key_env,
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


def start_serve(source: str, port: int | None = None, host: str = HOST, api_key_env: str | None = None) -> ServeJob:
    """Check everything a server needs and queue it; ExportError (one line naming the fix) before anything runs."""
    rules.check_port(port or 0)
    rules.check_key(host, api_key_env, member_secrets.environ())  # team mode: the account's own key counts
    rules.max_body_bytes()  # the server's limits from the environment: a bad one is refused here, in one line
    rules.max_messages()
    check_source(source)
    problem = rules.bind_problem(host, port or 0)
    if problem:
        raise problem
    port = port or free_port(host)
    argv = [sys.executable, "-m", MODULE, source, "--host", host, "--port", str(port)]
    argv += [*(["--api-key-env", api_key_env] if api_key_env else []), "--events", "{run_dir}/events.jsonl"]
    name = f"serve {Path(str(source).rstrip('/')).name} :{port}"
    run_id = runs.submit_command(argv, name=name, tags=[SERVE_TAG], start=False)
    if api_key_env:  # its name only: the scheduler passes the value in memory
        rdir = Path(runs.get(run_id, refresh_status=False).run_dir)
        (rdir / "pass_env.json").write_text(json.dumps([api_key_env]), encoding="utf-8")
    runs.schedule()
    return ServeJob(run_id)


def list_servers(limit: int = 10) -> list[ServeJob]:
    return newest_jobs(SERVE_TAG, ServeJob, ExportError, limit)


def curl_example(url: str, model: str, key_env: str | None = None) -> str:
    key = f'-H "Authorization: Bearer ${key_env}" ' if key_env else ""
    return (
        f"curl {url}/chat/completions {key}-H 'Content-Type: application/json' "
        f'-d \'{{"model": "{model}", "messages": [{{"role": "user", "content": "Hello"}}]}}\''
    )


def cli(argv: list[str]) -> int:
    """``studio serve``: serves until Ctrl-C (then stops the run); 0 on a clean stop, 1 failed, 2 bad input."""
    ap = argparse.ArgumentParser(prog="studio serve", description="Serve a run or model with an OpenAI-style API.")
    ap.add_argument("source", metavar="RUN_ID|DIR", help="a run id or folder, an adapter folder or a model folder")
    ap.add_argument("--port", type=int, default=8000, help="port (default 8000; 0: any free port)")
    ap.add_argument("--host", default=HOST, help=f"address to listen on (default {HOST}); any other needs a key")
    ap.add_argument(
        "--api-key-env",
        metavar="NAME",
        help="require the key held by the environment variable NAME (OpenAI's Authorization: Bearer); the Chat "
        "tab's client reads the same variable from the studio's environment",
    )
    args = ap.parse_args(argv)
    try:
        job = start_serve(args.source, args.port, args.host, args.api_key_env)
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
        print(curl_example(status["url"], status["model"], job.key_env), flush=True)
        print("Ctrl-C stops it (or `studio runs stop " + job.run_id + "`)", flush=True)
        while job.poll()["state"] == "serving":
            time.sleep(0.5)
    except KeyboardInterrupt:
        job.stop()
        print("stopped", flush=True)
        return 0
    status = job.poll()
    return 0 if status["state"] == "stopped" else 1
