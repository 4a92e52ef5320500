"""Property test: arbitrary values at every field give a valid spec or a SpecError naming real field paths.

Never any other exception, from parse_spec or from validate_spec (which also runs the file-reading context rules).
~300 examples by default; STUDIO_SOAK=1 runs 10,000 (the reliability soak); STUDIO_FUZZ_EXAMPLES=N sets N.
"""

from __future__ import annotations

import os
import types
import typing
from typing import Any, Literal, Union

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from engine.spec.schema import RunSpec, SpecError, dump_spec, parse_spec, validate_spec

EXAMPLES = int(os.environ.get("STUDIO_FUZZ_EXAMPLES") or (10_000 if os.environ.get("STUDIO_SOAK") == "1" else 300))


def _paths(model: type[BaseModel], prefix: str = "") -> dict[str, Any]:
    """Every field path of the schema (groups and leaves) -> its annotation."""
    out: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        out[prefix + name] = field.annotation
        inner = _model_of(field.annotation)
        if inner is not None:
            out.update(_paths(inner, f"{prefix}{name}."))
    return out


def _model_of(ann: Any) -> type[BaseModel] | None:
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return ann
    for arg in typing.get_args(ann):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
    return None


PATHS = _paths(RunSpec)
LEAVES = sorted(p for p, ann in PATHS.items() if _model_of(ann) is None)
GROUPS = sorted(p for p, ann in PATHS.items() if _model_of(ann) is not None)

_junk_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.sampled_from(["", " ", "all", "none", "cpu", "nvme", "~nouser/x", "/", "a\x00b", "1e309", "0x10", "真"]),
)
_junk = st.recursive(
    _junk_scalar,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=8,
)


def _plausible(ann: Any) -> st.SearchStrategy:
    """Values of roughly the right type, so the search also reaches the cross-field rules."""
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin is Literal:
        return st.sampled_from(args)
    if origin in (Union, types.UnionType):
        return st.one_of(*[_plausible(a) for a in args])
    if origin is list:
        return st.lists(_plausible(args[0]), max_size=4)
    if ann is type(None):
        return st.none()
    if ann is bool:
        return st.booleans()
    if ann is int:
        return st.one_of(st.integers(-2, 10), st.sampled_from([0, 1, 2, 3, 4, 8, 16, 1024, 2**31, 2**40]))
    if ann is float:
        return st.one_of(st.floats(-1, 2), st.sampled_from([0.0, 0.5, 1.0, 1e-4, 1e9, float("nan"), float("inf")]))
    if ann is str:
        return st.one_of(st.text(max_size=20), st.sampled_from(["q_proj", "all", "10.0.0.1", "demo_alpaca"]))
    return _junk


_field_value = {path: st.one_of(_plausible(PATHS[path]), _junk) for path in LEAVES}


@st.composite
def spec_dicts(draw) -> Any:
    if draw(st.integers(0, 40)) == 0:
        return draw(_junk)  # not even a mapping
    data: dict = {"model": {"name_or_path": "org/model"}, "data": {"datasets": ["a"]}}
    for path in draw(st.lists(st.sampled_from(LEAVES), max_size=8, unique=True)):
        node = data
        *parents, leaf = path.split(".")
        for p in parents:
            if not isinstance(node.get(p), dict):
                node[p] = {}
            node = node[p]
        node[leaf] = draw(_field_value[path])
    if draw(st.integers(0, 6)) == 0:  # an unknown key, or a whole group replaced by junk
        group = draw(st.sampled_from(GROUPS + [""]))
        node = data
        for p in filter(None, group.split(".")):
            node = node.setdefault(p, {}) if isinstance(node.get(p, {}), dict) else {}
        key = draw(st.text(min_size=1, max_size=10))
        node[key] = draw(_junk)
    return data


def _names_a_field(path: str, msg: str, data: Any = None) -> bool:
    if path == "spec":
        return True
    if msg.startswith("unknown field"):
        # An unknown key is named by its own path: a key of the input at the top, or under a real group (keys
        # may themselves contain dots, so match on the group prefix).
        top = isinstance(data, dict) and path in {str(k) for k in data}
        return top or any(path.startswith(g + ".") for g in GROUPS)
    return _normal(path) in PATHS


def _normal(path: str) -> str:
    """Drop list indices: data.datasets.0 -> data.datasets."""
    return ".".join(p for p in path.split(".") if not p.isdigit())


_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@_SETTINGS
@given(data=spec_dicts())
def test_arbitrary_values_give_a_spec_or_named_errors(data, studio_home):
    try:
        spec = parse_spec(data)
    except SpecError as exc:
        assert exc.problems, "a SpecError lists at least one problem"
        for path, msg in exc.problems:
            assert _names_a_field(path, msg, data), f"problem names no field of the schema: {path!r}: {msg}"
            assert msg.strip(), f"empty message for {path}"
    else:
        assert isinstance(spec, RunSpec)
        # A spec that validates survives the trip to YAML and back unchanged.
        assert parse_spec(yaml.safe_load(dump_spec(spec))) == spec
    checked, errors, warns = validate_spec(data)
    for path, msg in errors + warns:
        assert _names_a_field(path, msg, data), f"problem names no field of the schema: {path!r}: {msg}"
    assert (checked is None) == bool(errors)
