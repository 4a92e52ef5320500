"""Evaluation runs on the demo: a LoRA run with two checkpoints evaluated with its base through `studio eval`; every
number of the table checked against a computation written here (a plain torch loop for loss and perplexity, the
tokens cut from the tokenizer's own chat template; jieba / rouge_chinese / nltk called directly for BLEU and ROUGE;
one-row-at-a-time greedy `generate` for the batched answers); the held-out rows are the trainer's; bad input is
refused before launch naming the field; a model that does not load fails with the finished rows kept; cancel."""

from __future__ import annotations

import json
import math
import re
import shutil
import statistics
from pathlib import Path

import pytest

from engine.commands.eval_cli import cli
from engine.eval.messages import EvalError
from engine.jobs import evals
from engine.runs import registry as runs
from tests import eval_fixtures as fx
from tests import helpers


@pytest.fixture(scope="module")
def trained(demo_paths, tmp_path_factory):
    home = tmp_path_factory.mktemp("eval-home")
    with fx.EnvHome(home):
        data_dir = fx.write_eval_dataset(home / "data")
        rid = fx.train_demo_run(demo_paths)
        yield {"run": rid, "data_dir": data_dir, "home": home, "model": demo_paths["model_dir"]}


@pytest.fixture(scope="module")
def evaluated(trained):
    """`studio eval RUN --base --checkpoints all --data eval_rows ...`: exit code, printed text, the job."""
    import contextlib
    import io

    spec = {
        "models": {"run": trained["run"], "base": True, "checkpoints": "all"},
        "data": {"source": "dataset", "datasets": ["eval_rows"], "dataset_dir": str(trained["data_dir"])},
        "measures": ["loss", "bleu", "rouge", "exact", "accuracy"],
        "generation": {"max_new_tokens": 8, "batch_size": 4},
    }
    path = trained["home"] / "eval.yaml"
    import yaml

    path.write_text(yaml.safe_dump(spec))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = cli([str(path)])
    rid = next(r.id for r in runs.list_runs(refresh_status=False) if "eval" in r.tags)
    return {"rc": rc, "out": out.getvalue(), "job": evals.EvalJob(rid)}


def _load(model_dir, adapter=None):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    if adapter:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, adapter)
    return tok, model.eval()


def _plain_loss(model, tok) -> float:
    """Token-weighted NLL of the answers (answer + end-of-turn, as trained), one row at a time, no padding; the
    prompt and answer tokens cut from the tokenizer's own chat template."""
    import torch

    nll, count = 0.0, 0
    for q, a in fx.EVAL_ROWS:
        msgs = [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
        prompt = tok.apply_chat_template(msgs[:1], add_generation_prompt=True, tokenize=False)
        full = tok.apply_chat_template(msgs, tokenize=False)
        assert full.startswith(prompt)
        p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
        a_ids = tok(full[len(prompt) :], add_special_tokens=False)["input_ids"]
        ids = torch.tensor([p_ids + a_ids])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0].double()
        logp = torch.log_softmax(logits[len(p_ids) - 1 : -1], dim=-1)
        nll -= logp.gather(1, ids[0, len(p_ids) :, None]).sum().item()
        count += len(a_ids)
    return nll / count


def _lf_similarity(pred: str, label: str) -> dict:
    """LLaMA-Factory's ComputeSimilarity for one row, written out here."""
    import jieba
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu
    from rouge_chinese import Rouge

    hyp, ref = list(jieba.cut(pred)), list(jieba.cut(label))
    if not " ".join(hyp).split() or not " ".join(ref).split():
        scores = {"rouge-1": 0.0, "rouge-2": 0.0, "rouge-l": 0.0}
    else:
        got = Rouge().get_scores(" ".join(hyp), " ".join(ref))[0]
        scores = {k: round(v["f"] * 100, 4) for k, v in got.items()}
    bleu = sentence_bleu([list(label)], list(pred), smoothing_function=SmoothingFunction().method3)
    return scores | {"bleu-4": round(bleu * 100, 4)}


