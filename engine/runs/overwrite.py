"""A new run that replaces an earlier run's output folder: LLaMA-Factory's ``overwrite_output_dir`` habit of training
again into the same ``output_dir`` (``output.overwrite`` in the spec).

Light: stdlib and the run store. Only a folder an earlier run created and that holds nothing but what that run wrote
(``engine.runs.outputs``) may be replaced, and only once that run has ended; anything else keeps the usual refusal,
with the reason the overwrite does not apply. Replacing keeps the history true: the earlier run's record, run folder
and logs stay; its registry row and ``run.json`` say it no longer owns the folder and which run overwrote it, so a
later delete of it, or a registry rebuilt from the run folders, leaves the new run's output alone.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from engine.core.messages import Message
from engine.runs import outputs
from engine.runs.messages import message
from engine.runs.records import RunRecord, note
from engine.runs.store import list_runs, update

ENDED = ("completed", "failed", "stopped")


@dataclass
class Replaced:
    """The earlier run whose output folder a new run takes, and the files that go with it."""

    run: RunRecord
    folder: Path
    files: list[str]

    def line(self) -> Message:
        shown = ", ".join(self.files[:5]) + (f" and {len(self.files) - 5} more" if len(self.files) > 5 else "")
        return message(
            "runs.overwrite_replaces", folder=self.folder, id=self.run.id, count=len(self.files), files=shown or "-"
        )


def target(out: Path) -> tuple[Replaced | None, Message | None]:
    """(what the new run would replace, None) when ``out`` is an ended run's output folder that run created and
    wrote alone; (None, why not) when another run holds it otherwise; (None, None) when no run holds it."""
    out = out.expanduser().resolve()
    holders = [r for r in list_runs(refresh_status=False) if Path(r.output_dir).resolve() == out]
    if not holders:
        return None, None
    rec = holders[0]
    if len(holders) > 1 or rec.status not in ENDED:
        return None, message("runs.overwrite_active", id=rec.id, status=rec.status)
    made = outputs.read(rec.run_dir)
    if made is None or Path(made["output_dir"]).resolve() != out or not outputs.created(made):
        return None, message("runs.overwrite_not_created", id=rec.id, folder=out)
    others = outputs.added_later(made, rec.ended)
    if others:
        return None, message("runs.overwrite_others", folder=out, id=rec.id, files=", ".join(sorted(others)[:5]))
    files = [str(p.relative_to(out)) for p in outputs.written(made, rec.ended)]
    return Replaced(rec, out, sorted(files)), None


def replace(replaced: Replaced, new_id: str) -> None:
    """Remove the earlier run's output folder and record that ``new_id`` overwrote it (the earlier run's row and
    run.json now name its run folder as its output, so nothing it no longer owns is held or deleted for it)."""
    shutil.rmtree(replaced.folder, ignore_errors=True)
    old = replaced.run
    update(old.id, output_dir=old.run_dir)
    note(
        old.run_dir,
        output_dir=old.run_dir,
        overwritten_by=new_id,
        overwritten_folder=str(replaced.folder),
        overwritten_at=time.time(),
    )
