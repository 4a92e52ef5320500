"""The queue and the processes of runs: which queued run starts where, how it is launched detached, how it is
found and stopped. Light: stdlib, psutil, engine.runs.store / workspace / hardware; engine.runs.launch is imported
when a training run starts (it is light too).

Allocation (``plan_starts``, pure): runs start in submission order. On a machine without GPUs (or a spec with
``launch.device: cpu``) a run takes one of ``STUDIO_CPU_SLOTS`` (default 1) slots. A GPU run takes its explicit
``launch.gpus`` or ``num_processes`` free GPUs; a GPU is never given to two runs unless the later run sets
``launch.share_gpus``. A run that cannot start holds its place: later runs may only use GPUs it does not wait for.

Launch: ``python -m engine.runs.runner --detach <run_dir>`` is started with the run's complete environment (secrets
stay in memory: only env *keys* go to launch.json). The wrapper forks, the intermediate exits at once and is reaped
here, so the run belongs to no studio process: killing the studio leaves it training.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from engine.core import workspace
from engine.runs import fair, outputs, records, store
from engine.runs.messages import message as run_message
from engine.runs.node_commands import SECRET_ENV
from engine.runs.processes import MARKER, WRAPPER_MODULE, ask_to_stop, is_wrapper, runner_alive, signal_all
from engine.runs.store import run_processes

ROOT = Path(__file__).resolve().parents[2]


# A command run tagged so waits for requests (``studio serve``): on a machine without GPUs it takes no CPU slot, so a
# served model does not keep every CPU training run queued for as long as it serves (it computes only while it
# answers; on a GPU it holds its GPU, whose memory it needs). engine.export.serve_jobs tags its runs with it.
SERVE_TAG = "serve"


@dataclass
class Want:
    """What one queued run asks for (``slot``: a CPU run that takes one of the CPU slots)."""

    run_id: str
    cpu: bool
    count: int = 0
    ids: list[int] | None = None
    share: bool = False
    slot: bool = True


def holds_cpu_slot(rec: records.RunRecord) -> bool:
    """Whether a CPU run (no GPUs) counts against STUDIO_CPU_SLOTS: every one but a server."""
    return not (rec.kind == "command" and SERVE_TAG in (rec.tags or []))


def slot_holders(rec: records.RunRecord) -> list[records.RunRecord]:
    """The running runs that hold what the queued ``rec`` waits for: the CPU slots for a CPU run, the GPUs for a GPU
    run (all of them: which GPUs free first is unknown). For the page and the CLI to name, with their Stop."""
    from engine.machine import hardware

    want = _want(rec, hardware.detect().has_gpu)
    running = [r for r in store.list_runs("running", refresh_status=False) if r.kind in ("train", "command")]
    if want.cpu:
        return [r for r in running if not r.gpus and holds_cpu_slot(r)]
    return [r for r in running if r.gpus]


def cpu_slots() -> int:
    try:
        return max(1, int(os.environ.get("STUDIO_CPU_SLOTS", "1")))
    except ValueError:
        return 1


def plan_starts(
    running: list[tuple[bool, list[int]]], queued: list[Want], gpu_ids: list[int], slots: int
) -> tuple[list[tuple[str, list[int]]], dict[str, str]]:
    """Pure allocation. ``running``: (is_cpu, gpus) per running run. Returns ([(run_id, gpus)] to start,
    {run_id: reason} for runs that can never start on this machine)."""
    used = {g for is_cpu, gs in running if not is_cpu for g in gs}
    cpu_used = sum(1 for is_cpu, _ in running if is_cpu)
    reserved: set[int] = set()  # GPUs that an earlier, waiting run asked for by id
    count_blocked = cpu_blocked = False
    starts: list[tuple[str, list[int]]] = []
    impossible: dict[str, str] = {}
    for w in queued:
        if w.cpu and not w.slot:
            starts.append((w.run_id, []))
            continue
        if w.cpu:
            if cpu_blocked or cpu_used >= slots:
                cpu_blocked = True
                continue
            cpu_used += 1
            starts.append((w.run_id, []))
            continue
        if w.ids is not None:
            missing = [g for g in w.ids if g not in gpu_ids]
            if missing:
                impossible[w.run_id] = f"launch.gpus: GPU {missing} not on this machine (it has {gpu_ids})"
                continue
            busy = set(w.ids) & reserved or (set(w.ids) & used and not w.share)
            if busy:
                reserved |= set(w.ids)
                continue
            used |= set(w.ids)
            starts.append((w.run_id, list(w.ids)))
            continue
        if w.count > len(gpu_ids):
            impossible[w.run_id] = f"launch.num_processes: needs {w.count} GPUs, this machine has {len(gpu_ids)}"
            continue
        if count_blocked:
            continue
        pool = [g for g in gpu_ids if g not in used and g not in reserved]
        if len(pool) < w.count and w.share:
            pool += [g for g in gpu_ids if g in used and g not in reserved]
        if len(pool) < w.count:
            count_blocked = True
            continue
        chosen = sorted(pool[: w.count])
        used |= set(chosen)
        starts.append((w.run_id, chosen))
    return starts, impossible


def _want(rec: records.RunRecord, has_gpu: bool) -> Want:
    if rec.kind == "command":
        cpu = not (has_gpu and rec.gpu_count)
        return Want(rec.id, cpu=cpu, count=rec.gpu_count, slot=not cpu or holds_cpu_slot(rec))
    spec = rec.load_spec()
    ln = spec.launch
    if not has_gpu or ln.device == "cpu" or ln.target == "ray":  # Ray gives its workers their resources itself
        return Want(rec.id, cpu=True)
    return Want(rec.id, cpu=False, count=ln.num_processes, ids=list(ln.gpus) if ln.gpus else None, share=ln.share_gpus)


def schedule() -> list[str]:
    """Start every queued run that fits now. Safe to call from several processes at once (the claim is one
    IMMEDIATE transaction). Called by submit, by each run's wrapper when it ends, and by the UI/CLI."""
    from engine.machine import hardware

    store.refresh()
    hw = hardware.detect()
    gpu_ids = [g.index for g in hw.gpus]
    started: list[str] = []
    while True:
        with store.transaction() as conn:
            # Submission order: ids share their second, so their random suffix must not decide.
            rows = conn.execute(
                "SELECT * FROM runs WHERE status IN ('running', 'queued') ORDER BY created, id"
            ).fetchall()
            recs = [records.row_to_record(r) for r in rows]
            # a run elsewhere (a Slurm job: kind "slurm") takes no slot of this machine
            holding = [  # the runs that hold a GPU or a CPU slot here
                r
                for r in recs
                if r.status == "running" and r.kind in ("train", "command") and (r.gpus or holds_cpu_slot(r))
            ]
            running = [(not r.gpus, r.gpus) for r in holding]
            # ... and a run whose processes live on where the registry does not say "running" (a registry rebuilt
            # while it was being launched, a row lost) still holds its slot: counted from the processes themselves
            alive = _live_runs() if any(r.status == "queued" for r in recs) else {}
            if alive:  # a run already ended (its wrapper still recording the end) holds nothing
                ended = {
                    row[0] for row in conn.execute("SELECT id FROM runs WHERE status NOT IN ('running', 'queued')")
                }
                alive = {k: v for k, v in alive.items() if k not in ended}
            listed = {r.id for r in recs if r.status == "running"}
            running += [(not gpus, gpus) for run_id, gpus in alive.items() if run_id not in listed]
            queued, impossible = [], {}
            waiting = [r for r in recs if r.status == "queued" and r.id not in alive]
            for r in fair.within_limits(fair.order(waiting, _last_starts(conn)), _by_owner(holding))[0]:
                try:
                    queued.append(_want(r, hw.has_gpu))
                except Exception as exc:  # noqa: BLE001 - a spec that no longer parses: fail it, move on
                    impossible[r.id] = f"spec: {exc}"
            starts, more = plan_starts(running, queued, gpu_ids, cpu_slots())
            impossible.update(more)
            now = time.time()
            for run_id, reason in impossible.items():
                conn.execute(
                    "UPDATE runs SET status='failed', reason=?, ended=? WHERE id=? AND status='queued'",
                    (reason, now, run_id),
                )
                _note_final(next(r for r in recs if r.id == run_id), "failed", reason, now)
            for run_id, gpus in starts:
                conn.execute(
                    "UPDATE runs SET status='running', started=?, gpus=?, runner_pid=NULL, pid=NULL, "
                    "pgid=NULL WHERE id=? AND status='queued'",
                    (now, json.dumps(gpus), run_id),
                )
        if not starts:
            return started
        for run_id, gpus in starts:
            try:
                launch(store.get(run_id, refresh_status=False), gpus, hw)
                started.append(run_id)
            except Exception as exc:  # noqa: BLE001
                # a run that cannot launch fails with the reason and frees its claim; the queue moves on. A stop
                # that landed while it was being launched (its signal may be why the launch failed) is a stop.
                rec = store.get(run_id, refresh_status=False)
                status, reason = "failed", f"could not start: {type(exc).__name__}: {exc}"
                if rec.stop_requested is not None:
                    status, reason = "stopped", run_message("store.stopped_before_start")
                if store.update(run_id, only_if_status=("running",), status=status, ended=time.time(), reason=reason):
                    _note_final(rec, status, reason, time.time())