def test_cli_prints_the_table_of_base_checkpoints_and_final(evaluated):
    assert evaluated["rc"] == 0, evaluated["out"]
    lines = evaluated["out"].splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("model"))
    assert lines[head].split() == [
        "model", "step", "loss", "perplexity", "bleu-4", "rouge-1", "rouge-2", "rouge-l", "exact_match", "accuracy",
        "degenerate",
    ]  # fmt: skip
    assert [line.split()[0] for line in lines[head + 1 : head + 5]] == [
        "base",
        "checkpoint-2",
        "checkpoint-4",
        "final",
    ]
    assert [line.split()[1] for line in lines[head + 1 : head + 5]] == ["0", "2", "4", "4"]
    job = evaluated["job"]
    assert job.poll()["state"] == "finished"
    folder = job.run_dir
    for name in ("spec.yaml", "eval_plan.json", "events.jsonl", "results.json", "predictions.jsonl", "report.html"):
        assert (folder / name).is_file(), name
    page = (folder / "report.html").read_text()
    assert "checkpoint-2" in page and "<svg" in page and "<script" not in page  # self-contained, no fetches
    src = runs.get(job.plan["run_id"], refresh_status=False)
    linked = [json.loads(x)["eval_id"] for x in (Path(src.run_dir) / "evaluations.jsonl").read_text().splitlines()]
    assert job.run_id in linked
    from studio.tabs.runs import details

    assert job.run_id in details(src.id) and str(folder / "report.html") in details(src.id)  # the Runs tab's panel


def test_cli_says_whether_each_tuned_row_beats_the_base(evaluated):
    """Each tuned row against the base, per measure, as `studio eval` prints it: recomputed here from the rows' own
    values in predictions.jsonl (the paired bootstrap written out in eval_fixtures, lower loss better, higher scores
    better); the best line and "no tuned model beats the base" follow; degenerate answers counted by a rule of the
    test's own; report.html says the same."""
    job, lines = evaluated["job"], evaluated["out"].splitlines()
    preds = job.predictions()
    by = {}
    for p in preds:
        by.setdefault(p["model"], {})[p["index"]] = p
    head = next(i for i, line in enumerate(lines) if line.startswith("model"))
    table = {line.split()[0]: line.split() for line in lines[head + 1 : head + 5]}
    cols = ["loss", "bleu-4", "rouge-1", "rouge-2", "rouge-l", "exact_match", "accuracy"]
    words = {"better": "better", "worse": "worse", "no clear difference": "same"}
    printed = {}
    for line in lines:
        parts = line.split()
        if len(parts) >= 5 and parts[0] in table and parts[1] in cols:
            printed[parts[0], parts[1]] = (float(parts[2]), " ".join(parts[5:]))
    said = {}
    for label in ("checkpoint-2", "checkpoint-4", "final"):
        mine = by[label]
        assert table[label][-1] == f"{sum(fx.degenerate(p['prediction']) for p in mine.values())}/{len(mine)}"
        for col in cols:

            def value(p, col=col):
                return p["loss"] if col == "loss" else p["scores"].get(col)

            shared = sorted(i for i in mine if value(mine[i]) is not None and value(by["base"][i]) is not None)
            diffs = [value(mine[i]) - value(by["base"][i]) for i in shared]
            low, high = fx.bootstrap_interval(diffs)
            good = -1 if col == "loss" else 1
            word = "same" if low <= 0 <= high else "better" if (low > 0) == (good > 0) else "worse"
            diff, text = printed[label, col]
            assert diff == pytest.approx(statistics.fmean(diffs), abs=1e-2) and words[text] == word, (label, col)
            said[label, col] = word
    assert said["final", "loss"] == said["checkpoint-4", "loss"]  # the same weights, the same verdict
    beats = any(said[label, "rouge-l"] == "better" for label in ("checkpoint-2", "checkpoint-4", "final"))
    assert ("no tuned model beats the base by rouge-l" in lines) is not beats
    best = next(line for line in lines if line.startswith(("best by rouge-l", "no best by rouge-l")))
    page = (job.run_dir / "report.html").read_text()
    assert "Against the base" in page and best.replace("'", "&#x27;") in page
    assert page.count('<tr class="verdict-') == 3 * len(cols)  # each tuned row, each measure with per-row values


