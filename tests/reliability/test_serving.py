"""Security and load against a real studio server and a live run.

One run is submitted with marker secrets in the studio's environment (HF_TOKEN, WANDB_API_KEY, STUDIO_AUTH and an
unrelated variable); one studio is served behind a login on 0.0.0.0 (every address of the machine, as a shared
server is; probed from 127.0.0.1). Then: the trainer's environment is explicit; every route needs the login, and
every route gradio has (enumerated from the app) answers a client without the cookie with nothing of the workspace
(no path, run id or dataset name), ``/`` with the login page only; wrong logins are throttled per address with
exponential back-off and logged; file downloads cannot leave the allowed folders; 20 clients poll the dashboard's timer
endpoint (``/tick`` then ``/show``, what the open page calls every 0.5 s) for a bounded time and all see the same loss
curve while the studio's RSS stays flat; after the run is stopped no secret is found in any file it wrote.
Load duration: 30 s by default, 300 s with STUDIO_SOAK=1.

`studio serve`'s server (issue 47 item 5), on the demo model with a key: huge prompts, many messages, big and deep
bodies refused at once while small requests are answered, 50 concurrent clients, a client's departure ending its
generation, the bearer key, and the command's one-line refusals.
"""

from __future__ import annotations

import functools
import http.client
import json
import os
import re
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
from engine.runs import records, store
from engine.runs import registry as runs
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
        s.bind(("0.0.0.0", 0))  # free on every address: the studio binds 0.0.0.0
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
def server(studio_home, live_run, tmp_path_factory):
    """The studio behind a login on 0.0.0.0, started after the live run: its page lists that run (what a client
    without the login must not see)."""
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
            "--host",
            "0.0.0.0",
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


def test_trusted_proxies_setting(tally):
    """``STUDIO_TRUSTED_PROXIES``: none by default (uvicorn is told to believe nobody's X-Forwarded-For), a list of
    addresses / networks when set, anything else refused naming the variable."""
    from studio import app as studio_app
    from studio import settings

    saved = os.environ.get("FORWARDED_ALLOW_IPS")
    try:
        conf = settings.load([], env={})
        studio_app.launch_kwargs(conf)
        tally.check("serving::no trusted proxy by default", os.environ["FORWARDED_ALLOW_IPS"] == "", "")
        conf = settings.load([], env={"STUDIO_TRUSTED_PROXIES": "10.0.0.5, 192.168.0.0/16"})
        studio_app.launch_kwargs(conf)
        assert conf.trusted_proxies == ("10.0.0.5", "192.168.0.0/16")
        assert os.environ["FORWARDED_ALLOW_IPS"] == ""  # studio.proxy reads the header, for the proxies named
    finally:
        if saved is None:
            os.environ.pop("FORWARDED_ALLOW_IPS", None)
        else:
            os.environ["FORWARDED_ALLOW_IPS"] = saved
    for bad in ("*", "proxy.example", "10.0.0.300"):
        with pytest.raises(settings.SettingsError, match="STUDIO_TRUSTED_PROXIES"):
            settings.load([], env={"STUDIO_TRUSTED_PROXIES": bad})


def test_proxy_user_header_setting(tmp_path, monkeypatch):
    """``STUDIO_PROXY_USER_HEADER``: a header name, believed only from named proxies and only in team mode; each
    missing piece refused in one line naming what to set."""
    from engine.core import accounts
    from studio import settings

    proxies = {"STUDIO_TRUSTED_PROXIES": "10.0.0.5", "STUDIO_PROXY_USER_HEADER": "X-Forwarded-User"}
    with pytest.raises(settings.SettingsError, match="add them first"):
        settings.load(["--home", str(tmp_path)], env=proxies)
    monkeypatch.setenv("STUDIO_HOME", str(tmp_path))
    accounts.add("ann", "ann's password")
    assert settings.load(["--home", str(tmp_path)], env=proxies).proxy_user_header == "X-Forwarded-User"
    assert settings.load(["--home", str(tmp_path)], env={}).proxy_user_header == ""
    with pytest.raises(settings.SettingsError, match="needs STUDIO_TRUSTED_PROXIES"):
        settings.load(["--home", str(tmp_path)], env={"STUDIO_PROXY_USER_HEADER": "X-Forwarded-User"})
    for bad in ("X Forwarded User", "X-User:", "-x"):
        with pytest.raises(settings.SettingsError, match="STUDIO_PROXY_USER_HEADER must be a header name"):
            settings.load(["--home", str(tmp_path)], env={**proxies, "STUDIO_PROXY_USER_HEADER": bad})


