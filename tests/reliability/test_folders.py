"""Folders and who owns them (issue 18, items 1 and 2): a resumed run is its own run, deleting a run removes only what
it owns and says so, output / merge / export folders stay in the workspace (or a root the user allowed) and are
refused when a run, the workspace or a base model owns them, with a message naming the owner.

Real registry, real trainer on the demo (CPU, one thread), real ``studio`` commands; every refusal is the product's
own message.
"""

from __future__ import annotations

import functools
import hashlib
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
from engine.spec.schema import SpecError, validate_spec
from tests import helpers

wait_for = functools.partial(helpers.wait_for, timeout=180.0, every=0.1)


@pytest.fixture
def home(demo_paths, run_registry) -> Path:
    """A private registry and workspace (the demo model stays in the session workspace where it was built), with a
    dataset folder of its own so 'data intact' means something."""
    data = workspace.data_dir()
    for src in Path(demo_paths["data_dir"]).iterdir():
        if src.is_file():
            (data / src.name).write_bytes(src.read_bytes())
    return run_registry


def allow_session_workspace(demo_paths, monkeypatch) -> None:
    """The demo model lives in the session's workspace, outside this test's: allow it as an output root, so that a
    folder inside the base model is refused for its owner, not for its place."""
    monkeypatch.setenv("STUDIO_OUTPUT_ROOTS", str(Path(demo_paths["model_dir"]).parents[1]))


def spec_data(demo_paths, steps: int = 2, save_steps: int = 1, **output) -> dict:
    data = yaml.safe_load(Path(demo_paths["example_spec"]).read_text())
    data["train"].update(max_steps=steps, logging_steps=1, save_steps=save_steps, save_total_limit=20)
    data["data"]["max_samples"] = 16
    data["output"]["report_to"] = ["none"]
    data["output"].update(output)
    return data


