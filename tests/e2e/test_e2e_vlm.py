"""A vision-language run from the page, as a person does it (issue 25): LLaMA-Factory's multimodal YAML (a LLaVA
model, a sharegpt dataset with an ``images`` column, LF's ``llava`` template) pasted into the Train form; the
Datasets tab showing the first row's image as a thumbnail beside its text, and its ``<image>`` placeholder with the
tokens the model puts in for it; then the run started, and its loss chart drawn with every logged step; then the
Chat tab with the base and the tuned run side by side, both shown a picture and both answering.

Each figure is checked against one computed here: the image tokens from the model's own config (the vision tower's
image size over its patch size, squared: LLaVA's default strategy drops the CLS token), the thumbnail's colours
from a screenshot against the source picture's own colour, the curves' points against the run's events file."""

from __future__ import annotations

import io
import json
import uuid

import pytest
from playwright.sync_api import expect

from studio import alerts, monitor
from tests.e2e.conftest import import_lf_yaml, open_tab
from tests.e2e.test_e2e_charts import lines_match, logged, run_alerts, start_run, wait_finished, wait_svg

pytestmark = pytest.mark.slow  # a real server, a run and a browser


def _dominant_colour(png: bytes | str) -> tuple[int, int, int]:
    """The commonest colour of a picture that is neither near white nor near black: a drawn shape's fill."""
    from PIL import Image

    img = Image.open(io.BytesIO(png) if isinstance(png, bytes) else png).convert("RGB")
    counts: dict[tuple[int, int, int], int] = {}
    for px in (img.tobytes()[i : i + 3] for i in range(0, img.width * img.height * 3, 3)):
        if max(px) < 40 or min(px) > 215:
            continue
        counts[tuple(px)] = counts.get(tuple(px), 0) + 1
    return max(counts, key=counts.get)


def _near(a, b, tol: int = 40) -> bool:
    return all(abs(x - y) <= tol for x, y in zip(a, b, strict=True))


