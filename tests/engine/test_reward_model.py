"""GRPO with a reward model from a Studio rm run (issue 26): the spec's rules find the run's weights and refuse what
is not a reward model before launch; the trainer's ``RewardModel`` scores a prompt and completion as the rm run was
trained on them; a GRPO run logs the reward model's curve, and each sample's score equals the score the test
computes itself with peft and transformers."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from engine.core.events import read_all
from engine.spec.schema import validate_spec
from tests.helpers import demo_spec, log_tail, run_trainer

GRPO_REWARDS = [
    {"kind": "regex", "name": "has_digit", "pattern": r".*\d.*", "weight": 0.5},
]


@pytest.fixture(scope="module")
def rm_run(demo_paths, tmp_path_factory) -> Path:
    """A LoRA reward model trained on the demo's preference pairs, through the real launch path."""
    run_dir = tmp_path_factory.mktemp("rm-run")
    spec = demo_spec(
        demo_paths,
        method={"stage": "rm"},
        data={"datasets": ["demo_dpo"], "cutoff_len": 128},
        train={"max_steps": 3, "per_device_batch_size": 2, "save_steps": 1000, "learning_rate": 5e-3},
        output={"report_to": ["none"]},
    )
    rc, events = run_trainer(spec, run_dir)
    assert rc == 0 and events[-1]["type"] == "finished", log_tail(run_dir)
    cfg = json.loads((run_dir / "adapter" / "adapter_config.json").read_text())
    assert cfg["task_type"] == "SEQ_CLS"
    return run_dir


def grpo_spec(demo_paths, rewards, steps=2):
    return demo_spec(
        demo_paths,
        method={
            "stage": "grpo",
            "grpo": {"num_generations": 4, "max_completion_length": 8, "rewards": rewards},
        },
        data={"datasets": ["grpo_arith"], "max_samples": None},
        train={
            "max_steps": steps,
            "per_device_batch_size": 4,
            "gradient_accumulation": 1,
            "logging_steps": 1,
            "save_steps": 1000,
            "learning_rate": 1e-3,
        },
        output={"report_to": ["none"]},
    )


def problems(spec) -> dict[str, str]:
    _, errors, _ = validate_spec(spec.model_dump(mode="json"))
    return {p: str(m) for p, m in errors}


def test_rules_find_the_reward_model_and_refuse_what_is_not_one(demo_paths, rm_run, tmp_path):
    def model_problem(given: str) -> str | None:
        spec = grpo_spec(demo_paths, [{"kind": "model", "model": given}])
        return problems(spec).get("method.grpo.rewards.0.model")

    assert model_problem(str(rm_run)) is None  # the run's folder: its final adapter
    assert model_problem(str(rm_run / "adapter")) is None
    with pytest.raises(ValueError, match=r"rewards\.0\.model: a model reward needs its reward model"):
        model_problem("")
    assert "no reward model at" in model_problem(str(tmp_path / "nowhere"))
    # a language model is not a reward model
    lm = model_problem(demo_paths["model_dir"])
    assert lm is not None and "is not a reward model" in lm
    # a run that has not saved its weights yet
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    shutil.copy(rm_run / "spec.yaml", unfinished / "spec.yaml")
    spec_text = (unfinished / "spec.yaml").read_text()
    assert "has no final weights yet" in model_problem(str(unfinished)), spec_text
    # an adapter whose base is not here
    moved = tmp_path / "moved"
    shutil.copytree(rm_run / "adapter", moved)
    cfg = json.loads((moved / "adapter_config.json").read_text())
    cfg["base_model_name_or_path"] = str(tmp_path / "gone-base")
    (moved / "adapter_config.json").write_text(json.dumps(cfg))
    assert "not a local folder here" in model_problem(str(moved))
    # its label is the curve's name
    spec = grpo_spec(demo_paths, [{"kind": "model", "model": str(rm_run)}])
    assert spec.method.grpo.rewards[0].label == "reward_model"


