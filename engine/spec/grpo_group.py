"""The spec's ``method.grpo`` group: GRPO (TRL's ``GRPOTrainer``) settings and its reward functions, with the rules
that need no torch.

Light: pydantic, ast and the stdlib only. A user's reward file is never imported here (it runs only in a confined
worker of the trainer subprocess, ``engine.trainer.reward_confine``): its function is found by reading the file's
syntax tree. The page names reward files only in the workspace's reward folder; the shell, anywhere
(``engine.core.page_trust``, ``engine.core.acting``). Field names follow
TRL's ``GRPOConfig`` (num_generations, max_completion_length, temperature, top_p, beta, loss_type, epsilon,
epsilon_high, num_iterations, scale_rewards); ``max_prompt_length`` is Studio's (TRL 1.16 has none): prompts are cut
to their last tokens before TRL sees them.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from engine.core import acting, page_trust, weights
from engine.core.messages import Message
from engine.spec.messages import message

# The think / answer format of DeepSeek-R1-style training, the regex reward's default pattern
FORMAT_PATTERN = r"<think>.*?</think>\s*<answer>.*?</answer>"
# The reward functions' kinds, the one list: the spec's field and the Train tab's picker read it
REWARD_KINDS = ("exact", "normalized", "math", "regex", "length", "json", "model", "python")
LOSS_TYPES = ("dapo", "grpo", "dr_grpo", "bnpo", "cispo", "sapo")


def _meta(label: str, *, advanced: bool = False, **extra: Any) -> dict:
    return {"label": label, "group": "grpo", "advanced": advanced, **extra}


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, protected_namespaces=())


class RewardSpec(_Spec):
    kind: Literal[REWARD_KINDS] = Field(
        ...,
        description="exact: the completion equals the answer column (spaces around trimmed); normalized: equal "
        "after lower-casing and dropping punctuation, articles and extra spaces; math: the same value as the answer "
        "(math-verify); regex: the completion matches the pattern (default: <think>...</think><answer>...</answer>); "
        "length: 0 up to the target length, less beyond it; json: the completion is JSON (valid against the schema "
        "when given); model: the score of a reward model (a Studio rm run); python: your own function in a .py file",
        json_schema_extra=_meta("Reward"),
    )
    weight: float = Field(
        1.0,
        ge=-100,
        le=100,
        description="Weight of this reward in the total (TRL's reward_weights)",
        json_schema_extra=_meta("Weight"),
    )
    name: str = Field(
        "",
        max_length=60,
        pattern=r"^[A-Za-z0-9_\-]*$",
        description="Name of its curve and column (empty: the kind, or the python function's name)",
        json_schema_extra=_meta("Name", advanced=True),
    )
    pattern: str = Field(
        FORMAT_PATTERN,
        description="regex: the pattern the whole completion must match (Python re, dot matches newlines)",
        json_schema_extra=_meta("Pattern"),
    )
    target_length: int = Field(
        256,
        ge=1,
        le=1_000_000,
        description="length: completions up to this many tokens score 0; beyond it, -(excess / target), at least -1",
        json_schema_extra=_meta("Target length"),
    )
    json_schema: dict[str, Any] | None = Field(
        None,
        description="json: a JSON Schema the completion must satisfy (empty: any valid JSON)",
        json_schema_extra=_meta("JSON schema"),
    )
    model: str = Field(
        "",
        description="model: the reward model: a Studio rm run's id or folder (its final adapter or model), or a "
        "folder of a sequence-classification model (a merged rm run); it scores the prompt and completion as the rm "
        "run was trained on them",
        json_schema_extra=_meta("Reward model"),
    )
    file: str = Field(
        "",
        description="python: the .py file holding the function (run in a confined process: no secrets in its "
        "environment, no network where the machine allows, limited CPU time and memory); from the page, a file in "
        "the workspace's rewards/ folder",
        json_schema_extra=_meta("Python file"),
    )
    function: str = Field(
        "",
        description="python: the function's name; TRL's signature f(prompts, completions, **kwargs) -> list[float]",
        json_schema_extra=_meta("Function"),
    )
    timeout_s: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="python: the most CPU seconds one call (and the file's import) may use before the run stops "
        "naming the function; a call that waits is stopped 5 s later",
        json_schema_extra=_meta("Time limit (s)", advanced=True),
    )

    @property
    def label(self) -> str:
        """The reward's name in TRL's logs (``rewards/<label>/mean``) and the dashboard."""
        if self.name:
            return self.name
        if self.kind == "python" and self.function:
            return self.function
        return "reward_model" if self.kind == "model" else self.kind


class GrpoSpec(_Spec):
    num_generations: int = Field(
        4,
        ge=2,
        le=1024,
        description="Completions sampled per prompt (the group; GRPO compares each with its group's mean). The "
        "generation batch (batch size x accumulation x processes) must be a multiple of it",
        json_schema_extra=_meta("Group size"),
    )
    max_prompt_length: int = Field(
        512,
        ge=1,
        le=1_048_576,
        description="Prompts longer than this many tokens keep their last tokens",
        json_schema_extra=_meta("Max prompt length"),
    )
    max_completion_length: int = Field(
        256,
        ge=1,
        le=1_048_576,
        description="Tokens generated per completion at most (longer ones are clipped and counted)",
        json_schema_extra=_meta("Max completion length"),
    )
    temperature: float = Field(
        1.0, gt=0, le=10, description="Sampling temperature", json_schema_extra=_meta("Temperature")
    )
    top_p: float = Field(
        1.0, gt=0, le=1, description="Nucleus sampling", json_schema_extra=_meta("Top p", advanced=True)
    )
    beta: float = Field(
        0.0,
        ge=0,
        le=10,
        description="KL coefficient: how strongly the policy is held to the reference model (0: no reference "
        "model is loaded, TRL's default; DeepSeek-R1 used 0.001)",
        json_schema_extra=_meta("KL coefficient (beta)"),
    )
    loss_type: Literal["dapo", "grpo", "dr_grpo", "bnpo", "cispo", "sapo"] = Field(
        "dapo",
        description="TRL's loss_type: dapo (tokens of the whole batch), grpo (per sequence), dr_grpo (a constant), "
        "bnpo (tokens of the local batch), cispo, sapo",
        json_schema_extra=_meta("Loss type"),
    )
    epsilon: float = Field(0.2, gt=0, le=10, description="Clipping epsilon", json_schema_extra=_meta("Clip epsilon"))
    epsilon_high: float | None = Field(
        None,
        gt=0,
        le=100,
        description="Upper clipping epsilon (empty: the same as epsilon; DAPO uses 0.28)",
        json_schema_extra=_meta("Upper clip epsilon", advanced=True),
    )
    num_iterations: int = Field(
        1,
        ge=1,
        le=64,
        description="Optimisation passes over each generated batch (TRL's mu)",
        json_schema_extra=_meta("Iterations per batch", advanced=True),
    )
    scale_rewards: Literal["group", "batch", "none"] = Field(
        "group",
        description="Divide advantages by the reward std of the group, of the batch, or not at all (Dr. GRPO)",
        json_schema_extra=_meta("Reward scaling", advanced=True),
    )
    generation_backend: Literal["transformers", "vllm"] = Field(
        "transformers",
        description="Who generates the completions: transformers' generate (CPU and GPU), or vLLM (a GPU and the "
        "vllm package)",
        json_schema_extra=_meta("Generation backend"),
    )
    rewards: list[RewardSpec] = Field(
        default_factory=list,
        description="Reward functions, one YAML mapping per line, e.g. {kind: math, weight: 1.0}; kind is exact, "
        "normalized, math, regex (pattern), length (target_length), json (json_schema), model (model: a Studio rm "
        "run's id or folder) or python (file, function); stage grpo needs at least one",
        json_schema_extra=_meta("Reward functions"),
    )
    log_completions: int = Field(
        4,
        ge=0,
        le=64,
        description="Sample completions (with their rewards) written to the run's events at each logged step",
        json_schema_extra=_meta("Sample completions per log", advanced=True),
    )


def vllm_installed() -> bool:
    return importlib.util.find_spec("vllm") is not None


def reward_file(path: str) -> Path:
    """A reward file as the trainer opens it: a relative path from the working folder, else the workspace."""
    p = Path(path).expanduser()
    if p.is_absolute() or p.exists():
        return p
    from engine.core import workspace

    return workspace.home() / p


def absolute_reward_files(spec: Any) -> list[Path]:
    """The spec's python reward files, each made absolute in the spec (as ``reward_file`` finds it from here)."""
    found = []
    for r in spec.method.grpo.rewards if spec.method.stage == "grpo" else []:
        if r.kind == "python" and r.file:
            r.file = str(reward_file(r.file).resolve())
            found.append(Path(r.file))
    return found


