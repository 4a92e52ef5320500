"""A run owns only what it made; validate, train, submit and the form refuse the same output folders (issue 30,
items 2 and 3).

Real registry, the real trainer on the demo (CPU), real merges, the ``studio`` commands as a user runs them and the
Train tab's form handler; every refusal is the product's own message, every kept file is compared by its bytes.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path

import pytest
import yaml

from engine.cli import main as studio
from engine.core import workspace
from engine.runs import records as records_mod
from engine.runs import registry as runs
from engine.runs.records import RunRecord
from engine.runs.store import _claim_run_dir, _insert
from engine.spec.schema import SpecError
from tests import helpers

wait_for = functools.partial(helpers.wait_for, timeout=240.0, every=0.1)


@pytest.fixture
def home(demo_paths, run_registry) -> Path:
    data = workspace.data_dir()
    for src in Path(demo_paths["data_dir"]).iterdir():
        if src.is_file():
            (data / src.name).write_bytes(src.read_bytes())
    return run_registry


def spec_data(demo_paths, steps: int = 2, **output) -> dict:
    data = yaml.safe_load(Path(demo_paths["example_spec"]).read_text())
    data["train"].update(max_steps=steps, logging_steps=1, save_steps=1000)
    data["data"]["max_samples"] = 16
    data["data"]["dataset_dir"] = str(workspace.data_dir())  # the workspace's copy: the page reads only its own
    data["output"]["report_to"] = ["none"]
    data["output"].update(output)
    return data


def finished(rid: str) -> records_mod.RunRecord:
    rec = wait_for(lambda: runs.get(rid).status not in ("queued", "running") and runs.get(rid))
    assert rec.status == "completed", f"{rec.status}: {rec.reason}\n{helpers.log_tail(Path(rec.run_dir))}"
    return rec


def snapshot(folder: Path) -> dict[str, str]:
    return {
        str(f.relative_to(folder)): hashlib.sha256(f.read_bytes()).hexdigest()
        for f in sorted(folder.rglob("*"))
        if f.is_file()
    }


def refusal(data: dict) -> str:
    """The output.output_dir problems submit names (nothing may be queued)."""
    before = {r.id for r in runs.list_runs(refresh_status=False)}
    with pytest.raises(SpecError) as info:
        runs.submit(data, start=False)
    assert {r.id for r in runs.list_runs(refresh_status=False)} == before
    return " / ".join(str(m) for p, m in info.value.problems if p == "output.output_dir")


def legacy_run(spec_text: str, output_dir: Path, status: str = "completed") -> str:
    """A run recorded as a Studio before this fix recorded it (no record of what it created)."""
    rid, rdir = _claim_run_dir()
    (rdir / "spec.yaml").write_text(spec_text)
    _insert(
        RunRecord(
            id=rid,
            name=f"old {output_dir.name}",
            status=status,
            created=0.0,
            run_dir=str(rdir),
            output_dir=str(output_dir),
            spec=spec_text,
        )
    )
    return rid


def delete(rid: str, capsys) -> str:
    assert studio(["runs", "delete", rid, "--yes"]) == 0
    return capsys.readouterr().out


def test_delete_removes_only_what_the_run_made(home, demo_paths, tally, capsys):
    """exports/m1 (a merge) named by a later run, cache/ (tokenized datasets), mystuff/ with the user's notes and a
    queued run that never ran naming exports/m2: each is refused at submit naming what is there, and deleting runs
    that named them (recorded by an older Studio) keeps every file. A run that created its output folder takes it
    with it; one whose folder existed (empty) takes only the files it wrote there."""
    from engine.export import merge_jobs

    t = finished(runs.submit(spec_data(demo_paths, output_dir="outs/new"), name="T"))
    exports = workspace.home() / "exports"
    for name in ("m1", "m2"):
        merged = merge_jobs.merge([t.output_dir], str(exports / name))
        assert merged["state"] == "finished", merged
    cache = workspace.home() / "cache"
    mystuff = workspace.home() / "mystuff"
    mystuff.mkdir()
    (mystuff / "notes.txt").write_text("my notes, not Studio's")
    assert snapshot(cache), "the run tokenized its dataset into cache/"
    kept = {p: snapshot(p) for p in (exports / "m1", exports / "m2", cache, mystuff)}

    said = {
        "exports/m1": ("inside the exports folder", "exports/m1"),
        "exports/m2": ("inside the exports folder", "exports/m2"),
        "cache": ("tokenized-dataset cache", "cache"),
        "mystuff": ("notes.txt", "mystuff"),
    }
    for out, (words, _) in said.items():
        why = refusal(spec_data(demo_paths, output_dir=out))
        tally.check(f"owned::output_dir {out} refused before launch, naming what is there", words in why, why)

    spec_text = t.spec
    olds = {out: legacy_run(spec_text, workspace.home() / out) for out in ("exports/m1", "cache", "mystuff")}
    olds["exports/m2"] = legacy_run(spec_text, exports / "m2", status="queued")
    for out, rid in olds.items():
        text = delete(rid, capsys)
        why = "it belongs to the tokenized-dataset cache" if out == "cache" else f"run {rid} did not create it"
        tally.check(
            f"owned::delete a run that named {out} -> kept, and said why",
            f"kept {workspace.home() / out}: {why}" in text,
            text,
        )
    from studio.tabs import runs as runs_tab

    page = legacy_run(spec_text, exports / "m1")  # the page's Delete says the same, in the page's language
    shown = runs_tab.act("delete", page, "zh")
    tally.check(
        "owned::the Runs tab's Delete says what it kept and why",
        f"保留了 {exports / 'm1'}：它不是运行 {page} 创建的" in shown,
        shown,
    )
    now = {p: snapshot(p) for p in kept}
    tally.check("owned::exports/m1, exports/m2, cache/ and mystuff/notes.txt intact", now == kept, "")

    text = delete(t.id, capsys)
    tally.check(
        "owned::a run that created its output folder takes it (and the folder it made around it)",
        f"removed {workspace.home() / 'outs' / 'new'}" in text and not (workspace.home() / "outs").exists(),
        text,
    )

    existing = workspace.home() / "outs2" / "empty"
    existing.mkdir(parents=True)
    e = finished(runs.submit(spec_data(demo_paths, output_dir="outs2/empty"), name="E"))
    wrote = sorted(str(f.relative_to(existing)) for f in existing.rglob("*") if f.is_file())
    assert wrote, "the run wrote its adapter into the folder"
    (existing / "notes.txt").write_text("put here after the run")
    text = delete(e.id, capsys)
    left = sorted(str(f.relative_to(existing)) for f in existing.rglob("*") if f.is_file())
    tally.check(
        "owned::a folder that existed keeps itself and what the run did not write",
        left == ["notes.txt"] and f"removed only the {len(wrote)} file(s) the run wrote" in text,
        f"{left}\n{text}",
    )

    # A folder the run created, where the person put files after the run ended: the run's files go, theirs stay
    f = finished(runs.submit(spec_data(demo_paths, output_dir="outs3/made"), name="F"))
    made = Path(f.output_dir)
    wrote = sorted(str(p.relative_to(made)) for p in made.rglob("*") if p.is_file())
    (made / "usernote.txt").write_text("mine")
    (made / "userdir").mkdir()
    (made / "userdir" / "plot.png").write_bytes(b"\x89PNG")
    text = delete(f.id, capsys)
    left = sorted(str(p.relative_to(made)) for p in made.rglob("*") if p.is_file())
    tally.check(
        "owned::a folder the run created keeps the files added after the run, naming them",
        left == ["userdir/plot.png", "usernote.txt"]
        and (made / "usernote.txt").read_text() == "mine"
        and f"kept {made}: it holds files added after run {f.id} ended (userdir/plot.png, usernote.txt); removed "
        f"only the {len(wrote)} file(s) the run wrote"
        in text,
        f"{left}\n{text}",
    )


def test_validate_train_and_the_form_refuse_the_same_output_folders(home, demo_paths, tally, capsys):
    """outs/o1 (another run's output folder), outs/o1/adapter and outs are refused alike by `studio validate`,
    `studio train` and the Train tab's form, with the same words; a free folder passes all three."""
    from studio import form_validation, forms

    o = runs.submit(spec_data(demo_paths, output_dir="outs/o1"), name="o1", start=False)
    runs.stop(o)  # taken off the queue: a run all the same, whose output folder is its own

    def three(out: str, run: bool = True) -> tuple[tuple[int, str], tuple[int, str], tuple[object, str]]:
        data = spec_data(demo_paths, output_dir=out)
        path = home / "spec.yaml"
        path.write_text(yaml.safe_dump(data))
        rc_v = studio(["validate", str(path)])
        said_v = capsys.readouterr()
        before = {r.id for r in runs.list_runs(refresh_status=False)}
        rc_t = studio(["train", str(path), "--detach"]) if run else 0
        said_t = capsys.readouterr()
        if rc_t == 0:  # started: the refusal failed; leave nothing running
            for rec in runs.list_runs(refresh_status=False):
                if rec.id not in before and rec.active:
                    runs.stop(rec.id, grace_s=5)
        spec, errors, _ = form_validation.form_check(forms.spec_to_values(data))
        form = " / ".join(str(m) for p, m in errors if p == "output.output_dir")
        return (rc_v, said_v.out + said_v.err), (rc_t, said_t.out + said_t.err), (spec, form)

    for out, words in (
        ("outs/o1", f"belongs to run {o}"),
        ("outs/o1/adapter", f"belongs to run {o}"),
        ("outs", f"holds run {o}"),
        ("exports/m9", "inside the exports folder"),
    ):
        (rc_v, said_v), (rc_t, said_t), (spec, form) = three(out)
        tally.check(f"same-check::`studio validate` refuses {out}", rc_v == 1 and words in said_v, said_v)
        tally.check(f"same-check::`studio train` refuses {out}", rc_t == 1 and words in said_t, said_t)
        tally.check(f"same-check::the form refuses {out}", spec is None and words in form, form)
        tally.check(
            f"same-check::the same words for {out}",
            form and form in said_v and form in said_t,
            f"{form}\n{said_v}\n{said_t}",
        )
    (rc_v, said_v), _, (spec, form) = three("outs/fresh", run=False)  # not trained: it would start
    ok = rc_v == 0 and "OK" in said_v and spec is not None and not form
    tally.check("same-check::a free folder passes validate and the form", ok, said_v + form)


def test_overwrite_output_dir_replaces_an_earlier_runs_output_and_keeps_its_history(home, demo_paths, tally, capsys):
    """LLaMA-Factory's rerun habit, overwrite_output_dir (issue 45 item 7): the second run into the same output_dir
    replaces the first run's output, saying what it replaced; the first run keeps its record, run folder and logs,
    marked overwritten, and deleting it later leaves the new output alone. Without the key, or over a folder with a
    person's file in it, the rerun is refused as before, naming why."""
    first = finished(runs.submit(spec_data(demo_paths, output_dir="outs/lf-out"), name="first"))
    out = Path(first.output_dir)
    assert (out / "adapter").is_dir()
    again = spec_data(demo_paths, output_dir="outs/lf-out")
    tally.check("overwrite::a rerun without overwrite is refused", "belongs to run" in refusal(again), refusal(again))
    (out / "mine.txt").write_text("a person's file")
    again["output"]["overwrite"] = True
    why = refusal(again)
    tally.check(
        "overwrite::a folder with a person's file is not overwritten, naming it",
        f"also holds files run {first.id} did not write (mine.txt)" in why and (out / "mine.txt").is_file(),
        why,
    )
    (out / "mine.txt").unlink()
    path = home / "again.yaml"
    path.write_text(yaml.safe_dump(again))
    assert studio(["train", str(path)]) == 0
    said = capsys.readouterr().out
    second = [r for r in runs.list_runs() if r.id != first.id and r.output_dir == str(out)]
    old = runs.get(first.id)
    notes = json.loads((Path(old.run_dir) / "run.json").read_text())
    tally.check(
        "overwrite::the rerun replaces the earlier output, saying so, and the earlier run is marked",
        len(second) == 1
        and f"overwrite_output_dir: replaced {out}, the output of run {first.id} (" in said
        and second[0].status == "completed"
        and old.status == "completed"
        and old.output_dir == old.run_dir
        and notes.get("overwritten_by") == second[0].id
        and (Path(old.run_dir) / "train.log").is_file(),
        said,
    )
    text = delete(first.id, capsys)
    tally.check(
        "overwrite::deleting the overwritten run leaves the new output",
        (out / "adapter").is_dir() and str(out) not in text,
        text,
    )


def test_a_file_put_in_the_folder_just_after_the_run_ended_is_the_persons(tmp_path):
    """File times cannot tell a run's last file from a person's note written a moment later (the kernel's clock is
    coarse, the margin is 10 ms): the list sealed at the run's end decides. The note keeps the run's end time to the
    microsecond and is still the person's; a relaunch adds only what it wrote after it started."""
    from engine.runs import outputs

    rdir, out = tmp_path / "run", tmp_path / "outs" / "made"
    rdir.mkdir()
    record = outputs.claim(rdir, out)
    assert record is not None and outputs.created(record)
    (out / "adapter.safetensors").write_bytes(b"w")
    outputs.seal(rdir)
    ended = (out / "adapter.safetensors").stat().st_mtime
    (out / "usernote.txt").write_text("mine")
    os.utime(out / "usernote.txt", (ended, ended))  # the same instant as the run's last file
    sealed = outputs.read(rdir)
    assert [p.name for p in outputs.written(sealed, ended)] == ["adapter.safetensors"]
    assert outputs.added_later(sealed, ended) == ["usernote.txt"]

    outputs.claim(rdir, out)  # relaunched (resume): its new checkpoint is the run's, the note still the person's
    os.utime(out / "usernote.txt", (ended - 5, ended - 5))
    (out / "checkpoint-2").mkdir()
    (out / "checkpoint-2" / "model.safetensors").write_bytes(b"c")
    outputs.seal(rdir)
    again = outputs.read(rdir)
    assert sorted(str(p.relative_to(out)) for p in outputs.written(again, None)) == [
        "adapter.safetensors",
        "checkpoint-2/model.safetensors",
    ]
    assert outputs.added_later(again, None) == ["usernote.txt"]
