"""What a new run must pass at submit beyond its spec's own validation, the same checks the Train tab's form and
``studio validate`` / ``studio train`` run before it: its output folder (``output_problems``), its data's rows
(``data_problems``), what the page may not do (``page_problems``), the folders a member's run may read
(``owner_problems``), a member's quotas of queued runs and disk (``member_quota``); and
the folders every run owns, which these checks and delete hold against (``run_owners``).

Light: engine.core, engine.data's registry (inside ``data_problems``), the store. The folders of every run count,
whoever may see them: a member's run never writes into another member's run folder.
"""

from __future__ import annotations

import os
from pathlib import Path

from engine.core import accounts, acting, folders, weights, workspace
from engine.core.messages import message as core_message
from engine.runs import fair, overwrite, owners, records, store
from engine.runs.messages import message as run_message
from engine.runs.records import RunsError
from engine.spec.messages import message
from engine.spec.schema import RunSpec
from engine.spec.watch_group import notify_page_problems

# Datasets up to this size are read row by row at submit, so bad data is refused before anything is queued; larger
# ones are checked by the trainer (engine.trainer.dataset), still before a model is loaded.
SUBMIT_DATA_CHECK_BYTES = 64 << 20


def data_problems(spec: RunSpec) -> list[tuple[str, str]]:
    """The rows of the spec's datasets checked for its stage (datasets up to ``SUBMIT_DATA_CHECK_BYTES``), as
    (field, message): what submit refuses, and what the page's form shows before Start."""
    from engine.data import dataset_registry as reg
    from engine.spec.rules import resolve_dataset_dir

    ddir = resolve_dataset_dir(spec)
    try:
        info = reg.read_dataset_info(ddir)
        size = 0
        for name in [*spec.data.datasets, *spec.data.eval_datasets]:
            size += reg.entry_bytes(info[name], ddir)  # never walks outside the dataset folder (file_name "/")
    except (OSError, ValueError, KeyError, TypeError):
        size = 0  # validate_spec's context rules name a broken registry; the row check below names a missing file
    if size > SUBMIT_DATA_CHECK_BYTES:
        return []
    stage = spec.method.stage
    return [("data.datasets", p.located()) for p in reg.check_datasets(spec.data.datasets, ddir, stage)] + [
        ("data.eval_datasets", p.located()) for p in reg.check_datasets(spec.data.eval_datasets, ddir, stage)
    ]


def page_problems(spec: RunSpec) -> list[tuple[str, str]]:
    """What the page may not do with this run (engine.core.page_trust): send notifications through secrets or to
    hosts the operator did not allow it, or run a model's own code (``model.trust_remote_code`` on a model that ships
    code); nothing at the shell. Run by submit and the Train tab's form."""
    if acting.at_shell():
        return []
    found = notify_page_problems(spec.notify)
    if spec.model.trust_remote_code and (problem := _remote_code_problem(spec)) is not None:
        found.append(("model.trust_remote_code", problem))
    return found


def _remote_code_problem(spec: RunSpec):
    """page_trust's remote-code rule on what can be read here of the model: its config.json from its folder, the
    hub's cache or the hub (Studio's table of published configs cannot tell: it keeps no ``auto_map``), and in a
    folder its ``tokenizer_config.json`` and Python files."""
    from engine.core import page_trust
    from engine.models import resolve

    res = resolve.resolve_model(spec.model)
    configs = [res.config if res.source not in (resolve.TABLE, resolve.NONE) else None]
    code_files: list[str] = []
    where = Path(res.where) if res.where and res.source not in (resolve.HUB, resolve.MS_HUB) else None
    folder = where if where is not None and where.is_dir() else (where.parent if where is not None else None)
    if folder is not None and folder.is_dir():
        configs.append(records.read_json(folder / "tokenizer_config.json"))
        code_files = sorted(p.name for p in folder.glob("*.py"))
    return page_trust.remote_code_problem(spec.model.name_or_path, configs, code_files)