def reward_model_problem(given: str) -> Message | None:
    """Why ``given`` is not a reward model the trainer can load (read from files only), or None: it must be a run
    id or folder with its final weights saved, an adapter folder or a model folder, and those weights a sequence
    classifier (stage rm); an adapter's base model must be a local folder."""
    try:
        found = weights.find(given)
    except weights.WeightsNotFound as exc:
        return message(f"grpo_model_{exc.reason}", path=exc.path, error=exc.detail)
    if found.head != "seq_cls":
        return message("grpo_model_not_rm", path=found.folder)
    if found.kind == "adapter":
        base = found.base
        bpath = Path(base).expanduser()
        if not base or not (bpath / "config.json").is_file():
            return message("grpo_model_base_missing", path=found.folder, base=base or "?")
    return None


def grpo_errors(spec: Any) -> list[tuple[str, Message]]:
    """Cross-field rules of stage grpo (no files read): rewards given, the generation batch holds whole groups, the
    generation backend can run here."""
    m = spec.method
    g, out = m.grpo, []
    if m.stage != "grpo":
        return out
    if not g.rewards:
        out.append(("method.grpo.rewards", message("grpo_no_reward")))
    labels = [r.label for r in g.rewards]
    for i, r in enumerate(g.rewards):
        where = f"method.grpo.rewards.{i}"
        if r.kind == "python" and (not r.file or not r.function):
            out.append((where + (".file" if not r.file else ".function"), message("grpo_python_needs_file")))
        if r.kind == "model" and not r.model.strip():
            out.append((where + ".model", message("grpo_model_needs_path")))
        if labels.count(r.label) > 1:
            out.append((where + ".name", message("grpo_reward_name_twice", name=r.label)))
        if r.kind == "regex":
            try:
                re.compile(r.pattern)
            except re.error as exc:
                out.append((where + ".pattern", message("grpo_bad_pattern", error=exc)))
    t, world = spec.train, spec.launch.num_processes * spec.launch.num_machines
    batch = t.per_device_batch_size * t.gradient_accumulation * world
    if batch % g.num_generations:
        out.append(
            (
                "method.grpo.num_generations",
                message("grpo_batch_groups", batch=batch, n=g.num_generations),
            )
        )
    if g.generation_backend == "vllm":
        if spec.launch.device == "cpu":
            out.append(("method.grpo.generation_backend", message("grpo_vllm_cpu")))
        elif not vllm_installed():
            out.append(("method.grpo.generation_backend", message("grpo_vllm_missing")))
    return out


