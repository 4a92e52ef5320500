"""One browser test per tab's main path, screenshots into test-artifacts/, each at 1280x800 without a horizontal
scroll bar. Uses the session's studio server (see conftest.py)."""

from __future__ import annotations

import json
import time

import pytest

from tests.e2e.conftest import open_tab, type_field

pytestmark = pytest.mark.slow  # a real server and browser


def test_train_form_validation_blocks_start(page, shots, fits_width):
    page.wait_for_selector("#start-btn:not([disabled])", timeout=60_000)
    page.click("#sec-launch >> text=Launch")  # open the launch section
    type_field(page, "#f-launch-num-processes input", "4")  # once the opened section is drawn
    procs = page.locator("#f-launch-num-processes input")
    page.wait_for_selector("#f-launch-num-processes.field-error", timeout=90_000)
    assert page.is_disabled("#start-btn")
    assert "launch.num_processes" in page.inner_text("#spec-problems")
    page.screenshot(path=str(shots / "train-invalid.png"))
    procs.fill("1")
    procs.press("Tab")
    page.wait_for_selector("#start-btn:not([disabled])", timeout=90_000)
    assert fits_width(page)
    # An out-of-range number reaches the spec (no gradio popup): the message sits next to the field, Start is off.
    rank = page.locator("#f-method-lora-rank input")
    assert "range 1 – 1024" in page.inner_text("#f-method-lora-rank")
    rank.fill("0")
    rank.press("Tab")
    page.wait_for_selector("#f-method-lora-rank.field-error", timeout=90_000)
    assert "must be at least 1" in page.inner_text("#f-method-lora-rank")  # plain words, not pydantic's
    assert page.is_disabled("#start-btn") and "method.lora.rank" in page.inner_text("#spec-problems")
    lr = page.locator("#f-train-learning-rate input")
    lr.fill("-0.001")
    lr.press("Tab")
    page.wait_for_selector("#f-train-learning-rate.field-error", timeout=90_000)
    assert "must be more than 0" in page.inner_text("#f-train-learning-rate")
    page.screenshot(path=str(shots / "train-out-of-range.png"))
    rank.fill("8")
    rank.press("Tab")
    lr.fill("0.0002")
    lr.press("Tab")
    page.wait_for_selector("#start-btn:not([disabled])", timeout=90_000)
    assert page.locator(".field-error").count() == 0
    # LoRA+, PiSSA, rsLoRA and DoRA sit in the (open) LoRA section; the LoRA+ ratio is checked like any number
    for field in ("pissa-init", "use-rslora", "use-dora"):
        assert page.is_visible(f"#f-method-lora-{field}"), field
    ratio = page.locator("#f-method-lora-loraplus-lr-ratio input")
    ratio.fill("5000")  # above its range (an emptied optional number, sent as 0, reads as none: LoRA+ off)
    ratio.press("Tab")
    page.wait_for_selector("#f-method-lora-loraplus-lr-ratio.field-error", timeout=90_000)
    assert page.is_disabled("#start-btn") and "method.lora.loraplus_lr_ratio" in page.inner_text("#spec-problems")
    ratio.fill("16")
    ratio.press("Tab")
    page.wait_for_selector("#start-btn:not([disabled])", timeout=90_000)
    assert page.locator(".field-error").count() == 0