def test_loss_and_perplexity_match_a_plain_torch_loop(evaluated, trained):
    results = evaluated["job"].results()
    rows = {r["label"]: r["metrics"] for r in results["rows"]}
    run_out = Path(runs.get(trained["run"], refresh_status=False).output_dir)
    for label, adapter in (("base", None), ("checkpoint-2", run_out / "checkpoints" / "checkpoint-2")):
        tok, model = _load(trained["model"], adapter)
        want = _plain_loss(model, tok)
        assert rows[label]["loss"] == pytest.approx(want, rel=1e-4), label
        assert rows[label]["perplexity"] == pytest.approx(math.exp(want), rel=1e-3), label
    assert rows["final"]["loss"] == pytest.approx(rows["checkpoint-4"]["loss"], rel=1e-5)  # the same weights


def test_generation_measures_match_lf_recipe_and_one_row_greedy(evaluated, trained):
    import torch

    job = evaluated["job"]
    results, preds = job.results(), job.predictions()
    refs = dict(fx.EVAL_ROWS)
    for r in results["rows"]:
        mine = [p for p in preds if p["model"] == r["label"]]
        assert len(mine) == len(fx.EVAL_ROWS)
        sims = [_lf_similarity(p["prediction"], p["reference"]) for p in mine]
        for col in ("bleu-4", "rouge-1", "rouge-2", "rouge-l"):
            assert r["metrics"][col] == pytest.approx(statistics.fmean(s[col] for s in sims), abs=1e-3), col
        exact = [100.0 * (p["prediction"].strip() == p["reference"].strip()) for p in mine]
        assert r["metrics"]["exact_match"] == pytest.approx(statistics.fmean(exact))
        letters = [p for p in mine if p["reference"] in ("A", "B")]
        assert len(letters) == 2
        acc = [100.0 * bool((m := re.match(r"[^A-Za-z0-9]*([A-Za-z0-9]+)", p["prediction"])) and
                            m.group(1).upper() == p["reference"]) for p in letters]  # fmt: skip
        assert r["metrics"]["accuracy"] == pytest.approx(statistics.fmean(acc))
        for p in mine:  # the prompt is the tokenizer's own chat template; the reference the row's answer
            assert p["reference"] == next(a for q, a in fx.EVAL_ROWS if q in p["prompt"])
    assert set(refs) == {q for q, _ in fx.EVAL_ROWS}
    # the batched, left-padded answers are the ones a plain one-row greedy generate gives
    run_out = Path(runs.get(trained["run"], refresh_status=False).output_dir)
    tok, model = _load(trained["model"], run_out / "adapter")
    final = [p for p in preds if p["model"] == "final"]
    for p in final:
        ids = tok(p["prompt"], add_special_tokens=False, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            out = model.generate(input_ids=ids, max_new_tokens=8, do_sample=False, eos_token_id=tok.eos_token_id,
                                 pad_token_id=tok.pad_token_id)  # fmt: skip
        assert tok.decode(out[0, ids.shape[1] :], skip_special_tokens=True) == p["prediction"]


def test_measures_on_chosen_rows_match_the_libraries():
    from engine.eval import measures

    pairs = [
        ("32 减 56 等于 -24。", "32 减 56 等于 -24。"),
        ("5 分钟等于 300 秒", "5 分钟等于 300 秒。"),
        ("The capital of Peru is Lima.", "Lima is the capital of Peru."),
        ("", "something"),
    ]
    for pred, label in pairs:
        got = measures.row_scores(pred, label, ["bleu", "rouge", "exact"])
        want = _lf_similarity(pred, label)
        assert {k: got[k] for k in want} == pytest.approx(want)
        assert got["exact_match"] == (100.0 if pred.strip() == label.strip() else 0.0)
    assert got["rouge-l"] == 0.0 and pairs[0][0] == pairs[0][1]
    assert measures.row_scores("B. It barks.", "B", ["accuracy"]) == {"accuracy": 100.0}
    assert measures.row_scores("Because", "B", ["accuracy"]) == {"accuracy": 0.0}
    assert measures.row_scores("anything", "a long answer", ["accuracy"]) == {}


def test_held_out_rows_are_the_rows_the_trainer_held_out(trained):
    from transformers import AutoTokenizer

    from engine.trainer.dataset import build_train_data
    from engine.trainer.evaluate import prepare_rows

    plan = evals.resolve({"models": {"run": trained["run"]}, "measures": ["loss"]})
    assert plan["data"]["held_out"]["val_size"] == 6
    tok = AutoTokenizer.from_pretrained(trained["model"])
    rows = prepare_rows(plan, tok)
    spec = runs.get(trained["run"], refresh_status=False).load_spec()
    spec.data.padding_free = "off"
    held = build_train_data(spec, tok, log=lambda _m: None).eval_dataset
    assert len(rows) == 6
    assert sorted(r["input_ids"] for r in rows) == sorted(list(x) for x in held["input_ids"])
    assert sorted(r["labels"] for r in rows) == sorted(list(x) for x in held["labels"])


def test_bad_input_is_refused_before_launch_naming_the_field(trained, demo_paths, tmp_path):
    before = len(runs.list_runs(refresh_status=False))

    def problems(spec) -> dict:
        with pytest.raises(EvalError) as err:
            evals.submit_eval(spec)
        return {field: str(msg) for field, msg in err.value.problems}

    rid, ddir = trained["run"], str(Path(demo_paths["data_dir"]))
    got = problems({"models": {"run": rid}, "data": {"source": "dataset", "datasets": ["demo_pretrain"],
                                                     "dataset_dir": ddir}, "measures": ["loss", "bleu"]})  # fmt: skip
    assert "no reference answers" in got["measures"] and "only loss applies" in got["measures"]
    assert "bleu" in got["measures"]
    assert "models.nonsense" in problems({"models": {"run": rid, "nonsense": 1}})
    assert "no run" in problems({"models": {"run": "nope"}})["models.run"]
    assert "checkpoint-7" in problems({"models": {"run": rid, "checkpoints": [7]}})["models.checkpoints"]
    assert "generation.batch_size" in problems({"models": {"run": rid}, "generation": {"batch_size": 0}})
    # an incomplete checkpoint folder: its weights cut short
    ckpts = Path(runs.get(rid, refresh_status=False).output_dir) / "checkpoints"
    broken = ckpts / "checkpoint-9"
    shutil.copytree(ckpts / "checkpoint-2", broken)
    try:
        w = broken / "adapter_model.safetensors"
        w.write_bytes(w.read_bytes()[:-100])
        msg = problems({"models": {"run": rid, "checkpoints": "all"}})["models.checkpoints"]
        assert "checkpoint-9" in msg and "cut short" in msg
    finally:
        shutil.rmtree(broken)
    assert len(runs.list_runs(refresh_status=False)) == before  # nothing was launched


def test_a_model_that_does_not_load_fails_clearly_and_keeps_the_finished_rows(trained, tmp_path):
    bad = tmp_path / "not-a-model"
    shutil.copytree(trained["model"], bad)
    (bad / "config.json").write_text(json.dumps({"model_type": "no-such-architecture"}))
    rid = evals.submit_eval(
        {
            "models": {"run": trained["run"], "base": True, "final": False, "paths": [str(bad)]},
            "data": {"source": "dataset", "datasets": ["eval_rows"], "dataset_dir": str(trained["data_dir"])},
            "measures": ["loss"],
        }
    )
    status = evals.EvalJob(rid).wait(timeout=300)
    assert status["state"] == "failed"
    assert "not-a-model: the model did not load" in str(status["error"])
    assert [r["label"] for r in status["results"]["rows"]] == ["base"]
    assert status["results"]["state"] == "failed"


def test_cancel_keeps_finished_models_and_a_restarted_reader_sees_it(trained, demo_paths):
    rid = evals.submit_eval(
        {
            "models": {"run": trained["run"], "base": True},
            "data": {"source": "dataset", "datasets": ["demo_alpaca"], "dataset_dir": demo_paths["data_dir"],
                     "limit": 30},
            "measures": ["exact"],
            "generation": {"max_new_tokens": 64, "batch_size": 1},
        }
    )  # fmt: skip
    job = evals.EvalJob(rid)

    def final_generating():
        return any(e["type"] == "eval_progress" and e["payload"]["label"] == "final" and e["payload"]["done"] >= 1
                   for e in job.poll()["events"])  # fmt: skip

    helpers.wait_for(final_generating, timeout=300)
    job.cancel(grace=30)
    status = helpers.wait_for(lambda: (s := job.poll())["state"] not in ("queued", "running") and s, timeout=60)
    assert status["state"] == "cancelled"
    again = evals.EvalJob(rid).poll()  # a new reader (a reloaded page, a restarted studio) rebuilt from the registry
    assert again["state"] == "cancelled"
    assert [r["label"] for r in again["results"]["rows"]] == ["base"]
    assert "cancelled after 1 of 2 models" in str(again["error"])
    assert not runs.get(rid).active


def test_a_rows_earlier_turns_and_system_are_kept_for_open_in_chat(demo_paths, tmp_path):
    """Each evaluated row keeps the user's question (the last user turn), the turns before it and the system prompt:
    the Evaluate tab shows the question, and *Open the row in Chat* puts the earlier turns in both panes."""
    from transformers import AutoTokenizer

    from engine.trainer.evaluate import prepare_rows

    talk = [
        {
            "system": "Be brief.",
            "conversations": [
                {"from": "human", "value": "My name is Ada."},
                {"from": "gpt", "value": "Hello Ada!"},
                {"from": "human", "value": "What is my name?"},
                {"from": "gpt", "value": "Ada"},
            ],
        }
    ]
    (tmp_path / "talk.json").write_text(json.dumps(talk), encoding="utf-8")
    entry = {"file_name": "talk.json", "formatting": "sharegpt", "columns": {"messages": "conversations",
                                                                            "system": "system"}}  # fmt: skip
    (tmp_path / "dataset_info.json").write_text(json.dumps({"talk": entry}), encoding="utf-8")
    data = {"dataset_dir": str(tmp_path), "datasets": ["talk"], "held_out": None, "max_samples": 0, "text": False,
            "template": "chatml", "train_on_prompt": False, "cutoff_len": 256, "mask_history": False,
            "enable_thinking": True, "tool_format": None, "limit": 0}  # fmt: skip
    (row,) = prepare_rows({"data": data}, AutoTokenizer.from_pretrained(demo_paths["model_dir"]))
    assert row["question"] == "What is my name?" and row["reference"] == "Ada" and row["system"] == "Be brief."
    assert row["history"] == [
        {"role": "user", "content": "My name is Ada."},
        {"role": "assistant", "content": "Hello Ada!"},
    ]
    assert "<|im_start|>" in row["prompt"] and "Hello Ada!" in row["prompt"]


def test_the_demo_as_the_form_starts_it_is_said_worse(demo_paths, tmp_path):
    """The tiny demo trained as the Train form starts it (30 steps) answers with whitespace only: its loss falls, yet
    `studio eval --base` must say the tuned model is worse by BLEU-4, that no tuned model beats the base, and count
    every answer degenerate (the issue's case: 'best by rouge-l: checkpoint-15' at a tie of zeros). The verdict is
    recomputed here from predictions.jsonl with the test's own bootstrap."""
    import contextlib
    import io

    import yaml

    with fx.EnvHome(tmp_path):
        data = yaml.safe_load(Path(demo_paths["example_spec"]).read_text())
        data["output"]["report_to"] = ["none"]
        rid = runs.submit(data, name="as-the-form")
        helpers.wait_for(lambda: runs.get(rid).status not in ("queued", "running"), timeout=600, every=0.5)
        assert runs.get(rid).status == "completed", runs.log_tail(rid)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = cli([rid, "--base", "--data", "demo_alpaca", "--limit", "60", "--measures", "bleu,rouge"])
        lines = out.getvalue().splitlines()
        assert rc == 0, out.getvalue()
        job = evals.EvalJob(next(r.id for r in runs.list_runs(refresh_status=False) if "eval" in r.tags))
        preds = job.predictions()
        base = {p["index"]: p for p in preds if p["model"] == "base"}
        final = {p["index"]: p for p in preds if p["model"] == "final"}
        assert sum(fx.degenerate(p["prediction"]) for p in final.values()) == len(final) == 60
        diffs = [final[i]["scores"]["bleu-4"] - base[i]["scores"]["bleu-4"] for i in sorted(final)]
        low, high = fx.bootstrap_interval(diffs)
        assert high < 0, (low, high, out.getvalue())  # worse, independently of Studio's code
        row = next(line.split() for line in lines if line.split()[:2] == ["final", "bleu-4"])
        assert row[-1] == "worse" and float(row[2]) == pytest.approx(statistics.fmean(diffs), abs=1e-3)
        assert "no tuned model beats the base by rouge-l" in lines
        assert "final: 60 of 60 answers are degenerate (empty, whitespace only or one token repeated)" in lines