def grpo_context(spec: Any) -> list[tuple[str, Message]]:
    """Rules that read files: each python reward's file exists, is one the page may run (acting for the page: in the
    workspace's reward folder), and defines its function at the top level (read as a syntax tree, never run); vLLM
    needs a GPU on this machine."""
    if spec.method.stage != "grpo":
        return []
    out: list[tuple[str, Message]] = []
    for i, r in enumerate(spec.method.grpo.rewards):
        where = f"method.grpo.rewards.{i}"
        if r.kind == "model" and r.model.strip():
            problem = reward_model_problem(r.model.strip())
            if problem is not None:
                out.append((where + ".model", problem))
        if r.kind != "python" or not r.file or not r.function:
            continue
        path = reward_file(r.file)
        refused = None if acting.may_run_code(path) else page_trust.reward_problem(path)
        if refused is not None:
            out.append((where + ".file", refused))
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except OSError as exc:
            out.append((where + ".file", message("grpo_file_unreadable", path=path, reason=exc.strerror or exc)))
            continue
        except (SyntaxError, ValueError) as exc:
            out.append((where + ".file", message("grpo_file_syntax", path=path, error=exc)))
            continue
        names = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        if r.function not in names:
            found = ", ".join(names) or "none"
            out.append((where + ".function", message("grpo_no_function", path=path, name=r.function, found=found)))
    if spec.method.grpo.generation_backend == "vllm" and spec.launch.device != "cpu":
        from engine.machine.hardware import detect

        if not detect().gpus:
            out.append(("method.grpo.generation_backend", message("grpo_vllm_no_gpu")))
    return out
