"""A real one-host Slurm cluster for tests: munged, slurmctld and slurmd started as processes of the test (in the
foreground, -D / -F), on 127.0.0.1 and free ports, with their configuration, state and logs in a temporary folder;
stopped by their process ids. Needs Debian's slurm-wlm and munge (scripts/bootstrap.sh --test installs them) and
root (slurmd starts jobs as their users); ``unavailable()`` says why not where it cannot run.

The configuration is the smallest that runs jobs without cgroups or a database: proctrack/linuxproc, task/none,
select/cons_tres, no accounting (so ``sacct`` has nothing; Studio falls back to ``scontrol show job``).

To try Studio's Slurm runs by hand on one machine, as root: ``python -m tests.slurm_cluster [FOLDER]`` starts the
same cluster, prints the two variables to export in the shell that runs ``studio webui`` or ``studio train``
(``SLURM_CONF``, and ``STUDIO_SLURM_SHARED``, a folder in FOLDER) and keeps it up until Ctrl-C.

``session_cluster`` is the session's one cluster (the ``slurm_cluster`` fixture of tests/conftest.py, shared by the
engine's Slurm tests and the browser test): it exports SLURM_CONF for the session, so the studio servers the tests
start find it too; at the end it cancels any job left and stops the daemons.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scancel", "scontrol", "sinfo")


def _which(name: str) -> str | None:
    return shutil.which(name) or next(
        (str(p) for p in (Path("/usr/sbin") / name, Path("/usr/bin") / name) if p.exists()), None
    )


def unavailable() -> str | None:
    """Why a test cluster cannot start here (None: it can)."""
    missing = [n for n in (*DAEMONS, *CLIENTS) if _which(n) is None]
    if missing:
        return f"Slurm / munge not installed ({', '.join(missing)} missing; scripts/bootstrap.sh --test installs them)"
    if os.geteuid() != 0:
        return "the test cluster's slurmd must run as root"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Cluster:
    folder: Path
    conf: Path
    env: dict[str, str]
    node: str
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), env=self.env, capture_output=True, text=True, timeout=60, check=check)

    def log(self, name: str, n: int = 30) -> str:
        path = self.folder / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:]) if path.exists() else "(no log)"

    def stop(self) -> None:
        for name in reversed(DAEMONS):
            proc = self.procs.get(name)
            if proc is None or proc.poll() is not None:
                continue
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def start(folder: Path, *, cpus: int = 2, kill_wait: int = 30) -> Cluster:
    """Write the configuration into ``folder``, start the three daemons and wait until the node is idle."""
    folder.mkdir(parents=True, exist_ok=True)
    for sub in ("state", "spool", "munge"):
        (folder / sub).mkdir(exist_ok=True)
    os.chmod(folder / "munge", 0o700)
    key = folder / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    os.chmod(key, 0o400)
    sock = folder / "munge" / "munge.sock"
    host = socket.gethostname()
    node = "studio-node"
    conf = folder / "slurm.conf"
    conf.write_text(
        f"""ClusterName=studiotest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={sock}
CredType=cred/munge
StateSaveLocation={folder / "state"}
SlurmdSpoolDir={folder / "spool"}
SlurmctldPidFile={folder / "slurmctld.pid"}
SlurmdPidFile={folder / "slurmd.pid"}
SlurmctldLogFile={folder / "slurmctld.log"}
SlurmdLogFile={folder / "slurmd.log"}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
MinJobAge=3600
KillWait={kill_wait}
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=60
NodeName={node} NodeHostname={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=1024 State=UNKNOWN
PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP
""",
        encoding="utf-8",
    )
    env = dict(os.environ, SLURM_CONF=str(conf))
    cluster = Cluster(folder, conf, env, node)
    commands = {
        "munged": [
            _which("munged"),
            "-F",
            "--force",
            f"--key-file={key}",
            f"--socket={sock}",
            f"--pid-file={folder / 'munge' / 'munged.pid'}",
            f"--log-file={folder / 'munged.log'}",
            f"--seed-file={folder / 'munge' / 'seed'}",
        ],
        "slurmctld": [_which("slurmctld"), "-D", "-i", "-f", str(conf)],
        "slurmd": [_which("slurmd"), "-D", "-N", node, "-f", str(conf)],
    }
    try:
        for name, argv in commands.items():
            out = open(folder / f"{name}.out", "wb")
            cluster.procs[name] = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
            if name == "munged":
                _wait(lambda: sock.exists(), 20, cluster, name)
            if name == "slurmctld":
                _wait(lambda: cluster.run("scontrol", "ping", check=False).stdout.count("UP") > 0, 40, cluster, name)
        _wait(
            lambda: "idle" in cluster.run("sinfo", "-h", "-N", "-o", "%t", check=False).stdout, 60, cluster, "slurmd"
        )
    except BaseException:
        cluster.stop()
        raise
    return cluster


def session_cluster(tmp_path_factory):
    """Generator behind the ``slurm_cluster`` fixture: skips (saying why) where a cluster cannot start."""
    import pytest

    reason = unavailable()
    if reason:
        pytest.skip(reason)
    try:
        c = start(tmp_path_factory.mktemp("slurm"), kill_wait=15)
    except RuntimeError as exc:
        pytest.skip(f"a one-host Slurm cluster does not start on this machine: {exc}")
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(c.conf)
    try:
        yield c
    finally:
        jobs = c.run("squeue", "-h", "-o", "%i", check=False).stdout.split()
        if jobs:
            c.run("scancel", *jobs, check=False)
            deadline = time.time() + 60
            while time.time() < deadline and c.run("squeue", "-h", "-o", "%i", check=False).stdout.strip():
                time.sleep(0.5)
        c.stop()
        if old is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old


def _wait(cond, timeout: float, cluster: Cluster, name: str) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        proc = cluster.procs[name]
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode}:\n{_out(cluster, name)}")
        if cond():
            return
        time.sleep(0.2)
    raise RuntimeError(f"{name} not ready within {timeout}s:\n{_out(cluster, name)}")


def _out(cluster: Cluster, name: str) -> str:
    texts = []
    for suffix in ("out", "log"):
        path = cluster.folder / f"{name}.{suffix}"
        if path.exists():
            texts.append("\n".join(path.read_text(errors="replace").splitlines()[-20:]))
    return "\n".join(texts)


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.slurm_cluster [FOLDER]``: a one-host cluster to try Slurm runs with, up until Ctrl-C."""
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python -m tests.slurm_cluster", description=main.__doc__)
    ap.add_argument("folder", nargs="?", default="/tmp/studio-slurm", help="configuration, state, logs, shared runs")
    ap.add_argument("--cpus", type=int, default=os.cpu_count() or 2, help="CPUs the node offers (default: all)")
    args = ap.parse_args(argv)
    reason = unavailable()
    if reason:
        print(f"cannot start a Slurm cluster here: {reason}", file=sys.stderr)
        return 1
    folder = Path(args.folder).resolve()
    cluster = start(folder, cpus=args.cpus)
    shared = folder / "shared"
    shared.mkdir(exist_ok=True)
    print(f"a one-host Slurm cluster is up (node {cluster.node}, partition debug); in the shell that runs studio:")
    print(f"  export SLURM_CONF={cluster.conf}")
    print(f"  export STUDIO_SLURM_SHARED={shared}")
    print("then set launch.target: slurm in a spec (or the Train tab's Slurm section). Ctrl-C stops the cluster.")
    sys.stdout.flush()
    stop = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop)  # the daemons already run: they keep their own signal masks
    try:
        signal.sigwait(stop)
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