def test_trusted_proxy_reads_its_headers_only_from_the_named_proxies():
    """studio.proxy on raw ASGI scopes: from a named proxy the client is the right-most forwarded hop that is not a
    proxy (a client-sent hop to its left is ignored), the scheme its X-Forwarded-Proto, the user its header; from
    anyone else nothing changes but the user header, which is removed."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from studio.proxy import SCOPE_USER, TrustedProxy

    seen = []

    async def app(scope, receive, send):
        seen.append(scope)

    guard = TrustedProxy(app, proxies=("10.0.0.5", "192.168.0.0/16"), user_header="X-Forwarded-User")

    def through(peer: str, **headers: str) -> dict:
        raw = [(k.replace("_", "-").lower().encode(), v.encode()) for k, v in headers.items()]
        scope = {"type": "http", "client": (peer, 5000), "headers": raw, "scheme": "http"}
        with ThreadPoolExecutor(1) as pool:  # a loop of its own: a browser test in this worker may hold one running
            pool.submit(asyncio.run, guard(scope, None, None)).result()
        return seen[-1]

    got = through("10.0.0.5", x_forwarded_for="6.6.6.6, 203.0.113.9, 192.168.1.1", x_forwarded_user="ann")
    assert got["client"] == ("203.0.113.9", 0) and got[SCOPE_USER] == "ann"
    got = through("192.168.7.7", x_forwarded_proto="https", x_forwarded_for="10.0.0.5")
    assert got["scheme"] == "https" and got["client"] == ("10.0.0.5", 0) and SCOPE_USER not in got
    got = through("127.0.0.1", x_forwarded_for="203.0.113.9", x_forwarded_user="ann", x_forwarded_proto="https")
    assert got["client"] == ("127.0.0.1", 5000) and got["scheme"] == "http" and SCOPE_USER not in got
    assert [k for k, _ in got["headers"]] == [b"x-forwarded-for", b"x-forwarded-proto"]


def test_login_throttle_bounds(tally):
    """The throttle's arithmetic on a fake clock: free failures, doubling back-off up to the cap, reset on success,
    other addresses unaffected, the table bounded under a flood of addresses."""
    from studio.guard import LoginThrottle

    now = [0.0]
    th = LoginThrottle(free=3, base_s=1.0, cap_s=8.0, max_addresses=100, clock=lambda: now[0])
    backoffs = []
    for _ in range(8):
        assert th.begin("a") == 0
        backoffs.append(th.end("a", False))
        now[0] += backoffs[-1]
    tally.check("serving::throttle back-off 0,0,0,1,2,4,8,8", backoffs == [0, 0, 0, 1, 2, 4, 8, 8], str(backoffs))
    assert th.begin("a") == 0 and th.end("a", None) == 0  # neither right nor wrong (a malformed form): not counted
    assert th.begin("a") == 0 and th.end("a", False) == 8
    assert th.begin("a") > 0 and th.begin("b") == 0
    th.end("b", True)
    now[0] += 100
    assert th.begin("a") == 0
    th.end("a", True)
    assert th.failures("a") == 0
    for i in range(1000):
        if th.begin(f"10.0.{i // 256}.{i % 256}") == 0:
            th.end(f"10.0.{i // 256}.{i % 256}", False)
    tally.check("serving::throttle table bounded", len(th._clients) <= 100, str(len(th._clients)))


def test_upload_names_and_sizes(studio_home, tally, tmp_path):
    from studio.tabs import data_register

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
            dest = data_register.store_upload(src, name)
        except ValueError:
            tally.record("serving::upload name traversal rejected", True)
            continue
        ok = dest.resolve().parent == root
        tally.check("serving::upload name traversal rejected", ok, f"{name!r} -> {dest}")
    for name in ("x.py", "x.sh", "x", "x.json.exe"):
        with pytest.raises(ValueError):
            data_register.store_upload(src, name)
        tally.record("serving::upload type refused", True)
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:  # sparse: the size is real, the disk is not used
        fh.truncate(data_register.MAX_UPLOAD_BYTES + 1)
    with pytest.raises(ValueError, match="limit"):
        data_register.store_upload(big, "big.json")
    tally.record("serving::upload over the size cap refused", True)


def test_path_fields_reject_traversal(studio_home, tally, tmp_path):
    from engine.data import dataset_registry as reg

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
            "no run" in str(info.value).lower() or isinstance(info.value, (records.RunsError, KeyError)),
            repr(info.value),
        )


def test_trust_remote_code_off_unless_explicit(tally):
    from engine.lf.to_spec import lf_to_spec
    from engine.spec.schema import RunSpec

    spec = RunSpec.model_validate({"model": {"name_or_path": "org/m"}, "data": {"datasets": ["a"]}})
    tally.check("serving::trust_remote_code default off", spec.model.trust_remote_code is False, "")
    got = lf_to_spec({"model_name_or_path": "org/m", "dataset": "a", "stage": "sft", "finetuning_type": "lora"})
    spec_lf = got[0] if isinstance(got, tuple) else getattr(got, "spec", got)
    data = spec_lf if isinstance(spec_lf, dict) else spec_lf.model_dump()
    tc = data.get("model", {}).get("trust_remote_code", False)
    tally.check("serving::trust_remote_code off after LLaMA-Factory import", tc is False, str(got)[:300])


# The tests that need the live run come together, from its start to its stop (test_no_secret_...): its trainer
# keeps a core busy all the while, so the tests that do not need it run before it starts or after it stopped.
def test_trainer_environment_is_explicit(live_run, tally):
    procs = [
        p
        for p in store.run_processes(live_run)
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


def served_routes() -> list[tuple[str, str]]:
    """(method, path) of every route of gradio's app as ``studio webui`` builds it (the same page, the same launch
    arguments), enumerated from the app itself: a route a gradio upgrade adds is probed too."""
    from gradio.routes import App

    from studio import app as studio_app
    from studio import settings

    blocks = studio_app.build_app()
    kwargs = studio_app.launch_kwargs(settings.Settings(host="0.0.0.0", auth=(USER, PASSWORD)))
    blocks.auth = [kwargs["auth"]]
    blocks.run_history = kwargs["run_history"]
    app = App.create_app(blocks, app_kwargs=kwargs.get("app_kwargs"))

    def walk(routes):
        for r in routes:
            if hasattr(r, "path"):
                yield r
            else:  # FastAPI >= 0.120 keeps an included router as one node
                yield from (ctx.starlette_route or ctx.original_route for ctx in r.effective_route_contexts())

    out = {(m, r.path) for r in walk(app.routes) for m in (getattr(r, "methods", None) or ["GET"])}
    return sorted(out)


def fetch(url: str, method: str = "GET", cookie: str | None = None, limit: int = 4 << 20) -> tuple[int, bytes]:
    """(status, body up to ``limit`` bytes); a streaming answer (heartbeat, reload) is read until it pauses 3 s."""
    parsed = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=20)
    headers = {"Cookie": cookie} if cookie else {}
    body = None
    if method in ("POST", "PUT", "PATCH", "DELETE"):
        body, headers["Content-Type"] = b"{}", "application/json"
    try:
        conn.request(method, parsed.path + (f"?{parsed.query}" if parsed.query else ""), body=body, headers=headers)
        resp = conn.getresponse()
        conn.sock.settimeout(3)
        chunks, size = [], 0
        try:
            while size < limit:
                chunk = resp.read1(65536) if method != "HEAD" else b""
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
        except (TimeoutError, http.client.IncompleteRead):  # a stream that went quiet (and was cut mid-chunk)
            pass
        return resp.status, b"".join(chunks)
    finally:
        conn.close()


def workspace_markers(studio_home: Path, run_ids: list[str]) -> list[bytes]:
    """What must never reach a client without the login: the workspace's paths, run ids and dataset names."""
    info = json.loads((studio_home / "data" / "dataset_info.json").read_text())
    marks = [str(studio_home), str(studio_home / "models"), *run_ids, *info]
    return [m.encode() for m in marks] + [b"named_endpoints", b"parameter_default"]