def queue_order() -> list[records.RunRecord]:
    """The queued runs in the order the scheduler offers them the machine (``engine.runs.fair.order``), whoever may
    see them: what a queued run's position and ``studio queue list`` say."""
    recs = store.list_runs(refresh_status=False)
    last: dict[str, float] = {}
    for r in recs:
        if r.started is not None:
            last[r.owner or ""] = max(r.started, last.get(r.owner or "", r.started))
    return fair.order(sorted((r for r in recs if r.status == "queued"), key=lambda r: (r.created, r.id)), last)


def _last_starts(conn) -> dict[str, float]:
    """owner -> when their newest run started (engine.runs.fair takes turns from it)."""
    rows = conn.execute("SELECT owner, MAX(started) FROM runs WHERE started IS NOT NULL GROUP BY owner").fetchall()
    return {str(o or ""): float(t) for o, t in rows if t is not None}


def _by_owner(runs: list[records.RunRecord]) -> dict[str, int]:
    """owner -> how many of ``runs`` are theirs (a member's ``max_running`` counts the runs holding a slot)."""
    out: dict[str, int] = {}
    for r in runs:
        out[r.owner or ""] = out.get(r.owner or "", 0) + 1
    return out


def _live_runs() -> dict[str, list[int]]:
    """{run id: its GPUs (launch.json)} of every run of this workspace with a live process carrying the
    ``STUDIO_RUN_ID`` marker (and this workspace's STUDIO_HOME) that still holds a slot, except this process (a
    wrapper scheduling the queue at its end): not a run that ended or was forgotten, nor the lone wrapper of a run
    deleted with its folder (see below)."""
    found: dict[str, list[int]] = {}
    home = str(workspace.home())
    for proc in psutil.process_iter():
        if proc.pid == os.getpid():
            continue
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            env = proc.environ()
        except (psutil.Error, OSError):
            continue
        run_id = env.get(MARKER)
        if run_id and env.get("STUDIO_HOME") == home and run_id not in found:
            rdir = workspace.runs_dir() / Path(run_id).name
            # A run that ended (exit.json: its wrapper is recording the end) or was deleted with its files kept
            # (forgotten) holds nothing, nor does the wrapper of a run whose folder is gone (deleted while the wrapper
            # was still ending): its row may be gone already, and the wrapper's own scheduling of the queue may have
            # come before a run submitted now. Any other process of a run without a folder (a registry lost, the
            # folders too) still holds its slot.
            if (rdir / "exit.json").is_file() or (records.read_json(rdir / records.RUN_NOTES) or {}).get("forgotten"):
                continue
            if not rdir.is_dir() and is_wrapper(proc):
                continue
            launched = records.read_json(rdir / "launch.json") or {}
            found[run_id] = [int(g) for g in launched.get("gpus") or []]
    return found


