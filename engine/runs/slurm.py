"""Slurm as a launch target: a run with ``launch.target: slurm`` is a batch job on the cluster, recorded in the
registry like any run (kind ``slurm``, tag ``slurm-job:<id>``), its folder on the shared filesystem.

- Submit (``submit_job``, called by ``engine.runs.registry.submit``): the batch script ``studio preview`` shows
  (``engine.runs.node_commands.slurm_script``: one srun task per node, ``--machine_rank`` from SLURM_NODEID, the
  allocation's first node as main address) is written to ``run.slurm`` in the run folder and submitted with
  ``sbatch --parsable``; the job's output goes to the folder's train.log.
- Follow (``follow``, registered with ``engine.runs.store.FOLLOWERS`` by ``engine.runs.registry``, so every refresh of
  the registry follows the job, and a restarted studio re-attaches from the registry row alone): ``squeue`` while Slurm
  holds the job (pending with its reason, running), then ``sacct``, then ``scontrol show job`` (clusters without
  accounting storage, where sacct has nothing: it keeps finished jobs for MinJobAge), then the run folder's events (a
  job Slurm has forgotten). The state is written to ``slurm.json`` in the run folder; events, metrics and logs are read
  from the folder like a local run's (the batch script samples every node's metrics:
  ``engine.runs.metrics.node_main``). Slurm is asked at most every ``FOLLOW_S`` seconds per run, however many pages
  poll it. ``describe`` is the job as every view shows it (the Runs tab, the dashboard, ``studio runs``): "Slurm job
  12: pending (Resources)"; the page explains the common reason codes in its language (``reason_message``), keeping
  Slurm's code.
- Stop (``cancel``): ``scancel --signal=TERM`` first (the trainer saves a checkpoint and stops; the batch script
  keeps the launcher alive meanwhile), ``scancel`` after the grace period: ``cancel`` waits for it, or with
  ``wait=False`` (the page's Stop) returns at once and the follower sends it once the grace period is over. A run
  stopped this way reads ``cancelled`` whether Slurm ended it or it ended itself after saving.

Settings (environment, like the studio's others): ``STUDIO_SLURM_BIN`` (the folder holding sbatch, squeue, scancel,
scontrol, sacct; empty: PATH), ``STUDIO_SLURM_SHARED`` (the shared run folder: Slurm runs' folders are made there,
and every node must see it at the same path), ``STUDIO_SLURM_PARTITION`` (the default partition). Light: stdlib only
besides the engine's light modules.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from engine.core import events, workspace
from engine.machine.hardware import Hardware, cpu_only, target_machine
from engine.runs import outputs, store
from engine.runs import run_end as run_end_mod
from engine.runs.launch import build_command, launch_record, owner_environment, write_config_files
from engine.runs.messages import MESSAGES
from engine.runs.messages import message as run_message
from engine.runs.node_commands import slurm_script
from engine.runs.processes import MARKER
from engine.runs.records import RunRecord
from engine.runs.run_end import with_log_tail
from engine.spec.schema import RunSpec

KIND = "slurm"
TAG = "slurm-job:"
REQUIRED = ("sbatch", "squeue", "scancel", "scontrol")
# Slurm's job states -> the state Studio shows (lower case; the ones a run can end in, and the two it waits in).
STATES = {
    "PENDING": "pending",
    "CONFIGURING": "pending",
    "REQUEUED": "pending",
    "REQUEUE_HOLD": "pending",
    "RESV_DEL_HOLD": "pending",
    "SUSPENDED": "pending",
    "RUNNING": "running",
    "COMPLETING": "running",
    "STAGE_OUT": "running",
    "SIGNALING": "running",
    "COMPLETED": "completed",
    "FAILED": "failed",
    "CANCELLED": "cancelled",
    "TIMEOUT": "timeout",
    "NODE_FAIL": "node failure",
    "OUT_OF_MEMORY": "out of memory",
    "BOOT_FAIL": "failed",
    "DEADLINE": "timeout",
    "PREEMPTED": "cancelled",
    "REVOKED": "cancelled",
}
WAITING = ("pending", "running")
FOLLOW_S = 2.0  # the shortest time between two looks at one job (every page's timer and the watchdog follow it)
# Local network filesystems count as shared; these are certainly not (checked only when the cluster has other nodes).
LOCAL_FS = ("ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "overlay", "zfs", "f2fs", "vfat", "ramfs")


@dataclass(frozen=True)
class Settings:
    bin_dir: str = ""
    shared: str = ""
    partition: str = ""


def settings() -> Settings:
    return Settings(
        os.environ.get("STUDIO_SLURM_BIN", "").strip(),
        os.environ.get("STUDIO_SLURM_SHARED", "").strip(),
        os.environ.get("STUDIO_SLURM_PARTITION", "").strip(),
    )


def tool(name: str, s: Settings | None = None) -> str | None:
    s = s or settings()
    if s.bin_dir:
        path = Path(s.bin_dir).expanduser() / name
        return str(path) if path.is_file() and os.access(path, os.X_OK) else None
    return shutil.which(name)


def _slurm(argv: list[str], s: Settings | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
    exe = tool(argv[0], s)
    if exe is None:
        return subprocess.CompletedProcess(argv, 127, "", f"{argv[0]} not found")
    try:
        return subprocess.run([exe, *argv[1:]], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess(argv, 1, "", str(exc))


def problems(s: Settings | None = None) -> list[tuple[str, object]]:
    """Why a Slurm run cannot be submitted from here, each under the field it concerns (empty: it can)."""
    s = s or settings()
    missing = [name for name in REQUIRED if tool(name, s) is None]
    if missing:
        where = s.bin_dir or "PATH"
        return [("launch.target", run_message("runs.slurm_missing", tools=", ".join(missing), where=where))]
    if not s.shared:
        return [("launch.target", run_message("runs.slurm_no_shared"))]
    shared = Path(s.shared).expanduser()
    if not shared.is_dir() or not os.access(shared, os.W_OK | os.X_OK):
        return [("launch.target", run_message("runs.slurm_shared_unusable", path=shared))]
    fs = filesystem_type(shared)
    if fs in LOCAL_FS and other_nodes():
        return [("launch.target", run_message("runs.slurm_not_shared", path=shared, fs=fs))]
    return []


def filesystem_type(path: Path) -> str:
    """The type of the filesystem holding ``path`` (from /proc/mounts; '' when unknown)."""
    best, kind = "", ""
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return ""
    target = str(Path(path).resolve())
    for line in lines:
        parts = line.split()
        if len(parts) >= 3:
            mount = parts[1].replace("\\040", " ")
            if (target == mount or target.startswith(mount.rstrip("/") + "/")) and len(mount) >= len(best):
                best, kind = mount, parts[2]
    return kind


def other_nodes() -> bool:
    """Whether the cluster has nodes other than this machine (then a local filesystem is not shared)."""
    import socket

    out = _slurm(["sinfo", "-h", "-N", "-o", "%n"]).stdout.split()
    here = {socket.gethostname(), socket.getfqdn(), "localhost"}
    return any(n not in here for n in out)


def runs_root() -> Path:
    return Path(settings().shared).expanduser()


def job_id(rec: RunRecord) -> str | None:
    return next((t[len(TAG) :] for t in rec.tags if t.startswith(TAG)), None)


def target_hardware(spec: RunSpec) -> Hardware:
    """The node the job runs on, not this machine: GPUs when asked for (device cuda or GPUs per node), else CPU."""
    ln = spec.launch
    gpus = ln.slurm.gpus_per_node
    if ln.device == "cpu" or (ln.device == "auto" and not gpus):
        return cpu_only()
    return target_machine(gpus or ln.num_processes, 80.0)


# ----------------------------------------------------------------------------------------------- submit
def submit_job(run_id: str) -> str | None:
    """Write the run's batch script and configs and submit it; returns the job id (None: it failed, with the
    reason recorded)."""
    rec = store.get(run_id, refresh_status=False)
    rdir = Path(rec.run_dir)
    s = settings()
    try:
        spec = rec.load_spec()
        plan = build_command(spec, rdir, target_hardware(spec))
        env = dict(plan.env)
        for key, value in os.environ.items():  # studio settings and the Slurm client's own (SLURM_CONF, ...)
            if (key.startswith("STUDIO_") and key != "STUDIO_AUTH") or key.startswith("SLURM_"):
                env.setdefault(key, value)
        env[MARKER] = run_id
        env["STUDIO_HOME"] = str(workspace.home())
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
        # sbatch hands the job its environment: in team mode the owner's own secrets, never the operator's unbound
        env = owner_environment(env, rec.owner, spec.notify.env_names())
        script = slurm_script(spec, plan.argv, env, run_dir=rdir, partition=s.partition)
        write_config_files(plan, rdir)
        (rdir / "run.slurm").write_text(script, encoding="utf-8")
        (rdir / "launch.json").write_text(
            json.dumps({"run_id": run_id, "target": "slurm", **launch_record(plan)}, indent=2), encoding="utf-8"
        )
        exe = tool("sbatch", s) or "sbatch"
        proc = subprocess.run(
            [exe, "--parsable", str(rdir / "run.slurm")], capture_output=True, text=True, env=env, timeout=60
        )
    except Exception as exc:  # noqa: BLE001 - any failure to submit fails the run with its reason
        return _fail_submit(run_id, f"{type(exc).__name__}: {exc}")
    jid = proc.stdout.strip().split(";")[0]
    if proc.returncode != 0 or not jid.isdigit():
        return _fail_submit(run_id, (proc.stderr or proc.stdout).strip() or f"exit code {proc.returncode}")
    store.update(run_id, tags=[*rec.tags, TAG + jid], command=[exe, "--parsable", str(rdir / "run.slurm")])
    _write_state(rdir, {"job_id": jid, "state": "pending", "reason": "", "slurm_state": "PENDING"})
    _set_active_reason(store.get(run_id, refresh_status=False), jid, "pending", "")
    return jid


def _fail_submit(run_id: str, error: str) -> None:
    store.update(
        run_id,
        only_if_status=("running",),
        status="failed",
        ended=time.time(),
        reason=str(run_message("runs.slurm_submit_failed", error=error[-2000:])),
    )
    return None


# ----------------------------------------------------------------------------------------------- follow
@dataclass
class JobState:
    state: str  # Studio's word (STATES values), or "unknown"
    slurm_state: str = ""
    reason: str = ""
    exit_code: str = ""
    source: str = ""


def query(jid: str, s: Settings | None = None) -> JobState:
    """The job's state from squeue, then sacct, then scontrol (no accounting storage: sacct has nothing)."""
    q = _slurm(["squeue", "-h", "-j", jid, "--states=all", "-o", "%T|%r"], s)
    line = q.stdout.strip().splitlines()[0] if q.returncode == 0 and q.stdout.strip() else ""
    if line:
        state, _, reason = line.partition("|")
        return _state(state, reason, "", "squeue")
    a = _slurm(["sacct", "-n", "-P", "-X", "-j", jid, "-o", "State,ExitCode,Reason"], s)
    line = a.stdout.strip().splitlines()[0] if a.returncode == 0 and a.stdout.strip() else ""
    if line:
        state, code, reason = (line.split("|") + ["", "", ""])[:3]
        return _state(state.split()[0], reason, code, "sacct")
    c = _slurm(["scontrol", "show", "job", jid, "-o"], s)
    if c.returncode == 0 and "JobState=" in c.stdout:
        fields = dict(re.findall(r"(\w+)=(\S*)", c.stdout))
        return _state(fields.get("JobState", ""), fields.get("Reason", ""), fields.get("ExitCode", ""), "scontrol")
    return JobState("unknown", source="none")


