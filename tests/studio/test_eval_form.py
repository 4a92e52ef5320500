"""The Evaluate tab's judge settings as the engine takes them: the pairwise switch makes a pairwise judge of the
spec (the base evaluated too, the prompt box's text as the pairwise prompt), and the prompt box follows the switch
without losing a prompt the user wrote."""

from __future__ import annotations

import re

from engine.eval.spec import DEFAULT_JUDGE_PROMPT, DEFAULT_PAIRWISE_PROMPT, parse_eval_spec
from studio.tabs.eval import judge_prompt_for, spec_from_form

FORM = ("r1", [], False, True, None, ["exact", "judge"], 0, 32, 4, "", "http://127.0.0.1:9/v1", "judge-7b", "")


def test_pairwise_switch_makes_a_pairwise_judge_with_the_base():
    spec = spec_from_form(*FORM, DEFAULT_PAIRWISE_PROMPT, True)
    assert spec["models"]["base"] is True  # the other side of every pair
    assert spec["judge"]["mode"] == "pairwise" and spec["judge"]["pairwise_prompt"] == DEFAULT_PAIRWISE_PROMPT
    assert "prompt" not in spec["judge"]
    parsed = parse_eval_spec(spec)  # the engine's own rules accept it
    assert parsed.judge.mode == "pairwise" and parsed.models.base


def test_score_mode_keeps_its_prompt_and_the_base_as_ticked():
    spec = spec_from_form(*FORM, "Q {question} A {answer} Score: N", False)
    assert spec["models"]["base"] is False and "mode" not in spec["judge"]
    assert spec["judge"]["prompt"] == "Q {question} A {answer} Score: N"
    assert parse_eval_spec(spec).judge.mode == "score"


def test_prompt_box_follows_the_switch_but_keeps_a_written_prompt():
    assert judge_prompt_for(True, DEFAULT_JUDGE_PROMPT) == DEFAULT_PAIRWISE_PROMPT
    assert judge_prompt_for(False, DEFAULT_PAIRWISE_PROMPT) == DEFAULT_JUDGE_PROMPT
    mine = "Compare {answer_a} with {answer_b}. Winner: A, B or tie"
    assert judge_prompt_for(False, mine) == mine and judge_prompt_for(True, mine) == mine


def test_charts_only_for_measures_with_figures_titled_in_the_pages_language():
    """Pairwise judging scores nothing: the judge's mean-score column is n/a on every row and gets no chart (it drew
    an empty one); the win rate gets its chart, titled in Chinese on the Chinese page."""
    from studio.tabs.eval import report_view

    results = {
        "columns": ["exact", "judge", "judge_win"],
        "rows": [
            {"label": "base", "kind": "base", "step": 0, "metrics": {"exact": 10.0, "judge": None, "judge_win": None}},
            {
                "label": "final",
                "kind": "final",
                "step": 4,
                "metrics": {"exact": 20.0, "judge": None, "judge_win": 62.5},
            },
        ],
        "train_loss": [[1, 2.0], [4, 1.5]],
    }
    _, charts, _, _, _ = report_view(results, [], None, "all", "zh")
    assert re.findall(r'data-measure="([^"]+)"', charts) == ["exact", "judge_win"]
    assert "judge_win 随步数的变化（虚线：训练损失）" in charts and "by step" not in charts
    _, charts, _, _, _ = report_view(results, [], None, "all", "en")
    assert "exact by step (dashed: training loss)" in charts


def test_the_verdict_against_the_base_in_the_pages_language():
    """A tuned model that answers only newlines: no ★ among the tied tuned rows, the best line says no tuned model
    beats the base, the verdict table says worse (更差 on the Chinese page), the degenerate answers are counted."""
    from studio.tabs.eval import report_view

    rows = [("base", "base", 0, [40.0, 60.0, 50.0, 30.0]), ("checkpoint-2", "checkpoint", 2, [0.0] * 4),
            ("final", "final", 2, [0.0] * 4)]  # fmt: skip
    results = {"columns": ["rouge-l"], "rows": [], "n_rows": 4}
    preds = []
    for label, kind, step, scores in rows:
        results["rows"].append({"label": label, "kind": kind, "step": step, "metrics": {"rouge-l": sum(scores) / 4}})
        for i, s in enumerate(scores):
            answer = "\n" if kind != "base" else f"answer {i}"
            preds.append({"model": label, "index": i, "prompt": "q", "reference": "a", "prediction": answer,
                          "scores": {"rouge-l": s}})  # fmt: skip
    table, _, best, verdicts, _ = report_view(results, preds, "rouge-l", "all", "en")
    assert [r[0] for r in table["data"]] == ["base", "checkpoint-2", "final"]  # no ★: a tie worse than the base
    assert table["headers"][-1] == "degenerate" and [r[-1] for r in table["data"]] == ["0/4", "4/4", "4/4"]
    assert "no tuned model beats the base by rouge-l" in best
    assert "| checkpoint-2 | rouge-l | -45.00 |" in verdicts and verdicts.count("**worse**") == 2
    assert "⚠ final: 4 of 4 answers are degenerate" in verdicts
    table, _, best, verdicts, _ = report_view(results, preds, "rouge-l", "all", "zh")
    assert "按 rouge-l 没有任何微调模型优于基座模型" in best
    assert verdicts.count("**更差**") == 2 and table["headers"][-1] == "退化回答"


def test_a_run_without_held_out_rows_gets_data_that_evaluates(demo_paths, run_registry):
    """The Train form's defaults keep no held-out rows (val_size 0): the Evaluate tab's default data (the run's
    held-out rows) was refused at Evaluate. Picking such a run now picks the first dataset it trained on and says
    what its scores mean; a run with a held-out split keeps the held-out default. Checked with the evaluation's own
    resolution of the spec the form then makes."""
    from pathlib import Path

    import yaml

    from engine.core import workspace
    from engine.eval.messages import EvalError
    from engine.runs import evals
    from engine.runs import registry as runs
    from studio.tabs.eval import data_for_run

    for src in Path(demo_paths["data_dir"]).iterdir():
        if src.is_file():
            (workspace.data_dir() / src.name).write_bytes(src.read_bytes())
    data = yaml.safe_load(Path(demo_paths["example_spec"]).read_text())
    assert not data["data"].get("val_size") and not data["data"].get("eval_datasets")  # the form's defaults
    plain = runs.submit(data, start=False)
    data["data"]["val_size"] = 0.1
    split = runs.submit(data, start=False)

    def data_problems(run_id: str, picked: str) -> list:
        form = spec_from_form(run_id, [], True, False, picked, ["rouge"], 4, 8, 2)
        try:
            evals.resolve(form)
        except EvalError as exc:
            return [(p, str(m)) for p, m in exc.problems if p.startswith("data")]
        return []

    choices, value, note = data_for_run(plain)
    trained = data["data"]["datasets"][0]
    assert value == trained and value in [v for _, v in choices] and "" not in [v for _, v in choices]
    assert note.startswith(f"run {plain} kept no held-out rows (data.val_size 0): {trained} is rows it trained on")
    assert data_problems(plain, "") and "kept no held-out rows" in data_problems(plain, "")[0][1]
    assert data_problems(plain, value) == []
    _, zh_value, zh_note = data_for_run(plain, "zh")
    assert zh_value == trained and "没有留出评估行" in zh_note

    choices, value, note = data_for_run(split)
    assert (value, note) == ("", "") and ("", "") != choices[0] and choices[0][1] == ""
    assert data_problems(split, value) == []