def _note_final(rec: records.RunRecord, status: str, reason: str, ended: float) -> None:
    """An end that no wrapper records in the folder (exit.json): kept in run.json for a registry rebuild."""
    records.note(rec.run_dir, final={"status": status, "reason": str(reason), "ended": ended})


def _pass_env(rdir: Path) -> list[str]:
    """The environment variables a command run asks for by name (its folder's ``pass_env.json``)."""
    try:
        names = json.loads((rdir / "pass_env.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [n for n in names if isinstance(n, str) and n.isidentifier()] if isinstance(names, list) else []


def launch(rec: records.RunRecord, gpus: list[int], hw=None) -> int:
    """Start a claimed run: write its launch files (``launch.json``: argv, GPUs, env keys; a training run's configs
    from ``engine.runs.launch.build_command``) and start its detached wrapper; returns the wrapper's pid."""
    rdir = Path(rec.run_dir)
    if rec.kind == "train":
        from engine.models.hub_cache import download_first
        from engine.runs.launch import build_command, launch_record, write_config_files

        spec = rec.load_spec()
        outputs.claim(rdir, rec.output_dir)  # the output folder is the run's only if it creates it here
        plan = build_command(spec, rdir, hw, gpu_ids=gpus or None)
        write_config_files(plan, rdir)
        # A hub model not complete in the cache is downloaded first, by the same run (engine.models.download).
        argv, env = download_first(spec, plan.argv, rdir), dict(plan.env)
        extra = launch_record(plan)
    else:
        from engine.machine.hardware import detect
        from engine.runs.launch import subprocess_env

        # The same allow-listed environment as a trainer's, never the studio's own (its login, unrelated secrets).
        argv, env, extra = list(rec.command or []), subprocess_env("cuda" if gpus else "cpu", gpus, hw or detect()), {}
    # Studio settings (CPU slots, metrics interval, ...) must reach the wrapper: it schedules the queue when its
    # run ends, possibly with no studio left. STUDIO_AUTH (the page's login) is a secret and stays behind.
    for key, value in os.environ.items():
        if key.startswith("STUDIO_") and key != "STUDIO_AUTH":
            env.setdefault(key, value)
    if rec.kind == "train":  # the notifications' secrets (engine.watch.notify): in memory only, like every value here
        for name in spec.notify.env_names():
            if os.environ.get(name):
                env.setdefault(name, os.environ[name])
    else:  # a command's secrets by name (an evaluation's judge key: engine.jobs.evals): values in memory only
        for name in _pass_env(rdir):
            if os.environ.get(name):
                env.setdefault(name, os.environ[name])
    # Team mode: whose run it is and the secret variables it may read, for the wrapper, which gives the run's
    # processes the owner's own secrets (engine.core.member_secrets.run_environment); the wrapper itself keeps the
    # studio's environment, since it starts the next queued run, maybe another account's
    named = spec.notify.env_names() if rec.kind == "train" else _pass_env(rdir)
    owner = {"owner": rec.owner, "secret_names": [*SECRET_ENV, *named]}
    env[MARKER] = rec.id
    env["STUDIO_HOME"] = str(workspace.home())
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    info = {"run_id": rec.id, "env_keys": sorted(env), "gpus": gpus, **owner, **extra, "argv": argv}  # argv: what runs
    tmp = rdir / "launch.json.tmp"
    tmp.write_text(json.dumps(info, indent=2), encoding="utf-8")
    tmp.replace(rdir / "launch.json")
    proc = subprocess.Popen(
        [sys.executable, "-m", WRAPPER_MODULE, "--detach", str(rdir)],
        env=env,
        cwd=str(ROOT),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        close_fds=True,
    )
    out, err = proc.communicate(timeout=60)  # the intermediate prints the wrapper's pid and exits at once
    if proc.returncode != 0:
        detail = err.decode(errors="replace")[-2000:].strip() or run_message("store.how_exit", code=proc.returncode)
        raise RuntimeError(run_message("store.wrapper_failed", error=detail))
    pid = int(out.split()[0])
    store.update(rec.id, only_if_status=("running",), runner_pid=pid)
    return pid


def stop_grace_s() -> float:
    """How long a stopped trainer may take to save its checkpoint before SIGKILL (STUDIO_STOP_GRACE, seconds).
    Saving a large model's checkpoint takes minutes, so the default is generous."""
    try:
        return max(1.0, float(os.environ.get("STUDIO_STOP_GRACE", "120")))
    except ValueError:
        return 120.0


def stop_run(run_id: str, grace_s: float | None = None, *, wait: bool = True) -> bool:
    """SIGTERM to the run's process group and every marked process (DDP ranks live in their own sessions), SIGCONT
    so a frozen (SIGSTOPped) one acts on it, SIGKILL after the grace period, then wait until none remains and the
    wrapper has recorded the end. ``wait=False`` (the page): signal and return at once; a background thread
    finishes the stop (and the studio's watchdog finishes it if this process goes away, see ``overdue_stops``)."""
    now = time.time()
    if store.update(
        run_id,
        only_if_status=("queued",),
        status="stopped",
        ended=now,
        reason="removed from the queue",
        stop_requested=now,
    ):
        _note_final(store.get(run_id, refresh_status=False), "stopped", "removed from the queue", now)
        return True
    rec = store.get(run_id)
    if rec.status != "running":
        return not run_processes(run_id)
    store.update(run_id, stop_requested=now)
    records.note(rec.run_dir, stop_requested=now)
    procs = run_processes(run_id)
    ask_to_stop(procs, rec.pgid)
    signal_all(procs, signal.SIGCONT, rec.pgid)
    grace = stop_grace_s() if grace_s is None else grace_s
    if not wait:
        import threading

        def finish() -> None:
            try:
                _finish_stop(run_id, rec.pgid, now + grace)
            except Exception as exc:  # noqa: BLE001 - the watchdog's overdue_stops finishes what this could not
                print(f"studio: stopping {run_id}: {type(exc).__name__}: {exc}", file=sys.stderr)

        threading.Thread(target=finish, name=f"stop-{run_id}", daemon=True).start()
        return not procs
    return _finish_stop(run_id, rec.pgid, now + grace)


def _finish_stop(run_id: str, pgid: int | None, deadline: float) -> bool:
    """The rest of a stop: SIGKILL what is left at ``deadline``, end a wrapper that hangs, record the end."""
    while time.time() < deadline and run_processes(run_id):
        time.sleep(0.2)
    left = run_processes(run_id)
    if left:
        signal_all(left, signal.SIGKILL, pgid)
    until = time.time() + 10.0
    while time.time() < until and (run_processes(run_id) or runner_alive(store.get(run_id, refresh_status=False))):
        time.sleep(0.1)
    rec = store.get(run_id, refresh_status=False)
    if runner_alive(rec):  # the wrapper hangs after its trainer is gone: end it too
        signal_all([psutil.Process(rec.runner_pid)], signal.SIGKILL)
    store.refresh(run_id)
    return not run_processes(run_id) and not runner_alive(rec)


def overdue_stops(grace_s: float | None = None) -> list[str]:
    """Running runs whose stop was asked for longer ago than the grace period (and 10 s for the wrapper) but
    whose processes live on: SIGKILL them. The studio's watchdog calls this, so a stop finishes even when the
    process that asked for it (a page request, a CLI) is gone."""
    grace = stop_grace_s() if grace_s is None else grace_s
    killed = []
    for rec in store.list_runs("running", refresh_status=False):
        if rec.stop_requested is None or time.time() - rec.stop_requested < grace + 10.0:
            continue
        if rec.kind not in ("train", "command"):  # a Slurm job is stopped by scancel (engine.runs.slurm.cancel)
            continue
        left = run_processes(rec.id)
        if runner_alive(rec):
            try:
                left.append(psutil.Process(rec.runner_pid))
            except psutil.Error:
                pass
        if left:
            signal_all(left, signal.SIGKILL, rec.pgid)
            killed.append(rec.id)
    return killed
