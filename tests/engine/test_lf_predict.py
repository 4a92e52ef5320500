"""LLaMA-Factory's nlg_eval prediction YAML (tests/fixtures/lf/predict, LF's file with the demo model, a demo run's
adapter and the demo datasets swapped in) runs through `studio train` as an evaluation and writes LF's two files in
its output_dir with LF's keys and formats; the BLEU / ROUGE in predict_results.json are recomputed here from
generated_predictions.jsonl with jieba / rouge_chinese / nltk as LF's ComputeSimilarity does; `do_eval` writes
eval_results.json with eval_loss; a generation option Studio lacks is refused naming the key, before launch."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
import yaml

from engine.commands.train_cli import cli
from engine.data.dataset_registry import load_rows
from engine.runs import registry as runs
from tests import eval_fixtures as fx
from tests.engine.test_eval import _lf_similarity

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "lf" / "predict" / "llama3_lora_predict.yaml"
PREDICT_KEYS = {
    "predict_bleu-4",
    "predict_rouge-1",
    "predict_rouge-2",
    "predict_rouge-l",
    "predict_runtime",
    "predict_samples_per_second",
    "predict_steps_per_second",
    "predict_model_preparation_time",
}


@pytest.fixture(scope="module")
def adapter_run(demo_paths, tmp_path_factory):
    home = tmp_path_factory.mktemp("lf-predict-home")
    with fx.EnvHome(home):
        rid = fx.train_demo_run(demo_paths, steps=2, save_steps=1000)
        yield {"home": home, "adapter": str(runs.weights_dir(runs.get(rid, refresh_status=False)))}


def _yaml(tmp_path: Path, demo_paths: dict, adapter: str, **changes) -> Path:
    data = yaml.safe_load(FIXTURE.read_text())
    data.update(
        model_name_or_path=demo_paths["model_dir"],
        adapter_name_or_path=adapter,
        eval_dataset="demo_alpaca,demo_messages",
        dataset_dir=demo_paths["data_dir"],
        template="auto",
        max_samples=3,
        max_new_tokens=8,
        per_device_eval_batch_size=2,
        output_dir=str(tmp_path / "predict"),
    )
    data.update(changes)
    path = tmp_path / "predict.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    return path


def test_nlg_eval_predict_yaml_writes_lfs_files(adapter_run, demo_paths, tmp_path, monkeypatch):
    monkeypatch.setenv("STUDIO_OUTPUT_ROOTS", str(tmp_path))
    path = _yaml(tmp_path, demo_paths, adapter_run["adapter"])
    assert cli(["train", str(path)]) == 0
    out = tmp_path / "predict"
    lines = (out / "generated_predictions.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines]
    assert all(list(r) == ["prompt", "predict", "label"] for r in rows)
    ddir = demo_paths["data_dir"]
    want = [r["messages"][-1]["content"] for n in ("demo_alpaca", "demo_messages") for r in load_rows(n, ddir)[:3]]
    assert [r["label"] for r in rows] == want  # max_samples per dataset, in LF's order
    assert all(r["prompt"].endswith("<|im_start|>assistant\n") for r in rows)
    got = json.loads((out / "predict_results.json").read_text())
    assert set(got) == PREDICT_KEYS
    sims = [_lf_similarity(r["predict"], r["label"]) for r in rows]
    for col in ("bleu-4", "rouge-1", "rouge-2", "rouge-l"):
        assert got[f"predict_{col}"] == pytest.approx(statistics.fmean(s[col] for s in sims), abs=1e-3)
    assert got["predict_runtime"] > 0
    assert got["predict_samples_per_second"] == pytest.approx(len(rows) / got["predict_runtime"], rel=0.01)
    assert got["predict_steps_per_second"] == pytest.approx(3 / got["predict_runtime"], rel=0.01)  # 6 rows, batch 2
    assert json.loads((out / "all_results.json").read_text()) == got


def test_do_eval_yaml_writes_eval_loss(adapter_run, demo_paths, tmp_path, monkeypatch):
    monkeypatch.setenv("STUDIO_OUTPUT_ROOTS", str(tmp_path))
    path = _yaml(tmp_path, demo_paths, adapter_run["adapter"], do_predict=False, do_eval=True,
                 predict_with_generate=False)  # fmt: skip
    assert cli(["train", str(path)]) == 0
    got = json.loads((tmp_path / "predict" / "eval_results.json").read_text())
    assert {"eval_loss", "eval_runtime", "eval_samples_per_second", "eval_steps_per_second"} <= set(got)
    assert 0 < got["eval_loss"] < 20
    assert not (tmp_path / "predict" / "generated_predictions.jsonl").exists()


def test_unsupported_generation_key_is_refused_naming_it(adapter_run, demo_paths, tmp_path, capsys):
    before = len(runs.list_runs(refresh_status=False))
    path = _yaml(tmp_path, demo_paths, adapter_run["adapter"], num_beams=4)
    assert cli(["train", str(path)]) == 2
    assert "num_beams" in capsys.readouterr().err
    assert len(runs.list_runs(refresh_status=False)) == before
