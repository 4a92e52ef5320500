"""engine/spec/hf_args.py, the light table of TrainingArguments fields, is the installed transformers' dataclass."""

from __future__ import annotations

import dataclasses
import enum
import types
import typing

import pytest

from engine.spec.hf_args import HF_TRAINING_ARGS, TRANSFORMERS_VERSION, type_problem


def _kinds(ann) -> tuple[str, tuple | None]:
    out, choices, optional = set(), None, False
    args = typing.get_args(ann) if typing.get_origin(ann) in (typing.Union, types.UnionType) else (ann,)
    for a in args:
        if a is type(None):
            optional = True
        elif isinstance(a, type) and issubclass(a, enum.Enum):
            out.add("str")
            choices = tuple(m.value for m in a)
        elif typing.get_origin(a) is typing.Literal:
            out |= {{bool: "bool", str: "str", int: "int"}[type(v)] for v in typing.get_args(a)}
        elif a in (bool, int, float, str):
            out.add(a.__name__)
        elif a is dict or typing.get_origin(a) is dict:
            out.add("dict")
        elif typing.get_origin(a) is list:
            out.add("list")
        else:
            out.add("object")
    return "|".join(sorted(out)) + ("|None" if optional else ""), choices


def live_table() -> dict[str, tuple]:
    """The table as generated from the installed transformers (what engine/spec/hf_args.py must hold)."""
    from transformers import TrainingArguments

    table = {}
    for f in dataclasses.fields(TrainingArguments):
        if not f.init:
            continue
        default = f.default
        if default is dataclasses.MISSING:
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else None
        if isinstance(default, enum.Enum):
            default = default.value
        kinds, choices = _kinds(f.type)
        table[f.name] = (kinds, default, choices) if choices else (kinds, default)
    return table


def test_the_table_is_the_installed_transformers():
    """The fields, their kinds, defaults and choices are the installed transformers' own. Not its version number: a
    release that leaves TrainingArguments as it was (5.25.0 after the table's 5.24.0) changes nothing the table says,
    and the set-up installs the newest transformers, so CI would fail on every such release."""
    import transformers

    live = live_table()
    rendered = "\n".join(f"    {k!r}: {v!r}," for k, v in live.items())
    assert HF_TRAINING_ARGS == live, (
        f"transformers {transformers.__version__}'s TrainingArguments differ from the table (generated from "
        f"{TRANSFORMERS_VERSION}): regenerate engine/spec/hf_args.py's table and its TRANSFORMERS_VERSION from:\n"
        f"{rendered}"
    )


@pytest.mark.parametrize(
    ("name", "value", "ok"),
    [
        ("ddp_timeout", 180000000, True),
        ("ddp_timeout", "long", False),
        ("ddp_timeout", True, False),  # a bool is not an int
        ("logging_steps", 10, True),  # an int is a float
        ("save_strategy", "epoch", True),
        ("save_strategy", "sometimes", False),
        ("include_num_input_tokens_seen", True, True),
        ("neftune_noise_alpha", None, True),
        ("lr_scheduler_kwargs", {"min_lr": 1e-6}, True),
        ("parallelism_config", {"dp": 2}, False),  # an object, not a YAML value
        ("per_gpu_train_batch_size", 2, False),  # removed in transformers 5
    ],
)
def test_type_problem(name, value, ok):
    assert (type_problem(name, value) is None) == ok, type_problem(name, value)
