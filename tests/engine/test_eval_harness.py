"""lm-evaluation-harness and LLM-as-judge as measures of an evaluation run, on a demo LoRA run with two checkpoints.

lm-eval: the bundled multiple-choice demo task and a local task YAML over a JSONL file run offline through lm-eval's
own harness for base, each checkpoint and final; each task's accuracy is checked against log-likelihoods computed
here with plain torch (the context and each choice tokenised, the choice tokens' log-probabilities summed, the best
choice compared with the target). The judge: a stand-in OpenAI-compatible endpoint on 127.0.0.1 records what was sent
(question, reference, each model's answer, the model name, the key in the header only) and answers by a rule of its
own; the table's judge score and win rate are recomputed from that rule; bad replies and an unreachable endpoint are
named per row; a missing field or key is refused before launch."""

from __future__ import annotations

import json
import re
import socket
import statistics
from pathlib import Path

import pytest

from engine.core import acting
from engine.eval.messages import EvalError
from engine.jobs import evals
from engine.runs import registry as runs
from tests import eval_fixtures as fx
from tests.judge_standin import JudgeStandin

# a demo training run and evaluations of three models on a shared 2-core machine: more than the suite's 600 s
SLOW = pytest.mark.timeout(1800)
LOCAL_ROWS = [
    {"q": "Water boils at", "options": ["100 degrees", "nothing", "a cat"], "label": 0},
    {"q": "The sun rises in the", "options": ["bottle", "east", "spoon"], "label": 1},
    {"q": "Two plus two is", "options": ["seven", "blue", "four"], "label": 2},
]
LOCAL_TASK = """task: tiny_local
dataset_path: json
dataset_kwargs:
  data_files:
    validation: rows.jsonl
validation_split: validation
output_type: multiple_choice
doc_to_text: "{{q}}"
doc_to_choice: "{{options}}"
doc_to_target: label
metric_list:
  - metric: acc
"""


@pytest.fixture(scope="module")
def trained(demo_paths, tmp_path_factory):
    home = tmp_path_factory.mktemp("eval-harness-home")
    with fx.EnvHome(home):
        data_dir = fx.write_eval_dataset(home / "data")
        rid = fx.train_demo_run(demo_paths)
        yield {"run": rid, "data_dir": data_dir, "home": home, "model": demo_paths["model_dir"]}


def _data(trained, limit=None) -> dict:
    d = {"source": "dataset", "datasets": ["eval_rows"], "dataset_dir": str(trained["data_dir"])}
    return d | ({"limit": limit} if limit else {})


def _load(model_dir, adapter=None):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapter))
    return tok, model.eval()


def _choice_loglik(tok, model, context: str, choice: str) -> float:
    """log P(" " + choice | context): the tokens the whole text adds after the context's tokens."""
    import torch

    ctx = tok(context)["input_ids"]
    whole = tok(context + " " + choice)["input_ids"]
    assert whole[: len(ctx)] == ctx
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([whole])).logits[0].float(), -1)
    return sum(float(logp[pos - 1, whole[pos]]) for pos in range(len(ctx), len(whole)))


@pytest.fixture(scope="module")
def lm_evaluated(trained, tmp_path_factory):
    """base, checkpoint-2 and final on two rows (loss) and two lm-eval tasks: its finished status."""
    task_dir = tmp_path_factory.mktemp("tasks")
    (task_dir / "tiny_local.yaml").write_text(LOCAL_TASK, encoding="utf-8")
    (task_dir / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in LOCAL_ROWS), encoding="utf-8")
    with acting.shell():  # `studio eval` names a task file anywhere (the page: only the workspace's)
        rid = evals.submit_eval(
            {
                "models": {"run": trained["run"], "base": True, "checkpoints": [2]},
                "data": _data(trained, limit=2),
                "measures": ["loss", "lm_eval"],
                "lm_eval": {"tasks": ["studio_demo_mc", str(task_dir / "tiny_local.yaml")]},
                "generation": {"batch_size": 4},
            }
        )
    status = evals.EvalJob(rid).wait(timeout=900)
    assert status["state"] == "finished", status["error"]
    return status


