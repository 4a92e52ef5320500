"""A real nginx in front of a studio, as an operator puts one: HTTP basic auth at nginx (the pattern oauth2-proxy and
``auth_request`` follow: the proxy logs the person in and names them in a header), the account in
``X-Forwarded-User``, the client in ``X-Forwarded-For``. Started by the test in the foreground (one process,
``master_process off``), on 127.0.0.1 and a free port, its configuration, logs and temporary files in a folder of the
test's; stopped by its process id.

nginx reaches the studio from ``127.0.0.2`` (``proxy_bind``; all of 127.0.0.0/8 is this host), so a studio that trusts
127.0.0.2 as its proxy still sees a client that connects to it directly from 127.0.0.1 as a stranger. Needs Debian's
nginx (scripts/bootstrap.sh --test installs nginx-light); ``unavailable()`` says why not where it cannot run.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

PROXY_ADDRESS = "127.0.0.2"
USER_HEADER = "X-Forwarded-User"


def binary() -> str | None:
    return shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if Path(p).exists()), None)


def unavailable() -> str | None:
    return None if binary() else "nginx not installed (scripts/bootstrap.sh --test installs Debian's nginx-light)"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


CONF = """daemon off;
master_process off;
worker_processes 1;
pid {folder}/nginx.pid;
error_log {folder}/error.log info;
events {{ worker_connections 256; }}
http {{
    access_log {folder}/access.log;
    client_body_temp_path {folder}/body;
    proxy_temp_path {folder}/proxy;
    fastcgi_temp_path {folder}/fastcgi;
    uwsgi_temp_path {folder}/uwsgi;
    scgi_temp_path {folder}/scgi;
    client_max_body_size 300m;
    map $http_upgrade $connection_upgrade {{ default upgrade; '' close; }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            auth_basic "studio";
            auth_basic_user_file {folder}/htpasswd;
            proxy_pass http://127.0.0.1:{upstream};
            proxy_bind {proxy_address};
            proxy_http_version 1.1;
            proxy_set_header Host $http_host;
            proxy_set_header {user_header} $remote_user;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_buffering off;
            proxy_read_timeout 300s;
        }}
    }}
}}
"""


class Nginx:
    """nginx on 127.0.0.1 in front of the studio at ``upstream`` (a port), with these logins (name -> password)."""

    def __init__(self, folder: Path, upstream: int, logins: dict[str, str]):
        self.folder, self.port = folder, _free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / "htpasswd", "w", encoding="utf-8") as out:  # nginx reads {SHA}: base64 of the SHA-1
            for name, password in logins.items():
                out.write(f"{name}:{{SHA}}{base64.b64encode(hashlib.sha1(password.encode()).digest()).decode()}\n")
        conf = CONF.format(
            folder=folder, port=self.port, upstream=upstream, proxy_address=PROXY_ADDRESS, user_header=USER_HEADER
        )
        (folder / "nginx.conf").write_text(conf, encoding="utf-8")
        with open(folder / "stderr.log", "wb") as err:
            self.proc = subprocess.Popen(
                [binary(), "-c", str(folder / "nginx.conf"), "-p", str(folder)],
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,
            )

    def wait_up(self, timeout: float = 30) -> None:
        t0 = time.time()
        while time.time() - t0 < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nginx exited {self.proc.returncode}: {self.log()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"nginx did not listen in {timeout} s: {self.log()}")

    def log(self) -> str:
        return "".join(
            p.read_text(errors="replace")[-1500:]
            for p in (self.folder / "stderr.log", self.folder / "error.log")
            if p.exists()
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGQUIT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
