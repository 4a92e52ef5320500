"""KTO and reward-model (rm) runs from LLaMA-Factory-shaped YAMLs, trained through `studio train` as the LF README
runs them (tests/fixtures/lf: the kto example on kto_en_demo, the reward example on dpo_en_demo), 2 steps each on the
demo model; the reward model is then merged with `studio merge` and loaded as a sequence classifier. One module
fixture trains both and merges once; every test reads what it left."""

from __future__ import annotations

import contextlib
import io
import json
import math
import shutil
from pathlib import Path

import pytest
import yaml

from engine import cli as studio_cli
from engine.core.events import read_all

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "lf"
EXAMPLES = {"kto": "qwen3_lora_kto.yaml", "rm": "qwen3_lora_reward.yaml"}


def _studio(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        rc = studio_cli.main(list(argv))
    return rc, out.getvalue()


@pytest.fixture(scope="module")
def lf_runs(demo_paths, tmp_path_factory):
    """Both examples trained for 2 steps from the LF root (output under the root, which the user allows), the rm run
    merged; yields {stage: (rc, output, run folder, events)} and the merge's (rc, output, folder)."""
    from engine.runs import registry as runs

    top = tmp_path_factory.mktemp("lf-preference")
    root = top / "LLaMA-Factory"
    shutil.copytree(FIXTURE, root)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("STUDIO_HOME", str(top / "home"))
        mp.setenv("STUDIO_CPU_SLOTS", "1")
        mp.setenv("STUDIO_OUTPUT_ROOTS", str(root))
        mp.chdir(root)
        found: dict = {}
        try:
            for stage, name in EXAMPLES.items():
                path = root / "examples" / "train_lora" / name
                args = yaml.safe_load(path.read_text(encoding="utf-8"))
                args |= {"model_name_or_path": demo_paths["model_dir"], "max_steps": 2, "logging_steps": 1}
                path.write_text(yaml.safe_dump(args, sort_keys=False), encoding="utf-8")
                rc, out = _studio("train", str(path))
                recs = [r for r in runs.list_runs() if r.kind == "train" and r.load_spec().method.stage == stage]
                assert len(recs) == 1, out
                run_dir = Path(recs[0].run_dir)
                found[stage] = (rc, out, recs[0], read_all(run_dir / "events.jsonl"))
            merged = top / "home" / "exports" / "reward-merged"
            rc, out = _studio("merge", found["rm"][2].id, "--out", str(merged))
            found["merge"] = (rc, out, merged)
            yield found
        finally:
            for rec in runs.list_runs(refresh_status=False):
                if rec.status in ("running", "queued"):
                    runs.stop(rec.id, grace_s=1)


@pytest.mark.parametrize("stage", list(EXAMPLES))
def test_trains_two_steps_with_finite_losses(lf_runs, stage):
    rc, out, rec, events = lf_runs[stage]
    assert rc == 0 and "completed" in out and "step 2/2" in out, out[-3000:]
    losses = [e["payload"]["loss"] for e in events if e["type"] == "log"]
    assert len(losses) == 2 and all(math.isfinite(v) for v in losses), losses
    assert events[-1]["type"] == "finished"
    adapter = Path(events[-1]["payload"]["adapter_dir"])
    # LF's layout (output.layout: llamafactory): the adapter files are in output_dir itself, as LF writes them
    assert adapter.name == {"kto": "kto", "rm": "reward"}[stage] and (adapter / "adapter_config.json").is_file()


def test_kto_reads_the_tags_and_trains_the_adapter(lf_runs):
    from safetensors.torch import load_file

    _, _, rec, events = lf_runs["kto"]
    ready = next(e for e in events if e["type"] == "data_ready")["payload"]
    assert (ready["desirable"], ready["undesirable"], ready["untagged"]) == (4, 4, 0)
    spec = rec.load_spec()
    assert (spec.train.per_device_batch_size, spec.train.gradient_accumulation) == (2, 4)  # LF's 1 x 8, for TRL
    adapter = Path(next(e for e in events if e["type"] == "finished")["payload"]["adapter_dir"])
    weights = load_file(str(adapter / "adapter_model.safetensors"))
    assert any(t.abs().max() > 0 for k, t in weights.items() if "lora_B" in k)


def test_rm_adapter_keeps_its_score_head(lf_runs):
    from safetensors.torch import load_file

    _, _, _, events = lf_runs["rm"]
    metrics = [e["payload"]["metrics"] for e in events if e["type"] == "log"]
    assert all(0 <= m["accuracy"] <= 1 and math.isfinite(m["margin"]) for m in metrics), metrics
    adapter = Path(next(e for e in events if e["type"] == "finished")["payload"]["adapter_dir"])
    config = json.loads((adapter / "adapter_config.json").read_text(encoding="utf-8"))
    assert config["task_type"] == "SEQ_CLS" and "score" in config["modules_to_save"]
    weights = load_file(str(adapter / "adapter_model.safetensors"))
    assert [k for k in weights if ".score." in k], sorted(weights)


def test_merged_reward_model_loads_as_a_sequence_classifier_and_scores_like_the_adapter(lf_runs, demo_paths):
    """The merge verifies itself against base + adapter; here the merged folder loads with
    AutoModelForSequenceClassification and gives a chosen answer the score the trained adapter gives it."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    rc, out, merged = lf_runs["merge"]
    assert rc == 0 and "merged model written to" in out, out[-3000:]
    config = json.loads((merged / "config.json").read_text(encoding="utf-8"))
    assert config["architectures"] == ["LlamaForSequenceClassification"] and len(config["id2label"]) == 1
    assert config["pad_token_id"] is not None
    assert json.loads((merged / "verify.json").read_text(encoding="utf-8"))["passed"] is True

    pair = json.loads((FIXTURE / "data" / "dpo_en_demo.json").read_text(encoding="utf-8"))[0]
    text = pair["conversations"][0]["value"] + "\n" + pair["chosen"]["value"]
    tok = AutoTokenizer.from_pretrained(str(merged))
    ids = tok(text, return_tensors="pt")
    model = AutoModelForSequenceClassification.from_pretrained(str(merged), dtype=torch.float32).eval()
    with torch.no_grad():
        score = model(**ids).logits
    assert score.shape == (1, 1) and torch.isfinite(score).all()

    adapter = Path(next(e for e in lf_runs["rm"][3] if e["type"] == "finished")["payload"]["adapter_dir"])
    base = AutoModelForSequenceClassification.from_pretrained(
        demo_paths["model_dir"], num_labels=1, dtype=torch.float32, pad_token_id=config["pad_token_id"]
    )
    trained = PeftModel.from_pretrained(base, str(adapter)).eval()
    with torch.no_grad():
        want = trained(**ids).logits
    assert score.item() == pytest.approx(want.item(), abs=1e-4 * max(1.0, abs(want.item())))
