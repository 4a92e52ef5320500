"""`studio export-lf` writes a LLaMA-Factory YAML that runs in LF as Studio ran the spec: the demo spec (template
auto, precision auto, the workspace's models/ and data/) trained fp32 on this CPU machine, so the YAML names the
model folder absolutely, a template LF has, the dataset folder Studio read and no bf16.

The template is checked independently of Studio's templates: the named one the YAML gives, rendered as LF renders it
(Studio's renderer of LF's templates), must equal what transformers' apply_chat_template makes of the model's own
chat template for the same conversations.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from engine import cli as studio_cli
from engine.commands.export_lf import lf_text
from engine.core import workspace
from engine.lf.compat import load_any
from engine.spec.schema import load_spec, save_spec

CONVERSATIONS = [
    ("", [{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4"}]),
    (
        "Be brief.",
        [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello."},
            {"role": "user", "content": "Name a colour."},
            {"role": "assistant", "content": "Blue."},
        ],
    ),
]


def studio(capsys, *argv: str) -> tuple[int, str, str]:
    rc = studio_cli.main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.fixture
def demo_run(demo_paths, tmp_path) -> Path:
    """A run folder of the demo spec as the trainer leaves it: spec.yaml with the workspace-relative model and
    template / precision auto, and record.json saying it trained fp32 on the CPU."""
    spec = load_spec(demo_paths["example_spec"], context=False)
    data = spec.model_dump(mode="json")
    data["model"]["name_or_path"] = "models/demo-tiny-llama"  # as the page's picker writes a workspace model
    data["data"]["dataset_dir"] = ""  # the workspace's data folder
    assert (data["data"]["template"], data["train"]["precision"]) == ("auto", "auto")
    run = workspace.runs_dir() / "20990101-000000-abcd"
    run.mkdir(parents=True)
    (run / "spec.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    record = {"hardware": {"device": "cpu", "precision": "fp32"}, "template": "auto"}
    (run / "record.json").write_text(json.dumps(record), encoding="utf-8")
    return run


def _lf_render(name: str, model_dir: str, system: str, messages: list[dict]) -> str:
    from engine.data import templates

    info = templates.tokenizer_info(model_dir)
    return "".join(p + r for p, r in templates.conversation_segments(name, info, system, messages))


def test_a_run_exports_as_it_ran(demo_run, demo_paths, tmp_path, capsys, monkeypatch):
    from transformers import AutoTokenizer

    monkeypatch.chdir(tmp_path)  # not the workspace: nothing may depend on where LF is started
    for given in (demo_run.name, str(demo_run)):
        rc, out, err = studio(capsys, "export-lf", given, "-o", "lf.yaml")
        assert rc == 0, out + err
        args = yaml.safe_load(Path("lf.yaml").read_text(encoding="utf-8"))
        model = Path(args["model_name_or_path"])
        assert model.is_absolute() and (model / "config.json").is_file()
        assert model == Path(demo_paths["model_dir"]).resolve()
        assert Path(args["dataset_dir"]) == Path(demo_paths["data_dir"]).resolve()
        info = json.loads((Path(args["dataset_dir"]) / "dataset_info.json").read_text())
        assert set(args["dataset"].split(",")) <= set(info)
        assert args["bf16"] is False and args["fp16"] is False and "pure_bf16" not in args  # it trained fp32
        assert "train.precision auto written as fp32 (what run 20990101-000000-abcd trained with)" in err
        name = args["template"]
        assert name not in ("auto", None)
        from engine.data.template_table import NAMED

        assert name in NAMED and f"data.template auto written as {name}" in err
    tok = AutoTokenizer.from_pretrained(demo_paths["model_dir"])
    for system, messages in CONVERSATIONS:
        chat = ([{"role": "system", "content": system}] if system else []) + messages
        theirs = tok.apply_chat_template(chat, tokenize=False)
        assert _lf_render(name, demo_paths["model_dir"], system, messages) == theirs


def test_a_spec_file_exports_with_this_machines_precision(demo_paths, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, out, err = studio(capsys, "export-lf", demo_paths["example_spec"], "-o", "lf.yaml")
    assert rc == 0, out + err
    args = yaml.safe_load(Path("lf.yaml").read_text(encoding="utf-8"))
    assert args["bf16"] is False and "what a run on this machine uses: CPU" in err  # no GPU here
    # read back by Studio's LF import from elsewhere: the same model, data and template, fp32
    back = load_any("lf.yaml", context=False)
    assert back.model.name_or_path == str(Path(demo_paths["model_dir"]).resolve())
    assert back.train.precision == "fp32" and back.data.template == args["template"]


def test_template_without_a_chat_template_or_a_tokenizer(demo_paths, tmp_path):
    spec = load_spec(demo_paths["example_spec"], context=False)
    bare = tmp_path / "bare-model"
    bare.mkdir()
    src = Path(demo_paths["model_dir"])
    (bare / "config.json").write_text((src / "config.json").read_text())
    cfg = json.loads((src / "tokenizer_config.json").read_text())
    cfg.pop("chat_template", None)
    (bare / "tokenizer_config.json").write_text(json.dumps(cfg))
    bare_model = spec.model.model_copy(update={"name_or_path": str(bare)})
    text, _, _ = lf_text(spec.model_copy(update={"model": bare_model}))
    args = yaml.safe_load(text)
    assert args["template"] == "default" and "data.template auto written as default" in text
    hub = spec.model.model_copy(update={"name_or_path": "someone/not-in-the-cache"})
    text, _, _ = lf_text(spec.model_copy(update={"model": hub}))
    args = yaml.safe_load(text)
    assert "template" not in args and "LLaMA-Factory parses the model's chat template" in text
    assert args["model_name_or_path"] == "someone/not-in-the-cache"  # a hub id stays one


def test_save_spec_roundtrip_keeps_a_named_template_and_precision(demo_paths, tmp_path):
    spec = load_spec(demo_paths["example_spec"], context=False)
    data = spec.model_dump(mode="json")
    data["data"]["template"], data["train"]["precision"] = "chatml", "bf16"
    save_spec(spec.model_validate(data), tmp_path / "s.yaml")
    text, _, _ = lf_text(load_spec(tmp_path / "s.yaml", context=False))
    args = yaml.safe_load(text)
    assert (args["template"], args["bf16"]) == ("chatml", True)
    assert "written as" not in text  # nothing resolved: nothing said