def test_vlm_yaml_thumbnails_image_tokens_and_run_curves(page, server, shots, fits_width):
    model = server.home / "models" / "demo-tiny-llava"
    page.wait_for_selector("#start-btn:not([disabled])", timeout=60_000)
    import_lf_yaml(
        page,
        f"model_name_or_path: {model}\nstage: sft\nfinetuning_type: lora\nlora_target: all\ndataset: demo_vlm\n"
        "template: llava\ncutoff_len: 128\nlogging_steps: 1\nper_device_train_batch_size: 2\n"
        "freeze_vision_tower: true\n",
    )
    assert page.input_value("#f-model-name-or-path input") == str(model)

    # ---- the Datasets tab: the row's picture and its placeholder's tokens
    rows = json.loads((server.home / "data" / "demo_vlm.json").read_text(encoding="utf-8"))
    first = rows[0]["images"]
    source = server.home / "data" / first[0]
    open_tab(page, "Datasets")
    page.click("#ds-pick input")
    page.get_by_role("option", name="demo_vlm", exact=True).click()
    thumbs = page.locator("#ds-thumbs img.ds-thumb")
    expect(thumbs).to_have_count(len(first), timeout=120_000)
    assert thumbs.first.get_attribute("alt") == source.name
    size = thumbs.first.evaluate("i => [i.naturalWidth, i.naturalHeight, i.complete]")
    assert size[2] and 0 < max(size[:2]) <= 96, size  # a thumbnail, loaded
    thumbs.first.scroll_into_view_if_needed()
    seen = _dominant_colour(thumbs.first.screenshot())
    want = _dominant_colour(str(source))
    assert _near(seen, want), (seen, want)  # the row's own picture is what the page shows

    cfg = json.loads((model / "config.json").read_text(encoding="utf-8"))["vision_config"]
    tokens = (cfg["image_size"] // cfg["patch_size"]) ** 2
    badge = page.locator("#ds-sample .tok-image")
    expect(badge).to_have_count(rows[0]["messages"][0]["content"].count("<image>"), timeout=90_000)
    expect(badge.first).to_contain_text(f"{tokens} tokens")
    page.screenshot(path=str(shots / "vlm-inspector.png"))

    # ---- the run: started from the form, its loss curves drawn with every logged step
    open_tab(page, "Train")
    run_id = start_run(page, f"vlm-{uuid.uuid4().hex[:6]}", steps=3, lr="0.001")
    wait_finished(page, run_id, timeout_ms=600_000)
    steps, evals = logged(server, run_id)
    assert steps == 3 and evals == 0, (steps, evals)
    colors = monitor.loss_colors("en")
    want_lines = {colors["train loss"]: steps, colors["train loss (smoothed)"]: steps}
    extra = [(alerts.ALERT_COLOR, 2)] * len(run_alerts(server, run_id))
    drawn = wait_svg(page, "#plot-loss", lines_match(want_lines, extra), timeout_ms=180_000)
    assert drawn and {"train loss", "train loss (smoothed)"} <= set(drawn["legend"]), drawn
    assert sorted(f"{line['color']}:{line['points']}" for line in drawn["lines"]) == sorted(
        f"{c}:{n}" for c, n in [*want_lines.items(), *extra]
    ), drawn["lines"]
    events = [json.loads(x) for x in (server.home / "runs" / run_id / "events.jsonl").read_text().splitlines()]
    ready = next(e for e in events if e["type"] == "data_ready")["payload"]
    # it trained on the pictures: every row's, each the model's count of tokens
    assert ready["dropped_cut_images"] == 0 and ready["num_images"] == sum(len(r["images"]) for r in rows), ready
    assert ready["image_tokens"] == ready["num_images"] * tokens, (ready, tokens)
    page.locator("#plot-loss").scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "vlm-run-loss.png"))
    assert fits_width(page)

    # ---- Chat: the base and the tuned run side by side, asked about a picture; both see it and answer
    open_tab(page, "Chat")
    page.click("#chat-adapter input")
    page.get_by_role("option", name=run_id).first.click()
    # the picked run brings its own base into the model picker at once: a Load clicked right away loads that base
    # (it once sent the model picked before, when the server's answer to the pick came after the click)
    page.click("#chat-load")
    page.wait_for_function(  # this run loaded (the status may still tell of workers an earlier test loaded)
        "(id) => { const s = (document.querySelector('#chat-status')?.innerText ?? '');"
        " return s.includes('loaded base, tuned') && s.includes(id); }",
        arg=run_id,
        timeout=240_000,
    )
    base_line, tuned_line = page.locator("#chat-status li").all_inner_texts()  # one line per pane, base first
    assert "demo-tiny-llava" in base_line and run_id not in base_line, base_line  # the run's own base, no adapter
    assert "demo-tiny-llava" in tuned_line and run_id in tuned_line, tuned_line
    picture = server.home / "data" / rows[1]["images"][0]
    page.set_input_files("#chat-image input[type=file]", str(picture))
    page.wait_for_selector("#chat-image img", timeout=60_000)
    page.fill("#chat-prompt textarea", "What colour is the shape?")
    page.click("#chat-send")
    page.wait_for_function(
        """() => ['#chat-base', '#chat-tuned'].every(p => document.querySelectorAll(p + ' .message-row').length === 2
            && document.querySelector(p + ' .user-row img') !== null)
            && document.querySelector('#chat-send:not([disabled])') !== null""",
        timeout=240_000,
    )
    for pane in ("#chat-base", "#chat-tuned"):
        reply = page.locator(f"{pane} .message-row:not(.user-row)").last.inner_text().strip()
        assert reply and "⚠" not in page.inner_text(pane), (pane, page.inner_text(pane))
    page.screenshot(path=str(shots / "vlm-chat-both-panes.png"), full_page=True)
    page.click("#chat-unload")
    page.wait_for_function(
        "(document.querySelector('#chat-status')?.innerText ?? '').includes('unloaded')", timeout=90_000
    )
