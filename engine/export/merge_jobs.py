"""Merge jobs: start, follow, cancel and list merges, and ``studio merge``. Light: stdlib, engine.export.checks / runs
/ events; never torch.

A merge is a command run of the registry (engine.runs.registry ``submit_command``, tag ``merge``), so it gets what
every run gets without a second copy of it: its own folder, a detached wrapper (engine.runs.runner) that writes
``exit.json``, status from the exit record and process liveness, stop by SIGTERM to its process group (checked by its
``STUDIO_RUN_ID`` marker) with SIGKILL after a grace period, a place in the queue (a CPU slot, or a GPU for
``--device cuda``) and a row in the Runs tab. The registry row is the job record: id, argv, pid / pgid, start time;
the argv names the target (``--out``), the temp folder (``--tmp-dir``) and the events file (``--events``, in the
run's folder; the log is the run's ``train.log``). ``MergeJob(run_id)`` is rebuilt from it at any time, so a
reloaded page or a restarted studio shows the merge's progress and result and can cancel it.

A merge that cannot clean up after itself (SIGKILL, the OOM killer) leaves its temp folder: the next look at the
ended job removes it. The target is only ever written by the final rename of a verified folder.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from engine.core import acting
from engine.core.messages import payload_message
from engine.export import checks as xp
from engine.export import sizes, written
from engine.export import sources as sources_mod
from engine.export.checks import ExportError
from engine.export.messages import message
from engine.jobs.command_job import CommandJob, job_record, new_events, newest_jobs
from engine.runs import registry as runs

ROOT = Path(__file__).resolve().parents[2]  # where the export subprocess runs, as every job's does

MERGE_TAG = "merge"
# registry status -> merge state


class MergeJob(CommandJob):
    """One merge, read back from its registry run; ``poll()`` is cheap and safe to call from a UI timer.
    ``cancel()``: the merge removes its temp folder and exits."""

    what = "merge"
    events_prefix = "merge"

    def __init__(self, run_id: str):
        rec, rest = job_record(run_id, "engine.trainer.merge", ExportError, message("export.not_merge", id=run_id))
        args = xp.merge_arg_parser().parse_args(rest)
        self.run_id, self.run_dir, self.argv = rec.id, Path(rec.run_dir), rec.command
        self.sources, self.out_dir, self.dtype, self.device = args.sources, args.out, args.dtype, args.device
        self.tmp_dir, self.log_path = Path(args.tmp_dir), rec.log_path
        self._read_events_from(args.events)

    def fields(self, s) -> dict:
        """The progress, the result, the clean-up note, the folders. The error, the clean-up note and the progress
        detail are catalog messages where the merge wrote their keys (``engine.export.messages``), so the page can
        show them in its language."""
        result = _with_summary(s.result) if s.result is not None else None
        return {**output_fields(self, s), "result": result, "sources": list(self.sources)}


def output_fields(job: CommandJob, s) -> dict:
    """What a job writing a folder (a merge, an export) reports: its exit code, progress, clean-up note, folder,
    events and log."""
    return {
        "returncode": s.rec.exit_code,
        "progress": _with_detail(s.progress) if s.progress else None,
        "cleaned": message("export.cleaned", path=s.cleaned) if s.cleaned else "",
        "out_dir": job.out_dir,
        "events_path": str(job.events_path),
        "log_path": str(job.log_path),
    }


def _with_detail(payload: dict) -> dict:
    return {**payload, "detail": payload_message(payload, "detail") or ""}


def _with_summary(payload: dict) -> dict:
    """The finished event's payload, its report's summary a catalog message when the merge wrote its key."""
    summary = payload_message(payload, "summary")
    if summary is None or not isinstance(payload.get("report"), dict):
        return payload
    return {**payload, "report": {**payload["report"], "summary": summary}}


def start_merge(
    sources: list[str],
    out_dir: str,
    *,
    dtype: str | None = None,
    max_shard_size: str = "2GB",
    device: str = "cpu",
    overwrite: bool = False,
    adapter_only: bool = False,
    force: bool = False,
    push_to_hub: str | None = None,
    base: str | None = None,
    legacy_format: bool = False,
) -> MergeJob:
    """Check the inputs (ExportError on any problem, memory included unless ``force``) and queue the merge.
    ``base``: merge into this model folder (no sources: re-export it); ``legacy_format``: .bin files."""
    sources = [acting.from_working_folder(s) for s in sources]  # the merge runs in the repository
    plan = xp.plan_export(
        sources,
        out_dir,
        dtype=dtype,
        overwrite=overwrite,
        adapter_only=adapter_only,
        device=device,
        max_shard_size=max_shard_size,
        force=force,
        base=base,
    )
    argv = xp.merge_argv(
        plan,
        xp.temp_dir_for(plan.out_dir),
        "{run_dir}/events.jsonl",
        max_shard_size=max_shard_size,
        overwrite=overwrite,
        force=force,
        push_to_hub=push_to_hub,
        base=base,
        legacy_format=legacy_format,
    )
    if overwrite and (removes := written.removal(plan.out_dir)):
        print(removes, flush=True)
    name = f"merge {Path(plan.sources[0].run_dir or plan.sources[0].weights_dir).name} → {Path(plan.out_dir).name}"
    gpus = 1 if device == "cuda" else 0
    run_id = runs.submit_command(argv, name=name, tags=[MERGE_TAG], gpus=gpus, writes=plan.out_dir)
    return MergeJob(run_id)


def list_merges(limit: int = 10) -> list[MergeJob]:
    """The newest merges first (a look at each ended one also removes a temp folder a killed merge left)."""
    return newest_jobs(MERGE_TAG, MergeJob, ExportError, limit)


def merge(sources: list[str], out_dir: str, *, echo: bool = False, poll_interval: float = 0.3, **kwargs) -> dict:
    """Blocking merge: start, follow to the end, return the final ``poll()`` dict (echo prints each event)."""
    job = start_merge(sources, out_dir, **kwargs)
    if not echo:
        return job.follow(interval=poll_interval)
    return job.follow(new_events(describe_event), label="merge", interval=poll_interval)


def describe_event(event: dict) -> str:
    p = event.get("payload", {})
    if event["type"] == "merge_progress":
        count = f" {p.get('i')}/{p.get('n')}" if p.get("n") else ""
        return f"[merge] {p.get('stage')}{count} {p.get('detail', '')}".rstrip()
    if event["type"] == "merge_finished":
        rep = p.get("report") or {}
        return f"[merge] finished: {p.get('out_dir')} (verify: {rep.get('summary', 'n/a')})"
    if event["type"] == "merge_failed":
        return f"[merge] failed ({p.get('cause')}): {p.get('error')}"
    return f"[merge] {event['type']}: {p.get('message', p)}"


# ----------------------------------------------------------------------------------------------- LF export YAML
def lf_yaml_options(path: str | Path) -> tuple[dict, list[str]]:
    """``start_merge`` keyword arguments (``sources`` among them) from a LLaMA-Factory export YAML, and the notes
    (keys accepted that change nothing, a push that will not happen). Raises ExportError naming every key refused,
    one line each, before any work."""
    import yaml

    from engine.lf.merge_yaml import lf_export_to_merge
    from engine.spec.schema import read_yaml_file

    path = Path(path)
    try:
        data = read_yaml_file(path)
    except OSError as exc:
        raise ExportError(message("export.lf_yaml_unreadable", path=path, error=exc.strerror or exc)) from None
    except yaml.YAMLError as exc:
        raise ExportError(message("export.lf_yaml_unreadable", path=path, error=exc)) from None
    imp = lf_export_to_merge(data, path.resolve().parent)
    problems = dict(imp.unsupported)
    for key, why in imp.missing.items():  # an adapter that is no folder may still be a Studio run id
        i = int(key.rsplit("[", 1)[1].rstrip("]"))
        if sources_mod.run_id_folder(imp.data["adapters"][i]) is None:
            problems[key] = why
    if problems:
        lines = "\n".join(f"  {key}: {why}" for key, why in problems.items())
        raise ExportError(message("export.lf_yaml_refused", path=path, problems=lines))
    d = imp.data
    notes = list(imp.notes)
    repo = d["push_to_hub"]
    push_ready = None  # the repo, when nothing said the push cannot happen
    if repo:
        import os

        if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
            notes.append(str(message("export.push_offline", repo=repo, out=d["out_dir"])))
        elif not (os.environ.get("HF_TOKEN") or _saved_token()):
            notes.append(str(message("export.push_no_token", repo=repo, out=d["out_dir"])))
        else:
            push_ready = repo
    options = {
        "sources": list(d["adapters"]),
        "out_dir": d["out_dir"],
        "base": d["base"],
        "max_shard_size": d["max_shard_size"],
        "device": d["device"],
        "legacy_format": d["legacy_format"],
        "push_to_hub": repo,
        "quantize": d["quantize"],
        "push_ready": push_ready,
    }
    return options, notes


def lf_quantize_argv(options: dict, q: dict, *, out: str | None, overwrite: bool, push: str | None) -> list[str]:
    """``studio export`` for an export YAML with ``export_quantization_bit``: GPTQ of its model, calibrated on its
    ``export_quantization_dataset`` (``engine.lf.merge_yaml``), into ``export_dir`` (or ``out``); pushed to the hub
    when a repo is named."""
    target = str(Path(out).expanduser().resolve()) if out else options["out_dir"]
    argv = [sys.executable, "-m", "engine.cli", "export", options["base"], "--format", q["format"], "--out", target]
    argv += ["--calibration", q["calibration"], "--calibration-samples", str(q["samples"])]
    argv += ["--calibration-maxlen", str(q["maxlen"])]
    argv += ["--overwrite"] if overwrite else []
    argv += ["--push", push] if push else []
    return argv


def _saved_token() -> str | None:
    try:
        from huggingface_hub import get_token

        return get_token()
    except Exception:  # noqa: BLE001 - no token store: no token
        return None


# ----------------------------------------------------------------------------------------------- CLI
def cli(argv: list[str]) -> int:
    """``studio merge``: 0 merged and verified, 1 merge or verification failed, 2 bad input, 130 cancelled."""
    ap = argparse.ArgumentParser(
        prog="studio merge",
        description="Merge run adapters into their base model "
        "(or export the adapter), verify the result, write it atomically.",
    )
    ap.add_argument(
        "sources",
        nargs="*",
        metavar="RUN_OR_ADAPTER",
        help="run ids, run folders or PEFT adapter folders, applied in order",
    )
    ap.add_argument(
        "--lf-yaml",
        metavar="FILE",
        default=None,
        help="a LLaMA-Factory export YAML (model_name_or_path, adapter_name_or_path, export_dir, export_size, "
        "export_device, export_legacy_format, export_hub_model_id; export_quantization_bit with its _dataset, "
        "_nsamples and _maxlen runs `studio export --format gptq-<bits>bit`); options given here win over its keys",
    )
    ap.add_argument("--out", default=None, help="output folder (must not exist unless --overwrite)")
    ap.add_argument("--dtype", choices=list(sizes.DTYPES), default=None, help="saved dtype (default: the base's)")
    ap.add_argument("--max-shard-size", default=None, help="largest safetensors shard (default 2GB)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default=None, help="where to merge (default cpu)")
    ap.add_argument("--overwrite", action="store_true", help="replace an existing output folder")
    ap.add_argument("--adapter-only", action="store_true", help="export the PEFT adapter, tokenizer and card only")
    ap.add_argument(
        "--force", action="store_true", help="merge even when the memory estimate is above the available RAM"
    )
    ap.add_argument(
        "--push-to-hub",
        metavar="REPO",
        default=None,
        help="also upload to this Hub repo (needs a token and network; skipped offline)",
    )
    args = ap.parse_args(argv)
    options: dict = {"sources": args.sources, "out_dir": args.out, "max_shard_size": "2GB", "device": "cpu"}
    try:
        if args.lf_yaml:
            if args.sources:
                raise ExportError(message("export.lf_yaml_with_sources"))
            options, notes = lf_yaml_options(args.lf_yaml)
            for note in notes:
                print(f"note: {note}", file=sys.stderr)
            quantize, push_ready = options.pop("quantize"), options.pop("push_ready")
            if quantize:  # GPTQ at export: Studio's export job, as the person could run it
                flags = [f for f, on in (("--adapter-only", args.adapter_only), ("--dtype", args.dtype)) if on]
                flags += [f for f, v in (("--max-shard-size", args.max_shard_size), ("--device", args.device)) if v]
                if flags:
                    raise ExportError(message("export.lf_gptq_flags", flags=", ".join(flags)))
                push = args.push_to_hub or push_ready
                argv = lf_quantize_argv(options, quantize, out=args.out, overwrite=args.overwrite, push=push)
                print(f"[merge] export_quantization_bit: running {shlex.join(['studio', *argv[3:]])}", flush=True)
                import subprocess

                return subprocess.call(argv, cwd=ROOT)
        given = {"out_dir": args.out, "max_shard_size": args.max_shard_size, "device": args.device}
        given["push_to_hub"] = args.push_to_hub
        options.update({k: v for k, v in given.items() if v is not None})
        if not options.get("out_dir"):
            raise ExportError(message("export.no_out"))
        status = merge(
            options.pop("sources"),
            options.pop("out_dir"),
            echo=True,
            dtype=args.dtype,
            overwrite=args.overwrite,
            adapter_only=args.adapter_only,
            force=args.force,
            **options,
        )
    except ExportError as exc:
        print(f"studio merge: {exc}", file=sys.stderr)
        return 2
    if status["state"] == "finished":
        res = status["result"] or {}
        print(f"merged model written to {res.get('out_dir')}")
        if (res.get("push") or {}).get("message"):
            print(res["push"]["message"])
        return 0
    print(f"studio merge: {status['state']}: {status['error']}", file=sys.stderr)
    if status["state"] == "failed" and status["events"] and status["events"][-1]["payload"].get("cause") == "input":
        return 2
    return 130 if status["state"] == "cancelled" else 1