def test_grpo_reward_picker_and_stage_switches(page, shots):
    """Issue 45 item 16: the GRPO section's picker lists the engine's reward kinds; a kind picked is a line of the
    rewards field; the rewards and the run name a person chose stay through sft -> grpo -> sft -> grpo."""
    from playwright.sync_api import expect

    from engine.spec.grpo_group import REWARD_KINDS
    from tests.e2e.conftest import type_field

    page.wait_for_selector("#start-btn:not([disabled])", timeout=60_000)
    page.locator("#sec-method-grpo").get_by_text("GRPO", exact=True).first.click()  # the section opens
    page.click("#grpo-reward-pick input")
    options = page.locator("[role=option]")
    expect(options).to_have_count(len(REWARD_KINDS), timeout=90_000)
    assert [o.strip() for o in options.all_inner_texts()] == list(REWARD_KINDS)
    page.get_by_role("option", name="math", exact=True).click()
    rewards = page.locator("#f-method-grpo-rewards textarea")
    expect(rewards).to_have_value("{kind: math, weight: 1.0}", timeout=90_000)
    page.get_by_role("option", name="length", exact=True).click()  # the list stays open for the next pick
    page.keyboard.press("Escape")
    picked = "{kind: math, weight: 1.0}\n{kind: length, weight: 1.0}"
    expect(rewards).to_have_value(picked, timeout=90_000)
    page.click("#sec-output >> text=Output")
    # the demo's own run name follows a stage picked by hand (a GRPO run went out named "demo-lora")
    expect(page.locator("#f-output-run-name input")).to_have_value("demo-lora")
    page.click("#f-method-stage input")
    page.get_by_role("option", name="grpo", exact=True).click()
    expect(page.locator("#f-output-run-name input")).to_have_value("demo-tiny-llama-grpo-lora", timeout=90_000)
    page.click("#f-method-stage input")
    page.get_by_role("option", name="sft", exact=True).click()
    expect(page.locator("#f-output-run-name input")).to_have_value("demo-tiny-llama-sft-lora", timeout=90_000)
    type_field(page, "#f-output-run-name input", "my-grpo-try")
    expect(page.locator("#f-method-stage input")).to_have_value("sft")
    for stage in ("grpo", "sft", "grpo"):
        page.click("#f-method-stage input")
        page.get_by_role("option", name=stage, exact=True).click()
        expect(page.locator("#f-method-stage input")).to_have_value(stage, timeout=90_000)
        # every handler the switch starts has answered: the plan is the new stage's (a GRPO row is its prompt and
        # its completion, longer than SFT's cutoff of 256) and no box shows Gradio's running timer (the form's
        # checks say the same words for both stages, so they cannot tell)
        page.wait_for_function(
            """(sft) => {
                const plan = document.querySelector('#plan-panel')?.innerText ?? '';
                const said = document.querySelector('#spec-problems')?.innerText ?? '';
                const busy = /^\\s*\\d+(\\.\\d+)?s\\b/;
                return plan.includes('sequence length') && plan.includes('sequence length 256,') === sft
                    && !busy.test(plan) && !busy.test(said);
            }""",
            arg=stage == "sft",
            timeout=90_000,
        )
        expect(rewards).to_have_value(picked)
        expect(page.locator("#f-output-run-name input")).to_have_value("my-grpo-try")
    chips = page.locator("#grpo-reward-pick .token")
    expect(chips).to_have_count(2)
    assert [c.strip() for c in chips.all_inner_texts()] == ["math", "length"]
    page.locator("#sec-method-grpo").screenshot(path=str(shots / "train-grpo-reward-picker.png"))


def test_validation_messages_in_chinese(page, shots):
    page.wait_for_selector("#start-btn:not([disabled])", timeout=60_000)
    page.click("#lang-picker input")
    page.get_by_role("option", name="中文").click()
    page.wait_for_function("document.querySelector('#start-btn').innerText.includes('开始训练')", timeout=120_000)
    assert "范围 1 – 1024" in page.inner_text("#f-method-lora-rank")
    rank = page.locator("#f-method-lora-rank input")
    rank.fill("0")
    rank.press("Tab")
    page.wait_for_selector("#f-method-lora-rank.field-error", timeout=90_000)
    page.wait_for_function(
        "(document.querySelector('#f-method-lora-rank')?.innerText ?? '').includes('应 ≥ 1')", timeout=90_000
    )
    assert page.is_disabled("#start-btn")
    problems = page.inner_text("#spec-problems")
    assert "LoRA 秩" in problems and "应 ≥ 1" in problems and "greater than" not in problems
    page.screenshot(path=str(shots / "train-invalid-zh.png"))


def test_preview_and_plan(page, shots):
    page.wait_for_selector("#start-btn:not([disabled])", timeout=60_000)
    page.get_by_text("Preview command").first.click()
    page.click("#preview-btn")
    page.wait_for_function(
        "(document.querySelector('#preview-out')?.innerText ?? '').includes('engine.trainer.train')", timeout=90_000
    )
    page.wait_for_function("(document.querySelector('#plan-panel')?.innerText ?? '').length > 3", timeout=90_000)
    page.screenshot(path=str(shots / "train-preview-plan.png"))


