"""On a machine without a GPU (issue 27, item 8), the plan panel, ``studio plan`` and the trainer's run_started say
the same thing for a spec left on device auto: the run trains on the CPU, its memory is host memory compared with
what the machine has free, and gradient checkpointing auto is decided against that host memory, not "on because no
GPU is known"."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from engine.machine import hardware
from engine.plan import planner
from studio import forms
from studio.tabs import train_plan

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(bool(hardware.detect().gpus), reason="a machine without a GPU is what this checks")


def _spec_data(demo_paths) -> dict:
    data = yaml.safe_load(Path(demo_paths["example_spec"]).read_text(encoding="utf-8"))
    data["launch"]["device"] = "auto"
    data["train"]["gradient_checkpointing"] = "auto"
    return data


def test_panel_cli_and_trainer_agree_on_a_cpu_machine(demo_paths, tmp_path):
    from engine.spec.schema import parse_spec
    from engine.trainer.train import resolve_checkpointing

    data = _spec_data(demo_paths)
    mp = planner.plan(parse_spec(data), hardware=hardware.detect())
    assert mp.details["device"] == "cpu" and mp.details["host_budget_bytes"] > 0
    assert "the host memory less a 10%" in str(mp.checkpointing_reason)
    assert "no GPU here, none given" not in str(mp.checkpointing_reason)

    # the trainer decides on the same plan for the device it runs on
    spec = parse_spec(data)
    _, reason = resolve_checkpointing(spec, "cpu")
    assert (spec.train.gradient_checkpointing == "on") is mp.checkpointing
    assert "the host memory less a 10%" in reason

    # the panel: one host-memory row, no "GPU 0", the same decision
    shown = train_plan.plan_html(forms.spec_to_values(data), None, "en")
    text = re.sub(r"<[^>]+>", " ", shown)
    assert "CPU (host memory):" in text and "GPU 0" not in text and "no GPU memory to compare" not in text
    assert "trains on the CPU" in text
    assert ("gradient checkpointing on" if mp.checkpointing else "gradient checkpointing off") in text.lower()
    zh = re.sub(r"<[^>]+>", " ", train_plan.plan_html(forms.spec_to_values(data), None, "zh"))
    assert "CPU（主机内存）" in zh and "在 CPU 上训练" in zh

    # studio plan, as a person runs it
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "engine.cli", "plan", str(path)], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "of free host memory (no GPU here: the run trains on the CPU)" in done.stdout, done.stdout
    assert "fits: unknown" not in done.stdout and "per GPU" not in done.stdout
    assert f"gradient checkpointing: {'on' if mp.checkpointing else 'off'} (auto:" in done.stdout


def test_the_price_field_is_empty_by_default_and_a_bad_price_is_named(demo_paths):
    """Issue 45 item 20: the price per GPU-hour read "0" while it meant "the GPU's default" (gradio's Number shows 0
    for none). It is a text box: empty is the default price, "$2" and "2.5" are prices, anything else is refused in
    the panel naming the field; the cost then follows the price typed."""
    from studio.tabs import train_estimate

    typed = [train_estimate.typed_price(v) for v in ("", None, " ", "2", "$2.5", "0")]
    assert typed == [None, None, None, 2.0, 2.5, 0]
    for bad in ("abc", "-1", "inf", "nan"):
        with pytest.raises(ValueError):
            train_estimate.typed_price(bad)
    values = forms.spec_to_values(_spec_data(demo_paths))
    refused = html.unescape(re.sub(r"<[^>]+>", " ", train_plan.plan_html(values, None, "en", "H100", "two dollars")))
    assert 'Price per GPU-hour: "two dollars" is not a number of dollars' in refused
    priced = re.sub(r"<[^>]+>", " ", train_plan.plan_html(values, None, "en", "H100", "$2"))
    assert "at $2 per GPU-hour" in priced


def test_no_table_of_the_page_shows_gradios_placeholder_header(studio_home):
    """Issue 45 item 20: an empty gr.Dataframe without headers reads "1 2 3". Every table the page builds starts
    with its own header, in the page's language."""
    import gradio as gr

    from studio.app import build_app

    for lang in ("en", "zh"):
        tables = [b for b in build_app(lang).blocks.values() if isinstance(b, gr.Dataframe)]
        assert tables
        placeholder = [b.elem_id for b in tables if list((b.value or {}).get("headers") or []) == ["1", "2", "3"]]
        assert not placeholder, (lang, placeholder)
