"""The evaluation spec: which models, which data, which measures, how to generate. Light: pydantic, yaml, stdlib.

One spec describes one evaluation run (``engine.runs.evals`` submits it; ``engine.trainer.evaluate`` runs it):

- ``models``: a training run (``run``: id or folder) and from it the ``base`` it was trained on, its ``final``
  weights and ``checkpoints`` (``all`` or a list of steps); or a ``base_model`` with ``adapters`` (LLaMA-Factory's
  model_name_or_path / adapter_name_or_path); and ``paths``: merged exports or any local model folders.
- ``data``: the run's held-out rows (``held_out``: its val_size split or its eval_datasets, rebuilt exactly) or
  registered ``datasets``; ``limit`` keeps the first rows.
- ``measures``: loss (with perplexity) on the answers, masked as in training; bleu (BLEU-4), rouge (ROUGE-1/2/L),
  exact (exact match) and accuracy (rows with a one-word or one-letter answer) on generated answers.
- ``generation``: max_new_tokens, temperature (0: greedy), top_p, batch_size, seed.

Unknown fields are refused (``extra="forbid"``); ``parse_eval_spec`` returns every problem as (field, message).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine.eval.messages import EvalError, message

MEASURES = ("loss", "bleu", "rouge", "exact", "accuracy")
GENERATION_MEASURES = ("bleu", "rouge", "exact", "accuracy")
# measure -> the table's columns
COLUMNS = {
    "loss": ["loss", "perplexity"],
    "bleu": ["bleu-4"],
    "rouge": ["rouge-1", "rouge-2", "rouge-l"],
    "exact": ["exact_match"],
    "accuracy": ["accuracy"],
}
# columns where lower is better (the rest: higher)
LOWER_BETTER = ("loss", "perplexity")


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


class EvalSpec(_Group):
    name: str | None = None
    models: ModelsSpec = Field(default_factory=ModelsSpec)
    data: DataSpec = Field(default_factory=DataSpec)
    measures: list[Literal["loss", "bleu", "rouge", "exact", "accuracy"]] = Field(
        default_factory=lambda: ["loss", "bleu", "rouge", "exact"]
    )
    generation: GenerationSpec = Field(default_factory=GenerationSpec)
    template: str | None = Field(None, description="chat template (default: the run's)")
    device: Literal["auto", "cpu", "cuda"] = "auto"
    lf_output_dir: str | None = Field(None, description="also write LLaMA-Factory's prediction files here")
    lf_prefix: Literal["predict", "eval"] = Field("predict", description="LLaMA-Factory's metric prefix")


def columns(measures: list[str]) -> list[str]:
    return [c for m in MEASURES if m in measures for c in COLUMNS[m]]


def parse_eval_spec(data: Any) -> EvalSpec:
    """An EvalSpec from a dict, a YAML text or a YAML file; EvalError naming every bad field."""
    if isinstance(data, EvalSpec):
        return data
    if isinstance(data, Path) or (isinstance(data, str) and "\n" not in data and data.endswith((".yaml", ".yml"))):
        try:
            data = yaml.safe_load(Path(data).read_text(encoding="utf-8"))
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
    return spec


def dump_eval_spec(spec: EvalSpec) -> str:
    return yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False, allow_unicode=True)
