"""Team mode: member B names member A's run by id or by path in every page field that takes one, and is refused in
one line naming it; A's own run answers. The page's handlers are called as the page calls them, with the logged-in
user installed as the engine's viewer (studio.team does this from gradio's request)."""

from __future__ import annotations

import json
import os

import pytest

from engine.core import accounts
from engine.runs import owners, store
from engine.runs import records as records_mod
from engine.runs.records import RunRecord

REFUSED = "is not in a run of yours"


@pytest.fixture()
def team(tmp_path, monkeypatch):
    """Two members, ann and bob, each with a finished LoRA run (adapter, base model on disk) and ann with a merge
    job whose output folder is in exports/."""
    monkeypatch.setenv("STUDIO_HOME", str(tmp_path))
    accounts.add("ann", "ann's password")
    accounts.add("bob", "bob's password")
    accounts.add("root", "root's password", admin=True)
    who = {"name": None}
    accounts.set_viewer_source(lambda: who["name"])
    base = tmp_path / "models" / "base"
    base.mkdir(parents=True)
    (base / "config.json").write_text("{}")
    store._connect().close()
    for name in ("ann", "bob"):
        who["name"] = name
        rdir = tmp_path / "runs" / f"{name}-run"
        adapter = rdir / "adapter"
        adapter.mkdir(parents=True)
        (rdir / "spec.yaml").write_text(f"model: {{name_or_path: {base}}}\nmethod: {{finetuning: lora}}\n")
        (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(base)}))
        (adapter / "adapter_model.safetensors").write_bytes(b"0")
        (rdir / "train.log").write_text(f"{name}'s log\n")
        store._insert(RunRecord(f"{name}-run", f"{name}-run", "completed", 1.0, str(rdir), str(rdir)))
    who["name"] = "ann"
    merged = tmp_path / "exports" / "ann-merged"
    merged.mkdir(parents=True)
    (merged / "config.json").write_text("{}")
    (merged / "model.safetensors").write_bytes(b"0")
    mdir = tmp_path / "runs" / "ann-merge"
    mdir.mkdir()
    argv = ["python", "-m", "engine.trainer.merge", str(rdir), "--out", str(merged), "--tmp-dir", str(mdir / "t")]
    argv += ["--events", str(mdir / "events.jsonl")]
    store._insert(
        RunRecord(
            "ann-merge", "merge", "completed", 2.0, str(mdir), str(mdir), kind="command", command=argv, tags=["merge"]
        )
    )
    yield who, tmp_path
    accounts.set_viewer_source(None)


def test_export_tab_refuses_another_members_run_by_path_and_id(team):
    from studio.tabs import export

    who, home = team
    ann_run = str(home / "runs" / "ann-run")
    who["name"] = "bob"
    for given in (ann_run, ann_run + "/adapter", "runs/ann-run"):
        said = export.estimate(given, "")
        assert REFUSED in said and "ann-run" in said and said.count("\n") == 0, said
        run_id, said = export.start(given, "")
        assert run_id is None and REFUSED in said and "ann-run" in said
    assert "ann-run" in export.estimate("ann-run", "") and REFUSED not in export.estimate("bob-run", "")
    assert [label for label, _ in export.source_choices()] == ["bob-run"]
    who["name"] = "ann"  # her own run resolves: the refusal is the owner's check, nothing else
    assert REFUSED not in export.estimate(ann_run, "")
    from engine.export import sources

    assert sources.resolve_source(ann_run).kind == "adapter"
    assert sources.resolve_source("ann-run").run_dir == ann_run


def test_engine_sources_hide_another_members_run_id(team):
    from engine.export import sources
    from engine.export.messages import ExportError

    who, home = team
    who["name"] = "bob"
    assert sources.run_id_folder("ann-run") is None and sources.run_id_folder("bob-run") is not None
    with pytest.raises(ExportError, match="ann-run"):
        sources.resolve_source("ann-run")
    with pytest.raises(ExportError, match=REFUSED):
        sources.resolve_source(home / "exports" / "ann-merged")  # a job's --out target is its owner's too
    link = home / "runs" / "bob-run" / "peek"
    os.symlink(home / "runs" / "ann-run" / "adapter", link)  # a link in B's own folder into A's run
    with pytest.raises(ExportError, match=REFUSED):
        sources.resolve_source(link)
    who["name"] = "root"  # an admin, like the shell, reads every run
    assert sources.resolve_source(home / "runs" / "ann-run").kind == "adapter"


def test_chat_dashboard_runs_tab_and_downloads_refuse(team):
    from studio import backend, file_offers
    from studio.tabs import chat_sources, dashboard, runs

    who, home = team
    who["name"] = "bob"
    with pytest.raises(ValueError, match=f"{REFUSED}"):
        chat_sources.tuned_target(str(home / "runs" / "ann-run"))
    with pytest.raises(ValueError, match=REFUSED):
        chat_sources.tuned_target(str(home / "exports" / "ann-merged"))
    with pytest.raises(ValueError, match="model: .*ann-merged.* is not in a run of yours"):
        chat_sources.load_target(str(home / "exports" / "ann-merged"), "")  # as the base model
    assert chat_sources.exported_models() == []  # ann's merge wrote it: not offered to bob
    assert backend.run_dir("ann-run") is None
    assert dashboard.select_run("ann-run")["run_dir"] == ""
    assert runs.tensorboard_info("ann-run") == ""
    assert file_offers.offer(home / "runs" / "ann-run" / "train.log", "x") is None
    assert file_offers.offer(home / "runs" / "bob-run" / "train.log", "x") is not None
    assert chat_sources.tuned_target(str(home / "runs" / "bob-run"))[1].endswith("bob-run/adapter")
    who["name"] = "ann"
    assert chat_sources.exported_models() == [home / "exports" / "ann-merged"]
    assert chat_sources.load_target(str(home / "exports" / "ann-merged"), "") is None
    assert dashboard.select_run("ann-run")["run_dir"] == str(home / "runs" / "ann-run")
    assert chat_sources.tuned_target(str(home / "exports" / "ann-merged")) == (
        str(home / "exports" / "ann-merged"),
        None,
    )
    assert file_offers.offer(home / "runs" / "ann-run" / "train.log", "x") is not None


