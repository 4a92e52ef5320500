"""The Train tab's LLaMA-Factory YAML in and out (issue 14, item 8), at the handler level: a pasted LF training YAML
(+ accelerate config) fills the form with the import's notes; a refused key leaves the form as it was and is named
in one line; "Save as LF YAML" writes the form as LF YAML that reads back to the same spec, the settings LF has no
key for listed as comments, and the accelerate config beside it for a launch other than the default."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from engine.lf import keys
from engine.lf.compat import lf_text_to_spec
from engine.spec import rules
from engine.spec import schema as spec_mod
from studio import forms
from studio.tabs import train, train_lf


def lf_yaml(model: str) -> str:
    return f"""### model
model_name_or_path: {model}
trust_remote_code: true

### method
stage: sft
do_train: true
finetuning_type: lora
lora_rank: 16
lora_target: all

### dataset
dataset: demo_alpaca
template: default
cutoff_len: 128
max_samples: 50
overwrite_cache: true

### output
logging_steps: 1
save_steps: 500
plot_loss: true

### train
per_device_train_batch_size: 2
gradient_accumulation_steps: 4
learning_rate: 3.0e-4
num_train_epochs: 1.0
lr_scheduler_type: cosine
warmup_ratio: 0.1
"""


@pytest.fixture
def model(demo_paths) -> str:
    return demo_paths["model_dir"]


def test_pasted_lf_yaml_fills_the_form_with_its_notes(model):
    values, msg = train_lf.import_lf(lf_yaml(model), "", "en")
    assert values is not None, msg
    spec, errors, _ = train.check(values)
    assert spec is not None, errors
    assert spec.model.name_or_path == model and spec.model.trust_remote_code is True
    assert spec.data.datasets == ["demo_alpaca"] and spec.data.cutoff_len == 128 and spec.data.max_samples == 50
    assert spec.method.lora.rank == 16 and spec.method.lora.alpha == 32  # LF: alpha defaults to twice the rank
    assert spec.train.learning_rate == 3e-4 and spec.train.lr_scheduler == "cosine"
    assert spec.train.gradient_accumulation == 4 and spec.train.precision == "fp32"  # neither bf16 nor fp16
    assert msg.startswith("✅ " + train.t("lf_filled", "en"))
    assert train.t("lf_notes", "en") in msg
    assert "- plot_loss: accepted, ignored" in msg and "- overwrite_cache: accepted, ignored" in msg


def test_accelerate_config_travels_with_it(model):
    acc = "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nnum_processes: 2\nmixed_precision: 'no'\n"
    values, msg = train_lf.import_lf(lf_yaml(model), acc, "en")
    assert values is not None, msg
    assert values["launch.num_processes"] == 2 and values["launch.backend"] == "ddp"


def test_refused_keys_leave_the_form_and_are_named_one_line_each(model):
    text = lf_yaml(model) + "use_mca: true\nmixture_of_depths: convert\n"
    values, msg = train_lf.import_lf(text, "", "en")
    assert values is None
    lines = msg.splitlines()
    assert lines[0] == "❌ " + train.t("lf_refused", "en")
    assert any("`use_mca`" in ln and "Megatron" in ln for ln in lines[1:])
    assert any("`mixture_of_depths`" in ln and "mixture-of-depths" in ln for ln in lines[1:])
    values, msg = train_lf.import_lf(text, "", "zh")
    assert values is None and msg.startswith("❌ " + train.t("lf_refused", "zh"))

    for bad, named in (("a: [1", "lf_yaml"), ("hello: 1\n", "lf_yaml"), ("", None)):
        values, msg = train_lf.import_lf(bad, "", "en")
        assert values is None
        assert (f"`{named}`" in msg) if named else msg == train.t("lf_empty", "en")
    values, msg = train_lf.import_lf(lf_yaml(model), "- not a mapping\n", "en")
    assert values is None and "`accelerate_config`" in msg


def test_save_as_lf_yaml_reads_back_to_the_form(model):
    values, _ = train_lf.import_lf(lf_yaml(model), "", "en")
    values["data.padding_free"] = "off"  # no LLaMA-Factory key: listed as a comment
    spec, _, _ = train.check(values)
    files, msg = train_lf.save_lf_yaml(values, "en")
    assert files and len(files) == 1 and Path(files[0]).name == "lf_train.yaml", msg
    assert msg.startswith("✅") and "lf_train.yaml" in msg
    text = Path(files[0]).read_text(encoding="utf-8")
    args = yaml.safe_load(text)
    assert args["model_name_or_path"] == model and args["dataset"] == "demo_alpaca"
    assert args["lora_rank"] == 16 and args["learning_rate"] == 3e-4
    comments = [ln for ln in text.splitlines() if ln.startswith("#   ")]
    assert '#   data.padding_free: "off"' in comments
    lost = {ln[4:].split(":")[0] for ln in comments}
    back = spec_mod.spec_to_dict(lf_text_to_spec(text))
    want = spec_mod.spec_to_dict(spec)
    # the folder Studio reads the datasets from, written out (LF's default would be ./data)
    assert back["data"]["dataset_dir"] == str(rules.resolve_dataset_dir(spec).resolve())
    for path in forms.BY_PATH:
        if path in lost or forms.BY_PATH[path].kind == "optional_model" or path == "data.dataset_dir":
            continue
        assert forms._get(back, path, None) == forms._get(want, path, None), path
    assert back["data"]["padding_free"] == "auto"  # what the comment warned about

    values["launch.num_processes"] = 2  # a launch LF starts with an accelerate config: written beside it
    values["launch.device"] = "cpu"
    values["launch.backend"] = "ddp"
    files, msg = train_lf.save_lf_yaml(values, "en")
    assert files and [Path(f).name for f in files] == ["lf_train.yaml", "accelerate_config.yaml"], msg
    acc = yaml.safe_load(Path(files[1]).read_text(encoding="utf-8"))
    assert acc["num_processes"] == 2
    again = lf_text_to_spec(Path(files[0]).read_text(encoding="utf-8"), Path(files[1]).read_text(encoding="utf-8"))
    assert again.launch.num_processes == 2

    values["method.lora.rank"] = 0  # an invalid form writes nothing and says why
    files, msg = train_lf.save_lf_yaml(values, "en")
    assert files is None and "method.lora.rank" in msg


def test_the_writer_follows_the_key_table(model, monkeypatch):
    """A pass-through mapping added to engine.lf.keys is written with no change to the writer (other branches add
    keys there)."""
    values, _ = train_lf.import_lf(lf_yaml(model), "", "en")
    values["data.padding_free"] = "off"
    monkeypatch.setitem(keys._DIRECT, "some_new_lf_key", "data.padding_free")
    files, _ = train_lf.save_lf_yaml(values, "en")
    text = Path(files[0]).read_text(encoding="utf-8")
    assert yaml.safe_load(text)["some_new_lf_key"] == "off"
    assert "#   data.padding_free" not in text  # it has a key now: no longer listed as missing


def test_an_uploaded_file_is_read_as_text(tmp_path):
    path = tmp_path / "train.yaml"
    path.write_text("stage: sft\n", encoding="utf-8")
    assert train_lf.read_upload(str(path)) == "stage: sft\n"
    assert train_lf.read_upload(None) == ""
    assert train_lf.read_upload(str(tmp_path / "gone.yaml")).startswith("# cannot read gone.yaml")
