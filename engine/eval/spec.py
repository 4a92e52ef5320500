"""The evaluation spec: which models, which data, which measures, how to generate. Light: pydantic, yaml, stdlib.

One spec describes one evaluation run (``engine.jobs.evals`` submits it; ``engine.trainer.evaluate`` runs it):

- ``models``: a training run (``run``: id or folder) and from it the ``base`` it was trained on, its ``final``
  weights and ``checkpoints`` (``all`` or a list of steps); or a ``base_model`` with ``adapters`` (LLaMA-Factory's
  model_name_or_path / adapter_name_or_path); and ``paths``: merged exports or any local model folders.
- ``data``: the run's held-out rows (``held_out``: its val_size split or its eval_datasets, rebuilt exactly) or
  registered ``datasets``; ``limit`` keeps the first rows.
- ``measures``: loss (with perplexity) on the answers, masked as in training; bleu (BLEU-4), rouge (ROUGE-1/2/L),
  exact (exact match) and accuracy (rows with a one-word or one-letter answer) on generated answers; lm_eval:
  lm-evaluation-harness tasks (``lm_eval.tasks``: task names it knows, local task YAML files, or the bundled
  ``studio_demo_mc``), accuracy per task; judge: each answer scored by an OpenAI-compatible endpoint (``judge``: URL,
  model, the name of the environment variable holding the key, never the key; the prompt, editable).
- ``generation``: max_new_tokens, temperature (0: greedy), top_p, batch_size, seed.

Unknown fields are refused (``extra="forbid"``); ``parse_eval_spec`` returns every problem as (field, message).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine.eval.measures import ROW_MEASURE_COLUMNS
from engine.eval.messages import EvalError, message
from engine.spec.schema import read_yaml_file

Measure = Literal["loss", "bleu", "rouge", "exact", "accuracy", "lm_eval", "judge"]
MEASURES: tuple[str, ...] = get_args(Measure)
DEFAULT_MEASURES = ["loss", "bleu", "rouge", "exact"]
GENERATION_MEASURES = ("bleu", "rouge", "exact", "accuracy", "judge")
# measures read from the evaluation's rows (the rest: lm_eval, on its tasks' own data)
ROW_MEASURES = ("loss", *GENERATION_MEASURES)
# measure -> the table's columns
COLUMNS = {
    "loss": ["loss", "perplexity"],
    **{measure: list(columns) for measure, columns in ROW_MEASURE_COLUMNS.items()},
    "lm_eval": [],  # one column per task: TASK/acc (lm_eval_columns)
    "judge": ["judge", "judge_win"],
}
# each column's direction: lower is better for these; higher for every other (bleu-4, rouge-*, exact_match,
# accuracy, judge, judge_win, TASK/acc). The best row, the verdicts against the base and "got worse" read it here.
LOWER_BETTER = ("loss", "perplexity")
DEMO_TASK = "studio_demo_mc"  # bundled: engine/eval/tasks/studio_demo_mc.yaml (+ .jsonl)
DEFAULT_JUDGE_PROMPT = (
    "You are grading an answer to a question against a reference answer.\n\n"
    "Question:\n{question}\n\nReference answer:\n{reference}\n\nAnswer to grade:\n{answer}\n\n"
    "Rate how well the answer matches the reference in meaning and correctness on a scale of 1 to 10. "
    "Reply with the number only, as: Score: N"
)
DEFAULT_PAIRWISE_PROMPT = (
    "You are comparing two answers to a question against a reference answer.\n\n"
    "Question:\n{question}\n\nReference answer:\n{reference}\n\nAnswer A:\n{answer_a}\n\n"
    "Answer B:\n{answer_b}\n\nWhich answer matches the reference better in meaning and correctness? "
    "Reply with one word, as: Winner: A, Winner: B or Winner: tie"
)


class _Group(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ModelsSpec(_Group):
    run: str | None = Field(None, description="a training run's id or folder")
    base: bool = Field(False, description="evaluate the base model the run was trained on")
    final: bool = Field(True, description="evaluate the run's final weights")
    checkpoints: Literal["none", "all"] | list[int] = Field("none", description="checkpoint steps, or all / none")
    base_model: str | None = Field(None, description="a base model folder (without a run)")
    adapters: list[str] = Field(default_factory=list, description="PEFT adapter folders applied to base_model")
    paths: list[str] = Field(default_factory=list, description="merged exports or local model folders")


class DataSpec(_Group):
    source: Literal["held_out", "dataset"] = Field("held_out", description="the run's held-out rows, or datasets")
    datasets: list[str] = Field(default_factory=list, description="registered dataset names")
    dataset_dir: str | None = Field(None, description="the dataset registry folder (default: the run's)")
    limit: int | None = Field(None, ge=1, description="evaluate the first rows only")
    max_samples: int | None = Field(None, ge=1, description="rows per dataset (LLaMA-Factory's max_samples)")
    cutoff_len: int | None = Field(None, ge=8, description="tokens per row (default: the run's)")


class GenerationSpec(_Group):
    max_new_tokens: int = Field(64, ge=1, le=8192)
    temperature: float = Field(0.0, ge=0.0, le=5.0, description="0: greedy")
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    top_k: int = Field(0, ge=0, description="sample from the k likeliest tokens (0: all)")
    batch_size: int = Field(8, ge=1, le=1024)
    seed: int = Field(42)


class LmEvalSpec(_Group):
    tasks: list[str] = Field(
        default_factory=lambda: [DEMO_TASK], description="lm-eval task names, or local task YAML files"
    )
    num_fewshot: int | None = Field(None, ge=0, description="few-shot examples (default: the task's)")
    limit: int | None = Field(None, ge=1, description="documents per task")


class JudgeSpec(_Group):
    base_url: str | None = Field(None, description="an OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
    model: str | None = Field(None, description="the judge model's name at that endpoint")
    api_key_env: str | None = Field(
        None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", description="the environment variable holding the key"
    )
    mode: Literal["score", "pairwise"] = Field(
        "score",
        description="score: each answer rated 1-10 (judge: the mean, judge_win: rows scored above the base's); "
        "pairwise: each model's answer and the base's shown together, both orders, the judge names the better "
        "(judge_win: the share won, a tie or a split verdict counts half)",
    )
    prompt: str = Field(DEFAULT_JUDGE_PROMPT, description="the judge prompt: {question}, {reference}, {answer}")
    pairwise_prompt: str = Field(
        DEFAULT_PAIRWISE_PROMPT,
        description="the pairwise prompt: {question}, {reference}, {answer_a}, {answer_b}; replied Winner: A|B|tie",
    )
    max_tokens: int = Field(16, ge=1, le=4096)
    timeout: float = Field(60.0, gt=0, le=3600, description="seconds per request")


class EvalSpec(_Group):
    name: str | None = None
    models: ModelsSpec = Field(default_factory=ModelsSpec)
    data: DataSpec = Field(default_factory=DataSpec)
    measures: list[Measure] = Field(default_factory=lambda: list(DEFAULT_MEASURES))
    generation: GenerationSpec = Field(default_factory=GenerationSpec)
    lm_eval: LmEvalSpec = Field(default_factory=LmEvalSpec)
    judge: JudgeSpec = Field(default_factory=JudgeSpec)
    template: str | None = Field(None, description="chat template (default: the run's)")
    device: Literal["auto", "cpu", "cuda"] = "auto"
    lf_output_dir: str | None = Field(None, description="also write LLaMA-Factory's prediction files here")
    lf_prefix: Literal["predict", "eval"] = Field("predict", description="LLaMA-Factory's metric prefix")


def direction(column: str) -> int:
    """+1 when a higher value of ``column`` is better, -1 when a lower one is (loss, perplexity)."""
    return -1 if column in LOWER_BETTER else 1


def task_name(task: str) -> str:
    """A task's name as its column shows it: a YAML file's ``task`` (else its file stem), or the name given."""
    if task.endswith((".yaml", ".yml")):
        try:
            return str(yaml.safe_load(Path(task).expanduser().read_text(encoding="utf-8"))["task"])
        except Exception:  # noqa: BLE001 - an unreadable file is named by the check before launch
            return Path(task).stem
    return task


def lm_eval_columns(tasks: list[str]) -> list[str]:
    return [f"{task_name(t)}/acc" for t in tasks]


def columns(measures: list[str], tasks: list[str] = ()) -> list[str]:
    out = [c for m in MEASURES if m in measures for c in COLUMNS[m]]
    return out + (lm_eval_columns(list(tasks)) if "lm_eval" in measures else [])


def parse_eval_spec(data: Any) -> EvalSpec:
    """An EvalSpec from a dict, a YAML text or a YAML file; EvalError naming every bad field."""
    if isinstance(data, EvalSpec):
        return data
    if isinstance(data, Path) or (isinstance(data, str) and "\n" not in data and data.endswith((".yaml", ".yml"))):
        try:
            data = read_yaml_file(data)
        except (OSError, yaml.YAMLError) as exc:
            raise EvalError([("spec", message("eval.spec_unreadable", path=data, error=exc))]) from None
    if not isinstance(data, dict):
        raise EvalError([("spec", message("eval.field", error="expected a mapping of fields"))])
    try:
        spec = EvalSpec.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            path = ".".join(str(p) for p in err.get("loc", ())) or "spec"
            if err.get("type") == "extra_forbidden":
                problems.append((path, message("eval.unknown_field")))
            else:
                problems.append((path, message("eval.field", error=err.get("msg", ""))))
        raise EvalError(problems) from None
    if not spec.measures:
        raise EvalError([("measures", message("eval.no_measures"))])
    problems = []
    if "lm_eval" in spec.measures and not spec.lm_eval.tasks:
        problems.append(("lm_eval.tasks", message("eval.no_tasks")))
    if "judge" in spec.measures:
        for key in ("base_url", "model"):
            if not getattr(spec.judge, key):
                problems.append((f"judge.{key}", message("eval.judge_missing")))
        if spec.judge.base_url and not spec.judge.base_url.startswith(("http://", "https://")):
            problems.append(("judge.base_url", message("eval.judge_url", url=spec.judge.base_url)))
        try:
            spec.judge.prompt.format(question="", reference="", answer="")
        except (KeyError, IndexError, ValueError) as exc:
            problems.append(("judge.prompt", message("eval.judge_prompt", error=f"{type(exc).__name__}: {exc}")))
        if spec.judge.mode == "score" and "{answer}" not in spec.judge.prompt:
            problems.append(("judge.prompt", message("eval.judge_prompt", error="it has no {answer}")))
        if spec.judge.mode == "pairwise":
            problems += _pairwise_problems(spec)
    if problems:
        raise EvalError(problems)
    return spec


def _pairwise_problems(spec: EvalSpec) -> list[tuple[str, Any]]:
    """A pairwise judge compares with the base's answers: the base must be evaluated, and the prompt must show
    both answers."""
    problems: list[tuple[str, Any]] = []
    if not spec.models.base:
        problems.append(("models.base", message("eval.judge_pairwise_no_base")))
    fields = {"question": "", "reference": "", "answer_a": "", "answer_b": ""}
    try:
        spec.judge.pairwise_prompt.format(**fields)
    except (KeyError, IndexError, ValueError) as exc:
        error = f"{type(exc).__name__}: {exc}"
        problems.append(("judge.pairwise_prompt", message("eval.judge_pairwise_prompt", error=error)))
    missing = [f"{{{k}}}" for k in ("answer_a", "answer_b") if f"{{{k}}}" not in spec.judge.pairwise_prompt]
    if missing:
        error = "it has no " + " or ".join(missing)
        problems.append(("judge.pairwise_prompt", message("eval.judge_pairwise_prompt", error=error)))
    return problems


def dump_eval_spec(spec: EvalSpec) -> str:
    return yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False, allow_unicode=True)
