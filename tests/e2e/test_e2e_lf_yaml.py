"""The Train tab's LLaMA-Factory YAML in a real browser: paste an LF training YAML, see the form filled and the
import's notes, then download "Save as LF YAML" and read it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import import_lf_yaml

pytestmark = pytest.mark.slow  # a real server and browser


def test_paste_lf_yaml_fills_the_form_and_save_downloads_it(page, server, shots, tmp_path):
    model = str(server.home / "models" / "demo-tiny-llama")
    text = (
        f"model_name_or_path: {model}\nstage: sft\ndo_train: true\nfinetuning_type: lora\nlora_rank: 24\n"
        "lora_target: all\ndataset: demo_alpaca\ntemplate: default\ncutoff_len: 128\nlogging_steps: 1\n"
        "per_device_train_batch_size: 2\nlearning_rate: 0.00042\nnum_train_epochs: 1.0\nplot_loss: true\n"
    )
    page.wait_for_selector("#start-btn:not([disabled])", timeout=60_000)
    import_lf_yaml(page, text)
    notes = page.inner_text("#lf-msg")
    assert "plot_loss: accepted, ignored" in notes
    page.wait_for_function("document.querySelector('#f-method-lora-rank input').value === '24'", timeout=90_000)
    assert page.input_value("#f-model-name-or-path input") == model
    assert "demo_alpaca" in page.inner_text("#f-data-datasets")
    assert float(page.input_value("#f-train-learning-rate input")) == pytest.approx(0.00042)
    page.wait_for_selector("#start-btn:not([disabled])", timeout=90_000)  # the filled form is valid
    page.screenshot(path=str(shots / "train-lf-import.png"))

    page.get_by_text("Preview command").first.click()
    page.click("#lf-save")
    link = page.locator("#lf-file a").first
    link.wait_for(timeout=90_000)
    with page.expect_download() as info:
        link.click()
    saved = Path(info.value.path()).read_text(encoding="utf-8")
    args = yaml.safe_load(saved)
    assert args["model_name_or_path"] == model and args["dataset"] == "demo_alpaca"
    assert args["lora_rank"] == 24 and args["learning_rate"] == pytest.approx(0.00042)
    assert "LLaMA-Factory training YAML written by Studio" in saved

    # an uploaded file fills the text box and the form at once
    upload = tmp_path / "other.yaml"
    upload.write_text(text.replace("lora_rank: 24", "lora_rank: 40"), encoding="utf-8")
    page.set_input_files("#lf-upload input[type=file]", str(upload))
    page.wait_for_function("document.querySelector('#f-method-lora-rank input').value === '40'", timeout=90_000)
    assert "lora_rank: 40" in page.input_value("#lf-text textarea")
