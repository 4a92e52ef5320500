"""Security: the page runs no code from outside the workspace (engine.core.page_trust), beyond reward files.

A model's own Python code (``model.trust_remote_code`` on a model whose config names classes of its own in
``auto_map``, or whose folder holds ``.py`` files) runs unconfined with the studio's rights: the page refuses such a
run naming the field unless the operator allows it (``STUDIO_PAGE_REMOTE_CODE=on``); a model transformers builds
from its own classes runs no such code, so LLaMA-Factory's habit of ``trust_remote_code: true`` on Llama or Qwen
passes. An lm-eval task YAML runs the ``!function`` code beside it and reads the data it names: from the page, both
come from the workspace. The shell keeps its freedom. Real parts: the registry's submit and the evaluation's
resolve, on folders written here.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from engine.core import acting, page_trust, workspace
from engine.eval.messages import EvalError
from engine.jobs import evals
from engine.runs import registry as runs
from engine.spec.schema import SpecError
from tests.helpers import demo_spec

FIELD = "model.trust_remote_code"


def _model_copy(demo_paths, where: Path, *, auto_map: bool = False, code: bool = False) -> Path:
    folder = where / "model"
    shutil.copytree(demo_paths["model_dir"], folder)
    if auto_map:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        config["auto_map"] = {"AutoModelForCausalLM": "modeling_mine.MineForCausalLM"}
        (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    if code:
        (folder / "modeling_mine.py").write_text("import os\nos.system('true')\n", encoding="utf-8")
    return folder


def _submit_problems(demo_paths, model: str, trust: bool = True) -> dict[str, str]:
    data = demo_spec(demo_paths, model={"name_or_path": model, "trust_remote_code": trust}).model_dump(mode="json")
    try:
        rid = runs.submit(data, start=False)
    except SpecError as err:
        return {field: str(msg) for field, msg in err.problems}
    runs.delete(rid)
    return {}


@pytest.mark.parametrize(("auto_map", "code"), [(True, False), (False, True)])
def test_page_run_that_would_run_a_models_own_code_is_refused_naming_the_field(
    demo_paths, tmp_path, monkeypatch, auto_map, code
):
    monkeypatch.delenv(page_trust.ENV_REMOTE_CODE, raising=False)
    model = str(_model_copy(demo_paths, tmp_path, auto_map=auto_map, code=code))
    got = _submit_problems(demo_paths, model)
    assert list(got) == [FIELD], got
    text = got[FIELD]
    assert "ships its own Python code" in text and "STUDIO_PAGE_REMOTE_CODE=on" in text and "\n" not in text
    assert ("modeling_mine.py" if code else "AutoModelForCausalLM") in text
    assert _submit_problems(demo_paths, model, trust=False) == {}  # without trust_remote_code nothing of it runs
    with acting.shell():  # `studio train` at the shell acts for its person
        assert _submit_problems(demo_paths, model) == {}
    monkeypatch.setenv(page_trust.ENV_REMOTE_CODE, "on")  # the operator allows the page
    assert _submit_problems(demo_paths, model) == {}


def test_trust_remote_code_on_a_model_transformers_builds_itself_passes_from_the_page(demo_paths, monkeypatch):
    """LLaMA-Factory's examples set trust_remote_code: true on Llama and Qwen: no code of the model's would run."""
    monkeypatch.delenv(page_trust.ENV_REMOTE_CODE, raising=False)
    assert _submit_problems(demo_paths, demo_paths["model_dir"]) == {}


def test_a_cached_hub_model_whose_tokenizer_ships_code_is_refused_from_the_page(demo_paths, tmp_path, monkeypatch):
    """The Hugging Face cache's layout (models--org--name/refs/main, snapshots/<commit>/): config.json without
    auto_map, tokenizer_config.json naming a tokenizer class of the model's own."""
    from huggingface_hub import constants

    cache, commit = tmp_path / "hf-cache", "0123456789abcdef0123456789abcdef01234567"
    root = cache / "models--someorg--coder"
    snap = root / "snapshots" / commit
    shutil.copytree(demo_paths["model_dir"], snap)
    tok = json.loads((snap / "tokenizer_config.json").read_text(encoding="utf-8"))
    tok["auto_map"] = {"AutoTokenizer": ["tokenization_coder.CoderTokenizer", None]}
    (snap / "tokenizer_config.json").write_text(json.dumps(tok), encoding="utf-8")
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text(commit, encoding="utf-8")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.delenv(page_trust.ENV_REMOTE_CODE, raising=False)
    got = _submit_problems(demo_paths, "someorg/coder")
    assert "AutoTokenizer" in got.get(FIELD, ""), got


def test_a_model_whose_configs_cannot_be_read_cannot_be_told_safe():
    """Studio's table of published configs keeps no auto_map: with nothing else read, the page refuses."""
    text = str(page_trust.remote_code_problem("org/model", [None, None], []))
    assert "cannot be read here" in text and "STUDIO_PAGE_REMOTE_CODE=on" in text
    assert page_trust.remote_code_problem("org/model", [{"model_type": "llama"}, None], []) is None


TASK = """task: mine
dataset_path: json
dataset_kwargs:
  data_files: {files}
output_type: multiple_choice
doc_to_text: !function utils.text
doc_to_target: answer
doc_to_choice: choices
"""


def _task(folder: Path, data: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    data.parent.mkdir(parents=True, exist_ok=True)
    data.write_text(json.dumps({"q": "1+1", "choices": ["2", "3"], "answer": 0}) + "\n", encoding="utf-8")
    (folder / "utils.py").write_text("def text(doc):\n    return doc['q']\n", encoding="utf-8")
    (folder / "mine.yaml").write_text(TASK.format(files=json.dumps(str(data))), encoding="utf-8")
    return folder / "mine.yaml"


def _eval_problems(demo_paths, task: Path) -> dict[str, str]:
    spec = {
        "models": {"base_model": demo_paths["model_dir"]},
        "measures": ["lm_eval"],
        "lm_eval": {"tasks": [str(task)]},
    }
    try:
        evals.resolve(spec)
    except EvalError as exc:
        return {f: str(m) for f, m in exc.problems}
    return {}


def test_page_lm_eval_task_and_its_data_come_from_the_workspace(demo_paths, tmp_path):
    outside = _task(tmp_path / "tasks", tmp_path / "tasks" / "rows.jsonl")
    got = _eval_problems(demo_paths, outside)
    assert list(got) == ["lm_eval.tasks[0]"] and "outside the workspace" in got["lm_eval.tasks[0]"], got
    with acting.shell():  # the CLI may name any task file
        assert _eval_problems(demo_paths, outside) == {}
    inside = _task(workspace.home() / "eval_tasks" / "mine", workspace.home() / "eval_tasks" / "mine" / "rows.jsonl")
    assert _eval_problems(demo_paths, inside) == {}
    # a task in the workspace that reads its rows from outside it is refused too
    reads_out = _task(workspace.home() / "eval_tasks" / "reads-out", tmp_path / "elsewhere" / "rows.jsonl")
    got = _eval_problems(demo_paths, reads_out)
    assert "outside the workspace" in got.get("lm_eval.tasks[0]", "") and "rows.jsonl" in got["lm_eval.tasks[0]"]
