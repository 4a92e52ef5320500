"""GRPO's reward functions: the built-ins and a user's own Python function, each wrapped so that TRL's
``GRPOTrainer`` (and the dry run, ``engine.trainer.reward_dry_run``) calls it with TRL's reward signature
``f(prompts, completions, **kwargs) -> list[float | None]`` and a bad answer stops with a message that names the
function, the row and the value.

Runs only in a trainer subprocess. A user's file is never imported here: it runs in a confined worker of its own
(``engine.trainer.reward_confine``: no secrets, CPU-time and memory limits, no network where the machine allows),
started once and fed each batch. Imports
math-verify and jsonschema where used. Extra dataset columns reach every function as keyword lists, as TRL passes
them: ``answer`` (the row's reference answer, None when it has none), ``dataset`` and ``row`` (where the prompt came
from, 1-based), and TRL's ``completion_ids``.

Built-ins (scores hand-checked in tests/engine/test_rewards.py):
- exact: 1.0 when the completion, trimmed, equals the answer, trimmed; else 0.0.
- normalized: the same after lower-casing, dropping punctuation, the articles a / an / the and extra spaces.
- math: 1.0 when math-verify finds the completion's answer equal to the reference (``verify(parse(answer),
  parse(completion))``); else 0.0.
- regex: 1.0 when the whole completion (trimmed) matches the pattern (dot matches newlines); else 0.0.
- length: 0.0 up to ``target_length`` completion tokens; beyond it -(tokens - target) / target, at least -1.0.
- json: 1.0 when the completion (trimmed; a ```json fence allowed) is JSON, and valid against the schema when one
  is given; else 0.0.
- model: the score of a reward model trained by a Studio rm run (its final adapter on its base, or a merged
  sequence-classification folder). Each completion is scored as the rm run was trained: the prompt, then the
  completion rendered as an answer of the rm run's template (its end-of-turn marker), then the end-of-sequence token
  TRL's RewardTrainer adds, tokenized with the tokenizer's own special tokens; the score is the logit at the last
  non-pad token (``RewardModel``; checked against the model's own forward in tests/engine/test_reward_model.py).
Rows without an answer get None from exact / normalized / math (TRL leaves them out of that reward's mean).
"""

from __future__ import annotations

import json
import math
import re
import string
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


class RewardError(RuntimeError):
    """A reward function that raised, ran out of time or returned something other than one number per row."""


def completion_text(completion: Any) -> str:
    """A completion as text: TRL passes strings for text prompts, a list of messages for conversational ones."""
    if isinstance(completion, list):
        return "".join(str(m.get("content", "")) for m in completion if isinstance(m, dict))
    return str(completion)


_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD's answer normalisation: lower case, no punctuation, no articles, single spaces."""
    text = _ARTICLES.sub(" ", str(text).lower().translate(_PUNCT))
    return " ".join(text.split())


def _answers(kwargs: dict, n: int) -> list[Any]:
    answer = kwargs.get("answer")
    return list(answer) if answer is not None else [None] * n


def exact(prompts, completions, **kwargs) -> list[float | None]:
    answers = _answers(kwargs, len(completions))
    return [
        None if a is None else float(completion_text(c).strip() == str(a).strip())
        for c, a in zip(completions, answers)
    ]


def normalized(prompts, completions, **kwargs) -> list[float | None]:
    answers = _answers(kwargs, len(completions))
    return [
        None if a is None else float(normalize_answer(completion_text(c)) == normalize_answer(a))
        for c, a in zip(completions, answers)
    ]


def math_answer(prompts, completions, **kwargs) -> list[float | None]:
    from math_verify import parse, verify

    out: list[float | None] = []
    for c, a in zip(completions, _answers(kwargs, len(completions))):
        if a is None:
            out.append(None)
            continue
        gold = parse(str(a))
        if not gold:  # a reference math-verify cannot read: no score rather than a wrong one
            out.append(None)
            continue
        out.append(float(bool(verify(gold, parse(completion_text(c))))))
    return out


def make_regex(pattern: str) -> Callable:
    compiled = re.compile(pattern, re.DOTALL)

    def regex(prompts, completions, **kwargs) -> list[float]:
        return [float(compiled.fullmatch(completion_text(c).strip()) is not None) for c in completions]

    return regex


def make_length(target: int) -> Callable:
    def length(prompts, completions, completion_ids=None, **kwargs) -> list[float]:
        out = []
        for i, c in enumerate(completions):
            n = len(completion_ids[i]) if completion_ids is not None else len(completion_text(c).split())
            out.append(-min(1.0, max(0, n - target) / target))
        return out

    return length