def test_datasets_upload_register_and_sample(page, shots, server, fits_width, tmp_path):
    open_tab(page, "Datasets")
    page.wait_for_selector("#ds-sample .tok-train", timeout=60_000)
    src = tmp_path / "my data.jsonl"
    src.write_text("\n".join(json.dumps({"instruction": f"Say {i}", "output": f"{i}"}) for i in range(20)))
    page.set_input_files("#ds-upload input[type=file]", str(src))
    page.wait_for_function(
        "(document.querySelector('#ds-upload-msg')?.innerText ?? '').includes('stored')", timeout=90_000
    )
    page.fill("#ds-name input", "my_upload")
    page.click("#ds-register")
    page.wait_for_function(
        "(document.querySelector('#ds-register-msg')?.innerText ?? '').includes('registered')", timeout=90_000
    )
    assert (server.home / "uploads" / "my_data.jsonl").is_file()
    assert "my_upload" in json.loads((server.home / "data" / "dataset_info.json").read_text())
    page.wait_for_selector("#ds-sample .tok-prompt", timeout=90_000)
    page.screenshot(path=str(shots / "datasets.png"), full_page=True)
    assert fits_width(page)


def test_runs_doctor_chat_tabs_render(page, server, shots, fits_width):
    open_tab(page, "Runs")
    page.wait_for_selector("#runs-table", timeout=90_000)
    page.screenshot(path=str(shots / "runs.png"), full_page=True)
    assert fits_width(page)
    # The Doctor tab renders its Run button; what a run shows (a PASS row per check, the fix column within the page)
    # is test_e2e_charts.py::test_doctor_table_hidden_until_run_then_fits, which also writes doctor.png.
    open_tab(page, "Doctor")
    page.wait_for_selector("#doctor-run", state="visible", timeout=90_000)
    open_tab(page, "Chat")
    # the demo's vision-language model, asked about a drawn image: the image shows in the pane and it answers
    page.click("#chat-model input")
    page.get_by_role("option", name="demo-tiny-llava").click()
    page.click("#chat-load")
    page.wait_for_function(
        "(document.querySelector('#chat-status')?.innerText ?? '').includes('loaded')", timeout=180_000
    )
    assert "demo-tiny-llava" in page.inner_text("#chat-status")
    image = sorted((server.home / "data" / "demo_vlm_images").glob("*.png"))[0]
    page.set_input_files("#chat-image input[type=file]", str(image))
    page.wait_for_selector("#chat-image img", timeout=60_000)
    page.fill("#chat-prompt textarea", "What colour is the shape?")
    page.click("#chat-send")
    page.wait_for_function(
        "document.querySelectorAll('#chat-base .message-row').length >= 2 && "
        "document.querySelector('#chat-base .user-row img') !== null && "
        "document.querySelector('#chat-send:not([disabled])') !== null",
        timeout=120_000,
    )
    reply = page.locator("#chat-base .message-row:not(.user-row)").last.inner_text().strip()
    assert reply, page.inner_text("#chat-base")
    assert "⚠" not in page.inner_text("#chat-base"), page.inner_text("#chat-base")
    assert page.locator("#chat-image img").count() == 0  # cleared for the next message
    page.screenshot(path=str(shots / "chat.png"))
    page.click("#chat-unload")
    page.wait_for_function(
        "(document.querySelector('#chat-status')?.innerText ?? '').includes('unloaded')", timeout=90_000
    )
    assert fits_width(page)


def test_stop_from_the_page(page, shots):
    """Start a long run, then Stop: the status turns 'stopped' within seconds (the whole process group ends)."""
    page.wait_for_selector("#start-btn:not([disabled])", timeout=60_000)
    steps = page.locator("#f-train-max-steps input")
    steps.fill("5000")
    steps.press("Tab")
    page.wait_for_selector("#start-btn:not([disabled])", timeout=90_000)
    page.click("#start-btn")
    page.wait_for_function("document.querySelector('#action-msg').innerText.includes('Started run')", timeout=90_000)
    page.wait_for_function("document.querySelector('#run-status').innerText.includes('running')", timeout=120_000)
    page.wait_for_function("document.querySelectorAll('#plot-loss g.mark-line path').length > 0", timeout=120_000)
    t0 = time.time()
    page.click("#stop-btn")
    page.wait_for_function("document.querySelector('#run-status').innerText.includes('stopped')", timeout=60_000)
    page.screenshot(path=str(shots / "train-stopped.png"))
    assert time.time() - t0 < 45
