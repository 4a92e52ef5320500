"""The Chat tab in a browser (issue 13): a three-turn conversation in both panes, the base model beside a run trained
for a few steps; a reload shows what is loaded; Unload ends it. The demo model's answers are gibberish: the test
checks the conversation's shape (turns, non-empty replies, no error), not its words.

Then the same run served from the Export tab (issue 24: ``studio serve``'s OpenAI-compatible server) and picked in the
Chat tab's Tuned list: its pane's greedy reply is the one the ``openai`` client gets from that server with the same
settings; once the server is stopped, the pane says so and the base pane still answers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import ROOT, open_tab, pick, type_field, wait_text

pytestmark = pytest.mark.slow  # a real server, a training run and a browser

PANES = ("#chat-base", "#chat-tuned")
ERRORS = ("TypeError", "Error", "⚠️", "worker exited", "timed out")


_TRAINED: dict[Path, str] = {}


def _train_short_run(home: Path) -> str:
    """A LoRA run of the demo, a few steps, trained to the end through `studio train` in the server's workspace
    (once per workspace: both tests chat with it)."""
    if home not in _TRAINED:
        _TRAINED[home] = _train(home)
    return _TRAINED[home]


def _train(home: Path) -> str:
    spec = yaml.safe_load((home / "demo_spec.yaml").read_text(encoding="utf-8"))
    spec["train"].update(max_steps=2, save_steps=2, logging_steps=1)
    spec["data"]["max_samples"] = 16
    path = home / "chat-e2e.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    env = {**os.environ, "STUDIO_HOME": str(home)}
    out = subprocess.run(
        [sys.executable, "-m", "engine.cli", "train", str(path), "--name", "chat-e2e"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0 and "completed" in out.stdout, out.stdout[-2000:] + out.stderr[-2000:]
    return out.stdout.split()[1].rstrip(":")  # "run <id>: queued in <folder>"


def _messages(page, pane: str) -> list[dict]:
    """The bubbles a person sees in a pane, in order: who said it and the text."""
    return page.evaluate(
        """(pane) => [...document.querySelectorAll(pane + ' .message-row')].map(r => ({
            role: r.classList.contains('user-row') ? 'user' : 'assistant',
            text: (r.querySelector('.message') || r).innerText.trim()}))""",
        pane,
    )


def _wait_turn(page, turn: int) -> None:
    """Both panes show `turn` exchanges and Send is open again (the replies streamed to their end)."""
    page.wait_for_function(
        """(n) => ['#chat-base', '#chat-tuned'].every(p =>
                document.querySelectorAll(p + ' .message-row').length === 2 * n)
            && !document.querySelector('#chat-send').disabled
            && !document.querySelector('#chat-prompt textarea').disabled""",
        arg=turn,
        timeout=240_000,
    )


def test_three_turns_in_both_panes_then_reload_and_unload(page, server, shots, fits_width):
    run_id = _train_short_run(server.home)
    page.get_by_role("tab", name="Chat").click()
    page.click("#chat-adapter input")
    page.get_by_role("option", name=run_id).first.click()
    page.click("#chat-generation >> text=Generation settings")
    type_field(page, "#chat-system textarea", "You are a helpful assistant.")
    type_field(page, "#chat-max-new input", "16")
    page.click("#chat-load")
    page.wait_for_function(
        "(document.querySelector('#chat-status')?.innerText ?? '').includes('loaded base, tuned')", timeout=180_000
    )
    assert "demo-tiny-llama" in page.inner_text("#chat-status") and run_id in page.inner_text("#chat-status")

    prompts = ["Hello, who are you?", "Tell me more.", "Thanks, one last thing?"]
    for turn, prompt in enumerate(prompts, start=1):
        page.fill("#chat-prompt textarea", prompt)
        if turn == 2:
            page.press("#chat-prompt textarea", "Enter")  # the issue: every second message failed (Send or Enter)
        else:
            page.click("#chat-send")
        _wait_turn(page, turn)
        for pane in PANES:
            shown = _messages(page, pane)
            assert [m["role"] for m in shown] == ["user", "assistant"] * turn, shown
            assert [m["text"] for m in shown[0::2]] == prompts[:turn], shown
            assert all(m["text"] for m in shown[1::2]), shown  # every reply has text
            assert not any(e in m["text"] for m in shown for e in ERRORS), shown
    page.screenshot(path=str(shots / "chat-three-turns.png"), full_page=True)
    assert fits_width(page)

    # A reload: the pickers and the status show the models the workers run, not the page's defaults.
    page.reload()
    page.wait_for_selector("#start-btn", timeout=60_000)
    page.get_by_role("tab", name="Chat").click()
    page.wait_for_function(
        "(document.querySelector('#chat-status')?.innerText ?? '').includes('loaded base, tuned')", timeout=90_000
    )
    page.wait_for_function(
        "(id) => document.querySelector('#chat-adapter input').value.includes(id)", arg=run_id, timeout=90_000
    )
    assert "demo-tiny-llama" in page.input_value("#chat-model input")
    page.click("#chat-unload")
    page.wait_for_function(
        "(document.querySelector('#chat-status')?.innerText ?? '').includes('unloaded 2 worker(s)')", timeout=90_000
    )


def test_chat_with_a_served_run(page, server, shots):
    from openai import OpenAI

    run_id = _train_short_run(server.home)
    open_tab(page, "Export")
    pick(page, "#export-source", run_id)
    page.click("#xf-serve")
    page.wait_for_selector("#serve-url", timeout=300_000)
    url = page.inner_text("#serve-url").strip()
    assert url.startswith("http://127.0.0.1:") and url.endswith("/v1"), url

    open_tab(page, "Chat")
    pick(page, "#chat-adapter", url)  # "served: <model> · <url>" in the Tuned list
    page.wait_for_function(  # a served run brings its own base model into the Base pane's field
        "document.querySelector('#chat-model input').value.includes('demo-tiny-llama')", timeout=90_000
    )
    page.click("#chat-generation >> text=Generation settings")
    # typed once the section is drawn (type_field): a fill within the frame gradio mounts it was undone (ci13)
    type_field(page, "#chat-max-new input", "12")
    type_field(page, "#chat-temperature input[type=number]", "0")
    page.click("#chat-load")
    page.wait_for_function(
        "(document.querySelector('#chat-status')?.innerText ?? '').includes('loaded base, tuned')", timeout=180_000
    )
    assert url in page.inner_text("#chat-status"), page.inner_text("#chat-status")

    prompt = "Hello, who are you?"
    page.fill("#chat-prompt textarea", prompt)
    page.click("#chat-send")
    _wait_turn(page, 1)
    client = OpenAI(base_url=url, api_key="not-needed")
    served = client.chat.completions.create(
        model=client.models.list().data[0].id,
        messages=[{"role": "user", "content": prompt}],
        max_tokens=12,
        temperature=0,
    )
    want = served.choices[0].message.content
    shown = _messages(page, "#chat-tuned")
    assert [m["text"] for m in shown][0] == prompt and shown[1]["text"], shown
    # what each request asked the server for ("generating up to N tokens"): the page's 12, then the test's own
    asked = [
        ln for log in server.home.glob("runs/*/train.log") for ln in log.read_text().splitlines() if "generating" in ln
    ]
    assert " ".join(shown[1]["text"].split()) == " ".join(want.split()), (shown, want, asked)
    page.screenshot(path=str(shots / "chat-served.png"), full_page=True)

    # The server stopped from the Export tab: the Tuned pane says it is not answering; the base pane answers.
    open_tab(page, "Export")
    page.click("#xf-serve-stop")
    page.wait_for_function(
        "!(document.querySelector('#xf-serve-status')?.innerText ?? '').includes('🟢')", timeout=90_000
    )
    open_tab(page, "Chat")
    page.fill("#chat-prompt textarea", "Still there?")
    page.click("#chat-send")
    _wait_turn(page, 2)
    assert "is not answering" in _messages(page, "#chat-tuned")[3]["text"]
    assert not any(e in _messages(page, "#chat-base")[3]["text"] for e in ERRORS)
    page.click("#chat-unload")  # the base pane's worker ends with the test
    page.wait_for_function(
        "(document.querySelector('#chat-status')?.innerText ?? '').includes('unloaded 2 worker(s)')", timeout=90_000
    )


def test_feedback_from_chat_trains_a_dpo_run(page, server, shots):
    """Learning from use (issue 44 item 5): a person chats with a trained run, marks its answer bad, edits it into a
    better one and sees the counts; the Datasets tab lists both feedback sets; Train on this feedback starts a DPO
    run whose id the message says and the Train tab's dashboard follows to its end, DPO's rewards drawn."""
    run_id = _train_short_run(server.home)
    open_tab(page, "Chat")
    pick(page, "#chat-adapter", run_id)
    page.wait_for_function(
        "document.querySelector('#chat-model input').value.includes('demo-tiny-llama')", timeout=90_000
    )
    page.click("#chat-generation >> text=Generation settings")
    type_field(page, "#chat-max-new input", "12")
    page.click("#chat-load")
    wait_text(page, "#chat-status", "loaded base, tuned", timeout=180_000)
    page.fill("#chat-prompt textarea", "Hello, who are you?")
    page.click("#chat-send")
    _wait_turn(page, 1)
    answer = _messages(page, "#chat-tuned")[1]["text"]
    assert answer and not any(e in answer for e in ERRORS), answer

    page.click("#chat-fb-bad")  # the Tuned pane's answer, the section's default
    status = wait_text(page, "#chat-fb-status", "Marked the Tuned answer bad")
    assert "0 better answer(s)" in status and "1 marked bad" in status, status
    page.click("#chat-fb-edit")  # Edit answer… puts the model's answer in the box
    box = page.locator("#chat-fb-better textarea")
    page.wait_for_function("document.querySelector('#chat-fb-better textarea').value.trim().length > 0")
    assert " ".join(box.input_value().split()) == " ".join(answer.split())
    box.fill("Hello! I am a small assistant, glad to help.")
    page.click("#chat-fb-save")
    status = wait_text(page, "#chat-fb-status", "as a preference pair")
    assert "1 better answer(s)" in status and "1 marked bad" in status, status
    expect_empty = "document.querySelector('#chat-fb-better textarea').value === ''"
    page.wait_for_function(expect_empty)
    page.screenshot(path=str(shots / "chat-feedback.png"), full_page=True)

    open_tab(page, "Datasets")  # both feedback sets are registered datasets
    page.locator("#ds-pick input").click()
    for name in ("chat_feedback_dpo", "chat_feedback_kto"):
        page.locator("[role=option]", has_text=name).first.wait_for(state="visible", timeout=90_000)
    page.keyboard.press("Escape")

    open_tab(page, "Chat")
    page.click("#chat-fb-train")
    msg = wait_text(page, "#chat-fb-train-msg", "DPO on 1 feedback row(s)", timeout=120_000)
    new_id = msg.split("Run ", 1)[1].split()[0]
    assert new_id != run_id and "chat_feedback_dpo" in msg and f"run {run_id}'s adapter" in msg, msg
    page.click("#chat-unload")
    wait_text(page, "#chat-status", "unloaded 2 worker(s)", timeout=90_000)

    open_tab(page, "Train")  # the dashboard follows the new run to its end
    page.wait_for_function(
        "(id) => document.querySelector('#run-picker input').value.includes(id)", arg=new_id, timeout=90_000
    )
    page.wait_for_function(
        "(id) => { const s = document.querySelector('#run-status').innerText;"
        " return s.includes(id) && (s.includes('completed') || s.includes('failed')); }",
        arg=new_id,
        timeout=400_000,
    )
    assert "completed" in page.inner_text("#run-status"), page.inner_text("#run-status")
    page.locator("#plot-stage-rewards").wait_for(state="visible", timeout=90_000)
    page.locator("#plot-stage-rewards").scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "chat-feedback-run.png"), full_page=True)

    # the section in Chinese: its buttons, the pane choices and the counts line follow the switch
    page.click("#lang-picker input")
    page.get_by_role("option", name="中文").click()
    page.wait_for_function("document.querySelector('#start-btn').innerText.includes('开始训练')", timeout=120_000)
    open_tab(page, "对话")
    status = wait_text(page, "#chat-fb-status", "个更好的回答")
    assert "**" not in status and "1 个标为不好" in status and "Feedback kept" not in status, status
    assert "用这些反馈训练" in page.inner_text("#chat-fb-train") and "微调后" in page.inner_text("#chat-fb-pane")
    assert "保存更好的回答" in page.inner_text("#chat-fb-save") and "👎 不好" in page.inner_text("#chat-fb-bad")