def _state(slurm_state: str, reason: str, code: str, source: str) -> JobState:
    word = slurm_state.strip().upper().rstrip("+")
    reason = "" if reason.strip() in ("None", "(null)") else reason.strip()
    return JobState(STATES.get(word, "unknown" if not word else word.lower()), word, reason, code, source)


def _write_state(rdir: Path, data: dict) -> None:
    data = {**data, "checked": time.time()}
    tmp = rdir / "slurm.json.tmp"
    try:
        tmp.write_text(json.dumps(data, indent=2), encoding="utf-8")
        tmp.replace(rdir / "slurm.json")
    except OSError:
        pass


def read_state(rec: RunRecord) -> dict:
    """What was last seen of the run's job (slurm.json): job_id, state, reason, slurm_state."""
    try:
        return json.loads((Path(rec.run_dir) / "slurm.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"job_id": job_id(rec), "state": "unknown", "reason": ""}


def state_message(state: str):
    """Studio's word for a job state as a catalog message (the page translates it); an unknown word as it is."""
    key = "runs.slurm_state_" + state.replace(" ", "_")
    return run_message(key) if key in MESSAGES else state


def describe(rec: RunRecord):
    """The run's Slurm job as the Runs tab, the dashboard and ``studio runs`` show it: "Slurm job 12: pending
    (Resources)", "Slurm job 12: completed" (a catalog message). None for a run that is not a Slurm job, or whose
    submission failed (its reason says why)."""
    if rec.kind != KIND:
        return None
    seen = read_state(rec)
    jid = seen.get("job_id") or job_id(rec)
    if not jid:
        return None
    reason = str(seen.get("reason") or "")
    state = str(seen.get("state") or "unknown")
    return _job_message(jid, state, reason)


def _job_message(jid: str, state: str, reason: str):
    return run_message("runs.slurm_active", job=jid, state=state_message(state), reason=reason_message(reason))


# Slurm's reason codes (squeue(1), JOB REASON CODES) the page explains: code -> catalog key "runs.slurm_reason_<x>".
# The QOS* and Assoc* limit families (QOSMaxJobsPerUserLimit, AssocGrpGRES, ...) by prefix, in reason_message.
REASONS: dict[str, str] = {
    "Resources": "resources",
    "Priority": "priority",
    "ReqNodeNotAvail": "node_not_avail",
    "BeginTime": "begin_time",
    "Dependency": "dependency",
    "DependencyNeverSatisfied": "dependency_never",
    "JobHeldUser": "held_user",
    "JobHeldAdmin": "held_admin",
    "PartitionTimeLimit": "partition_time_limit",
    "PartitionNodeLimit": "partition_node_limit",
    "PartitionDown": "partition_down",
    "PartitionInactive": "partition_down",
    "NodeDown": "node_down",
    "Reservation": "reservation",
    "Licenses": "licenses",
    "InvalidAccount": "invalid_account",
    "InvalidQOS": "invalid_qos",
    "BadConstraints": "bad_constraints",
    "Prolog": "prolog",
    "Cleaning": "cleaning",
    "WaitingForScheduling": "scheduling",
    "launch failed requeued held": "launch_failed",
}


def reason_message(reason: str):
    """Why the job waits as shown after its state: Slurm's code as Slurm wrote it (" (Resources)"), a catalog
    message for the codes the page explains in its language, plain text for others; "" for none."""
    if reason.strip() in ("", "None", "(null)"):
        return ""
    code = reason.split(",")[0].split("(")[0].strip()  # "ReqNodeNotAvail, UnavailableNodes:n1" -> ReqNodeNotAvail
    name = REASONS.get(code)
    limit = code.endswith("Limit") or code.startswith(("QOSGrp", "QOSMax", "AssocGrp", "AssocMax"))
    if name is None and limit and code.startswith(("QOS", "Assoc")):
        name = "qos_limit" if code.startswith("QOS") else "assoc_limit"
    return run_message(f"runs.slurm_reason_{name}", reason=reason) if name else f" ({reason})"


def _set_active_reason(rec: RunRecord, jid: str, state: str, reason: str) -> None:
    """While the job waits or runs, the registry's reason says so (Slurm job 12: pending (Resources)): every view of
    the registry (the page, ``studio runs``) shows it without knowing about Slurm."""
    text = str(_job_message(jid, state, reason))
    if text != rec.reason:
        store.update(rec.id, only_if_status=("running",), reason=text)


def follow(rec: RunRecord, *, force: bool = False) -> bool:
    """Bring a Slurm run's record in line with its job; True when the run ended now (registered with the store).
    Slurm is asked again only ``FOLLOW_S`` after the last look (``force``: now). A stop whose grace period is over
    while the job still runs is finished here with ``scancel`` (``cancel(wait=False)`` left it to this)."""
    jid = job_id(rec)
    if jid is None:
        return False
    rdir = Path(rec.run_dir)
    seen = read_state(rec)
    if not force and time.time() - float(seen.get("checked") or 0) < FOLLOW_S and seen.get("state") in WAITING:
        return False
    js = query(jid)
    if rec.stop_requested is not None and js.state in WAITING and time.time() - rec.stop_requested > _grace():
        _slurm(["scancel", jid])
    last = events.last_event(rec.events_path, events.TERMINAL_TYPES)
    if js.state == "unknown":  # Slurm forgot the job (no accounting, MinJobAge passed): the folder says how it ended
        if last is None:
            return False if js.source != "none" else _end(rec, jid, JobState("failed", reason="job lost"), last)
        js = JobState({"finished": "completed", "stopped": "cancelled"}.get(last["type"], "failed"), source="events")
    shown = js.state
    if rec.stop_requested and js.state not in WAITING:
        shown = "cancelled"
    _write_state(
        rdir,
        {"job_id": jid, "state": shown, "reason": js.reason, "slurm_state": js.slurm_state, "source": js.source},
    )
    if js.state in WAITING:
        _set_active_reason(rec, jid, js.state, js.reason)
        return False
    return _end(rec, jid, js, last)


def _end(rec: RunRecord, jid: str, js: JobState, last: dict | None) -> bool:
    if rec.stop_requested is not None:
        status, reason = "stopped", str(run_message("runs.slurm_cancelled", job=jid))
    elif js.state == "completed" and last is not None and last["type"] == "finished":
        status, reason = "completed", ""
    elif js.state == "cancelled":
        status, reason = "stopped", str(run_message("runs.slurm_cancelled", job=jid))
    else:
        cause = ""
        if last is not None and last["type"] == "failed":
            p = last["payload"]
            cause = f"{p.get('cause', 'other')}: {p.get('error', '')}".strip()
        elif js.state == "completed":
            cause = str(run_message("runs.exit0_unfinished"))
        head = str(run_message("runs.slurm_ended", job=jid, state=js.state, slurm=js.slurm_state or "?"))
        reason = f"{head}: {cause}" if cause else head
        tail = run_end_mod.tail_text(rec.log_path, 30)
        reason = with_log_tail(reason, tail)
        status = "failed"
    code = js.exit_code.split(":")[0]
    outputs.seal(rec.run_dir)
    return store.update(
        rec.id,
        only_if_status=("running",),
        status=status,
        reason=reason,
        ended=time.time(),
        exit_code=int(code) if code.isdigit() else None,
    )


# ----------------------------------------------------------------------------------------------- stop
def _grace() -> float:
    from engine.runs.scheduler import stop_grace_s

    return stop_grace_s()


def cancel(run_id: str, grace_s: float | None = None, *, wait: bool = True) -> bool:
    """Stop a Slurm run: SIGTERM to the job's steps (the trainer saves a checkpoint), scancel after ``grace_s``
    (default STUDIO_STOP_GRACE), then wait for Slurm to end it. True when the job has ended. ``wait=False``: the
    SIGTERM (a pending job: the scancel) and return; ``follow`` sends the scancel once STUDIO_STOP_GRACE is over."""
    rec = store.get(run_id)
    jid = job_id(rec)
    if rec.status != "running" or jid is None:
        return True
    store.update(run_id, stop_requested=time.time())
    state = query(jid).state
    if state == "running":
        _slurm(["scancel", "--signal=TERM", jid])
        if not wait:
            return False
        deadline = time.time() + (_grace() if grace_s is None else grace_s)
        while time.time() < deadline and query(jid).state == "running":
            time.sleep(0.5)
    if query(jid).state in WAITING:
        _slurm(["scancel", jid])
    if not wait:
        return False
    deadline = time.time() + 120
    while time.time() < deadline and query(jid).state in WAITING:
        time.sleep(0.5)
    follow(store.get(run_id, refresh_status=False), force=True)
    return query(jid).state not in WAITING