_FENCE = re.compile(r"^```(?:json)?\s*\n?(.*?)\n?```$", re.DOTALL)


def make_json(schema: dict | None) -> Callable:
    validator = None
    if schema is not None:
        import jsonschema

        validator = jsonschema.validators.validator_for(schema)(schema)

    def json_valid(prompts, completions, **kwargs) -> list[float]:
        out = []
        for c in completions:
            text = completion_text(c).strip()
            fenced = _FENCE.match(text)
            try:
                value = json.loads(fenced.group(1) if fenced else text)
            except ValueError:
                out.append(0.0)
                continue
            out.append(float(validator is None or validator.is_valid(value)))
        return out

    return json_valid


class Reward:
    """One reward function as TRL calls it: named (``__name__`` is its label in TRL's logs), every value checked. An
    exception is retried row by row to name the row that raises."""

    def __init__(self, label: str, func: Callable) -> None:
        self.__name__ = label
        self.func = func

    def __call__(self, prompts, completions, **kwargs) -> list[float | None]:
        values = self._values(prompts, completions, kwargs)
        if not isinstance(values, (list, tuple)) or len(values) != len(completions):
            got = f"{len(values)} values" if isinstance(values, (list, tuple)) else _type_name(values)
            raise RewardError(
                f"reward '{self.__name__}' returned {got} for {len(completions)} completions: return a list with "
                "one number (or None) per completion"
            )
        out: list[float | None] = []
        for i, v in enumerate(values):
            if v is None:
                out.append(None)
                continue
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            if not ok:
                raise RewardError(
                    f"reward '{self.__name__}' returned {v!r} ({_type_name(v)}) for {self._where(kwargs, i)}: "
                    "each value must be a finite number or None"
                )
            out.append(float(v))
        return out

    def _values(self, prompts, completions, kwargs) -> Any:
        try:
            return self.func(prompts=prompts, completions=completions, **kwargs)
        except RewardError:
            raise
        except Exception as exc:  # noqa: BLE001 - name the row that raises
            for i in range(len(completions)):
                try:
                    self.func(prompts=[prompts[i]], completions=[completions[i]], **_row(kwargs, i, len(completions)))
                except Exception as row_exc:  # noqa: BLE001
                    raise RewardError(self._raised(type(row_exc).__name__, row_exc, completions, kwargs, i)) from exc
            raise RewardError(self._raised(type(exc).__name__, exc, completions, kwargs, None)) from exc

    def _raised(self, kind: str, text: Any, completions: list, kwargs: dict, i: int | None) -> str:
        if i is None:
            return f"reward '{self.__name__}' raised {kind}: {text} on a batch of {len(completions)} rows"
        return (
            f"reward '{self.__name__}' raised {kind}: {text} on {self._where(kwargs, i)}"
            f" (completion {completion_text(completions[i])[:80]!r})"
        )

    @staticmethod
    def _where(kwargs: dict, i: int) -> str:
        rows, names = kwargs.get("row"), kwargs.get("dataset")
        if rows is not None and i < len(rows):
            name = names[i] if names is not None and i < len(names) else "?"
            return f"dataset '{name}' row {rows[i]}"
        return f"completion {i + 1} of the batch"


def _row(kwargs: dict, i: int, n: int) -> dict:
    return {k: ([v[i]] if isinstance(v, (list, tuple)) and len(v) == n else v) for k, v in kwargs.items()}


class _Returned:
    """A value a confined function returned that is not a number, as it was (its repr and type's name)."""

    def __init__(self, text: str, type_name: str) -> None:
        self.text, self.type_name = text, type_name

    def __repr__(self) -> str:
        return self.text


def _type_name(value: Any) -> str:
    return value.type_name if isinstance(value, _Returned) else type(value).__name__


class ConfinedReward(Reward):
    """A user's python function, run by its confined worker (``engine.trainer.reward_confine``): the same checks and
    messages as an in-process one; a limit that stops it names the function."""

    def __init__(self, label: str, path: str | Path, function: str, timeout_s: float) -> None:
        from engine.trainer.reward_confine import Worker, WorkerError

        try:
            worker = Worker(path, function, timeout_s)
        except WorkerError as exc:
            raise RewardError(f"reward '{label}': {exc}") from None
        super().__init__(label, worker)
        self.note = worker.note

    def _values(self, prompts, completions, kwargs) -> Any:
        from engine.trainer.reward_confine import WorkerError

        try:
            got = self.func(list(prompts), list(completions), kwargs)
        except WorkerError as exc:
            raise RewardError(f"reward '{self.__name__}' {exc}") from None
        if "raised" in got:
            raise RewardError(self._raised(got["raised"], got["text"], completions, kwargs, got.get("row")))
        if "not_list" in got:
            return _Returned("", got["not_list"])
        return [_Returned(v["__repr__"], v["__type__"]) if isinstance(v, dict) else v for v in got["values"]]

    def close(self) -> None:
        self.func.close()