@SLOW
def test_lm_eval_tasks_accuracy_matches_direct_loglikelihoods(lm_evaluated, trained):
    status = lm_evaluated
    results = status["results"]
    assert results["columns"] == ["loss", "perplexity", "studio_demo_mc/acc", "tiny_local/acc"]
    rows = {r["label"]: r["metrics"] for r in results["rows"]}
    assert list(rows) == ["base", "checkpoint-2", "final"]
    samples = [json.loads(x) for x in (Path(status["run_dir"]) / "lm_eval_samples.jsonl").read_text().splitlines()]

    demo = [json.loads(x) for x in (Path(evals.__file__).parents[1] / "eval/tasks/studio_demo_mc.jsonl").open()]
    assert len(demo) == 12 and demo[1]["choices"][demo[1]["answer"]] == "four"  # hand-checkable questions
    docs = {"studio_demo_mc": [(f"Question: {d['question']}\nAnswer:", d["choices"], d["answer"]) for d in demo],
            "tiny_local": [(r["q"], r["options"], r["label"]) for r in LOCAL_ROWS]}  # fmt: skip
    run_out = Path(runs.get(trained["run"], refresh_status=False).output_dir)
    for label, adapter in (("base", None), ("checkpoint-2", run_out / "checkpoints" / "checkpoint-2")):
        tok, model = _load(trained["model"], adapter)
        for task, items in docs.items():
            logged = {s["doc_id"]: s for s in samples if s["model"] == label and s["task"] == task}
            assert sorted(logged) == list(range(len(items)))
            right = []
            for k, (context, choices, target) in enumerate(items):
                mine = [_choice_loglik(tok, model, context, c) for c in choices]
                theirs = [r[0] for r in logged[k]["responses"]]
                assert theirs == pytest.approx(mine, abs=1e-3), (label, task, k)
                right.append(max(range(len(mine)), key=mine.__getitem__) == target)
            assert rows[label][f"{task}/acc"] == pytest.approx(100 * statistics.fmean(right)), (label, task)
    from engine.eval.report import text_table

    assert "studio_demo_mc/acc" in text_table(results) and "tiny_local/acc" in text_table(results)


@SLOW
def test_lm_eval_task_problems_are_named(trained, tmp_path):
    def problems(tasks) -> dict:
        with pytest.raises(EvalError) as err, acting.shell():
            evals.submit_eval(
                {"models": {"run": trained["run"]}, "measures": ["lm_eval"], "lm_eval": {"tasks": tasks}}
            )
        return {f: str(m) for f, m in err.value.problems}

    assert "cannot read the lm-eval task" in problems([str(tmp_path / "nope.yaml")])["lm_eval.tasks[0]"]
    (tmp_path / "t.yaml").write_text(LOCAL_TASK)  # its rows.jsonl is not beside it
    got = problems(["studio_demo_mc", str(tmp_path / "t.yaml")])
    assert list(got) == ["lm_eval.tasks[1]"] and "rows.jsonl, which is not there" in got["lm_eval.tasks[1]"]
    assert "lm_eval.tasks" in problems([])
    # a task lm-eval knows by name whose data is on the hub, offline and not cached: the run fails naming it
    rid = evals.submit_eval(
        {"models": {"run": trained["run"]}, "measures": ["lm_eval"], "lm_eval": {"tasks": ["arc_easy"]}}
    )
    status = evals.EvalJob(rid).wait(timeout=600)
    assert status["state"] == "failed"
    assert "lm-eval task arc_easy needs its data from the hub" in str(status["error"])
    assert status["results"]["rows"] == []


JUDGE_PROMPT = "Q<<{question}>>REF<<{reference}>>ANS<<{answer}>> Reply as Score: N"
_FIELDS = re.compile(r"Q<<(.*)>>REF<<(.*)>>ANS<<(.*)>> Reply", re.DOTALL)


def _rule(prompt: str):
    """The stand-in judge: an HTTP 500 for one question, a reply with no score for another, else a score from the
    answer's length."""
    question, _ref, answer = _FIELDS.match(prompt).groups()
    if "2 plus 3" in question:
        return 500
    if "35 minutes" in question:
        return "I cannot decide."
    return f"Score: {len(answer) % 9 + 1}"


