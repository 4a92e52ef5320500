"""The run registry (of runs; datasets are ``engine.data.dataset_registry``'s): every run ever submitted, its status,
and the operations on it (submit, stop, delete, ...).

Light; never torch. The records live in ``engine.runs.store`` (one SQLite file shared by the page, the CLI and
each run's wrapper), whose reading functions are re-exported here so callers use one module for runs.

Status is never trusted blindly: ``refresh`` derives it from the run folder (``exit.json`` written by the wrapper,
the last terminal event) and from process liveness, so a run whose trainer was SIGKILLed reads ``failed`` with its
log tail as soon as anyone looks. Processes are found by the ``STUDIO_RUN_ID`` marker in their environment (every
process of a run inherits it, even DDP ranks that torch starts in their own sessions). Scheduling and process
control live in ``engine.runs.scheduler``.
"""

from __future__ import annotations

import shutil
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from engine.core import accounts, acting, audit, folders, page_trust, workspace
from engine.core.messages import Message
from engine.core.units import file_size
from engine.runs import (
    checkpoints,
    launch,
    outputs,
    overwrite,
    records,
    run_end,
    scheduler,
    slurm,
    store,
    submit_checks,
)
from engine.runs.messages import message as run_message
from engine.runs.owners import get, list_runs, log_tail, owned, run_dir  # noqa: F401 - as the caller may see them
from engine.runs.records import RunRecord, RunsError
from engine.runs.store import _claim_run_dir, _insert, transaction, update
from engine.runs.submit_checks import output_folder
from engine.spec.messages import message
from engine.spec.schema import RunSpec, SpecError, dump_spec, save_spec, spec_to_dict, validate_spec

# The registry's refresh asks each kind's follower for runs not started here: a Slurm job through squeue / scontrol.
store.FOLLOWERS[slurm.KIND] = slurm.follow


