"""The spec's messages on the Chinese page: every catalog key has its Chinese, every rule uses the catalog, and real
invalid specs driven through the form's validation handler come out in Chinese (English on the English page)."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from engine.spec import messages as spec_messages
from engine.spec.schema import RunSpec, parse_spec, validate_spec
from studio import form_validation, forms
from studio.i18n.localize import localize, placeholders
from studio.i18n.spec import PYDANTIC_EN, PYDANTIC_ZH, RULES_ZH
from studio.tabs import train

CJK = re.compile(r"[\u4e00-\u9fff]")
ROOT = Path(__file__).resolve().parents[2]


def _demo_values(demo_paths) -> dict:
    return forms.spec_to_values(yaml.safe_load(Path(demo_paths["example_spec"]).read_text(encoding="utf-8")))


def test_every_catalog_message_has_chinese_with_the_same_placeholders():
    assert set(RULES_ZH) == set(spec_messages.MESSAGES), "keys without Chinese / Chinese without a key"
    for key, english in spec_messages.MESSAGES.items():
        zh = RULES_ZH[key]
        assert placeholders(zh) == placeholders(english), key
        assert CJK.search(zh), f"{key}: not Chinese"


def test_rules_only_make_messages_from_the_catalog():
    """A rule appended with a plain f-string would bypass the catalog (and stay English on the Chinese page)."""
    field_path = re.compile(r"^[a-z_]+(\.[a-z_]+)+$")
    paths = {
        "engine/spec/rules.py": field_path.match,
        "engine/spec/schema.py": lambda p: p in ("spec", "schema_version"),
        "engine/runs/registry.py": lambda p: (
            p == "output.output_dir"
        ),  # its "spec" problems are about files, not the page
    }
    for module, names_a_field in paths.items():
        tree = ast.parse((ROOT / module).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Tuple) and len(node.elts) == 2):
                continue
            path, msg = node.elts
            if not (isinstance(path, ast.Constant) and isinstance(path.value, str) and names_a_field(path.value)):
                continue
            calls = [msg] if not isinstance(msg, ast.IfExp) else [msg.body, msg.orelse]
            for call in calls:
                # engine.spec.messages.message, or the data catalog's (the image rules name a dataset's problem)
                assert isinstance(call, ast.Call) and getattr(call.func, "id", "") in ("message", "data_message"), (
                    f"{module}:{node.lineno}: ({path.value!r}, ...) does not use engine.spec.messages.message"
                )


def test_messages_keep_their_english_and_their_key():
    bad = {"model": {"name_or_path": "m"}, "data": {"datasets": ["a"]}, "launch": {"num_processes": 4}}
    _, errors, _ = validate_spec(bad)
    (path, msg), *_ = errors
    assert path == "launch.num_processes" and msg.startswith("4 processes need a distributed backend")
    assert msg.key == "processes_need_backend" and msg.params == {"n": 4}
    assert localize(msg, "zh").startswith("4 个进程需要分布式后端") and localize(msg, "en") == msg
    import pickle

    again = pickle.loads(pickle.dumps(msg))
    assert again == msg and again.key == msg.key and json.dumps(msg) == json.dumps(str(msg))
    with pytest.raises(Exception, match="launch.num_processes: 4 processes"):
        parse_spec(bad)


def _min_length(path: str) -> int:
    model: Any = RunSpec
    *groups, leaf = path.split(".")
    for g in groups:
        model = forms._unwrap_optional(model.model_fields[g].annotation)[0]
    return next((m.min_length for m in model.model_fields[leaf].metadata if getattr(m, "min_length", None)), 0)


def _bad_values(demo_paths) -> list[dict]:
    """One form state per kind of mistake the form can make: every number below and above its range and as text,
    every choice off its list, required text emptied, lists malformed, cross-field and context rules."""
    base = _demo_values(demo_paths)
    cases = []
    for f in forms.FIELDS:
        bad: list = []
        if f.kind in ("int", "float"):
            if f.minimum is not None:  # an optional number's 0 below its range means "none", so go one further
                bad.append(f.minimum - (2 if f.optional and f.minimum == 1 else 1))
            if f.maximum is not None:
                bad.append(f.maximum + 1)
            bad += ["abc", 1.5] if f.kind == "int" else ["abc"]
        elif f.kind == "choice":
            bad.append("nonsense")
        elif f.kind == "bool":
            bad.append("maybe")
        elif f.kind == "str" and _min_length(f.path):
            bad.append("")
        elif f.kind in ("list_float", "list_int"):
            bad.append("a, b")
        elif f.kind == "list_choice":
            bad.append(["nonsense"])
        # a field inside an optional block (model.rope_scaling) counts only while the block is switched on
        on = {o.path: True for o in forms.FIELDS if o.kind == "optional_model" and f.path.startswith(o.path + ".")}
        for value in bad:
            cases.append({**base, **on, f.path: value})
    cross = [
        {"method.finetuning": "full", "method.quantization.bits": 4},
        {"method.lora.use_dora": True, "method.quantization.bits": 8},
        {"launch.num_processes": 4},
        {"launch.num_machines": 2},
        {"launch.machine_rank": 3},
        {"launch.gpus": ["0", "0"]},
        {"launch.backend": "fsdp", "launch.device": "cpu", "method.quantization.bits": 8},
        {"launch.backend": "deepspeed", "launch.num_processes": 2, "launch.deepspeed.zero_stage": 0}
        | {"launch.deepspeed.offload_optimizer": "nvme", "launch.deepspeed.offload_param": "cpu"},
        {"train.precision": "fp16", "launch.device": "cpu"},
        {"data.mix_probs": "0.5, 0.7", "data.mix": "concat"},
        {"data.datasets": ["nope", "nope"], "data.packing": True, "method.stage": "dpo"},
        {"output.report_to": ["none", "tensorboard"], "method.lora.targets": ["all", "q_proj"]},
        {"model.name_or_path": "/no/such/model", "train.resume_from": "/no/checkpoint"},
        {"data.cutoff_len": 100000, "method.lora.targets": ["nonsense_proj"]},
        {"method.finetuning": "freeze", "method.freeze.trainable_layers": 99}
        | {"method.freeze.trainable_modules": ["nonsense"]},
        {"data.dataset_dir": "/no/such/folder"},
        # warnings
        {"method.finetuning": "full", "train.learning_rate": 0.01, "model.trust_remote_code": True}
        | {"launch.backend": "ddp", "data.val_size": 0, "train.eval_steps": 7},
        {"train.learning_rate": 1e-7, "method.lora.alpha": 4000, "train.gradient_checkpointing": True}
        | {"train.per_device_batch_size": 1, "data.cutoff_len": 256},
    ]
    cases += [{**base, **c} for c in cross]
    return cases


def test_invalid_specs_through_the_form_come_out_in_chinese(demo_paths):
    seen_keys: set[str] = set()
    base = _demo_values(demo_paths)
    for values in _bad_values(demo_paths):
        _, errors, warnings = train.check(values)
        assert errors or warnings, {p: v for p, v in values.items() if v != base[p]}
        seen_keys |= {getattr(m, "key", "") for _, m in errors + warnings}
        out = train.validate_form(*[values[f.path] for f in forms.FIELDS], {}, "zh")
        field_updates, markdown = out[: len(forms.FIELDS)], out[-3]
        shown = [u["info"] for u in field_updates if str(u.get("info", "")).startswith(("❌", "⚠"))]
        assert shown, f"no field marked for {errors + warnings}"
        for info in shown:
            message = info.split(" — ")[0]
            for part in message[2:].split("；"):
                assert CJK.search(part), f"English left on the Chinese page: {part!r}"
        for line in markdown.splitlines():
            if line.startswith("- "):
                assert CJK.search(line.split("：", 1)[-1]), f"English left in #spec-problems: {line!r}"
        if errors:
            assert out[-2]["interactive"] is False  # Start disabled while invalid
        en = train.validate_form(*[values[f.path] for f in forms.FIELDS], {}, "en")
        assert not CJK.search(en[-3]), "Chinese on the English page"
    assert "" not in seen_keys, "a message without a catalog key"
    assert {k[len("pydantic.") :] for k in seen_keys if k.startswith("pydantic.")} <= set(PYDANTIC_ZH)
    assert {"greater_than_equal", "less_than_equal", "greater_than", "literal_error", "int_parsing"} <= {
        k[len("pydantic.") :] for k in seen_keys
    }


def test_out_of_range_numbers_reach_the_spec_and_show_their_range(demo_paths):
    values = _demo_values(demo_paths)
    values["method.lora.rank"] = 0
    out = train.validate_form(*[values[f.path] for f in forms.FIELDS], {}, "en")
    idx = [f.path for f in forms.FIELDS].index("method.lora.rank")
    assert "field-error" in out[idx]["elem_classes"] and out[-2]["interactive"] is False
    assert out[idx]["info"].startswith("❌ must be at least 1")  # plain words, not pydantic's "Input should be"
    assert "range 1 – 1024" in out[idx]["info"]
    zh = train.validate_form(*[values[f.path] for f in forms.FIELDS], {}, "zh")
    assert zh[idx]["info"].startswith("❌ 应 ≥ 1") and "范围 1 – 1024" in zh[idx]["info"]
    widget = forms.make_widget(forms.BY_PATH["method.lora.rank"], 0)
    assert widget.minimum is None and widget.maximum is None  # gradio must not refuse it before the spec sees it
    assert forms.BY_PATH["train.learning_rate"].range_for("en") == "range > 0, ≤ 1"
    assert forms.BY_PATH["data.cutoff_len"].range_for("zh").startswith("范围 ")


def test_field_errors_read_in_plain_words_under_the_field_label(demo_paths):
    """The English page says "Datasets `data.datasets`: needs at least 1 item(s); it has 0", not pydantic's "List
    should have at least 1 item after validation, not 0"; every pydantic error type we translate has plain English."""
    assert set(PYDANTIC_EN) == set(PYDANTIC_ZH)
    for kind, text in PYDANTIC_EN.items():
        assert placeholders(text) == placeholders(PYDANTIC_ZH[kind]), kind
    values = _demo_values(demo_paths)
    values["data.datasets"] = []
    _spec, errors, warnings = train.check(values)
    text = form_validation.problems_markdown(errors, warnings, "en")
    assert "**Datasets** `data.datasets`: needs at least 1 item(s); it has 0" in text, text
    assert "should have" not in text and "Input should" not in text