@SLOW
def test_judge_scores_every_answer_and_names_bad_rows(trained, monkeypatch):
    monkeypatch.setenv("STUDIO_TEST_JUDGE_KEY", "sk-test-123")
    monkeypatch.setenv("STUDIO_PAGE_SECRETS", "STUDIO_TEST_JUDGE_KEY=127.0.0.1")  # the operator's binding for the page
    with JudgeStandin(_rule) as judge:
        spec = {
            "models": {"run": trained["run"], "base": True},
            "data": _data(trained),
            "measures": ["exact", "judge"],
            "generation": {"max_new_tokens": 8, "batch_size": 4},
            "judge": {"base_url": judge.url, "model": "judge-7b", "api_key_env": "STUDIO_TEST_JUDGE_KEY",
                      "prompt": JUDGE_PROMPT},
        }  # fmt: skip
        rid = evals.submit_eval(spec)
        status = evals.EvalJob(rid).wait(timeout=600)
        sent = list(judge.requests)
    assert status["state"] == "finished", status["error"]
    preds = [json.loads(x) for x in (Path(status["run_dir"]) / "predictions.jsonl").read_text().splitlines()]
    questions = dict(fx.EVAL_ROWS)
    assert len(sent) == 2 * len(fx.EVAL_ROWS)
    for r in sent:
        assert r["path"] == "/v1/chat/completions" and r["headers"]["Authorization"] == "Bearer sk-test-123"
        assert r["body"]["model"] == "judge-7b" and r["body"]["temperature"] == 0
    got = sorted(_FIELDS.match(r["body"]["messages"][-1]["content"]).groups() for r in sent)
    want = sorted((next(q for q in questions if q in p["prompt"]), p["reference"], p["prediction"]) for p in preds)
    assert got == want  # every answer of both models, with its question and reference

    rows = {r["label"]: r for r in status["results"]["rows"]}
    scores = {}
    for label in ("base", "final"):
        mine = [p for p in preds if p["model"] == label]
        scored = {p["index"]: len(p["prediction"]) % 9 + 1 for p in mine if "2 plus 3" not in p["prompt"]
                  and "35 minutes" not in p["prompt"]}  # fmt: skip
        scores[label] = scored
        assert rows[label]["metrics"]["judge"] == pytest.approx(statistics.fmean(scored.values()))
        errors = rows[label]["judge_errors"]
        bad = {p["index"]: p["prompt"] for p in mine if p["index"] not in scored}
        assert len(errors) == 2
        for idx, prompt in bad.items():
            e = next(e for e in errors if e.startswith(f"row {idx}:"))
            assert ("HTTP 500" in e) if "2 plus 3" in prompt else ("no score from 1 to 10: I cannot decide." in e)
    base, final = scores["base"], scores["final"]
    wins = [1.0 if final[i] > base[i] else 0.5 if final[i] == base[i] else 0.0 for i in final]
    assert rows["final"]["metrics"]["judge_win"] == pytest.approx(100 * statistics.fmean(wins))
    assert rows["base"]["metrics"]["judge_win"] is None
    folder = Path(status["run_dir"])  # the key is never written down
    for f in folder.iterdir():
        if f.is_file():
            assert "sk-test-123" not in f.read_text(encoding="utf-8", errors="replace"), f.name
    assert "STUDIO_TEST_JUDGE_KEY" in (folder / "spec.yaml").read_text()


