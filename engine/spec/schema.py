"""The run spec: the one source of truth for what a run is, and all of its validation.

Light: pydantic, yaml and the stdlib only (never torch). The UI builds its widgets from the ``Field`` metadata
(description, default, range, choices, ``json_schema_extra`` label/group/advanced), the launcher builds
commands from it, the trainer reads it.

Three layers of checks, defined in this module's siblings and applied here:
- field rules (types, ranges, choices): pydantic, messages carry the dotted field path;
- cross-field rules (``engine.spec.rules.cross_field_errors``, run by ``RunSpec``): each message names its fields
  and the fix;
- context rules that read files (the model's ``config.json``, the dataset registry): ``check_context``.
The groups' fields are declared in ``engine.spec.groups`` (model, data), ``engine.spec.method`` (method),
``engine.spec.train_group`` (train), ``engine.spec.launch_group`` (launch, output) and ``engine.spec.watch_group``
(health, notify): a caller imports a group's class from its module, ``RunSpec`` and the checks from here.
``validate_spec`` runs all three and returns every problem; ``load_spec`` raises ``SpecError`` on any.
Legal but unwise combinations are ``spec_warnings``.
Every message is an ``engine.core.messages.Message``: English text that also carries a catalog key and parameters
(pydantic's errors are keyed by their type), so the page can translate it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError, model_validator

from engine.core.messages import Message
from engine.spec.groups import DataSpec, ModelSpec, _Spec
from engine.spec.launch_group import LaunchSpec, OutputSpec
from engine.spec.messages import RuleErrors, field_error, message
from engine.spec.method import MethodSpec
from engine.spec.rules import (
    check_context,
    cross_field_errors,
    spec_warnings,
)
from engine.spec.train_group import TrainSpec
from engine.spec.watch_group import HealthSpec, NotifySpec

SCHEMA_VERSION = 1


# ----------------------------------------------------------------------------------------------- run
class RunSpec(_Spec):
    schema_version: int = Field(SCHEMA_VERSION, description="Spec schema version")
    model: ModelSpec
    method: MethodSpec = Field(default_factory=MethodSpec)
    data: DataSpec
    train: TrainSpec = Field(default_factory=TrainSpec)
    launch: LaunchSpec = Field(default_factory=LaunchSpec)
    output: OutputSpec = Field(default_factory=OutputSpec)
    health: HealthSpec = Field(default_factory=HealthSpec)
    notify: NotifySpec = Field(default_factory=NotifySpec)

    @model_validator(mode="after")
    def _cross_field_rules(self) -> RunSpec:
        errors = cross_field_errors(self)
        if errors:
            raise RuleErrors(errors)
        return self

    @property
    def world_size(self) -> int:
        if self.launch.target == "ray":  # Ray places its workers, one process each
            return self.launch.ray.num_workers
        return self.launch.num_processes * self.launch.num_machines

    @property
    def effective_batch(self) -> int:
        return self.train.per_device_batch_size * self.train.gradient_accumulation * self.world_size


# ----------------------------------------------------------------------------------------------- load / save
class SpecError(Exception):
    """A spec that cannot run. ``problems`` lists (field path, message) pairs."""

    def __init__(self, problems: list[tuple[str, str]], source: str = ""):
        self.problems = problems
        self.source = source
        head = f"invalid run spec{' ' + source if source else ''}:"
        super().__init__("\n".join([head] + [f"  {p}: {m}" for p, m in problems]))


def pydantic_problems(exc: ValidationError) -> list[tuple[str, Message]]:
    """Turn a pydantic error into (field path, message) pairs; cross-field messages carry their own paths."""
    out: list[tuple[str, Message]] = []
    for err in exc.errors():
        path = ".".join(str(p) for p in err.get("loc", ()))
        ctx = err.get("ctx") or {}
        if isinstance(ctx.get("error"), RuleErrors):
            out += ctx["error"].problems
            continue
        msg = str(err.get("msg", ""))
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        if err.get("type") == "extra_forbidden":
            out.append((path or "spec", message("unknown_field")))
            continue
        out.append((path or "spec", field_error(str(err.get("type", "")), msg, ctx)))
    return out


def migrate(data: dict) -> dict:
    """Bring a spec dict saved by an earlier schema version up to the current one."""
    version = data.get("schema_version", 1)
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise SpecError([("schema_version", message("schema_newer", version=version, supported=SCHEMA_VERSION))])
    if not isinstance(version, int) or version < 1:
        raise SpecError([("schema_version", message("schema_unsupported", version=version, supported=SCHEMA_VERSION))])
    # Version 1 is the first; later versions add steps here (keep fixtures of old versions in tests/).
    data = dict(data)
    # Renamed within version 1 (2026-12): health.eval_rises counted rises in a row; the overfitting rule now judges as
    # early stopping does, and its n is health.eval_patience. A saved spec keeps its n under the new name.
    health = data.get("health")
    if isinstance(health, dict) and "eval_rises" in health and "eval_patience" not in health:
        health = dict(health)
        health["eval_patience"] = health.pop("eval_rises")
        data["health"] = health
    data["schema_version"] = SCHEMA_VERSION
    return data


def parse_spec(data: Any, *, source: str = "", context: bool = False) -> RunSpec:
    """Validate a dict into a RunSpec; raise SpecError listing every problem."""
    if not isinstance(data, dict):
        raise SpecError([("spec", message("spec_not_mapping", type=type(data).__name__))], source)
    data = migrate(data)
    try:
        spec = RunSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(pydantic_problems(exc), source) from None
    if context:
        problems = check_context(spec)
        if problems:
            raise SpecError(problems, source)
    return spec


def validate_spec(data: Any) -> tuple[RunSpec | None, list[tuple[str, str]], list[tuple[str, str]]]:
    """(spec or None, errors, warnings), running field, cross-field and context rules. Never raises on bad input."""
    try:
        spec = parse_spec(data)
    except SpecError as exc:
        return None, exc.problems, []
    errors = check_context(spec)
    return (spec if not errors else None), errors, spec_warnings(spec)


MAX_YAML_DEPTH = 64  # a spec is a few levels deep; PyYAML and pydantic recurse per level
# A spec or an LF YAML holds a few hundred values; aliases let a short file stand for billions (a "YAML bomb": nine
# levels of nine aliases kept `studio validate` busy past a minute): counted as expanded, bounded here.
MAX_YAML_NODES = 100_000
MAX_YAML_BYTES = 4 * 2**20  # a spec file is a few KiB


class YAMLTooDeep(yaml.YAMLError):
    """A YAML document nested deeper than ``MAX_YAML_DEPTH`` or larger than ``MAX_YAML_NODES`` values once its
    aliases are expanded: one line, never a RecursionError or a minute of CPU."""


class YAMLNotText(yaml.YAMLError):
    """A file that is not UTF-8 text (a binary given as a spec): named as bad YAML, never a UnicodeDecodeError."""


def read_yaml_file(path: str | Path) -> Any:
    """A YAML file the studio reads (a spec, an LF YAML, an accelerate config, an evaluation spec), bounded: only a
    regular file (a FIFO would block the command forever, a device never end), at most ``MAX_YAML_BYTES``, UTF-8,
    then ``safe_load_yaml``. Raises OSError (with a plain ``strerror``) or a ``yaml.YAMLError``, as reading did."""
    import errno
    import stat

    path = Path(path)
    # O_NONBLOCK: opening a FIFO with no writer returns at once, and fstat then says what it is
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, a device or a socket)", str(path))
        if st.st_size > MAX_YAML_BYTES:
            size = f"{st.st_size / 2**20:.1f} MiB"
            raise OSError(errno.EFBIG, f"{size}, larger than {MAX_YAML_BYTES // 2**20} MiB", str(path))
        raw = fh.read(MAX_YAML_BYTES + 1)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise YAMLNotText(f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})") from None
    return safe_load_yaml(text)


def safe_load_yaml(text: str) -> Any:
    """``yaml.safe_load`` for every spec, LLaMA-Factory YAML or accelerate config the studio reads (CLI and page):
    a document nested deeper than ``MAX_YAML_DEPTH`` raises ``YAMLTooDeep`` (a ``yaml.YAMLError``, so callers name
    the file as for any bad YAML) instead of recursing in the parser or in validation."""
    if len(text) > MAX_YAML_BYTES:  # a page's paste as a file: bounded before the parser sees it
        raise YAMLTooDeep(f"larger than {MAX_YAML_BYTES // 2**20} MiB")
    too_deep = YAMLTooDeep(f"nested deeper than {MAX_YAML_DEPTH} levels")
    try:
        data = yaml.safe_load(text)
    except RecursionError:
        raise too_deep from None
    stack, seen = [(data, 1)], 0
    while stack:  # iterative: a deep document must not recurse here either
        node, depth = stack.pop()
        seen += 1
        if seen > MAX_YAML_NODES:  # an alias is walked each time it is used, as validation would walk it
            raise YAMLTooDeep(f"more than {MAX_YAML_NODES} values once its aliases are expanded")
        if isinstance(node, (dict, list)):
            if depth > MAX_YAML_DEPTH:
                raise too_deep
            items = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in items)
    return data


def load_spec(path: str | Path, *, context: bool = True) -> RunSpec:
    path = Path(path)
    try:
        data = read_yaml_file(path)
    except OSError as exc:
        raise SpecError(
            [("spec", message("spec_unreadable", path=path, reason=exc.strerror or exc))], str(path)
        ) from None
    except yaml.YAMLError as exc:
        raise SpecError([("spec", message("spec_bad_yaml", path=path, error=exc))], str(path)) from None
    return parse_spec(data, source=str(path), context=context)


def spec_to_dict(spec: RunSpec) -> dict:
    return spec.model_dump(mode="json")


def dump_spec(spec: RunSpec) -> str:
    return yaml.safe_dump(spec_to_dict(spec), sort_keys=False, allow_unicode=True)


def save_spec(spec: RunSpec, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        tmp.write_text(dump_spec(spec), encoding="utf-8")
        tmp.replace(path)
    except OSError:  # a full disk: no half-written spec.yaml.tmp left behind
        tmp.unlink(missing_ok=True)
        raise
    return path