# ----------------------------------------------------------------------------------------------- submit
def _as_spec_data(spec: RunSpec | dict | str | Path) -> Any:
    if isinstance(spec, RunSpec):
        return spec_to_dict(spec)
    if isinstance(spec, Path) or (isinstance(spec, str) and "\n" not in spec and spec.endswith((".yaml", ".yml"))):
        try:
            return yaml.safe_load(Path(spec).read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise SpecError([("spec", message("spec_unreadable", path=spec, reason=exc))], str(spec)) from None
    if isinstance(spec, str):
        try:
            return yaml.safe_load(spec)
        except yaml.YAMLError as exc:
            raise SpecError([("spec", run_message("runs.spec_bad_yaml", error=exc))]) from None
    return spec


def submit(
    spec: RunSpec | dict | str | Path, *, name: str | None = None, tags: list[str] | None = None, start: bool = True
) -> str:
    """Validate (fields, cross-field and context rules), create the run folder with spec.yaml, queue the run and,
    with ``start``, schedule it. Raises SpecError listing every problem; no invalid spec reaches a process."""
    valid, errors, _warnings = validate_spec(_as_spec_data(spec))
    if errors or valid is None:
        raise SpecError(errors or [("spec", run_message("runs.spec_invalid"))])
    errors = (
        submit_checks.output_problems(valid)
        + submit_checks.data_problems(valid)
        + submit_checks.page_problems(valid)
        + submit_checks.owner_problems(valid)
    )
    on_slurm = valid.launch.target == "slurm"  # a batch job on the cluster, its folder in the shared run folder
    if on_slurm:
        errors += slurm.problems()
    if errors:
        raise SpecError(errors)
    base = slurm.runs_root() if on_slurm else None
    submit_checks.member_quota()
    check_space(base or workspace.home() / "runs")
    replaced = overwrite.target(output_folder(valid, workspace.runs_dir()))[0] if valid.output.overwrite else None
    run_id, rdir = _claim(base)
    with _half_made(rdir):
        run_id = _submit_into(valid, run_id, rdir, name, tags, on_slurm)
    if replaced is not None:  # LLaMA-Factory's overwrite_output_dir: the earlier run's folder goes, its record stays
        overwrite.replace(replaced, run_id)
    audit.record("start", run_id, name=name, replaced=replaced, slurm=on_slurm or None)
    if on_slurm:
        slurm.submit_job(run_id)
    elif start:
        schedule()
    return run_id


def _submit_into(valid: RunSpec, run_id: str, rdir: Path, name: str | None, tags: list[str] | None, on_slurm: bool):
    code = launch.anchor_paths(valid)  # the trainer (cwd: the repo) loads the model and files the submitter named
    if valid.output.output_dir:  # absolute, so the trainer (cwd: the repo) and the registry agree on it
        valid.output.output_dir = str(output_folder(valid, rdir))
    save_spec(valid, rdir / "spec.yaml")
    if valid.output.output_dir and acting.at_shell() and not folders.page_may_write(output_folder(valid, rdir)):
        acting.write_grant(rdir, output_folder(valid, rdir))  # chosen at the shell: the trainer may write it
    outside = [f for f in code if page_trust.reward_problem(f) is not None]
    if outside and acting.at_shell():  # reward code named at the shell outside the reward folder: it may run
        acting.write_grant(rdir, reward_files=outside)
    default_name = f"{valid.method.stage}-{valid.method.finetuning}-{Path(valid.model.name_or_path).name}"
    rec = RunRecord(
        id=run_id,
        name=name or valid.output.run_name or default_name,
        status="queued",
        created=time.time(),
        run_dir=str(rdir),
        output_dir=str(output_folder(valid, rdir)),
        spec=dump_spec(valid),
        share_gpus=valid.launch.share_gpus,
        tags=list(tags or []),
    )
    if on_slurm:  # running (in the registry's words) from submission: engine.runs.slurm follows the job
        rec.kind, rec.status, rec.started = slurm.KIND, "running", time.time()
    return _insert(rec)


# A run is not created with less free space than this where its folder goes: its spec, its row and its end must fit.
MIN_FREE_BYTES = run_end.LOW_SPACE_BYTES


def check_space(where: Path) -> None:
    """Refuse, in one line with the figure, to create a run where there is (almost) no space left."""
    free = run_end.disk_free(where)
    if free is not None and free < MIN_FREE_BYTES:
        raise RunsError(run_message("runs.no_space", path=where, free=file_size(free), need=file_size(MIN_FREE_BYTES)))


def _claim(base: Path | None = None) -> tuple[str, Path]:
    """``_claim_run_dir``, its failure to create the folder (no space, no inode left) said in one line."""
    try:
        return _claim_run_dir(base)
    except (OSError, sqlite3.Error) as exc:
        where = base or workspace.home() / "runs"
        why = run_end.write_problem(exc, where) or run_message("runs.io_error", path=str(where), error=str(exc))
        raise RunsError(run_message("runs.not_created", why=why)) from None


@contextmanager
def _half_made(rdir: Path) -> Iterator[None]:
    """A run folder whose creation fails (a full disk between the check and the writes) is removed again, and the
    failure is said in one line naming the cause."""
    try:
        yield
    except (OSError, sqlite3.Error) as exc:
        shutil.rmtree(rdir, ignore_errors=True)
        why = run_end.write_problem(exc, rdir.parent) or run_message("runs.io_error", path=str(rdir), error=str(exc))
        raise RunsError(run_message("runs.not_created", why=why)) from None


def submit_command(
    argv: list[str],
    *,
    name: str | None = None,
    tags: list[str] | None = None,
    gpus: int = 0,
    start: bool = True,
    writes: str | Path | None = None,
) -> str:
    """Queue any command (a merge, an export, a benchmark) under the same supervision as a training run:
    detached, logged to train.log, exit recorded, GPUs (a count) allocated by the scheduler, the same explicit
    environment as a trainer (``engine.runs.launch.subprocess_env``). ``{run_dir}`` in an argument is replaced by the
    run's folder, so a command can write its events there. ``writes``: the folder the command writes (a merge's,
    an export's target), granted to it when chosen at the shell outside what the page may write
    (engine.core.acting)."""
    if not argv or not all(isinstance(a, str) for a in argv):
        raise RunsError(run_message("runs.bad_command"))
    submit_checks.member_quota()
    check_space(workspace.home() / "runs")
    run_id, rdir = _claim()
    argv = [a.replace("{run_dir}", str(rdir)) for a in argv]
    rec = RunRecord(
        id=run_id,
        name=name or Path(argv[0]).name,
        status="queued",
        created=time.time(),
        run_dir=str(rdir),
        output_dir=str(rdir),
        kind="command",
        command=list(argv),
        gpu_count=max(0, int(gpus)),
        tags=list(tags or []),
    )
    with _half_made(rdir):
        if writes and acting.at_shell() and not folders.page_may_write(writes):
            acting.write_grant(rdir, writes)
        run_id = _insert(rec)
    audit.record("job", run_id, name=rec.name, kind=",".join(rec.tags))
    if start:
        schedule()
    return run_id


def folder_problem(path: str | Path, extra: list[folders.Owner] | None = None) -> Message | None:
    """Why ``path`` may not be written by a new run, merge or export: its place (engine.core.folders), the
    workspace's folders, ``extra`` owners (a base model), or a registered run's folders. None when it is free."""
    return folders.output_problem(path, [*(extra or []), *submit_checks.run_owners()])


# ----------------------------------------------------------------------------------------------- actions
def schedule() -> list[str]:
    """Start queued runs whose GPUs (or CPU slot) are free; returns the ids started. See engine.runs.scheduler."""
    return scheduler.schedule()


def stop(run_id: str, grace_s: float | None = None, *, wait: bool = True) -> bool:
    """Stop a run: a queued one leaves the queue; a running one gets SIGTERM (the trainer saves a checkpoint and
    exits), SIGKILL after ``grace_s`` (default STUDIO_STOP_GRACE, 120 s). True when no process of the run remains.
    ``wait=False`` returns once the signals are sent; the stop finishes in the background (the page's Stop).
    A Slurm run: the same through scancel (``engine.runs.slurm.cancel``)."""
    on_slurm = owned(run_id).kind == slurm.KIND  # someone else's run is an unknown one, a shared one read-only
    audit.record("stop", run_id)
    if on_slurm:
        return slurm.cancel(run_id, grace_s, wait=wait)
    return scheduler.stop_run(run_id, grace_s, wait=wait)


def move_first(run_id: str) -> None:
    """The operator or an admin moves a queued run to the front of the queue: it is offered the next free slot before
    the users' turns (``engine.runs.fair.order``); a member is refused, naming who may."""
    rec = owned(run_id)  # someone else's run is an unknown one to a member, a shared one read-only
    if accounts.viewer() is not None:
        raise RunsError(run_message("runs.move_not_member", id=run_id))
    if rec.status != "queued" or not store.update(run_id, only_if_status=("queued",), moved=time.time()):
        raise RunsError(run_message("runs.not_queued", id=run_id, status=get(run_id, refresh_status=False).status))
    audit.record("move", run_id)


@dataclass
class Deleted:
    """What ``delete`` did: the run forgotten, the folders removed, the folders kept and why (catalog messages)."""

    id: str
    removed: list[str] = field(default_factory=list)
    kept: list[Message] = field(default_factory=list)

    def lines(self) -> list[Message]:
        return [
            run_message("runs.deleted", id=self.id),
            *[run_message("runs.removed", path=p) for p in self.removed],
            *self.kept,
        ]


def delete(run_id: str, remove_files: bool = True) -> Deleted:
    """Forget a run and (by default) delete what it made: its run folder, and its output folder only if the run
    created it (``engine.runs.outputs``); in an output folder that existed before the run, only the files the run
    wrote. Nothing another run, the workspace or a model owns is removed, nor any folder holding one (a resumed run
    of old whose output folder is its parent's folder keeps the parent's files). The files go first and the row last,
    so a full disk still lets the run go. Says what it removed and what it kept, and why."""
    rec = owned(run_id, refresh_status=True)
    if rec.status == "running":
        raise RunsError(run_message("runs.delete_running", id=run_id))
    audit.record("delete", run_id, name=rec.name, files=remove_files)
    report = Deleted(run_id)
    if remove_files:
        _delete_files(rec, report)
    else:  # the folder stays: a registry rebuilt from the folders must not list the run again
        records.note(rec.run_dir, forgotten=True)
    with transaction() as conn:
        conn.execute("DELETE FROM runs WHERE id = ? AND status != 'running'", (run_id,))
    return report


def _delete_files(rec: RunRecord, report: Deleted) -> None:
    others = submit_checks.run_owners(exclude=rec.id)
    own = Path(rec.run_dir).resolve()
    out = Path(rec.output_dir).expanduser().resolve()
    if out != own and not out.is_relative_to(own) and out.exists():
        _delete_output(rec, out, own, others, report)  # first: its record is in the run folder
    if not own.exists():
        return
    found = folders.find_owner(own, others, own=own)
    if found is not None:
        report.kept.append(run_message(f"runs.kept_{found[0]}", path=own, owner=found[1]))
    elif not own.is_relative_to(workspace.home()):  # a user's folder: Studio removes only what it placed
        report.kept.append(run_message("runs.kept_outside", path=own))
    else:
        _remove_reported(own, report)


def _delete_output(rec: RunRecord, out: Path, own: Path, others: list, report: Deleted) -> None:
    found = folders.find_owner(out, others, own=own)
    if found is not None:
        report.kept.append(run_message(f"runs.kept_{found[0]}", path=out, owner=found[1]))
        return
    made = outputs.read(own)
    if made is None or Path(made["output_dir"]) != out:  # never started, or from before the record: not its folder
        report.kept.append(run_message("runs.kept_not_created", path=out, id=rec.id))
        return
    if not outputs.created(made):
        count, errors = outputs.remove_written(made, rec.ended)
        report.kept.append(run_message("runs.kept_existing", path=out, id=rec.id, count=count))
        if errors:
            report.kept.append(run_message("runs.remove_failed", path=out, error="; ".join(errors[:3])))
        return
    theirs = sorted(outputs.added_later(made, rec.ended)) if rec.ended else []
    if theirs:  # files put in the folder after the run ended are a person's: the run's own files go, theirs stay
        count, errors = outputs.remove_written(made, rec.ended)
        shown = ", ".join(theirs[:5]) + (f" and {len(theirs) - 5} more" if len(theirs) > 5 else "")
        report.kept.append(run_message("runs.kept_added", path=out, id=rec.id, count=count, files=shown))
        if errors:
            report.kept.append(run_message("runs.remove_failed", path=out, error="; ".join(errors[:3])))
        return
    _remove_reported(out, report)
    for parent in reversed([Path(p) for p in made.get("created") or []]):
        if parent != out and out.is_relative_to(parent):
            try:
                parent.rmdir()  # a folder the run created around its output, now empty
            except OSError:
                pass


def _remove_reported(folder: Path, report: Deleted) -> None:
    errors = _remove_tree(folder)
    if folder.exists():
        report.kept.append(run_message("runs.remove_failed", path=folder, error="; ".join(errors[:3])))
    else:
        report.removed.append(str(folder))


def _remove_tree(folder: Path) -> list[str]:
    """rmtree that carries on past what it cannot remove and returns those failures."""
    errors: list[str] = []
    shutil.rmtree(folder, onerror=lambda _f, p, info: errors.append(f"{p}: {info[1]}"))
    return errors


def rename(run_id: str, name: str) -> None:
    owned(run_id)  # someone else's run is an unknown one, a shared one read-only
    name = name.strip()
    if not name or len(name) > 120:
        raise RunsError(run_message("runs.bad_name"))
    if not update(run_id, name=name):
        raise RunsError(run_message("runs.unknown", id=run_id))
    audit.record("rename", run_id, name=name)


def set_tags(run_id: str, tags: list[str]) -> None:
    clean = sorted({t.strip() for t in tags if t and t.strip()})
    owned(run_id)  # someone else's run is an unknown one, a shared one read-only
    if not update(run_id, tags=clean):
        raise RunsError(run_message("runs.unknown", id=run_id))


def share(run_id: str, names: list[str]) -> list[str]:
    """Share a run read-only (team mode): with the accounts ``names``, ``["*"]`` for every account, ``[]`` for nobody
    again. Its owner (or the operator, an admin) may; the readers see it, its charts and files, and may use it as a
    source (merge, export, evaluate, chat, resume into a run of their own), never stop, delete, rename or tag it.
    Returns the names it is now shared with."""
    rec = owned(run_id)
    known = accounts.load()
    clean = sorted({str(n).strip() for n in names if str(n).strip()})
    for name in clean:
        if name != "*" and name not in known:
            raise RunsError(run_message("runs.share_unknown", name=name))
    clean = ["*"] if "*" in clean else [n for n in clean if n != (rec.owner or accounts.OPERATOR)]
    update(rec.id, shared=clean)
    audit.record("share", rec.id, shared=",".join(clean) or "-")
    return clean


def duplicate(run_id: str) -> RunSpec:
    """The run's spec, to edit and submit again."""
    rec = get(run_id, refresh_status=False)
    if rec.kind != "train":
        raise RunsError(run_message("runs.is_command", id=run_id))
    return rec.load_spec()


def weights_dir(rec: RunRecord) -> Path:
    """Where a training run's final weights go: ``<output>/adapter`` (LoRA, OFT) or ``<output>/model``, or the output
    folder itself (``output.layout: llamafactory``)."""
    try:
        spec = rec.load_spec()
        adapter, layout = spec.method.adapter, spec.output.layout
    except (SpecError, ValueError):
        adapter, layout = True, "studio"
    return outputs.final_dir(rec.output_dir, adapter=adapter, layout=layout)


def resume_point(rec: RunRecord) -> tuple[Path | None, list[Message]]:
    """The checkpoint a run resumed from ``rec`` starts at: its newest complete checkpoint; when it has none, the one
    it started from itself and the older ones beside it. (None, notes) when it has no checkpoint at all (the resumed
    run starts from scratch and says so); RunsError when every checkpoint it has is incomplete."""
    candidates = checkpoints.newest_first(Path(rec.output_dir) / "checkpoints")
    start = rec.load_spec().train.resume_from
    if start and start != "last":
        began = Path(start).expanduser()
        older = [c for c in checkpoints.newest_first(began.parent) if checkpoints.step(c) <= checkpoints.step(began)]
        candidates += older if began.name.startswith("checkpoint-") else [began]
    notes: list[Message] = []
    for ckpt in candidates:
        if checkpoints.complete(ckpt):
            return ckpt, notes
        notes.append(run_message("runs.checkpoint_skipped", path=ckpt))
    if candidates:
        where = Path(rec.output_dir) / "checkpoints"
        raise RunsError(run_message("runs.no_loadable_checkpoint", id=rec.id, path=where))
    return None, notes


def resume(run_id: str) -> str:
    """A new run (its own id and folder, tagged ``resume-of:<run_id>``) that continues this one: train.resume_from is
    the parent's newest complete checkpoint (``resume_point``), its outputs go to its own folder, so deleting either
    run never touches the other's files. What was skipped on the way is written at the top of its train.log."""
    rec = get(run_id)
    if rec.status == "running":
        raise RunsError(run_message("runs.still_running", id=run_id))
    data = spec_to_dict(duplicate(run_id))
    ckpt, notes = resume_point(rec)
    data["train"]["resume_from"] = str(ckpt) if ckpt else "last"  # 'last' in its own empty folder: from scratch
    data["output"]["output_dir"] = ""
    tags = [t for t in rec.tags if not t.startswith("resume-of:")] + [f"resume-of:{run_id}"]
    new_id = submit(data, name=f"{rec.name} (resumed)", tags=tags, start=False)
    lines = [f"[studio] resumed from run {run_id}: {ckpt or 'no checkpoint yet'}", *[f"[studio] {n}" for n in notes]]
    with open(Path(get(new_id, refresh_status=False).run_dir) / "train.log", "a", encoding="utf-8") as log:
        log.write("\n".join(lines) + "\n")
    schedule()
    return new_id


def resume_report(run_id: str) -> Message:
    """What ``resume`` made: the parent, the checkpoint it starts from, where its checkpoints and final weights go."""
    rec = get(run_id, refresh_status=False)
    parent = next((t.split(":", 1)[1] for t in rec.tags if t.startswith("resume-of:")), "?")
    start = rec.load_spec().train.resume_from
    checkpoint = start if start and start != "last" else run_message("runs.from_scratch")
    return run_message(
        "runs.resumed",
        parent=parent,
        id=run_id,
        checkpoint=checkpoint,
        out=Path(rec.output_dir) / "checkpoints",
        weights=weights_dir(rec),
    )
