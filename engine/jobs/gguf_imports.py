"""GGUF imports as registry runs, and ``studio import-gguf``. Light: stdlib, the registry, engine.models.gguf_file;
never torch.

An import is a command run of the registry (``submit_command``, tag ``gguf-import``) running
``python -m engine.trainer.gguf_import`` (see that module), like a download (engine.jobs.downloads) or a merge
(engine.export.merge_jobs): its own folder and ``events.jsonl``, the detached wrapper, stop (SIGTERM: the import
removes its temp folder), a CPU slot in the queue and a row in the Runs tab. The header is read and checked here first
(architecture, tensor types, the target folder, disk space), so a file the loader cannot map is refused in one line
before anything is queued. ``GgufImportJob(run_id)`` is rebuilt from the registry row, so a reloaded page follows it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engine.core import acting, belongings, page_trust
from engine.core.messages import payload_message
from engine.jobs.command_job import CommandJob, job_record, new_detail, newest_jobs
from engine.models import gguf_file as gf
from engine.models.messages import message
from engine.runs import owners
from engine.runs import registry as runs


def start_import(path: str | Path, name: str | None = None) -> GgufImportJob:
    """Read and check the GGUF's header and the target ``models/<name>`` (GgufError, one line, before anything is
    queued), then queue the import. From the page (not ``acting.shell()``) only a file inside the workspace, and in
    team mode not inside another member's run or job folder (engine.runs.owners)."""
    if not acting.at_shell():  # the page reads only the workspace's files (engine.core.page_trust)
        problem = page_trust.read_problem(path) or owners.path_problem(path, field="gguf")
        if problem is not None:
            raise gf.GgufError(problem)
    header = gf.read_header(path)
    out = gf.target_dir(name or gf.default_name(header))
    gf.check_space(header, out)
    argv = gf.import_argv(header.path, out, "{run_dir}/events.jsonl")
    run_id = runs.submit_command(
        argv, name=f"import {Path(header.path).name} → models/{out.name}", tags=[gf.IMPORT_TAG]
    )
    belongings.record_path(out)  # the importer's model, also once the import's run is deleted
    return GgufImportJob(run_id)


class GgufImportJob(CommandJob):
    """One import, read back from its registry run; ``poll()`` is cheap and safe to call from a UI timer."""

    what = "import"
    events_prefix = "gguf_import"

    def __init__(self, run_id: str):
        rec, rest = job_record(run_id, gf.MODULE, gf.GgufError, message("models.gguf_not_import", id=run_id))
        args = gf.import_arg_parser().parse_args(rest)
        self.run_id, self.run_dir = rec.id, Path(rec.run_dir)
        self.gguf, self.out_dir, self.tmp_dir = args.gguf, args.out, Path(args.tmp_dir)
        self._read_events_from(args.events)

    def fields(self, s) -> dict:
        """The file, the folder, the detail and the result; the detail, the summary and the error are catalog
        messages, so the page shows them in its language."""
        result = {**s.result, "summary": payload_message(s.result, "summary")} if s.result is not None else None
        return {"gguf": self.gguf, "out_dir": self.out_dir, "detail": s.detail, "result": result}


def list_imports(limit: int = 10) -> list[GgufImportJob]:
    return newest_jobs(gf.IMPORT_TAG, GgufImportJob, gf.GgufError, limit)


def import_and_follow(path: str, name: str | None = None, *, echo: bool = True) -> dict:
    """Blocking import for a terminal: queue, print each step, return the final ``poll()``; Ctrl-C cancels."""
    job = start_import(path, name)
    return job.follow(new_detail("import-gguf"), label="import-gguf") if echo else job.follow()


def cli(argv: list[str]) -> int:
    """``studio import-gguf``: 0 imported and verified, 1 failed, 2 refused, 130 cancelled."""
    ap = argparse.ArgumentParser(
        prog="studio import-gguf",
        description="Import a GGUF file (from Ollama, LM Studio, llama.cpp) as a base model: dequantized into "
        "$STUDIO_HOME/models/NAME (float32 safetensors, tokenizer, chat template, generation config), its logits "
        "compared with the GGUF read by transformers and llama.cpp, its source recorded in gguf_import.json.",
    )
    ap.add_argument("file", metavar="FILE.gguf", help="the GGUF file (an Ollama blob sha256-... works too)")
    ap.add_argument("--name", default=None, help="the model folder's name (default: the file's name)")
    ap.add_argument("--detach", action="store_true", help="queue the import and return at once")
    args = ap.parse_args(argv)
    try:
        if args.detach:
            job = start_import(args.file, args.name)
            print(f"import queued as run {job.run_id} (`studio runs show {job.run_id}`): {job.out_dir}")
            return 0
        status = import_and_follow(args.file, args.name)
    except gf.GgufError as exc:
        print(f"studio import-gguf: {exc}", file=sys.stderr)
        return 2
    if status["state"] == "finished":
        print(status["result"]["summary"])
        name = Path(status["out_dir"]).name
        print(f"train on it with model.name_or_path: models/{name}")
        return 0
    print(f"studio import-gguf: {status['state']}: {status['error']}", file=sys.stderr)
    if status["state"] == "failed" and status["events"] and status["events"][-1]["payload"].get("cause") == "input":
        return 2
    return 130 if status["state"] == "cancelled" else 1