@SLOW
def test_judge_unreachable_and_bad_fields(trained, monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    monkeypatch.setenv("STUDIO_PAGE_HOSTS", "127.0.0.1")  # the operator lets the page reach a judge on this machine
    spec = {
        "models": {"run": trained["run"], "final": False, "base": True},
        "data": _data(trained, limit=2),
        "measures": ["judge"],
        "generation": {"max_new_tokens": 4},
        "judge": {"base_url": f"http://127.0.0.1:{port}/v1", "model": "m", "timeout": 20},
    }
    status = evals.EvalJob(evals.submit_eval(spec)).wait(timeout=600)
    assert status["state"] == "finished"
    row = status["results"]["rows"][0]
    assert row["metrics"]["judge"] is None
    assert len(row["judge_errors"]) == 2 and all("cannot be reached" in e for e in row["judge_errors"])

    def problems(judge) -> dict:
        with pytest.raises(EvalError) as err:
            evals.submit_eval(spec | {"judge": judge})
        return {f: str(m) for f, m in err.value.problems}

    monkeypatch.delenv("STUDIO_TEST_NO_SUCH_KEY", raising=False)
    assert set(problems({})) == {"judge.base_url", "judge.model"}
    assert "not an http(s) URL" in problems({"base_url": "ftp://x", "model": "m"})["judge.base_url"]
    got = problems({"base_url": "http://x", "model": "m", "api_key_env": "STUDIO_TEST_NO_SUCH_KEY"})
    assert "STUDIO_TEST_NO_SUCH_KEY" in got["judge.api_key_env"]
    assert "judge.prompt" in problems({"base_url": "http://x", "model": "m", "prompt": "no answer {here}"})


PAIR_PROMPT = "Q<<{question}>>REF<<{reference}>>A<<{answer_a}>>B<<{answer_b}>> Who wins?"
_PAIR = re.compile(r"Q<<(.*)>>REF<<(.*)>>A<<(.*)>>B<<(.*)>> Who wins", re.DOTALL)


def _pair_rule(prompt: str) -> str:
    """The stand-in pairwise judge: no verdict for one question; else the longer answer wins, and between answers of
    one length it always picks A (a judge biased to a position, which asking both orders cancels)."""
    question, _ref, a, b = _PAIR.match(prompt).groups()
    if "35 minutes" in question:
        return "Both are fine."
    return "Winner: B" if len(b) > len(a) else "Winner: A"


@SLOW
def test_pairwise_judge_asks_both_orders_and_counts_wins(trained, monkeypatch):
    monkeypatch.setenv("STUDIO_PAGE_HOSTS", "127.0.0.1")  # the operator lets the page reach a judge on this machine
    with JudgeStandin(_pair_rule) as judge:
        spec = {
            "models": {"run": trained["run"], "base": True},
            "data": _data(trained),
            "measures": ["judge"],
            "generation": {"max_new_tokens": 8, "batch_size": 4},
            "judge": {"base_url": judge.url, "model": "judge-7b", "mode": "pairwise", "pairwise_prompt": PAIR_PROMPT},
        }
        status = evals.EvalJob(evals.submit_eval(spec)).wait(timeout=600)
        sent = [_PAIR.match(r["body"]["messages"][-1]["content"]).groups() for r in judge.requests]
    assert status["state"] == "finished", status["error"]
    preds = [json.loads(x) for x in (Path(status["run_dir"]) / "predictions.jsonl").read_text().splitlines()]
    base = {p["index"]: p["prediction"] for p in preds if p["model"] == "base"}
    final = {p["index"]: p for p in preds if p["model"] == "final"}
    # the base is not judged against itself; each final answer twice, the base's as A and then as B
    assert len(sent) == 2 * len(final) - 1  # the row without a verdict stops after its first ask
    for i, p in final.items():
        asked = [(a, b) for q, ref, a, b in sent if ref == p["reference"] and q in p["prompt"]]
        if "35 minutes" in p["prompt"]:
            assert asked == [(base[i], p["prediction"])]
            continue
        assert asked == [(base[i], p["prediction"]), (p["prediction"], base[i])], (i, asked)
    points = []
    for i, p in final.items():
        if "35 minutes" in p["prompt"]:
            continue
        m, b = len(p["prediction"]), len(base[i])
        as_b = 1.0 if m > b else 0.0  # the longer wins; a tie in length goes to A, here the base
        as_a = 1.0 if m >= b else 0.0  # ... and here the model
        points.append((as_a + as_b) / 2)
    rows = {r["label"]: r for r in status["results"]["rows"]}
    assert rows["final"]["metrics"]["judge_win"] == pytest.approx(100 * statistics.fmean(points))
    assert rows["final"]["metrics"]["judge"] is None and rows["base"]["metrics"]["judge_win"] is None
    errors = rows["final"]["judge_errors"]
    bad = next(i for i, p in final.items() if "35 minutes" in p["prompt"])
    assert errors == [f"row {bad}: the judge's reply names no winner (Winner: A, B or tie): Both are fine."]

    def problems(**changes) -> dict:
        with pytest.raises(EvalError) as err:
            evals.submit_eval(spec | changes)
        return {f: str(m) for f, m in err.value.problems}

    got = problems(models={"run": trained["run"]})
    assert "evaluate the base too" in got["models.base"]
    got = problems(judge=spec["judge"] | {"pairwise_prompt": "A: {answer_a} only"})
    assert "it has no {answer_b}" in got["judge.pairwise_prompt"]


@SLOW
def test_merge_the_best_checkpoint_click_submits_its_merge(lm_evaluated, trained):
    from engine.eval import verdict
    from engine.export import merge_jobs as export_jobs
    from studio.tabs.eval_merge import merge_best

    results = json.loads((Path(lm_evaluated["run_dir"]) / "results.json").read_text())
    preds = evals.EvalJob(lm_evaluated["run_id"]).predictions()
    tuned = [r for r in results["rows"] if r["kind"] in ("checkpoint", "final")]
    lowest = min(r["metrics"]["loss"] for r in tuned)
    before = {r.id for r in runs.list_runs(refresh_status=False)}
    # by an lm-eval task's accuracy: no per-row values, so nothing shows the best beats the base: the page asks
    acc = "studio_demo_mc/acc"
    said, asked = merge_best(lm_evaluated["run_id"], acc)
    if verdict.best(results, acc) is None:  # tuned rows tied at the base's accuracy or below: no pick at all
        assert asked is None and said.startswith("❌ no best by studio_demo_mc/acc"), said
    else:
        assert asked == verdict.best(results, acc) and "does not beat the base" in said and "merge it anyway?" in said
        other = next(r["label"] for r in tuned if r["label"] != asked)
        assert merge_best(lm_evaluated["run_id"], acc, confirmed=other)[1] == asked  # agreed to another row: asks
    assert {r.id for r in runs.list_runs(refresh_status=False)} == before  # asking merges nothing
    if asked:  # Merge anyway: the row asked about is merged
        said, again = merge_best(lm_evaluated["run_id"], acc, confirmed=asked)
        anyway = [r for r in runs.list_runs(refresh_status=False) if r.id not in before]
        assert again is None and len(anyway) == 1 and anyway[0].id in said, said
        targets = json.loads((Path(lm_evaluated["run_dir"]) / "eval_plan.json").read_text())["targets"]
        job = export_jobs.MergeJob(anyway[0].id)
        assert next(t["adapter"] for t in targets if t["label"] == asked) in [str(x) for x in job.sources]
        assert job.wait(timeout=600)["state"] == "finished"
        before |= {anyway[0].id}
    # by loss: merged at once when the best beats the base, else after the page's Merge anyway
    said, asked = merge_best(lm_evaluated["run_id"], "loss")  # what the page shows under the button
    best = verdict.best(results, "loss")
    if verdict.beats_base(verdict.compare(results, preds), best, "loss"):
        assert asked is None, said
    else:
        assert asked == best and "merge it anyway?" in said
        said, asked = merge_best(lm_evaluated["run_id"], "loss", confirmed=asked)
    new = [r for r in runs.list_runs(refresh_status=False) if r.id not in before]
    assert len(new) == 1 and export_jobs.MERGE_TAG in new[0].tags, said
    merge = new[0]
    assert merge.id in said and "❌" not in said
    job = export_jobs.MergeJob(merge.id)
    plan = json.loads((Path(lm_evaluated["run_dir"]) / "eval_plan.json").read_text())
    merged = [t["label"] for t in plan["targets"] if t["adapter"] and t["adapter"] in [str(x) for x in job.sources]]
    assert len(merged) == 1 and merged[0] != "base"
    assert next(r for r in tuned if r["label"] == merged[0])["metrics"]["loss"] == lowest  # the best by loss
    assert str(job.out_dir) in said
    status = job.wait(timeout=600)
    assert status["state"] == "finished", status
    assert (Path(job.out_dir) / "config.json").is_file()


@SLOW
def test_a_side_by_side_row_opens_in_chat(lm_evaluated, trained):
    from studio.tabs import chat_sources
    from studio.tabs.eval_chat import chat_target, open_in_chat

    rid = lm_evaluated["run_id"]
    got = chat_target(rid, 1, "all", "loss")
    rec = runs.get(trained["run"], refresh_status=False)
    assert got["prompt"] == fx.EVAL_ROWS[1][0]  # the row's own question, as a person would type it
    assert Path(got["model"]) == Path(trained["model"]) or got["model"] == rec.load_spec().model.name_or_path
    assert got["tuned"] == rec.run_dir  # the run itself: the Tuned list's entry for its final weights
    model, adapter = chat_sources.tuned_target(got["tuned"])  # what the Chat tab's Load then loads in the Tuned pane
    assert Path(adapter) == Path(rec.output_dir) / "adapter"
    assert (
        got["template"]
        == json.loads((Path(lm_evaluated["run_dir"]) / "eval_plan.json").read_text())["data"]["template"]
    )
    out = open_in_chat(rid, 1, "all", "loss")
    assert out[:4] == (got["model"], got["tuned"], got["template"], got["prompt"])
    # both panes start with the row's earlier turns (none: one-turn rows); no error under the button
    assert out[5] == [] and out[6] == [] and out[9] == ""
    assert getattr(out[8], "selected", None) == "chat" or out[8].get("selected") == "chat"  # the page goes to Chat
    assert "❌" in open_in_chat(rid, None, "all", "loss")[-1]
