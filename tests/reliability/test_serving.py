"""Security and load against a real studio server and a live run.

One run is submitted with marker secrets in the studio's environment (HF_TOKEN, WANDB_API_KEY, STUDIO_AUTH and an
unrelated variable); one studio is served behind a login on 127.0.0.1. Then: the trainer's environment is explicit;
every route needs the login; file downloads cannot leave the allowed folders; 20 clients poll the dashboard's timer
endpoint (``/tick``, what the open page calls every 0.5 s) for a bounded time and all see the same loss curve while
the studio's RSS stays flat; after the run is stopped no secret is found in any file it wrote.
Load duration: 30 s by default, 300 s with STUDIO_SOAK=1.
"""

from __future__ import annotations

import functools
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest
import yaml

from engine.core import events
from engine.runs import registry as runs
from engine.runs import scheduler
from tests import helpers

ROOT = Path(__file__).resolve().parents[2]
SOAK = os.environ.get("STUDIO_SOAK") == "1"
LOAD_SECONDS = 300 if SOAK else 30
CLIENTS = 20
UPLOAD_MB = 1  # the served studio's upload cap (STUDIO_MAX_UPLOAD_MB), small so an over-size upload is cheap
USER, PASSWORD = "admin", "pw-MARKER-auth-7c1"
SECRETS = {
    "HF_TOKEN": "hf_MARKER_token_93ab",
    "WANDB_API_KEY": "MARKER-wandb-51f0",
    "STUDIO_AUTH": f"{USER}:{PASSWORD}",
}
UNRELATED = ("STUDIO_TEST_UNRELATED_VAR".replace("STUDIO_", "RELIABILITY_"), "MARKER-unrelated-2d")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


wait_for = functools.partial(helpers.wait_for, timeout=150.0, every=0.2)


@pytest.fixture(scope="module")
def live_run(studio_home, demo_paths):
    """A long demo run started with marker secrets in the environment; stopped (SIGTERM) at module end."""
    saved = {k: os.environ.get(k) for k in [*SECRETS, UNRELATED[0]]}
    os.environ.update(SECRETS)
    os.environ[UNRELATED[0]] = UNRELATED[1]
    data = yaml.safe_load(Path(demo_paths["example_spec"]).read_text())
    data["train"].update(max_steps=2000, logging_steps=1, save_steps=25)
    data["data"]["max_samples"] = 64
    try:
        rid = runs.submit(data, name="live")
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    rec = runs.get(rid)
    wait_for(lambda: any(e["type"] == "log" for e in events.read_all(rec.events_path)))
    yield rid
    runs.stop(rid, grace_s=30)


@pytest.fixture(scope="module")
def server(studio_home, tmp_path_factory):
    port = free_port()
    log = tmp_path_factory.mktemp("studio-server") / "server.log"
    env = {k: v for k, v in os.environ.items() if k not in ("STUDIO_AUTH", "STUDIO_HOST", "STUDIO_PORT")}
    env.update(STUDIO_HOME=str(studio_home), GRADIO_ANALYTICS_ENABLED="False", STUDIO_MAX_UPLOAD_MB=str(UPLOAD_MB))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "engine.cli",
            "webui",
            "--port",
            str(port),
            "--no-demo",
            "--auth",
            f"{USER}:{PASSWORD}",
        ],
        cwd=ROOT,
        env=env,
        stdout=open(log, "wb"),  # noqa: SIM115
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"

    def up():
        if proc.poll() is not None:
            raise RuntimeError(f"studio exited: {log.read_text()[-2000:]}")
        try:
            urllib.request.urlopen(url + "/", timeout=2)
            return True
        except urllib.error.HTTPError:
            return True
        except OSError:
            return False

    wait_for(up, timeout=180, every=0.3)
    yield type("S", (), {"url": url, "pid": proc.pid, "log": log})
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def get(url: str, cookie: str | None = None) -> int:
    req = urllib.request.Request(url, headers={"Cookie": cookie} if cookie else {})
    try:
        with urllib.request.urlopen(req, timeout=20) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def login(url: str, password: str = PASSWORD) -> str | None:
    body = urllib.parse.urlencode({"username": USER, "password": password}).encode()
    try:
        with urllib.request.urlopen(urllib.request.Request(url + "/login", data=body), timeout=20) as resp:
            cookies = resp.headers.get_all("set-cookie") or []
    except urllib.error.HTTPError:
        return None
    return "; ".join(c.split(";", 1)[0] for c in cookies) or None


