"""The catalog of evaluation messages (``engine.eval``, ``engine.jobs.evals``, ``engine.trainer.evaluate``): a stable
key and an English template, made into ``engine.core.messages.Message`` by ``message``; the CLI and the tests read the
English, the Evaluate tab shows them in its language (``studio.i18n.eval``). Light: stdlib only."""

from __future__ import annotations

from typing import Any

from engine.core.messages import Message, make

MESSAGES: dict[str, str] = {
    # the spec, before launch
    "eval.spec_unreadable": "cannot read {path}: {error}",
    "eval.field": "{error}",
    "eval.unknown_field": "unknown field (not part of an evaluation spec)",
    "eval.no_run": "no run {run} (see `studio runs list`)",
    "eval.not_training_run": "run {run} is not a training run: give a training run's id",
    "eval.run_spec_bad": "run {run}: its spec.yaml cannot be read: {error}",
    "eval.no_models": "nothing to evaluate: ask for the base, the final weights, checkpoints or a model folder",
    "eval.no_base": "no base model: give models.run or models.base_model",
    "eval.no_checkpoints": "run {run} has no checkpoints in {path} (train.save_steps saves them)",
    "eval.no_checkpoint": "run {run} has no checkpoint-{step} (it has: {have})",
    "eval.checkpoint_incomplete": "{path} is incomplete: {why}",
    "eval.no_final": "run {run} has no final weights yet ({path} is missing; the run is {status})",
    "eval.not_model_folder": "{path} is not a model folder (no config.json)",
    "eval.not_adapter_folder": "{path} is not a PEFT adapter folder (no adapter_config.json)",
    "eval.full_run": "run {run} trained the full model: its checkpoints are model folders",
    "eval.no_held_out": "run {run} kept no held-out rows (its data.val_size is 0 and it has no data.eval_datasets): "
    "choose a dataset",
    "eval.interleaved": "run {run} mixes its datasets by {mix}: its held-out rows cannot be rebuilt; choose a dataset",
    "eval.no_dataset": "give a dataset when data.source is dataset",
    "eval.data_problem": "{problem}",
    "eval.no_references": "dataset {name} has no reference answers (text only): only loss applies; "
    "{measures} cannot be computed: leave them out",
    "eval.no_measures": "choose at least one measure",
    "eval.no_cuda": "launch.device is cuda but this machine has no GPU",
    "eval.not_eval": "run {id} is not an evaluation",
    "eval.lf_refused": "{key}: {why}",
    "eval.lf_no_dataset": "eval_dataset (or dataset) names no dataset to predict on",
    "eval.lf_no_model": "model_name_or_path is missing",
    # the evaluation subprocess
    "eval.progress_loss": "{label}: loss, row {done} of {total}",
    "eval.progress_generate": "{label}: answers, row {done} of {total}",
    "eval.progress_load": "{label}: loading the model",
    "eval.load_failed": "{label}: the model did not load: {error}",
    "eval.data_failed": "the evaluation data could not be prepared: {error}",
    "eval.failed": "{label}: {error}",
    "eval.cancelled": "cancelled after {done} of {total} models (their results are kept)",
    "eval.finished": "evaluated {n} models on {rows} rows",
    "eval.no_tasks": "name at least one lm-eval task (or studio_demo_mc, the bundled demo task)",
    "eval.task_unreadable": "cannot read the lm-eval task {path}: {error}",
    "eval.task_data_missing": "the lm-eval task {path} reads {file}, which is not there",
    "eval.task_failed": "lm-eval task {task} could not be loaded: {error}",
    "eval.task_offline": "lm-eval task {task} needs its data from the hub, which this machine cannot reach "
    "(offline) and it is not in the cache: {error}",
    "eval.progress_lm_eval": "{label}: lm-eval task {task}",
    "eval.progress_judge": "{label}: judge, row {done} of {total}",
    "eval.judge_missing": "the judge needs this (an OpenAI-compatible endpoint and a model)",
    "eval.judge_url": "{url} is not an http(s) URL",
    "eval.judge_prompt": "the judge prompt cannot be filled ({{question}}, {{reference}}, {{answer}}): {error}",
    "eval.judge_key_unset": "the environment variable {name} (the judge's key) is not set in the studio's environment",
    "eval.judge_unreachable": "row {row}: the judge at {url} cannot be reached: {error}",
    "eval.judge_http": "row {row}: the judge answered HTTP {code}: {error}",
    "eval.judge_bad_reply": "row {row}: the judge's reply has no score from 1 to 10: {reply}",
    "eval.judge_bad_verdict": "row {row}: the judge's reply names no winner (Winner: A, B or tie): {reply}",
    "eval.judge_pairwise_no_base": "a pairwise judge compares each model's answers with the base's: evaluate the "
    "base too",
    "eval.judge_pairwise_prompt": "the pairwise prompt cannot be filled ({{question}}, {{reference}}, {{answer_a}}, "
    "{{answer_b}}): {error}",
    "eval.no_short_rows": "no row has a short answer (one word or letter): accuracy does not apply",
    # the verdict against the base (engine.eval.verdict)
    "eval.verdict_better": "better",
    "eval.verdict_worse": "worse",
    "eval.verdict_same": "no clear difference",
    "eval.verdict_title": "Against the base: the difference of means (tuned - base) with a paired bootstrap 95% "
    "interval over the rows ({resamples} resamples); better or worse only when the interval excludes 0",
    "eval.versus_better": "better than the base by {measure}: {diff} (95% interval {low} to {high}, {rows} rows)",
    "eval.versus_worse": "worse than the base by {measure}: {diff} (95% interval {low} to {high}, {rows} rows)",
    "eval.versus_same": "no clear difference from the base by {measure}: {diff} (95% interval {low} to {high}, "
    "{rows} rows)",
    "eval.versus_none": "not compared with the base ({measure} has no per-row values)",
    "eval.versus_no_base": "not compared with the base (the base was not evaluated)",
    "eval.best": "best by {column}: {label}, {versus}",
    "eval.tie_no_best": "no best by {column}: {labels} tie at {value}, no better than the base's {base}",
    "eval.none_beats_base": "no tuned model beats the base by {column}",
    "eval.degenerate": "{label}: {count} of {total} answers are degenerate (empty, whitespace only or one token "
    "repeated)",
    "eval.merge_ask": "{label} does not beat the base by {column} ({versus}): merge it anyway?",
}


def message(key: str, /, **params: Any) -> Message:
    return make(MESSAGES, key, **params)


class EvalError(Exception):
    """An evaluation that cannot start. ``problems``: (field, Message) pairs, every one found."""

    def __init__(self, problems: list[tuple[str, Any]]):
        self.problems = problems
        super().__init__("invalid evaluation:\n" + "\n".join(f"  {f}: {m}" for f, m in problems))
