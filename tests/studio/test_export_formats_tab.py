"""Handlers of the Export tab's GGUF / push / serve part (studio.tabs.export_formats), without a browser: refusals
come back as the engine's own messages in the page's language, before anything is queued; a finished export's
result shows the files, sizes, verification and the Ollama command it was given."""

from __future__ import annotations

from engine.runs import registry as runs
from studio.tabs import export, export_formats

RESOLVE = lambda s: export._run_folder(s) or export.inside_workspace(s)  # noqa: E731 - what the tab passes


def test_refusals_before_any_work(studio_home, run_registry, monkeypatch):
    job, msg = export_formats.start_export("/etc", "gguf-q8_0", "en", RESOLVE)
    assert job is None and msg.startswith("❌ /etc: only folders inside the workspace")
    job, msg = export_formats.start_serve("/etc", "zh", RESOLVE)
    assert job is None and "工作区" in msg
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    job, msg = export_formats.start_push(None, "me/x", True, "hf_typed_token", "en")
    assert job is None and "HF_HUB_OFFLINE" in msg
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE")
    job, msg = export_formats.start_push(None, "not a repo", True, "", "zh")
    assert job is None and "owner/name" in msg
    assert runs.list_runs() == []


def test_finished_export_reads_as_files_sizes_and_verification():
    result = {
        "out_dir": "/w/exports/r1-gguf-q8_0",
        "files": [{"name": "r1.gguf", "bytes": 1_120_448}, {"name": "Modelfile", "bytes": 686}],
        "summary": "max |logit diff| 0.0149 <= 0.133 (gguf-q8_0, ...)",
        "llama_cpp_summary": "llama.cpp was not available here",
        "report": {
            "greedy": [{"prompt": "Hi", "gguf": "yo", "same": True}],
            "modelfile": {"written": True, "command": "cd /w && ollama create r1 -f Modelfile"},
        },
    }
    shown = export_formats.describe_export({"state": "finished", "result": result}, "en")
    assert "| `r1.gguf` | 1.1 MB |" in shown and "| `Modelfile` | 686 B |" in shown  # 1,120,448 and 686 bytes
    assert "max |logit diff| 0.0149 <= 0.133" in shown and "«Hi» → «yo» (same)" in shown
    assert "`cd /w && ollama create r1 -f Modelfile`" in shown
    assert "相同" in export_formats.describe_export({"state": "finished", "result": result}, "zh")
    # a GPTQ / AWQ folder's report names its greedy text "quantized" (engine.trainer.gptq_export)
    result["report"] = {"greedy": [{"prompt": "Hi", "reference": "yo", "quantized": "yo yo", "same": False}]}
    shown = export_formats.describe_export({"state": "finished", "result": result}, "en")
    assert "«Hi» → «yo yo» (differs)" in shown


def test_the_format_picker_offers_every_format_the_engine_exports():
    from engine.export import gguf_checks

    assert export_formats.FORMATS[0] == "gguf-q8_0" and sorted(export_formats.FORMATS) == sorted(gguf_checks.FORMATS)


def test_a_finished_export_offers_its_files_and_modelfile_and_nothing_outside_the_workspace(tmp_path, monkeypatch):
    """Issue 45 item 14: the exported files go home through the page and the Modelfile is shown; only regular files
    inside the workspace are offered (not a link leading out, not Studio's hidden record), each from gradio's temp
    folder, the bytes the export wrote."""
    from pathlib import Path

    from studio import file_offers

    home, outside = tmp_path / "home", tmp_path / "elsewhere"
    (home / "exports" / "m").mkdir(parents=True)
    outside.mkdir()
    monkeypatch.setenv("STUDIO_HOME", str(home))
    out = home / "exports" / "m"
    (out / "m.gguf").write_bytes(b"GGUF" + bytes(range(256)))
    (out / "Modelfile").write_text("FROM ./m.gguf\nPARAMETER stop <|im_end|>\n")
    (out / ".studio-written.json").write_text("{}")
    (outside / "secret.txt").write_text("not yours")
    (out / "leak.txt").symlink_to(outside / "secret.txt")
    names = ["m.gguf", "Modelfile", ".studio-written.json", "leak.txt", "../elsewhere/secret.txt"]
    status = {"state": "finished", "result": {"out_dir": str(out), "files": [{"name": n, "bytes": 1} for n in names]}}
    files, modelfile = export_formats.take_home(status, "20261205-000000-abc123")
    offered = [Path(p) for p in files["value"]]
    assert [p.name for p in offered] == ["m.gguf", "Modelfile"] and files["visible"]
    assert all(p.read_bytes() == (out / p.name).read_bytes() for p in offered)
    assert all(not p.is_relative_to(home) for p in offered)  # served from the temp folder, not the workspace
    assert modelfile["value"] == (out / "Modelfile").read_text() and modelfile["visible"]
    assert file_offers.offer(outside / "secret.txt", "x") is None and file_offers.offer(out, "x") is None
    running = export_formats.take_home({"state": "running"}, "x")
    assert running[0]["visible"] is False and running[1]["visible"] is False