def test_unauthenticated_routes_show_only_the_login(live_run, server, studio_home, tally):
    """Issue 18.6: every route gradio has, without the cookie: nothing of the workspace in any answer, ``/`` is the
    bare login page (no ``window.gradio_api_info`` with paths, run ids, dataset names); with the cookie every route
    lets the login through and ``/`` carries the page's API description again."""
    run_ids = [str(r.id) for r in runs.list_runs()]
    assert live_run in run_ids
    marks = workspace_markers(studio_home, run_ids)
    routes = served_routes()
    assert ("GET", "/") in routes and ("POST", "/login") in routes and len(routes) > 40, routes
    secret_file = studio_home / "data" / "dataset_info.json"

    def concrete(path: str) -> str:
        path = re.sub(r"\{(path|path_or_url):path\}", str(secret_file), path)
        path = path.replace("{api_name}", "tick").replace("{url_path:path}", "http://127.0.0.1:9/")
        return re.sub(r"\{[^}]+\}", "x", path)

    # Answers a client without the login may get: what the login page loads (issue 30.5: nothing else, not even
    # gradio's session routes -- cancel, reset, heartbeat, app_id, token, user, startup-events -- answers but 401).
    public = {
        ("GET", "/"),
        ("HEAD", "/"),
        ("GET", "/favicon.ico"),
        ("GET", "/theme.css"),
        ("GET", "/gradio_api/theme.css"),
        ("GET", "/robots.txt"),
        ("GET", "/manifest.json"),
        ("GET", "/pwa_icon"),
        ("GET", "/pwa_icon/{size}"),
        ("GET", "/static/{path:path}"),
        ("GET", "/assets/{path:path}"),
        ("GET", "/svelte/{path:path}"),
    }
    checked = 0
    for method, path in routes:
        if method == "POST" and path.rstrip("/") == "/login":
            continue  # the throttle test's subject
        code, body = fetch(server.url + concrete(path), method)
        hits = [m.decode() for m in marks if m in body]
        ok = not hits and (code == 401 or (method, path) in public)
        tally.record("serving::route without cookie leaks nothing (every gradio route)", ok)
        assert ok, f"{method} {path} without the cookie answered {code} with {hits}: {body[:300]!r}"
        checked += 1
    # The requests gradio answered with success to anyone before issue 30.5, with the bodies that make them act.
    for method, path, body in (
        ("POST", "/gradio_api/cancel", b'{"session_hash": "s1", "fn_index": 0, "event_id": "e1"}'),
        ("POST", "/gradio_api/reset", b'{"session_hash": "s1", "fn_index": 0, "event_id": "e1"}'),
        ("GET", "/gradio_api/heartbeat/anything", None),
        ("GET", "/gradio_api/app_id", None),
        ("GET", "/gradio_api/token", None),
        ("GET", "/gradio_api/user", None),
        ("GET", "/gradio_api/startup-events", None),
        ("GET", "/logout", None),
    ):
        req = urllib.request.Request(server.url + path, data=body, method=method)
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=20) as resp:
                code = resp.status
        except urllib.error.HTTPError as exc:
            code = exc.code
        tally.check(
            "serving::gradio session route without cookie answers 401", code == 401, f"{method} {path}: {code}"
        )
    code, body = fetch(server.url + "/")
    page = body.decode(errors="replace")
    tally.check(
        "serving::`/` without cookie is the bare login page",
        code == 200 and '"auth_required":true' in page.replace(" ", "") and "window.gradio_api_info = null" in page,
        page[-600:],
    )
    tally.note("serving::route without cookie leaks nothing (every gradio route)", f"{checked} method+route pairs")

    cookie = login(server.url)
    assert cookie, server.log.read_text()[-1500:]
    for method, path in routes:
        if path.rstrip("/") in ("/login", "/logout"):
            continue  # logging in again, or out (which ends every session of the user)
        code, _ = fetch(server.url + concrete(path), method, cookie)
        tally.record("serving::route with cookie lets the login through", code != 401)
        assert code != 401, f"{method} {path} with the cookie answered 401"
    code, body = fetch(server.url + "/", cookie=cookie)
    shown = [m.decode() for m in marks if m in body]
    tally.check(
        "serving::`/` with cookie is the page with its API description",
        code == 200 and b"named_endpoints" in body and live_run.encode() in body,
        f"{code}, markers present: {shown}",
    )