class RewardModel:
    """A reward model (stage rm) as a reward function of TRL's signature; see the module's docstring for how a
    completion is scored. ``template``: the chat template the scores are rendered with when the rm run's spec does
    not name one (the GRPO run's). Scores ``batch_size`` completions per forward, in ``device``."""

    def __init__(self, given: str, template: str, device: str = "cpu", batch_size: int = 8) -> None:
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        from engine.core import weights
        from engine.data.templates import tokenizer_info

        try:
            found = weights.find(given)
        except weights.WeightsNotFound as exc:
            raise RewardError(f"no reward model at '{given}' ({exc.reason}: {exc.path})") from None
        if found.head != "seq_cls":
            raise RewardError(f"{found.folder} is not a reward model (a stage rm run's sequence classifier)")
        dtype = torch.float32
        if device.startswith("cuda") and torch.cuda.is_bf16_supported():
            dtype = torch.bfloat16
        tok_dir = found.folder
        if found.kind == "adapter":
            from peft import PeftModel

            base = found.base
            model = AutoModelForSequenceClassification.from_pretrained(base, num_labels=1, dtype=dtype)
            model = PeftModel.from_pretrained(model, str(found.folder))
            if not (found.folder / "tokenizer_config.json").is_file():
                tok_dir = Path(base)
        else:
            model = AutoModelForSequenceClassification.from_pretrained(str(found.folder), dtype=dtype)
        self.tokenizer = AutoTokenizer.from_pretrained(str(tok_dir))
        if self.tokenizer.pad_token is None:  # as TRL's RewardTrainer pads: the tokenizer's pad, else its eos
            self.tokenizer.pad_token = self.tokenizer.eos_token
        model.config.pad_token_id = self.tokenizer.pad_token_id
        if hasattr(model, "get_base_model"):
            model.get_base_model().config.pad_token_id = self.tokenizer.pad_token_id
        self.model = model.to(device).eval()
        self.device, self.batch_size, self.folder = device, batch_size, found.folder
        self.template = str(((found.spec or {}).get("data") or {}).get("template") or template)
        self.info = tokenizer_info(self.tokenizer)

    def text(self, prompt: Any, completion: Any) -> str:
        """The text the reward model scores: prompt + the completion as an answer of the template + eos."""
        from engine.data.templates import assistant_text

        answer = assistant_text(self.template, self.info, completion_text(completion))
        eos = self.tokenizer.eos_token or ""
        if eos and not answer.endswith(eos):
            answer += eos
        return (prompt if isinstance(prompt, str) else completion_text(prompt)) + answer

    def __call__(self, prompts, completions, **kwargs) -> list[float]:
        import torch

        texts = [self.text(p, c) for p, c in zip(prompts, completions)]
        scores: list[float] = []
        for i in range(0, len(texts), self.batch_size):
            inputs = self.tokenizer(texts[i : i + self.batch_size], return_tensors="pt", padding=True)
            with torch.inference_mode():
                logits = self.model(**inputs.to(self.device)).logits
            scores += [float(v) for v in logits[:, 0].float().cpu()]
        return scores


def reward_device() -> str:
    """Where a reward model scores: this process's GPU when the run trains on one, else the CPU."""
    import os

    import torch

    if os.environ.get("STUDIO_DEVICE", "auto") != "cpu" and torch.cuda.is_available():
        return f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}"
    return "cpu"


def build_rewards(specs: list, *, template: str = "default") -> list[Reward]:
    """The spec's ``method.grpo.rewards`` as callables for TRL, in order. ``template``: the run's chat template (a
    reward model renders completions with it when its rm run names none)."""
    from engine.spec.grpo_group import reward_file

    out: list[Reward] = []
    for r in specs:
        if r.kind == "python":
            out.append(ConfinedReward(r.label, reward_file(r.file), r.function, r.timeout_s))
            if out[-1].note:
                print(f"reward '{r.label}': {out[-1].note}", file=sys.stderr, flush=True)  # into the run's log
            continue
        if r.kind == "exact":
            func = exact
        elif r.kind == "normalized":
            func = normalized
        elif r.kind == "math":
            func = math_answer
        elif r.kind == "regex":
            func = make_regex(r.pattern)
        elif r.kind == "length":
            func = make_length(r.target_length)
        elif r.kind == "json":
            func = make_json(r.json_schema)
        else:
            func = RewardModel(r.model.strip(), template, reward_device())
        out.append(Reward(r.label, func))
    return out
