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
    from studio.tabs.eval_view import report_view

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
    from studio.tabs.eval_view import report_view

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
    from engine.jobs import evals
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


def _evaluation(home) -> dict:
    """A finished evaluation of a run's final weights against its base, as the registry and the evaluation's folder
    hold it (``engine.jobs.evals`` / ``engine.trainer.evaluate``): a two-turn row whose prompt is a chatml
    rendering, its report, and a merge of it that failed."""
    import json
    import sys
    import time

    import yaml

    from engine.runs import records, store

    store.list_runs(refresh_status=False)  # the registry exists first
    base, run_dir, ev_dir = home / "models" / "base", home / "runs" / "r1", home / "runs" / "ev1"
    for d in (base, run_dir / "adapter", ev_dir):
        d.mkdir(parents=True)
    (base / "config.json").write_text("{}")
    spec = {"model": {"name_or_path": str(base)}, "data": {"template": "chatml"}}
    store._insert(records.RunRecord(id="r1", name="r1", status="completed", created=time.time(), run_dir=str(run_dir),
                                  output_dir=str(run_dir), spec=yaml.safe_dump(spec)))  # fmt: skip
    argv = [sys.executable, "-m", "engine.trainer.evaluate", "--plan", str(ev_dir / "eval_plan.json")]
    store._insert(records.RunRecord(id="ev1", name="ev1", status="completed", created=time.time() + 1,
                                  run_dir=str(ev_dir), output_dir=str(ev_dir), kind="command", command=argv,
                                  tags=["eval"]))  # fmt: skip
    targets = [
        {"label": "base", "kind": "base", "model": str(base), "adapter": None},
        {"label": "final", "kind": "final", "model": str(base), "adapter": str(run_dir / "adapter")},
    ]
    plan = {"run_id": "r1", "targets": targets, "data": {"template": "chatml"}}
    (ev_dir / "eval_plan.json").write_text(json.dumps(plan))
    rows = [{"label": t["label"], "kind": t["kind"], "step": 0 if t["kind"] == "base" else 4,
             "metrics": {"rouge-l": 10.0}} for t in targets]  # fmt: skip
    (ev_dir / "results.json").write_text(json.dumps({"columns": ["rouge-l"], "rows": rows}))
    history = [{"role": "user", "content": "My name is Ada."}, {"role": "assistant", "content": "Hello Ada!"}]
    prompt = (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nMy name is Ada.<|im_end|>\n<|im_start|>assistant\n"
        "Hello Ada!<|im_end|>\n<|im_start|>user\nWhat is my name?<|im_end|>\n<|im_start|>assistant\n"
    )
    preds = [
        {"model": m, "index": 0, "prompt": prompt, "question": "What is my name?", "history": history,
         "system": "Be brief.", "reference": "Ada", "prediction": answer, "scores": {"rouge-l": 10.0}}
        for m, answer in (("base", "Bob"), ("final", "Ada"))
    ]  # fmt: skip
    (ev_dir / "predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    (ev_dir / "report.html").write_text("<html><body>the report</body></html>")
    merge_dir = home / "runs" / "m1"
    merge_dir.mkdir()
    merge_argv = [
        sys.executable,
        "-m",
        "engine.trainer.merge",
        str(run_dir),
        "--out",
        str(home / "exports" / "x"),
        "--tmp-dir",
        str(home / "exports" / ".x.tmp-1"),
        "--events",
        str(merge_dir / "events.jsonl"),
    ]
    store._insert(records.RunRecord(id="m1", name="merge", status="failed", created=time.time() + 2,
                                  run_dir=str(merge_dir), output_dir=str(merge_dir), kind="command",
                                  command=merge_argv, tags=["merge"], reason="out of disk"))  # fmt: skip
    return {"history": history, "prompt": prompt}


def test_side_by_side_shows_the_question_and_a_row_opens_in_chat_with_its_turns(run_registry):
    """The side-by-side table's first column is the user's question, not the rendered template (``<|im_start|>``);
    a row opened in Chat brings its earlier turns into both panes and its system prompt; the report is a download
    (a copy gradio may serve), the picker shows a run on the first visit, and a merge is followed to its end."""
    import tempfile
    from pathlib import Path

    from engine.jobs import evals
    from studio.tabs.eval import picked_run, report_file
    from studio.tabs.eval_chat import open_in_chat
    from studio.tabs.eval_merge import merge_tick
    from studio.tabs.eval_view import report_view

    made = _evaluation(run_registry)
    job = evals.EvalJob("ev1")
    *_, sbs = report_view(job.results(), job.predictions(), "rouge-l", "all")
    assert sbs["data"] == [["What is my name?", "Ada", "Bob", "Ada"]] and sbs["headers"][0] == "question"
    out = open_in_chat("ev1", 0, "all", "rouge-l")
    assert out[3] == "What is my name?" and out[5] == made["history"] == out[6] and out[7] == "Be brief."
    assert out[9] == ""
    button = report_file("ev1")
    assert button["visible"] is True and Path(button["value"]).read_text() == "<html><body>the report</body></html>"
    assert Path(button["value"]).is_relative_to(tempfile.gettempdir())
    assert report_file(None)["visible"] is False
    assert picked_run(None, [("r1 · r1", "r1")]) == "r1" and picked_run("r1", [("a", "r2")]) == "r2"
    assert picked_run("r2", [("a", "r1"), ("b", "r2")]) == "r2" and picked_run(None, []) is None
    followed, said = merge_tick("m1")
    assert followed is None and said.startswith("❌") and "out of disk" in said