def login_status(url: str, password: str | None) -> tuple[int, str]:
    """(status, Retry-After) of one ``POST /login``; ``password=None`` sends a form without one (422, not a failure:
    it probes whether logins are open without counting as a guess)."""
    form = {"username": USER} if password is None else {"username": USER, "password": password}
    req = urllib.request.Request(url + "/login", data=urllib.parse.urlencode(form).encode())
    try:
        with urllib.request.urlopen(req, timeout=20) as resp:
            return resp.status, resp.headers.get("Retry-After", "")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Retry-After", "")


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
    # The load's LOAD_SECONDS start once every client has polled once (each session built): on a busy machine the
    # clients connect over many seconds, and RSS measured while they still arrive grew with them, not with a leak.
    window: list[float] = []  # [the time all had polled once]
    give_up = time.time() + 600

    def going() -> bool:
        return time.time() < (window[0] + LOAD_SECONDS if window else give_up)

    def client(i: int) -> None:
        try:
            c = Client(server.url + "/", auth=(USER, PASSWORD), verbose=False, httpx_kwargs={"timeout": 120})
            while going() and not errors:
                # what the page does: /tick reads the run's new lines into the session, /show draws them
                c.predict(polls[i], live_run, "step", 0.0, False, "en", api_name="/tick")
                out = c.predict(api_name="/show")
                polls[i] += 1
                if not window and min(polls) >= 1:
                    window.append(time.time())
                rows, headers = plot_rows(out[0])
                if rows and headers:
                    ix, iv, iser = headers.index("x"), headers.index("value"), headers.index("curve")
                    curves[i].update({r[ix]: r[iv] for r in rows if r[iser] == "train loss"})
                time.sleep(0.5)
        except Exception as exc:  # noqa: BLE001 - every client error is a failure of the case
            errors.append(f"client {i}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(CLIENTS)]
    for th in threads:
        th.start()
    while any(th.is_alive() for th in threads):
        time.sleep(2)
        if window:
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
    # RSS: the first and last quarter of the samples taken once every session was built (rss[0]: before the load).
    loaded = rss[1:]
    q = max(1, len(loaded) // 4)
    early, late = sum(loaded[:q]) / q, sum(loaded[-q:]) / q
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


def test_wrong_logins_are_throttled(server, tally):
    """Issue 18.6: 20 wrong logins in a row from one address: after a few, logins from it are refused (429 with
    Retry-After, the right password too) for a back-off that doubles with each further failure; the log names the
    address; once the back-off has passed the right login works."""
    log_start = len(server.log.read_bytes())
    codes = [login_status(server.url, f"wrong-{i}") for i in range(20)]
    refused = [c for c, _ in codes if c == 429]
    tally.check(
        "serving::20 wrong logins: later ones refused (429)",
        len(refused) >= 15 and codes[0][0] == 400 and all(c in (400, 429) for c, _ in codes),
        str(codes),
    )
    # while the back-off lasts the right password is refused as well: throttling, not a hint
    code, retry = login_status(server.url, PASSWORD)
    tally.check("serving::right login during the back-off refused", code == 429 and int(retry) >= 1, f"{code} {retry}")
    # the back-off doubles: wait until logins open (a form without password is not a guess), fail once more
    waits = []
    for _ in range(2):
        wait_for(lambda: login_status(server.url, None)[0] != 429, timeout=60)
        assert login_status(server.url, "wrong-again")[0] == 400
        code, retry = login_status(server.url, "wrong-again")
        assert code == 429, code
        waits.append(int(retry))
    tally.check("serving::back-off doubles with each failure", waits[1] >= 2 * waits[0] - 1, str(waits))
    wait_for(lambda: login_status(server.url, None)[0] != 429, timeout=60)
    tally.check("serving::right login after the back-off works", login(server.url) is not None, "")
    logged = server.log.read_bytes()[log_start:].decode(errors="replace")
    tally.check(
        "serving::failed and refused logins are logged with the address",
        "failed login from 127.0.0.1" in logged and "login from 127.0.0.1 refused" in logged,
        logged[-1500:],
    )
    # a right login resets the count: the next wrong one is answered as usual
    assert login_status(server.url, "wrong-after-reset")[0] == 400
    assert login(server.url) is not None


def test_spoofed_forwarded_for_does_not_lift_the_throttle(server, tally):
    """Issue 30.5: uvicorn believes ``X-Forwarded-For`` from 127.0.0.1 unless told otherwise; a client there that
    sends a new address with each wrong login must still be throttled on its own (the socket's) address, and the log
    must name that address, not the one it claimed."""
    wait_for(lambda: login_status(server.url, None)[0] != 429, timeout=60)
    assert login(server.url) is not None  # a clean count for 127.0.0.1
    log_start = len(server.log.read_bytes())
    codes = []
    for i in range(20):
        form = urllib.parse.urlencode({"username": USER, "password": f"spoofed-{i}"}).encode()
        req = urllib.request.Request(server.url + "/login", data=form, headers={"X-Forwarded-For": f"203.0.113.{i}"})
        try:
            with urllib.request.urlopen(req, timeout=20) as resp:
                codes.append(resp.status)
        except urllib.error.HTTPError as exc:
            codes.append(exc.code)
    tally.check(
        "serving::rotated X-Forwarded-For: wrong logins still refused (429)",
        codes.count(429) >= 15 and codes[0] == 400,
        str(codes),
    )
    logged = server.log.read_bytes()[log_start:].decode(errors="replace")
    tally.check(
        "serving::throttle log names the socket's address, not the claimed one",
        "failed login from 127.0.0.1" in logged and "203.0.113." not in logged,
        logged[-800:],
    )
    wait_for(lambda: login_status(server.url, None)[0] != 429, timeout=60)
    assert login(server.url) is not None


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


# ------------------------------------------------------------------------------------------------ studio serve
# Issue 47 item 5: `python -m engine.trainer.serve` (what `studio serve` runs) on the demo model, on 127.0.0.1, with a
# key and a 1 MiB body cap. One server for these cases; each request is short (the tiny model).
SERVE_KEY_ENV, SERVE_KEY = "STUDIO_TEST_SERVE_KEY", "sk-MARKER-serve-4e7a"


@pytest.fixture(scope="module")
def model_server(demo_paths, tmp_path_factory):
    folder = tmp_path_factory.mktemp("model-server")
    port = free_port()
    env = dict(os.environ, STUDIO_SERVE_MAX_BODY_MB="1", OMP_NUM_THREADS="1", **{SERVE_KEY_ENV: SERVE_KEY})
    argv = [sys.executable, "-m", "engine.trainer.serve", demo_paths["model_dir"], "--port", str(port)]
    argv += ["--api-key-env", SERVE_KEY_ENV, "--events", str(folder / "events.jsonl")]
    log = folder / "serve.log"
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=open(log, "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115

    def ready():
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited: {log.read_text()[-2000:]}")
        return (folder / "events.jsonl").is_file() and "serve_ready" in (folder / "events.jsonl").read_text()

    wait_for(ready, timeout=180)
    yield type("M", (), {"port": port, "log": log, "proc": proc})
    proc.terminate()
    proc.wait(30)


def serve_call(server, path: str, body=None, key: str | None = SERVE_KEY, raw: bytes | None = None):
    """(status, JSON answer) of one request on a connection of its own."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    try:
        conn.request("POST" if data is not None else "GET", path, body=data, headers=headers)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"null")
    finally:
        conn.close()


SMALL = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "temperature": 0}


def test_serve_huge_prompts_refused_at_once(model_server, tally):
    """A 200,000-word prompt and 10,001 messages get a 4xx in OpenAI's shape, and a 4-token request right after is
    answered (the server held one lock for minutes before)."""
    huge = " ".join(["word"] * 200_000)
    code, said = serve_call(model_server, "/v1/completions", {"prompt": huge, "max_tokens": 4})
    tally.check(
        "serving::serve: 200k-word prompt refused (400 context_length_exceeded)",
        code == 400 and said["error"]["code"] == "context_length_exceeded" and said["error"]["param"] == "prompt",
        str(said)[:300],
    )
    code, said = serve_call(model_server, "/v1/chat/completions", {**SMALL, "messages": SMALL["messages"] * 10_001})
    tally.check(
        "serving::serve: 10,001 messages refused (400)",
        code == 400 and said["error"]["param"] == "messages" and "at most 1000" in said["error"]["message"],
        str(said)[:300],
    )
    # tokenized, not the quick bound: 1,500 prompt tokens + 1,000 asked > the demo model's 2,048
    code, said = serve_call(model_server, "/v1/completions", {"prompt": "7 " * 1500, "max_tokens": 1000})
    tally.check(
        "serving::serve: prompt + max_tokens over the context refused (400)",
        code == 400 and said["error"]["code"] == "context_length_exceeded" and "2048" in said["error"]["message"],
        str(said)[:300],
    )
    code, said = serve_call(model_server, "/v1/chat/completions", SMALL)
    tally.check(
        "serving::serve: a 4-token request right after is answered",
        code == 200 and said["usage"]["completion_tokens"] <= 4,
        str(said)[:300],
    )


def test_serve_body_and_json_limits(model_server, tally):
    """The body cap holds from Content-Length (no body sent) and while reading a chunked body; JSON nested past 64
    levels is a 400 naming the depth (it dropped the connection before); the server answers on."""
    with socket.create_connection(("127.0.0.1", model_server.port), timeout=60) as s:
        head = f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {SERVE_KEY}\r\n"
        s.sendall(head.encode() + b"Content-Length: 99999999\r\n\r\n")  # and no body
        head = s.recv(65536).decode(errors="replace")
    tally.check("serving::serve: body over the cap refused by Content-Length (413)", " 413 " in head, head[:300])
    conn = http.client.HTTPConnection("127.0.0.1", model_server.port, timeout=60)
    chunks = iter([b'{"prompt": "', *[b"a" * 65536] * 20, b'"}'])  # 1.25 MiB, its length not said
    key = {"Authorization": f"Bearer {SERVE_KEY}"}
    conn.request("POST", "/v1/completions", body=chunks, encode_chunked=True, headers=key)
    resp = conn.getresponse()
    said = json.loads(resp.read())
    conn.close()
    tally.check(
        "serving::serve: chunked body over the cap refused while reading (413)",
        resp.status == 413 and said["error"]["code"] == "request_too_large",
        str(said)[:300],
    )
    deep = b'{"prompt": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    code, said = serve_call(model_server, "/v1/completions", raw=deep)
    tally.check(
        "serving::serve: deep JSON refused (400)",
        code == 400 and "deeper than 64 levels" in said["error"]["message"],
        str(said)[:300],
    )
    code, said = serve_call(model_server, "/v1/completions", raw=b'{"prompt": ' + b"[" * 65 + b"]" * 65 + b"}")
    tally.check("serving::serve: deep JSON refused (400)", code == 400 and "deeper" in said["error"]["message"], "65")
    code, said = serve_call(model_server, "/v1/chat/completions", SMALL)
    tally.check("serving::serve: answers after the refusals", code == 200, str(said)[:300])


def test_serve_key(model_server, tally):
    for key, path in ((None, "/v1/models"), ("sk-wrong", "/v1/models"), (None, "/v1/chat/completions")):
        code, said = serve_call(model_server, path, SMALL if "chat" in path else None, key=key)
        tally.check(
            "serving::serve: request without the right bearer key refused (401)",
            code == 401 and said["error"]["type"] == "invalid_request_error",
            f"{key} {path}: {code} {said}",
        )
    code, said = serve_call(model_server, "/v1/models")
    tally.check("serving::serve: the right key is let in", code == 200 and said["data"][0]["object"] == "model", "")


def test_serve_fifty_concurrent_clients(model_server, tally):
    """50 clients at once, each a 4-token request on its own connection: every one answered 200 (20 were reset with
    the old accept backlog of 5); they take turns at the model."""
    results: list = []

    def client(i: int) -> None:
        try:
            body = {**SMALL, "messages": [{"role": "user", "content": f"hello {i}"}]}
            results.append(serve_call(model_server, "/v1/chat/completions", body)[0])
        except OSError as exc:
            results.append(repr(exc))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(50)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(300)
    for r in results:
        tally.record("serving::serve: 50 concurrent clients all answered 200", r == 200)
    assert results == [200] * 50, results


def test_serve_disconnect_stops_generation(model_server, tally):
    """A client that leaves mid-stream, and one that leaves while waiting for a whole answer: each generation ends
    early, said in the server's log (it ran on to max_tokens before)."""
    before = model_server.log.read_text()
    conn = http.client.HTTPConnection("127.0.0.1", model_server.port, timeout=60)
    body = {"prompt": "Once upon a time", "max_tokens": 1900, "temperature": 0, "stream": True}
    conn.request("POST", "/v1/completions", json.dumps(body), {"Authorization": f"Bearer {SERVE_KEY}"})
    resp = conn.getresponse()
    assert resp.status == 200 and resp.readline().startswith(b"data: ")
    conn.sock.shutdown(socket.SHUT_RDWR)
    conn.close()
    stopped = re.compile(r"generation stopped after (\d+) of 1900 tokens: the client went away")

    def said(n: int):
        hits = stopped.findall(model_server.log.read_text()[len(before) :])
        return hits if len(hits) >= n else None

    hits = wait_for(lambda: said(1), timeout=120)
    tally.check("serving::serve: client gone mid-stream stops the generation", int(hits[0]) < 1900, str(hits))
    with socket.create_connection(("127.0.0.1", model_server.port), timeout=60) as s:
        data = json.dumps({**body, "stream": False}).encode()
        head = f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {SERVE_KEY}\r\n"
        s.sendall(head.encode() + b"Content-Length: %d\r\n\r\n" % len(data) + data)
        started = re.compile(r"generating up to 1900 tokens")
        wait_for(lambda: len(started.findall(model_server.log.read_text()[len(before) :])) >= 2)
    hits = wait_for(lambda: said(2), timeout=120)
    tally.check(
        "serving::serve: client gone before a whole answer stops the generation", int(hits[1]) < 1900, str(hits)
    )
    code, answer = serve_call(model_server, "/v1/chat/completions", SMALL)
    assert code == 200, answer


def test_serve_refusals_are_one_line(demo_paths, tally, tmp_path):
    """`studio serve --host 0.0.0.0` without a key, and `--port 99999` (an OverflowError traceback before), each say
    one line and start nothing; the server itself refuses a public host without a key too."""
    env = {k: v for k, v in os.environ.items() if k != SERVE_KEY_ENV}
    env["STUDIO_HOME"] = str(tmp_path)
    model = demo_paths["model_dir"]
    commands = {
        "serving::serve: --host 0.0.0.0 without a key refused in one line": (
            [sys.executable, "-m", "engine.cli", "serve", model, "--host", "0.0.0.0"],
            "refusing to serve on 0.0.0.0 without a key",
        ),
        "serving::serve: --port 99999 refused in one line": (
            [sys.executable, "-m", "engine.cli", "serve", model, "--port", "99999"],
            "--port 99999: choose a port from 0 to 65535",
        ),
        "serving::serve: the server refuses a public host without a key": (
            [sys.executable, "-m", "engine.trainer.serve", model, "--host", "0.0.0.0", "--events", "/dev/null"],
            "refusing to serve on 0.0.0.0 without a key",
        ),
    }
    for case, (argv, said) in commands.items():
        proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
        lines = proc.stderr.strip().splitlines()
        ok = proc.returncode == 2 and len(lines) == 1 and said in lines[0] and "Traceback" not in proc.stderr
        tally.check(case, ok, f"{proc.returncode}: {proc.stderr[-600:]}")
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
