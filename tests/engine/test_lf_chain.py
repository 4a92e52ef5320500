"""A LLaMA-Factory user's chain, unchanged, from their own working folder outside the workspace: `studio train` on
LF's examples/train_lora/llama3_lora_sft.yaml (output_dir: saves/llama3-8b/lora/sft, relative), then `studio merge
--lf-yaml` on LF's examples/merge_lora/llama3_lora_sft.yaml (adapter_name_or_path: that folder, export_dir:
output/llama3_lora_sft), then `studio export` of the merged model as GGUF into a folder of the working folder.

The fixtures are shaped like LF's files (same keys; tests/fixtures/lf), the model swapped for the demo model and the
steps made tiny. The command line acts for the person at the shell (engine.core.acting): it writes where LF writes,
the adapter's files directly in output_dir; the run is still registered, and the page shows it. The page (no
shell) stays bound to the workspace and STUDIO_OUTPUT_ROOTS, and the command line still never writes into another
run's folder, the workspace's own folders or a system folder.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from engine import cli as studio_cli
from engine.core import acting, folders, workspace
from engine.lf.compat import load_any
from engine.runs import registry as runs
from engine.spec.schema import SpecError

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "lf"
TRAIN_YAML = "examples/train_lora/llama3_lora_sft.yaml"
MERGE_YAML = "examples/merge_lora/llama3_lora_sft.yaml"


@pytest.fixture
def lf_work(tmp_path_factory, demo_paths, run_registry, monkeypatch) -> Path:
    """An LF checkout in miniature (examples/, data/) in a folder outside the workspace, as the working directory;
    no STUDIO_OUTPUT_ROOTS."""
    monkeypatch.delenv("STUDIO_OUTPUT_ROOTS", raising=False)
    root = tmp_path_factory.mktemp("lf-work") / "LLaMA-Factory"
    shutil.copytree(FIXTURE, root)
    assert not root.resolve().is_relative_to(workspace.home().resolve())
    for name in (TRAIN_YAML, MERGE_YAML):
        args = yaml.safe_load((root / name).read_text(encoding="utf-8"))
        args["model_name_or_path"] = demo_paths["model_dir"]
        (root / name).write_text(yaml.safe_dump(args, sort_keys=False), encoding="utf-8")
    monkeypatch.chdir(root)
    return root


def studio(capsys, *argv: str) -> tuple[int, str, str]:
    rc = studio_cli.main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def tiny(path: Path, **changes) -> None:
    args = yaml.safe_load(path.read_text(encoding="utf-8"))
    args.update(changes)
    path.write_text(yaml.safe_dump(args, sort_keys=False), encoding="utf-8")


def test_train_merge_export_chain_runs_unchanged_from_an_lf_working_folder(lf_work, capsys):
    from safetensors import safe_open

    tiny(lf_work / TRAIN_YAML, max_steps=2, save_steps=1000, logging_steps=1, max_samples=16, bf16=False)
    rc, out, err = studio(capsys, "train", TRAIN_YAML)
    assert rc == 0 and "completed" in out, out + err
    assert "inside the workspace" not in err  # no note moving output_dir: it stays where LF writes it
    sft = lf_work / "saves" / "llama3-8b" / "lora" / "sft"
    # the adapter's files directly in output_dir, as LF saves them (no adapter/ folder)
    assert (sft / "adapter_config.json").is_file() and (sft / "adapter_model.safetensors").is_file()
    assert not (sft / "adapter").exists()
    with safe_open(str(sft / "adapter_model.safetensors"), "pt") as fh:
        lora_b = [k for k in fh.keys() if "lora_B" in k]
        assert lora_b and any(fh.get_tensor(k).abs().sum() > 0 for k in lora_b)  # trained: B starts at zero

    # registered, followed and shown: the registry row, the page's run table and its weights folder
    (rec,) = runs.list_runs(refresh_status=False)
    assert rec.status == "completed" and Path(rec.output_dir) == sft.resolve()
    assert Path(rec.run_dir).is_relative_to(workspace.runs_dir())  # Studio's run files stay in the workspace
    assert runs.weights_dir(rec) == sft.resolve()
    assert (Path(rec.run_dir) / acting.GRANT).is_file()
    from studio.tabs import runs as runs_tab

    row = runs_tab.summarize(rec)
    assert row["status"] == "completed" and row["final loss"] is not None

    # LF's merge YAML as written: adapter_name_or_path saves/llama3-8b/lora/sft, export_dir output/llama3_lora_sft
    rc, out, err = studio(capsys, "merge", "--lf-yaml", MERGE_YAML)
    assert rc == 0, out + err
    merged = lf_work / "output" / "llama3_lora_sft"
    assert f"merged model written to {merged}" in out
    assert (merged / "config.json").is_file() and list(merged.glob("*.safetensors"))

    # and the merged model exported as GGUF into the working folder
    rc, out, err = studio(capsys, "export", "output/llama3_lora_sft", "--format", "gguf-f16", "--out", "gguf/llama3")
    assert rc == 0, out + err
    gguf = list((lf_work / "gguf" / "llama3").glob("*.gguf"))
    assert len(gguf) == 1 and gguf[0].stat().st_size > 0


def test_the_run_is_followed_by_the_page_whoever_launches_it(lf_work, capsys):
    """Queued from the shell, started by the page's scheduler (no shell in that process): the grant in its run
    folder lets the trainer write the folder chosen at the shell."""
    tiny(lf_work / TRAIN_YAML, max_steps=1, save_steps=1000, logging_steps=1, max_samples=8, bf16=False)
    with acting.shell():  # what `studio queue add` does, left in the queue
        rec = runs.get(runs.submit(load_any(TRAIN_YAML), start=False))
    assert rec.status == "queued" and not acting.at_shell()
    runs.schedule()  # as the page's timer does
    import time

    deadline = time.time() + 300
    while runs.get(rec.id).status in ("queued", "running") and time.time() < deadline:
        time.sleep(0.5)
    assert runs.get(rec.id).status == "completed", runs.log_tail(rec.id, 30)
    assert (lf_work / "saves" / "llama3-8b" / "lora" / "sft" / "adapter_config.json").is_file()


def test_the_page_stays_bound_to_the_workspace(lf_work):
    """The same YAML through the page (no shell): output_dir goes inside the workspace, saying so, and a folder
    outside it is refused with the STUDIO_OUTPUT_ROOTS message."""
    notes: list[str] = []
    spec = load_any(TRAIN_YAML, notes=notes)
    assert spec.output.output_dir == str(workspace.home() / "saves" / "llama3-8b" / "lora" / "sft")
    assert spec.output.layout == "llamafactory"
    assert any("inside the workspace" in str(n) for n in notes)
    outside = lf_work / "elsewhere"
    assert "STUDIO_OUTPUT_ROOTS" in str(folders.place_problem(outside))
    assert not folders.page_may_write(outside)
    with acting.shell():
        assert folders.place_problem(outside) is None
        assert not folders.page_may_write(outside)  # the page's rule whoever asks
    data = spec.model_dump(mode="json")
    data["output"]["output_dir"] = str(outside)
    with pytest.raises(SpecError, match="STUDIO_OUTPUT_ROOTS"):  # the page's Start
        runs.submit(data, start=False)
    assert runs.list_runs(refresh_status=False) == []


def test_the_shell_still_never_writes_a_system_folder_the_workspace_or_another_run(lf_work, capsys):
    for target in ("/etc/studio-out", "/usr/lib/x", str(Path.home())):
        with acting.shell():
            problem = folders.place_problem(target)
        assert problem is not None and "system folder" in str(problem), target
    tiny(lf_work / TRAIN_YAML, output_dir=str(workspace.home() / "runs"))
    rc, out, err = studio(capsys, "validate", TRAIN_YAML)
    assert rc == 1 and "runs folder" in err, out + err
    tiny(lf_work / TRAIN_YAML, output_dir="/etc/studio-saves")
    rc, out, err = studio(capsys, "validate", TRAIN_YAML)
    assert rc == 1 and "system folder" in err, out + err
    # a folder another run owns: queue one run at saves/a, then point a second at it
    tiny(lf_work / TRAIN_YAML, output_dir="saves/a")
    with acting.shell():
        run_id = runs.submit(load_any(TRAIN_YAML), start=False)
    rc, out, err = studio(capsys, "validate", TRAIN_YAML)
    assert rc == 1 and f"run {run_id}" in err, out + err


def test_an_lf_layout_run_is_a_merge_source_by_its_id(lf_work, tmp_path):
    """A run id given to `studio merge` finds the weights in the output folder itself (layout llamafactory)."""
    from engine.export import checks as xp
    from engine.export import sources

    rdir = workspace.runs_dir() / "r1"
    rdir.mkdir(parents=True)
    out = lf_work / "saves" / "x"
    out.mkdir(parents=True)
    spec = {"output": {"output_dir": str(out), "layout": "llamafactory"}, "method": {"finetuning": "lora"}}
    (rdir / "spec.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    with pytest.raises(xp.ExportError, match=str(out)):  # not trained yet: names the folder it wants
        sources.resolve_source(str(rdir))
    (out / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "nowhere/base"}))
    (out / "adapter_model.safetensors").write_bytes(b"")
    with pytest.raises(xp.ExportError, match="nowhere/base"):  # found as an adapter: its base is what is missing
        sources.resolve_source(str(rdir))