def finished(rid: str) -> records_mod.RunRecord:
    rec = wait_for(lambda: runs.get(rid).status not in ("queued", "running") and runs.get(rid))
    assert rec.status == "completed", f"{rec.status}: {rec.reason}\n{helpers.log_tail(Path(rec.run_dir))}"
    return rec


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` and its sha256."""
    return {
        str(f.relative_to(folder)): hashlib.sha256(f.read_bytes()).hexdigest()
        for f in sorted(folder.rglob("*"))
        if f.is_file()
    }


def refusal(data: dict) -> list[tuple[str, str]]:
    """The problems submit names (nothing may be queued)."""
    before = {r.id for r in runs.list_runs(refresh_status=False)}
    with pytest.raises(SpecError) as info:
        runs.submit(data, start=False)
    assert {r.id for r in runs.list_runs(refresh_status=False)} == before
    return [(p, str(m)) for p, m in info.value.problems]


def test_resume_is_its_own_run_and_deleting_it_keeps_the_parent(home, demo_paths, tally, capsys, monkeypatch):
    """X trains with checkpoints; resume X -> Y: a new id and folder, resume_from = X's newest checkpoint, Y's
    adapter in Y's folder; `studio runs delete Y` removes Y's folder only, says so, and X's folder, checkpoints and
    adapter are intact. A resumed run of old (its output folder = its parent's folder) is deleted without X's files.
    The same finished X then serves the merge refusals: into data/, models/, runs/, a base model, X's own folder."""
    x = finished(runs.submit(spec_data(demo_paths, steps=2, save_steps=1), name="parent"))
    xdir = Path(x.run_dir)
    ckpts = sorted((xdir / "checkpoints").glob("checkpoint-*"))
    assert ckpts and (xdir / "adapter" / "adapter_config.json").is_file()
    before = snapshot(xdir)

    assert studio(["runs", "resume", x.id]) == 0
    out = capsys.readouterr().out
    yid = out.splitlines()[0].strip()
    y = runs.get(yid)
    y_spec = y.load_spec()
    tally.check(
        "folders::resume -> a new run with its own folder, from the parent's newest checkpoint",
        yid != x.id
        and Path(y.run_dir) != xdir
        and Path(y.output_dir) == Path(y.run_dir)
        and y_spec.train.resume_from == str(xdir / "checkpoints" / "checkpoint-2")
        and f"resume-of:{x.id}" in y.tags,
        f"{y}\n{y_spec.train}",
    )
    tally.check(
        "folders::resume reports the new run's adapter path",
        str(Path(y.run_dir) / "adapter") in out and x.id in out,
        out,
    )
    y = finished(yid)
    tally.check(
        "folders::resumed run writes its adapter into its own folder",
        (Path(y.run_dir) / "adapter" / "adapter_config.json").is_file(),
        str(list(Path(y.run_dir).iterdir())),
    )

    assert studio(["runs", "delete", yid, "--yes"]) == 0
    said = capsys.readouterr().out
    tally.check(
        "folders::delete the resumed run -> says what it removed",
        f"removed {y.run_dir}" in said and str(xdir) not in said and not Path(y.run_dir).exists(),
        said,
    )
    tally.check("folders::delete the resumed run -> parent's folder intact", snapshot(xdir) == before, said)

    # A resumed run made before this fix: its output folder is its parent's folder.
    legacy_id, legacy_dir = _claim_run_dir()
    (legacy_dir / "spec.yaml").write_text(x.spec)
    _insert(
        RunRecord(
            id=legacy_id,
            name="old resume",
            status="completed",
            created=x.created + 1,
            run_dir=str(legacy_dir),
            output_dir=x.run_dir,
            spec=x.spec,
            tags=[f"resume-of:{x.id}"],
        )
    )
    report = runs.delete(legacy_id)
    lines = [str(m) for m in report.lines()]
    tally.check(
        "folders::delete an old resumed run -> parent kept, the owner named",
        report.removed == [str(legacy_dir.resolve())]
        and any(line.startswith(f"kept {xdir}: it belongs to run {x.id}") for line in lines)
        and snapshot(xdir) == before,
        "\n".join(lines),
    )

    # Merges into folders others own are refused, naming the owner; nothing there changes.
    data_before = snapshot(workspace.data_dir())
    assert (workspace.data_dir() / "dataset_info.json").is_file()
    rc = studio(["merge", x.run_dir, "--out", str(workspace.home() / "data"), "--overwrite"])
    err = capsys.readouterr().err
    tally.check(
        "folders::studio merge --out $STUDIO_HOME/data --overwrite refused, data intact",
        rc == 2 and "belongs to the dataset folder" in err and snapshot(workspace.data_dir()) == data_before,
        err,
    )
    base = Path(demo_paths["model_dir"])
    allow_session_workspace(demo_paths, monkeypatch)
    other = finished(runs.submit(spec_data(demo_paths, steps=1, save_steps=1000), name="other"))
    targets = {
        "models folder": (workspace.models_dir(), "belongs to the models folder"),
        "runs folder": (workspace.runs_dir(), "belongs to the runs folder"),
        "base model": (base / "merged", "belongs to the base model"),
        "another run's folder": (Path(other.run_dir), f"belongs to run {other.id}"),
        "inside another run's folder": (Path(other.run_dir) / "merged", f"belongs to run {other.id}"),
        "the workspace": (workspace.home(), "belongs to the workspace"),
        "/etc": (Path("/etc"), "is a system folder"),  # refused even at the shell (engine.core.acting)
    }
    for what, (target, said) in targets.items():
        rc = studio(["merge", x.run_dir, "--out", str(target), "--overwrite"])
        err = capsys.readouterr().err
        tally.check(f"folders::merge into {what} refused, naming the owner", rc == 2 and said in err, err)
    assert snapshot(xdir) == before and (Path(other.run_dir) / "adapter").is_dir()


def test_output_folder_owned_by_another_run_or_the_workspace_is_refused(home, demo_paths, tally, monkeypatch):
    """A spec whose output folder is another run's folder, inside it, its output folder or a folder holding it is
    refused naming that run; `runs`, `data`, `models`, `exports` and the workspace itself are refused naming the
    workspace's folder; the field is output.output_dir. Nothing is queued."""
    allow_session_workspace(demo_paths, monkeypatch)
    a = runs.submit(spec_data(demo_paths, steps=1), name="a", start=False)
    b = runs.submit(spec_data(demo_paths, steps=1, output_dir="outs/b"), name="b", start=False)
    a_dir, b_out = Path(runs.get(a).run_dir), workspace.home() / "outs" / "b"
    cases = {
        "another run's folder": (str(a_dir), f"belongs to run {a}"),
        "inside another run's folder": (str(a_dir / "sub"), f"belongs to run {a}"),
        "another run's output folder": ("outs/b", f"belongs to run {b}"),
        "a folder holding another run's output": ("outs", f"holds run {b}"),
        "runs": ("runs", "belongs to the runs folder"),
        "data": ("data", "belongs to the dataset folder"),
        "models": ("models", "belongs to the models folder"),
        "exports": ("exports", "belongs to the exports folder"),
        "the workspace": (".", "belongs to the workspace"),
        "the base model": (demo_paths["model_dir"], "belongs to the base model"),
    }
    for what, (out, said) in cases.items():
        problems = refusal(spec_data(demo_paths, output_dir=out))
        ok = any(p == "output.output_dir" and said in m for p, m in problems)
        tally.check(f"folders::output_dir = {what} refused, naming the owner", ok, str(problems))
    assert not b_out.exists()  # b was never started
    rid = runs.submit(spec_data(demo_paths, output_dir="outs/c"), start=False)  # a free folder is fine
    assert Path(runs.get(rid).output_dir) == workspace.home() / "outs" / "c"


def test_output_folders_outside_the_workspace(home, demo_paths, tally, tmp_path_factory, monkeypatch, capsys):
    """/etc and ../../../../etc are refused with the field named (form, `studio validate`, submit); an outside folder
    is allowed only under a root named in STUDIO_OUTPUT_ROOTS, which never allows a system folder."""
    climb = os.path.relpath("/etc", home)  # ../../../../etc from the workspace: as deep as the temporary folder is
    for label, out in (("/etc", "/etc"), ("../../../../etc", climb), ("/", "/"), (str(Path.home()), str(Path.home()))):
        _valid, errors, _ = validate_spec(spec_data(demo_paths, output_dir=out))
        ok = any(p == "output.output_dir" and "outside the workspace" in str(m) for p, m in errors)
        tally.check(f"folders::output_dir {label} refused by the spec rules (the form)", ok, str(errors))
        problems = refusal(spec_data(demo_paths, output_dir=out))
        tally.check(
            f"folders::output_dir {label} refused at submit",
            any(p == "output.output_dir" for p, _ in problems),
            str(problems),
        )
        spec_path = home / "bad.yaml"
        spec_path.write_text(yaml.safe_dump(spec_data(demo_paths, output_dir=out)))
        rc = studio(["validate", str(spec_path)])
        said = capsys.readouterr()
        tally.check(
            f"folders::studio validate names output.output_dir for {label}",
            rc != 0 and "output.output_dir" in said.out + said.err,
            said.out + said.err,
        )

    outside = tmp_path_factory.mktemp("allowed-root")
    problems = refusal(spec_data(demo_paths, output_dir=str(outside / "out")))
    assert any(p == "output.output_dir" and "STUDIO_OUTPUT_ROOTS" in m for p, m in problems), problems
    monkeypatch.setenv("STUDIO_OUTPUT_ROOTS", f"/etc:/:{outside}")
    rid = runs.submit(spec_data(demo_paths, output_dir=str(outside / "out")), start=False)
    tally.check(
        "folders::STUDIO_OUTPUT_ROOTS allows a folder under the named root",
        Path(runs.get(rid).output_dir) == outside / "out",
        "",
    )
    for out in ("/etc/studio-out", "/usr/lib/studio-out"):
        problems = refusal(spec_data(demo_paths, output_dir=out))
        tally.check(
            f"folders::STUDIO_OUTPUT_ROOTS never allows {out}",
            any(p == "output.output_dir" and "never allowed" in m for p, m in problems),
            str(problems),
        )
    problems = refusal(spec_data(demo_paths, output_dir=str(outside)))
    assert any("output root itself" in m for _, m in problems), problems