def owner_problems(spec: RunSpec) -> list[tuple[str, str]]:
    """Team mode: a member's run reads nothing of another member's runs: its model folder, its dataset folder, the
    checkpoint it resumes from and a GRPO reward model (a folder or a run id) are refused inside a run they cannot see
    (``engine.runs.owners.path_problem``). Hub ids and names that are no folder here pass; nothing for the
    operator."""
    if accounts.viewer() is None:
        return []
    given = [("model.name_or_path", spec.model.name_or_path), ("data.dataset_dir", spec.data.dataset_dir)]
    if spec.train.resume_from and spec.train.resume_from != "last":
        given.append(("train.resume_from", spec.train.resume_from))
    if spec.method.stage == "grpo":
        given += [(f"method.grpo.rewards[{i}].model", r.model) for i, r in enumerate(spec.method.grpo.rewards)]
    found = []
    for field, value in given:
        folder = folders.resolve(value) if value else None
        if folder is not None and not folder.exists():
            folder = weights.run_folder(value)  # a run id, as a reward model may be named
        problem = owners.path_problem(folder, field=field) if folder is not None else None
        if problem is not None:
            found.append((field, problem))
    return found


def output_problems(spec: RunSpec) -> list[tuple[str, str]]:
    """The one check of a new run's output folder, run by submit, ``studio validate`` / ``studio train`` and the
    Train tab's form: refused when another run owns it (its folder, its output folder, or one holding them), when it
    is in ``exports/`` or an existing folder with files (``folders.new_run_output_problem``), or when it cannot be
    created or written; not found out by the trainer. (Its place and the workspace's own folders are spec rules too:
    engine.spec.rules, engine.core.folders.)"""
    if not spec.output.output_dir:
        return []
    out = output_folder(spec, workspace.runs_dir())
    replaced, why = overwrite.target(out) if spec.output.overwrite else (None, None)
    if replaced is not None or why is not None:  # LLaMA-Factory's overwrite_output_dir (engine.runs.overwrite)
        return [] if replaced else [("output.output_dir", message("output_refused", reason=why))]
    owner = folders.owner_of(out, run_owners()) or folders.new_run_output_problem(out)
    if owner is not None:
        return [("output.output_dir", message("output_refused", reason=owner))]
    probe = out
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        return [("output.output_dir", message("output_is_file", path=out, probe=probe))]
    if not os.access(probe, os.W_OK | os.X_OK):
        return [("output.output_dir", message("output_not_writable", probe=probe))]
    return []


def output_folder(spec: RunSpec, rdir: Path) -> Path:
    if not spec.output.output_dir:
        return rdir
    out = Path(spec.output.output_dir).expanduser()
    return out if out.is_absolute() else (workspace.home() / out)


def run_owners(exclude: str | None = None) -> list[folders.Owner]:
    """Every registered run's folder and output folder (owned whole by the run), for engine.core.folders.owner_of."""
    owners: list[folders.Owner] = []
    for rec in store.list_runs(refresh_status=False):  # every run, whoever may see it
        if rec.id == exclude:
            continue
        for folder in {rec.run_dir, rec.output_dir}:
            owners.append((Path(folder), core_message("workspace.owner_run", id=rec.id, path=folder), True))
    return owners


def member_quota() -> None:
    """A member's quotas, before anything is made (RunsError naming the limit): with ``max_queued`` runs waiting no
    more are queued; with ``max_disk_gb`` held by their runs and jobs (``used_bytes``) no new one starts."""
    owner = accounts.owner_of_new()
    if not owner:
        return
    waiting = sum(1 for r in store.list_runs("queued", refresh_status=False) if (r.owner or "") == owner)
    limit = fair.queue_limit(owner, waiting)
    if limit is not None:
        raise RunsError(run_message("runs.quota_queued", owner=owner, n=limit))
    account = accounts.quota(owner)
    if account is not None and account.max_disk_gb and (used := used_bytes(owner)) >= account.max_disk_gb * 1e9:
        from engine.core.units import file_size

        raise RunsError(
            run_message("runs.quota_disk", owner=owner, used=file_size(used), limit=f"{account.max_disk_gb:g} GB")
        )


def used_bytes(owner: str) -> int:
    """What an account's runs and jobs hold on disk: each run's folder and output folder and a job's ``--out``
    folder (a merge's, an export's), every file counted once, links not followed."""
    roots = {
        f
        for rec in store.list_runs(refresh_status=False)
        if (rec.owner or "") == owner
        for f in owners.folders_of(rec)
    }
    total = 0
    for root in (r for r in roots if not any(o != r and r.is_relative_to(o) for o in roots)):
        for folder, _, files in os.walk(root):
            for name in files:
                try:
                    total += os.lstat(os.path.join(folder, name)).st_size
                except OSError:
                    continue  # removed meanwhile
    return total