# ------------------------------------------------------------------------------------------------ security
def test_non_loopback_bind_without_login_is_refused(tally):
    from studio import settings

    for host in ("0.0.0.0", "192.168.1.20", "::", "my-host.example"):
        try:
            settings.load(["--host", host], env={})
        except settings.SettingsError:
            tally.record("serving::non-loopback bind without auth refused", True)
        else:
            tally.check("serving::non-loopback bind without auth refused", False, host)
    env = {k: v for k, v in os.environ.items() if k not in ("STUDIO_AUTH", "STUDIO_HOST")}
    proc = subprocess.run(
        [sys.executable, "-m", "engine.cli", "webui", "--host", "0.0.0.0", "--no-demo"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    tally.check(
        "serving::`studio webui --host 0.0.0.0` exits with the fix",
        proc.returncode != 0 and "--auth" in proc.stderr,
        proc.stderr[-500:],
    )
    assert settings.load(["--host", "0.0.0.0", "--auth", "a:b"], env={}).auth == ("a", "b")


def test_trainer_environment_is_explicit(live_run, tally):
    procs = [
        p
        for p in scheduler.run_processes(live_run)
        if "engine.trainer.train" in " ".join(p.cmdline()) and "accelerate" not in " ".join(p.cmdline())
    ]
    assert procs, "no trainer process"
    env = procs[0].environ()
    tally.check("serving::unrelated studio env var absent in the trainer", UNRELATED[0] not in env, "")
    tally.check(
        "serving::studio login absent in the trainer",
        "STUDIO_AUTH" not in env and not any(PASSWORD in v for v in env.values()),
        "",
    )
    # HF_TOKEN / WANDB_API_KEY are passed on purpose (downloads, logging) -- but only in memory, see below.
    tally.check("serving::HF_TOKEN passed to the trainer in memory", env.get("HF_TOKEN") == SECRETS["HF_TOKEN"], "")


def test_every_route_needs_the_login(server, tally, tmp_path):
    """Without the login cookie nothing but the login page and static assets answers; with it the page works."""
    import json

    cookie = login(server.url)
    assert cookie, f"login failed: {server.log.read_text()[-1500:]}"
    assert login(server.url, "wrong") is None or get(server.url + "/config", login(server.url, "wrong")) >= 400
    secret_file = Path(runs.get(runs.list_runs()[0].id).run_dir) / "spec.yaml" if runs.list_runs() else None
    probes = [
        "/config",
        "/gradio_api/info",
        "/info",
        "/gradio_api/queue/status",
        "/gradio_api/file=/etc/passwd",
        "/file=/etc/passwd",
        "/gradio_api/upload_progress",
        "/gradio_api/call/tick",
        "/gradio_api/run/tick",
        "/monitoring",
        "/gradio_api/mcp/schema",
        "/gradio_api/openapi.json",
        "/gradio_api/vibe-edit/",
    ]
    if secret_file:
        probes.append(f"/gradio_api/file={secret_file}")
    # gradio's own public routes (startup events, theme, the session heartbeat stream -- not read here, it never
    # ends): the login page needs them; they must carry no studio data.
    for path in ("/gradio_api/startup-events", "/theme.css"):
        try:
            with urllib.request.urlopen(server.url + path, timeout=20) as resp:
                body = resp.read()
        except urllib.error.HTTPError:
            body = b""
        ok = not any(w in body for w in (b"run-picker", b"tab-train", b"demo_alpaca", b"loss"))
        tally.check("serving::public framework routes carry no studio data", ok, f"{path}: {body[:200]!r}")
    for path in probes:
        code = get(server.url + path)
        tally.record("serving::route without login refused", code in (401, 403, 404, 405))
        assert code in (401, 403, 404, 405), f"{path} answered {code} without a login"
    code = get(server.url + "/")
    tally.check("serving::page without login shows only the login form", code in (200, 401), str(code))
    with urllib.request.urlopen(urllib.request.Request(server.url + "/", headers={}), timeout=20) as resp:
        html = resp.read().decode(errors="replace")
    assert "tab-train" not in html and "run-picker" not in html
    tally.check("serving::config with login", get(server.url + "/config", cookie) == 200, "")
    with urllib.request.urlopen(urllib.request.Request(server.url + "/config", headers={"Cookie": cookie})) as resp:
        assert "tab-train" in json.dumps(json.loads(resp.read()))
    # downloads: even logged in, no file outside gradio's allowed folders
    for target in (
        "/etc/passwd",
        str(ROOT / "pyproject.toml"),
        "../../../../etc/passwd",
        "%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        *([str(secret_file)] if secret_file else []),
    ):
        code = get(f"{server.url}/gradio_api/file={target}", cookie)
        tally.record("serving::download outside allowed folders refused (logged in)", code in (403, 404))
        assert code in (403, 404), f"file={target} answered {code}"


def post_upload(url: str, name: str, size: int, cookie: str | None) -> tuple[int, str]:
    """A real multipart upload to gradio's upload route, as the page's file widget sends it."""
    boundary = "studio-test-boundary-5e1f"
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="{name}"\r\n'
            "Content-Type: application/json\r\n\r\n"
        ).encode()
        + b"["
        + b" " * max(0, size - 2)
        + b"]"
        + f"\r\n--{boundary}--\r\n".encode()
    )
    headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
    if cookie:
        headers["Cookie"] = cookie
    req = urllib.request.Request(url + "/gradio_api/upload", data=body, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, resp.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


def test_http_upload_is_size_capped(server, tally):
    """The cap holds at the HTTP layer (gradio refuses the body), not only when the Datasets tab stores the file."""
    cookie = login(server.url)
    assert cookie
    cap = UPLOAD_MB * 2**20
    code, text = post_upload(server.url, "small.json", 64 * 1024, None)
    tally.check("serving::upload without login refused", code in (401, 403), f"{code} {text[:200]}")
    code, text = post_upload(server.url, "small.json", 64 * 1024, cookie)
    tally.check("serving::upload under the cap accepted (HTTP)", code == 200 and "small.json" in text, f"{code}")
    code, text = post_upload(server.url, "big.json", cap + 64 * 1024, cookie)
    tally.check("serving::upload over the cap refused (HTTP 413)", code == 413, f"{code} {text[:200]}")


def test_upload_names_and_sizes(studio_home, tally, tmp_path):
    from studio.tabs import data as data_tab

    src = tmp_path / "x.json"
    src.write_text('[{"instruction": "q", "output": "a"}]')
    root = (studio_home / "uploads").resolve()
    for name in (
        "../../evil.json",
        "/etc/cron.d/evil.json",
        "..\\..\\evil.json",
        "a/../../b.json",
        "\x00.json",
        "....json",
        "ok name.json",
    ):
        try:
            dest = data_tab.store_upload(src, name)
        except ValueError:
            tally.record("serving::upload name traversal rejected", True)
            continue
        ok = dest.resolve().parent == root
        tally.check("serving::upload name traversal rejected", ok, f"{name!r} -> {dest}")
    for name in ("x.py", "x.sh", "x", "x.json.exe"):
        with pytest.raises(ValueError):
            data_tab.store_upload(src, name)
        tally.record("serving::upload type refused", True)
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:  # sparse: the size is real, the disk is not used
        fh.truncate(data_tab.MAX_UPLOAD_BYTES + 1)
    with pytest.raises(ValueError, match="limit"):
        data_tab.store_upload(big, "big.json")
    tally.record("serving::upload over the size cap refused", True)


def test_path_fields_reject_traversal(studio_home, tally, tmp_path):
    from engine.data import registry as reg

    ddir = tmp_path / "data"
    ddir.mkdir()
    (tmp_path / "outside.json").write_text("[]")
    for name in ("../outside.json", "sub/../../outside.json"):
        with pytest.raises(ValueError, match="leaves the dataset folder"):
            reg.register_dataset(ddir, "x", name)
        tally.record("serving::register_dataset file_name traversal rejected", True)
    for bad in ("../x", "a/b", "x y"):
        with pytest.raises(ValueError):
            reg.register_dataset(ddir, bad, "outside.json")
        tally.record("serving::register_dataset name rejected", True)
    for rid in ("../../etc", "../" + studio_home.name, "x; rm -rf /", "' OR '1'='1"):
        with pytest.raises(Exception) as info:
            runs.run_dir(rid)
        tally.check(
            "serving::run id traversal rejected",
            "no run" in str(info.value).lower() or isinstance(info.value, (runs.RunsError, KeyError)),
            repr(info.value),
        )


def test_trust_remote_code_off_unless_explicit(tally):
    from engine.lf.compat import lf_to_spec
    from engine.spec.schema import RunSpec

    spec = RunSpec.model_validate({"model": {"name_or_path": "org/m"}, "data": {"datasets": ["a"]}})
    tally.check("serving::trust_remote_code default off", spec.model.trust_remote_code is False, "")
    got = lf_to_spec({"model_name_or_path": "org/m", "dataset": "a", "stage": "sft", "finetuning_type": "lora"})
    spec_lf = got[0] if isinstance(got, tuple) else getattr(got, "spec", got)
    data = spec_lf if isinstance(spec_lf, dict) else spec_lf.model_dump()
    tc = data.get("model", {}).get("trust_remote_code", False)
    tally.check("serving::trust_remote_code off after LLaMA-Factory import", tc is False, str(got)[:300])


def plot_rows(plot) -> tuple[list | None, list | None]:
    """(rows, column names) of a LinePlot value as gradio_client returns it (PlotData, maybe under "value")."""
    if isinstance(plot, dict) and isinstance(plot.get("value"), dict):
        plot = plot["value"]
    if not isinstance(plot, dict):
        return None, None
    return plot.get("data"), plot.get("columns") or plot.get("headers")


def test_twenty_clients_poll_a_live_run(server, live_run, tally):
    from gradio_client import Client

    studio = psutil.Process(server.pid)
    rss = [studio.memory_info().rss]
    curves: list[dict] = [{} for _ in range(CLIENTS)]
    errors: list[str] = []
    polls = [0] * CLIENTS
    stop_at = time.time() + LOAD_SECONDS

    def client(i: int) -> None:
        try:
            c = Client(server.url + "/", auth=(USER, PASSWORD), verbose=False)
            while time.time() < stop_at:
                out = c.predict(live_run, "step", 0.0, False, "en", api_name="/tick")
                polls[i] += 1
                rows, headers = plot_rows(out[0])
                if rows and headers:
                    ix, iv, iser = headers.index("x"), headers.index("value"), headers.index("series")
                    curves[i].update({r[ix]: r[iv] for r in rows if r[iser] == "train"})
                time.sleep(0.5)
        except Exception as exc:  # noqa: BLE001 - every client error is a failure of the case
            errors.append(f"client {i}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(CLIENTS)]
    for th in threads:
        th.start()
    while any(th.is_alive() for th in threads):
        time.sleep(2)
        rss.append(studio.memory_info().rss)
    for th in threads:
        th.join(60)
    for i in range(CLIENTS):
        tally.record(
            "serving::20 clients poll /tick without error", not any(e.startswith(f"client {i}:") for e in errors)
        )
    assert not errors, errors[:5]
    truth = {
        e["step"]: e["payload"]["loss"]
        for e in events.read_all(runs.get(live_run).events_path)
        if e["type"] == "log" and "loss" in e["payload"]
    }
    same = 0
    for curve in curves:
        ok = bool(curve) and all(abs(truth[int(x)] - y) < 1e-6 for x, y in curve.items())
        same += ok
        tally.record("serving::every client sees the run's curve", ok)
    common = set.intersection(*(set(c) for c in curves))
    assert same == CLIENTS and len(common) >= 3, f"{same}/{CLIENTS} clients saw the run's curve; common {len(common)}"
    # RSS: compare the first and last quarter of the samples (the first polls build per-session state).
    q = max(1, len(rss) // 4)
    early, late = sum(rss[q : 2 * q]) / q, sum(rss[-q:]) / q
    growth = (late - early) / 2**20
    tally.note(
        "serving::20 clients poll /tick without error",
        f"{sum(polls)} polls in {LOAD_SECONDS}s; studio RSS "
        f"{rss[0] / 2**20:.0f} -> {rss[-1] / 2**20:.0f} MiB (late-vs-early {growth:+.1f} MiB)",
    )
    tally.check("serving::studio RSS flat under load (< 64 MiB growth)", growth < 64, f"{growth:.1f} MiB")


def test_no_secret_in_any_file_the_run_wrote(live_run, tally):
    """Stop the run (SIGTERM -> checkpoint), then search every file of its folder and outputs for the markers."""
    runs.stop(live_run, grace_s=30)
    rec = runs.get(live_run)
    markers = [v.encode() for v in (*SECRETS.values(), PASSWORD, UNRELATED[1])]
    scanned = 0
    for root in {Path(rec.run_dir), Path(rec.output_dir)}:
        for f in root.rglob("*"):
            if f.is_file():
                blob = f.read_bytes()
                scanned += 1
                hits = [m.decode() for m in markers if m in blob]
                tally.record("serving::no secret in run files", not hits)
                assert not hits, f"{f} contains {hits}"
    assert scanned >= 5 and (Path(rec.run_dir) / "launch.json").is_file()
    tally.note("serving::no secret in run files", f"{scanned} files scanned, status {rec.status}")