def _own_scores(rm_run: Path, texts: list[str]) -> list[float]:
    """The reward model's scores computed here: base + adapter with peft, each text alone (no padding)."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    cfg = json.loads((rm_run / "adapter" / "adapter_config.json").read_text())
    base = AutoModelForSequenceClassification.from_pretrained(cfg["base_model_name_or_path"], num_labels=1)
    model = PeftModel.from_pretrained(base, str(rm_run / "adapter")).eval()
    tok = AutoTokenizer.from_pretrained(str(rm_run / "adapter"))
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    out = []
    with torch.no_grad():
        for text in texts:
            ids = tok(text, return_tensors="pt")["input_ids"]
            hidden = model.base_model.model.model(input_ids=ids).last_hidden_state[0]
            # the score at the last token that is not the pad token (TRL's RewardTrainer pads with it)
            last = max(i for i, t in enumerate(ids[0].tolist()) if t != pad)
            out.append(float(model.base_model.model.score(hidden[last])[0]))
    return out


def test_reward_model_scores_as_its_run_was_trained(demo_paths, rm_run):
    from transformers import AutoTokenizer

    from engine.trainer.rewards import RewardModel, build_rewards

    spec = grpo_spec(demo_paths, [{"kind": "model", "model": str(rm_run)}])
    (reward,) = build_rewards(spec.method.grpo.rewards, template=spec.data.template)
    assert reward.__name__ == "reward_model" and isinstance(reward.func, RewardModel)
    tok = AutoTokenizer.from_pretrained(str(rm_run / "adapter"))
    prompt = "<|user|>\nWhat is 2 + 3?\n<|assistant|>\n"
    completions = ["5", "The answer is 5, since two and three make five.", "seven"]
    texts = [reward.func.text(prompt, c) for c in completions]
    for c, text in zip(completions, texts):
        # the completion as an answer of the template, then the end of sequence TRL's RewardTrainer adds
        assert text.startswith(prompt + c) and text.endswith(tok.eos_token), text
    # batched (right-padded to the longest) and scored through the Reward wrapper, as TRL calls it
    scores = reward(prompts=[prompt] * 3, completions=completions)
    assert all(math.isfinite(s) for s in scores) and len(set(scores)) == 3
    assert scores == pytest.approx(_own_scores(rm_run, texts), abs=1e-4)
    # the dry run before launch scores the dataset's own answers with it
    from engine.trainer.reward_dry_run import dry_run

    result = dry_run(spec, 4, "answers")
    (entry,) = result["rewards"]
    assert entry["name"] == "reward_model" and entry["error"] is None, entry
    rows = result["rows"]
    expected = _own_scores(rm_run, [reward.func.text(r["prompt"], r["completion"]) for r in rows])
    assert entry["scores"] == pytest.approx(expected, abs=1e-4)


def test_grpo_run_draws_the_reward_models_curve(demo_paths, rm_run, tmp_path):
    rewards = [{"kind": "model", "model": str(rm_run), "weight": 1.0}, *GRPO_REWARDS]
    spec = grpo_spec(demo_paths, rewards)
    assert not problems(spec)
    rc, events = run_trainer(spec, tmp_path)
    assert rc == 0 and events[-1]["type"] == "finished", log_tail(tmp_path)
    logs = [e["payload"]["metrics"] for e in events if e["type"] == "log"]
    assert len(logs) == 2
    for m in logs:
        assert math.isfinite(m["rewards/reward_model/mean"]) and "rewards/has_digit/mean" in m
        assert abs(m["reward"] - (m["rewards/reward_model/mean"] + 0.5 * m["rewards/has_digit/mean"])) < 1e-4
    samples = [
        s for e in read_all(tmp_path / "events.jsonl") if e["type"] == "completions" for s in e["payload"]["samples"]
    ]
    assert samples
    from transformers import AutoTokenizer

    from engine.data.templates import assistant_text, tokenizer_info

    tok = AutoTokenizer.from_pretrained(str(rm_run / "adapter"))
    info = tokenizer_info(tok)
    texts = []
    for s in samples:
        answer = assistant_text(spec.data.template, info, s["completion"])
        texts.append(s["prompt"] + answer + ("" if answer.endswith(tok.eos_token) else tok.eos_token))
    own = _own_scores(rm_run, texts)
    assert [s["rewards"]["reward_model"] for s in samples] == pytest.approx(own, abs=1e-3)


def test_plan_counts_the_reward_models_weights(demo_paths, rm_run):
    """The plan's reference / reward models row grows by the reward model's float32 weights on the CPU: counted here
    from the model transformers builds."""
    from transformers import AutoModelForSequenceClassification

    from engine.machine.hardware import cpu_only
    from engine.plan.planner import plan

    without = plan(grpo_spec(demo_paths, GRPO_REWARDS), hardware=cpu_only())
    spec = grpo_spec(demo_paths, [{"kind": "model", "model": str(rm_run)}, *GRPO_REWARDS])
    with_rm = plan(spec, hardware=cpu_only())
    rm = AutoModelForSequenceClassification.from_pretrained(demo_paths["model_dir"], num_labels=1)
    expected = sum(p.numel() for p in rm.parameters()) * 4
    grown = with_rm.components["reference_model"] - without.components["reference_model"]
    assert grown == expected
    assert any("reward models score completions" in n for n in with_rm.notes)
