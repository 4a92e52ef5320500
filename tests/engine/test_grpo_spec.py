"""Stage grpo's spec rules (engine.spec.grpo_group): every problem named by its field before launch."""

from __future__ import annotations

import pytest

from engine.core import acting
from engine.spec.schema import SpecError, parse_spec


def grpo(demo_paths=None, *, grpo=None, train=None, launch=None, stage="grpo"):
    data = {
        "model": {"name_or_path": demo_paths["model_dir"] if demo_paths else "m"},
        "method": {"stage": stage, "grpo": {"rewards": [{"kind": "math"}], **(grpo or {})}},
        "data": {"datasets": ["grpo_arith"]},
        "train": {"per_device_batch_size": 4, "gradient_accumulation": 1, **(train or {})},
        "launch": launch or {},
    }
    return data


def problems(data, context=False) -> dict[str, str]:
    with pytest.raises(SpecError) as err:
        parse_spec(data, context=context)
    return dict(err.value.problems)


def test_a_valid_grpo_spec_keeps_trl_names():
    spec = parse_spec(grpo(grpo={"num_generations": 2, "beta": 0.04, "loss_type": "dr_grpo", "epsilon_high": 0.28}))
    g = spec.method.grpo
    assert (g.num_generations, g.beta, g.loss_type, g.epsilon, g.epsilon_high) == (2, 0.04, "dr_grpo", 0.2, 0.28)
    assert g.rewards[0].label == "math" and g.generation_backend == "transformers"


def test_no_reward_is_refused():
    data = grpo()
    data["method"]["grpo"]["rewards"] = []
    assert "at least one reward" in problems(data)["method.grpo.rewards"]


def test_generation_batch_must_hold_whole_groups():
    got = problems(grpo(grpo={"num_generations": 3}))
    assert "(4 = batch size x accumulation x processes)" in got["method.grpo.num_generations"]


def test_group_of_one_is_refused():
    assert "method.grpo.num_generations" in problems(grpo(grpo={"num_generations": 1}))


def test_unknown_loss_type_and_field_are_refused():
    got = problems(grpo(grpo={"loss_type": "ppo", "max_prompt_len": 3}))
    assert "method.grpo.loss_type" in got and "method.grpo.max_prompt_len" in got


def test_vllm_refused_on_cpu_and_when_missing():
    got = problems(grpo(grpo={"generation_backend": "vllm"}, launch={"device": "cpu"}))
    assert "vLLM generates on a GPU only" in got["method.grpo.generation_backend"]
    pytest.importorskip("engine.spec.grpo_group").vllm_installed() and pytest.skip("vllm is installed here")
    got = problems(grpo(grpo={"generation_backend": "vllm"}, launch={"device": "cuda"}))
    assert "vLLM is not installed here" in got["method.grpo.generation_backend"]


def test_python_reward_needs_file_and_function():
    got = problems(grpo(grpo={"rewards": [{"kind": "python", "file": "r.py"}]}))
    assert "method.grpo.rewards.0.function" in got


def test_two_rewards_with_one_name_and_a_bad_pattern():
    rewards = [{"kind": "regex", "pattern": "("}, {"kind": "regex"}]
    got = problems(grpo(grpo={"rewards": rewards}))
    assert "not a valid regular expression" in got["method.grpo.rewards.0.pattern"]
    assert "two rewards are named 'regex'" in got["method.grpo.rewards.1.name"]


def test_packing_and_padding_free_are_refused():
    data = grpo()
    data["data"] |= {"packing": True, "padding_free": "on"}
    got = problems(data)
    assert "data.packing" in got and "data.padding_free" in got


def test_reward_file_is_read_not_run(demo_paths, tmp_path):
    with acting.shell():  # a file anywhere, as the CLI may name it (the page: tests/reliability/test_page_trust.py)
        _reward_file_is_read_not_run(demo_paths, tmp_path)


def _reward_file_is_read_not_run(demo_paths, tmp_path):
    marker = tmp_path / "ran"
    good = tmp_path / "rewards.py"
    good.write_text(f"open({str(marker)!r}, 'w').write('x')\n\ndef mine(prompts, completions, **kw):\n    return []\n")
    data = grpo(demo_paths, grpo={"rewards": [{"kind": "python", "file": str(good), "function": "other"}]})
    got = problems(data, context=True)
    assert "defines no top-level function 'other' (functions found: mine)" in got["method.grpo.rewards.0.function"]
    data["method"]["grpo"]["rewards"][0]["function"] = "mine"
    parse_spec(data, context=True)
    assert not marker.exists()  # the page's process never runs the user's file
    bad = tmp_path / "bad.py"
    bad.write_text("def f(:\n")
    data["method"]["grpo"]["rewards"][0]["file"] = str(bad)
    assert "is not valid Python" in problems(data, context=True)["method.grpo.rewards.0.file"]
    data["method"]["grpo"]["rewards"][0]["file"] = str(tmp_path / "missing.py")
    assert "cannot read the reward file" in problems(data, context=True)["method.grpo.rewards.0.file"]


def test_grpo_reads_rows_without_answers(demo_paths, tmp_path):
    """A row that ends with the user's turn is a prompt with no answer; pairs stay refused."""
    import json

    from engine.data.dataset_registry import check_datasets, load_rows

    (tmp_path / "q.json").write_text(
        json.dumps([{"instruction": "What is 1 + 1?"}, {"instruction": "Hi", "output": "2"}])
    )
    info = {"q": {"file_name": "q.json", "columns": {"prompt": "instruction", "response": "output"}}}
    (tmp_path / "dataset_info.json").write_text(json.dumps(info))
    rows = load_rows("q", tmp_path, "grpo")
    assert [len(r["messages"]) for r in rows] == [1, 2]
    assert check_datasets(["q"], tmp_path, "sft")  # sft still needs every answer
    data = grpo(demo_paths)
    data["data"]["datasets"] = ["demo_dpo"]
    assert "demo_dpo" in problems(data, context=True)["data.datasets"]