def test_evaluation_merge_job_stop_and_delete_refuse(team):
    from engine.eval.messages import EvalError
    from engine.export import merge_jobs as merge_jobs
    from engine.export.messages import ExportError
    from engine.jobs import evals
    from engine.runs import registry

    who, home = team
    who["name"] = "bob"
    spec = {
        "models": {
            "base_model": str(home / "models" / "base"),
            "adapters": [str(home / "runs" / "ann-run" / "adapter")],
        },
        "data": {"source": "dataset", "datasets": ["none"]},
    }
    with pytest.raises(EvalError) as exc:
        evals.resolve(spec)
    refused = [(f, str(m)) for f, m in exc.value.problems if REFUSED in str(m)]
    assert refused and refused[0][0] == "models.adapters[0]" and "ann-run" in refused[0][1]
    with pytest.raises(EvalError, match="ann-run"):
        evals.resolve({"models": {"run": "ann-run"}})
    with pytest.raises(ExportError, match="ann-merge"):
        merge_jobs.MergeJob("ann-merge")
    assert merge_jobs.list_merges() == []  # a job is its owner's, like a run
    with pytest.raises(records_mod.RunsError, match="ann-merge"):
        registry.stop("ann-merge")
    with pytest.raises(records_mod.RunsError, match="ann-run"):
        registry.delete("ann-run")
    assert (home / "runs" / "ann-run").is_dir() and store.get("ann-merge").owner == "ann"
    from engine.jobs import gguf_imports
    from engine.models.gguf_file import GgufError

    (home / "exports" / "ann-merged" / "model.gguf").write_bytes(b"GGUF")
    with pytest.raises(GgufError, match=f"gguf: .*ann-merged.*{REFUSED}"):
        gguf_imports.start_import(home / "exports" / "ann-merged" / "model.gguf")
    who["name"] = "ann"
    assert merge_jobs.MergeJob("ann-merge").out_dir == str(home / "exports" / "ann-merged")
    assert [j.run_id for j in merge_jobs.list_merges()] == ["ann-merge"]


def test_a_members_run_reads_no_other_members_folder(team):
    from engine.runs import submit_checks
    from engine.spec.schema import RunSpec

    who, home = team
    spec = RunSpec.model_validate(
        {"model": {"name_or_path": str(home / "exports" / "ann-merged")}, "data": {"datasets": ["x"]}}
    )
    who["name"] = "bob"
    problems = submit_checks.owner_problems(spec)
    assert [f for f, _ in problems] == ["model.name_or_path"] and "ann-merged" in problems[0][1]
    who["name"] = "ann"
    assert submit_checks.owner_problems(spec) == []
    assert owners.path_problem(home / "models" / "base") is None  # models have no owner yet


def test_a_run_shared_read_only_is_seen_and_read_but_not_acted_on(team):
    """Ann shares her run with Bob: he lists it, reads its folder (an export's source), and is refused stopping,
    deleting, renaming, tagging or re-sharing it, in one line naming its owner; unshared, it is unknown to him
    again. Shared with everyone (*), every member sees it. The registry and the run's folder keep the sharing."""
    from engine.runs import registry as runs

    who, home = team
    accounts.add("cy", "cy's password")
    who["name"] = "bob"
    with pytest.raises(records_mod.RunsError):
        runs.share("ann-run", ["bob"])  # not his to share: unknown to him
    who["name"] = "ann"
    with pytest.raises(records_mod.RunsError, match="'zed' is no account"):
        runs.share("ann-run", ["zed"])
    assert runs.share("ann-run", ["bob"]) == ["bob"]
    who["name"] = "bob"
    assert {r.id for r in runs.list_runs(refresh_status=False)} == {"bob-run", "ann-run"}
    assert owners.path_problem(home / "runs" / "ann-run" / "adapter") is None  # readable: a source
    for act in (
        lambda: runs.stop("ann-run"),
        lambda: runs.delete("ann-run"),
        lambda: runs.rename("ann-run", "mine now"),
        lambda: runs.set_tags("ann-run", ["x"]),
        lambda: runs.share("ann-run", ["*"]),
    ):
        with pytest.raises(records_mod.RunsError, match="ann's, shared with you read-only"):
            act()
    from studio.tabs import runs as runs_tab

    said = runs_tab.act("delete", "ann-run")
    assert said.startswith("❌") and "read-only" in said and "\n" not in said
    assert (home / "runs" / "ann-run" / "adapter" / "adapter_model.safetensors").exists()
    who["name"] = "cy"
    assert "ann-run" not in {r.id for r in runs.list_runs(refresh_status=False)}
    who["name"] = "ann"
    assert runs.share("ann-run", ["*"]) == ["*"]
    who["name"] = "cy"
    assert "ann-run" in {r.id for r in runs.list_runs(refresh_status=False)}
    assert json.loads((home / "runs" / "ann-run" / "run.json").read_text())["shared"] == ["*"]
    who["name"] = "ann"
    assert runs.share("ann-run", []) == []
    who["name"] = "bob"
    with pytest.raises(records_mod.RunsError, match="no run with id"):
        runs.get("ann-run")
