"""Export jobs (GGUF, quantized formats): start, follow, cancel and list them, and ``studio export``. Light: stdlib,
engine.export.convert_plan / jobs, engine.runs; never torch.

An export is a command run of the registry (tag ``export``), like a merge (engine.export.merge_jobs): its own run
folder, a detached wrapper, status from the exit record and process liveness, stop by SIGTERM to its process group, a
place in the queue and a row in the Runs tab. ``ExportJob(run_id)`` is rebuilt from the registry row's argv at any
time. An export killed before it could clean up leaves its temp folder: the next look at the ended job removes it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engine.core import acting
from engine.core.messages import payload_message
from engine.core.units import file_size
from engine.export import checks as xp
from engine.export import convert_plan as cp
from engine.export import gguf_checks as gc
from engine.export import written
from engine.export.checks import ExportError
from engine.export.merge_jobs import output_fields
from engine.export.messages import message
from engine.jobs.command_job import CommandJob, job_record, new_events, newest_jobs
from engine.runs import registry as runs

EXPORT_TAG = "export"
MODULE = "engine.trainer.convert"
# Export runs recorded before the writer of every format was named for what it does (issue 48): still exports.
EARLIER_MODULES = ("engine.trainer.gguf_export",)


class ExportJob(CommandJob):
    """One export, read back from its registry run; ``poll()`` is cheap and safe to call from a UI timer."""

    what = "export"
    events_prefix = "export"

    def __init__(self, run_id: str):
        not_export = message("export.not_export", id=run_id)
        rec, rest = job_record(run_id, (MODULE, *EARLIER_MODULES), ExportError, not_export)
        args = cp.convert_arg_parser().parse_args(rest)
        self.run_id, self.run_dir, self.argv = rec.id, Path(rec.run_dir), rec.command
        self.source, self.fmt, self.out_dir = args.source, args.format, args.out
        self.tmp_dir, self.log_path = Path(args.tmp_dir), rec.log_path
        self._read_events_from(args.events)

    def fields(self, s) -> dict:
        """The format, the source, the progress, the result (its summaries in the page's language), the folders."""
        result = None
        if s.result is not None:
            p = s.result
            result = {
                **p,
                "summary": payload_message(p, "summary") or p.get("summary", ""),
                "llama_cpp_summary": payload_message(p, "llama_cpp_summary") or p.get("llama_cpp_summary", ""),
            }
        return {**output_fields(self, s), "format": self.fmt, "source": self.source, "result": result}


def start_export(
    source: str,
    fmt: str,
    out_dir: str | None = None,
    *,
    overwrite: bool = False,
    force: bool = False,
    calibration: cp.Calibration | None = None,
) -> ExportJob:
    """Check the source and the format (ExportError on any problem, before anything is queued) and queue the job.
    ``calibration``: GPTQ / AWQ on a text file's rows instead of the run's training rows."""
    source = acting.from_working_folder(source)  # the job runs in the repository (the plan makes paths absolute)
    plan = cp.plan_convert(source, fmt, out_dir, overwrite=overwrite, force=force, calibration=calibration)
    argv = cp.convert_argv(
        plan, xp.temp_dir_for(plan.out_dir), "{run_dir}/events.jsonl", overwrite=overwrite, force=force
    )
    if overwrite and (removes := written.removal(plan.out_dir)):
        print(removes, flush=True)
    name = f"export {Path(str(source).rstrip('/')).name} → {Path(plan.out_dir).name}"
    return ExportJob(runs.submit_command(argv, name=name, tags=[EXPORT_TAG], writes=plan.out_dir))


def list_exports(limit: int = 10) -> list[ExportJob]:
    return newest_jobs(EXPORT_TAG, ExportJob, ExportError, limit)


def describe_event(event: dict) -> str:
    p = event.get("payload", {})
    if event["type"] == "export_progress":
        count = f" {p.get('i')}/{p.get('n')}" if p.get("n") else ""
        return f"[export] {p.get('stage')}{count} {p.get('detail', '')}".rstrip()
    if event["type"] == "export_finished":
        return f"[export] finished: {p.get('out_dir')}"
    if event["type"] == "export_failed":
        return f"[export] failed ({p.get('cause')}): {p.get('error')}"
    return f"[export] {event['type']}: {p.get('message', p)}"


def export(source: str, fmt: str, out_dir: str | None = None, *, echo: bool = False, poll_interval: float = 0.3,
           **kwargs) -> dict:  # fmt: skip
    """Blocking export: start, follow to the end, return the final ``poll()`` dict (echo prints each event)."""
    job = start_export(source, fmt, out_dir, **kwargs)
    return job.follow(new_events(describe_event) if echo else None, interval=poll_interval)


def exported_text(greedy: dict) -> str:
    """The exported model's greedy text in one of a report's ``greedy`` rows: a GGUF's (``gguf``, as
    engine.trainer.gguf_verify writes it) or a GPTQ / AWQ folder's (``quantized``, engine.trainer.gptq_export)."""
    return greedy["gguf"] if "gguf" in greedy else greedy.get("quantized", "")


def result_lines(result: dict) -> list[str]:
    """What a person reads at the end: the files and their sizes, the verification, the Ollama command."""
    lines = [f"exported to {result.get('out_dir')}"]
    lines += [f"  {f['name']}  {file_size(f['bytes'])}" for f in result.get("files") or []]
    lines += [f"verify: {result.get('summary')}", f"        {result.get('llama_cpp_summary')}"]
    rep = result.get("report") or {}
    for g in rep.get("greedy") or []:
        lines.append(f"  greedy {g['prompt']!r}: {exported_text(g)!r} ({'same' if g['same'] else 'differs'})")
    mfile = rep.get("modelfile") or {}
    if mfile.get("written"):
        lines.append(f"Ollama: {mfile['command']}")
    return lines


# ----------------------------------------------------------------------------------------------- CLI
def cli(argv: list[str]) -> int:
    """``studio export``: 0 exported and verified, 1 failed, 2 bad input, 130 cancelled."""
    ap = argparse.ArgumentParser(
        prog="studio export",
        description="Export a run (merged first) or a model folder as GGUF (with an Ollama Modelfile) or a "
        "quantized Hugging Face folder; the result is read back and compared with the model.",
    )
    ap.add_argument("source", metavar="RUN_ID|DIR", help="a run id or folder, a PEFT adapter folder or a model folder")
    ap.add_argument("--format", required=True, choices=list(gc.FORMATS))
    ap.add_argument("--out", default=None, help="output folder (default: the workspace's exports/<source>-<format>)")
    ap.add_argument("--overwrite", action="store_true", help="replace an existing output folder")
    ap.add_argument("--force", action="store_true", help="merge even when the memory estimate says it will not fit")
    ap.add_argument(
        "--calibration",
        metavar="FILE",
        default=None,
        help="GPTQ / AWQ: calibrate on this file's 'text' rows (json, jsonl, csv, parquet, txt) instead of the run's "
        "training rows; needed for a model folder",
    )
    ap.add_argument("--calibration-samples", type=int, default=128, metavar="N", help="windows drawn (default 128)")
    ap.add_argument("--calibration-maxlen", type=int, default=1024, metavar="T", help="tokens per window (1024)")
    ap.add_argument("--push", metavar="REPO", default=None, help="then upload the result to this hub repo")
    ap.add_argument("--private", action="store_true", help="with --push: create the repo private")
    args = ap.parse_args(argv)
    from engine.export import push_jobs

    try:
        cal = cp.calibration_of(args)
        plan = cp.plan_convert(
            args.source, args.format, args.out, overwrite=args.overwrite, force=args.force, calibration=cal
        )
        if args.push:  # offline, tokenless or a bad repo id: said before any work
            push_jobs.check_push(str(Path(plan.out_dir).parent), args.push)
        print(f"[export] {args.format} into {plan.out_dir}: about {cp.describe(plan)['estimated']}", flush=True)
        status = export(
            args.source,
            args.format,
            args.out,
            echo=True,
            overwrite=args.overwrite,
            force=args.force,
            calibration=cal,
        )
    except ExportError as exc:
        print(f"studio export: {exc}", file=sys.stderr)
        return 2
    if status["state"] == "finished":
        for line in result_lines(status["result"]):
            print(line)
        if not args.push:
            return 0
        try:
            push = push_jobs.start_push(status["out_dir"], args.push, private=args.private)
            pushed = push.follow(push_jobs.files_sent())
        except ExportError as exc:
            print(f"studio export: {exc}", file=sys.stderr)
            return 1
        if pushed["state"] != "finished":
            print(f"studio export: push {pushed['state']}: {pushed['error']}", file=sys.stderr)
            return 1
        print(f"pushed to {pushed['url']}")
        return 0
    print(f"studio export: {status['state']}: {status['error']}", file=sys.stderr)
    if status["state"] == "failed" and status["events"] and status["events"][-1]["payload"].get("cause") == "input":
        return 2
    return 130 if status["state"] == "cancelled" else 1
