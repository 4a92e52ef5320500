"""Stage grpo: prompts from the registry, TRL's ``GRPOConfig`` from the spec, TRL's ``GRPOTrainer`` with the spec's
reward functions (``engine.trainer.rewards``), and the sample completions written to the run's events.

Heavy: transformers; datasets and trl inside functions. Built by ``engine.trainer.trainers`` for
``method.stage: grpo``; the rest of a run (model loading with LoRA / QLoRA / full / freeze, callbacks, stop,
resume, saving) is the common path.

Prompts: each row's conversation up to its last user turn, rendered by the spec's template up to the assistant
header (``engine.data.templates.prompt_text``, as dpo prompts are), cut to its last ``max_prompt_length`` tokens.
A row that ends with an answer gives that answer as the ``answer`` column, which TRL hands to every reward function
as a keyword list; ``dataset`` and ``row`` (1-based) say where each prompt came from.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from transformers import TrainerCallback

from engine.core.events import append_event
from engine.data.dataset_registry import check_datasets, load_rows, sample_rows
from engine.data.rows import DataError
from engine.data.templates import prompt_text, template_warning, tokenizer_info

SAMPLE_CHARS = 2000  # of a prompt or completion in a completions event


def prompt_rows(spec, tokenizer, names: list[str], ddir: Path, stats: dict) -> list[dict]:
    """The named datasets as GRPO rows: prompt (rendered, cut), answer (or None), dataset, row."""
    from engine.data.dataset_registry import _resolve

    d, g = spec.data, spec.method.grpo
    info = tokenizer_info(tokenizer)
    tool_format = None if d.tool_format == "template" else d.tool_format
    out = []
    for name in names:
        entry, _ = _resolve(name, ddir)
        rows = load_rows(name, ddir, "grpo")
        numbered = list(enumerate(rows, 1))
        if entry is not None and entry.num_samples:
            numbered = sample_rows(numbered, entry.num_samples, spec.train.seed)
        for rowno, row in numbered[: d.max_samples or None]:
            messages = row["messages"]
            answer = None
            if messages and messages[-1]["role"] in ("assistant", "gpt"):
                answer, messages = messages[-1]["content"], messages[:-1]
            prompt = prompt_text(d.template, info, row.get("system", ""), messages, row.get("tools"), tool_format)
            ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
            if len(ids) > g.max_prompt_length:
                prompt = tokenizer.decode(ids[-g.max_prompt_length :])
                stats["truncated"] += 1
            out.append({"prompt": prompt, "answer": answer, "dataset": name, "row": rowno})
    return out


def build_data(spec, tokenizer, *, log: Callable[[str], None] = print):
    """The prompt dataset for TRL (``engine.trainer.dataset.TrainData``, no collator: TRL builds its batches)."""
    from datasets import Dataset

    from engine.data import hub
    from engine.data.dataset_registry import hub_pending
    from engine.spec.rules import resolve_dataset_dir
    from engine.trainer.dataset import TrainData, _problem

    d = spec.data
    ddir = resolve_dataset_dir(spec)
    for entry in hub_pending(d.datasets, ddir):
        log(f"data: downloading dataset '{entry.name}' ({entry.hub_id}) from the hub")
        hub.download(entry.hub_id, entry.revision, entry.folder)
    problems = check_datasets(d.datasets, ddir, "grpo")
    if problems:
        raise DataError(problems)
    warning = template_warning(d.template, tokenizer_info(tokenizer))
    if warning:
        log(f"warning: {warning}")
    stats = {"packed": False, "truncated": 0, "dropped": 0}
    rows = prompt_rows(spec, tokenizer, d.datasets, ddir, stats)
    if not rows:
        raise DataError([_problem(ddir, "no prompts in the training datasets")])
    answered = sum(1 for r in rows if r["answer"] is not None)
    stats |= {"num_train": len(rows), "num_eval": 0, "num_prompts": len(rows), "with_answer": answered}
    log(
        f"data: {len(rows)} prompts ({answered} with an answer), {stats['truncated']} cut to "
        f"{spec.method.grpo.max_prompt_length} tokens"
    )
    return TrainData(Dataset.from_list(rows), None, None, stats)


def grpo_config(spec, kwargs: dict):
    """TRL's GRPOConfig: the common Trainer arguments plus the spec's grpo group, named as TRL names them."""
    from trl import GRPOConfig

    g = spec.method.grpo
    kwargs = dict(kwargs)
    kwargs["include_num_input_tokens_seen"] = "no"  # GRPO counts its own tokens (num_tokens: the events' tokens/s)
    kwargs.pop("train_sampling_strategy", None)  # GRPO samples prompts in groups itself
    return GRPOConfig(
        num_generations=g.num_generations,
        max_completion_length=g.max_completion_length,
        temperature=g.temperature,
        top_p=g.top_p,
        beta=g.beta,
        loss_type=g.loss_type,
        epsilon=g.epsilon,
        epsilon_high=g.epsilon_high,
        num_iterations=g.num_iterations,
        scale_rewards=g.scale_rewards,
        reward_weights=[r.weight for r in g.rewards],
        use_vllm=g.generation_backend == "vllm",
        vllm_mode="colocate",
        log_completions=False,  # Studio writes its own sample events (no rich printing, no parquet files)
        **kwargs,
    )


def make_trainer(spec, model, tokenizer, data, targs, callbacks):
    """TRL's GRPOTrainer on the already loaded (and adapted) model, with the spec's rewards and the completions
    callback."""
    from trl import GRPOTrainer

    from engine.trainer.rewards import build_rewards

    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    from engine.trainer.callbacks import EventsCallback

    samples = CompletionsCallback(spec)
    samples.events = next((c.path for c in callbacks if isinstance(c, EventsCallback)), None)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=build_rewards(spec.method.grpo.rewards, template=spec.data.template),
        args=targs,
        train_dataset=data.train_dataset,
        processing_class=tokenizer,
        callbacks=[*callbacks, samples],
    )
    samples.trainer = trainer
    return trainer


class CompletionsCallback(TrainerCallback):
    """At each logged step, the newest sample completions with each reward and their weighted total, as a
    ``completions`` event (rank 0). Reads TRL's own record of the last generation batch (``GRPOTrainer._logs``)."""

    def __init__(self, spec) -> None:
        self.events = None
        self.n = spec.method.grpo.log_completions
        self.weights = {r.label: r.weight for r in spec.method.grpo.rewards}
        self.trainer = None
        self.last_step = -1

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or self.trainer is None or self.events is None or not self.n:
            return
        if "loss" not in (logs or {}) or state.global_step == self.last_step:
            return
        self.last_step = state.global_step
        samples = sample_completions(self.trainer, self.n, self.weights)
        append_event(self.events, "completions", state.global_step, samples=samples)


def sample_completions(trainer, n: int, weights: dict[str, float]) -> list[dict]:
    """The last ``n`` (prompt, completion) pairs TRL kept, with each reward (None: not scored) and the total."""
    import math

    from engine.trainer.rewards import completion_text

    logs = trainer._logs
    prompts, completions = list(logs["prompt"]), list(logs["completion"])
    rewards = {name: list(values) for name, values in logs["rewards"].items()}
    advantages = list(logs["advantages"])
    out = []
    for i in range(max(0, len(prompts) - n), len(prompts)):
        per = {}
        for name, values in rewards.items():
            v = values[i] if i < len(values) else None
            per[name] = None if v is None or (isinstance(v, float) and math.isnan(v)) else round(float(v), 6)
        scored = [(weights.get(k, 1.0), v) for k, v in per.items() if v is not None]
        out.append(
            {
                "prompt": completion_text(prompts[i])[-SAMPLE_CHARS:],
                "completion": completion_text(completions[i])[:SAMPLE_CHARS],
                "rewards": per,
                "total": round(sum(w * v for w, v in scored), 6) if scored else None,
                "advantage": round(float(advantages[i]), 6) if i < len(advantages) else None,
            }
        )
    return out
