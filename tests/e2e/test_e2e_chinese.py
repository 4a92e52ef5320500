"""The Chinese page in a real browser: the Datasets tab's problems with a bad upload, its length histogram read
as stage pt, the Runs tab's headers and action messages and the Export tab's refusals come out in Chinese (the Train
tab's validation: test_e2e_tabs.py). Screenshots into test-artifacts/."""

from __future__ import annotations

import functools
import json
import re
import uuid

import pytest

from tests.e2e.conftest import open_tab, wait_text

pytestmark = pytest.mark.slow  # a real server and browser

CJK = re.compile(r"[\u4e00-\u9fff]")


def _to_chinese(page) -> None:
    page.wait_for_selector("#start-btn:not([disabled])", timeout=60_000)  # the page's load handlers have run
    page.click("#lang-picker input")
    page.get_by_role("option", name="中文").click()
    page.wait_for_function("document.querySelector('#start-btn').innerText.includes('开始训练')", timeout=120_000)
    page.get_by_role("tab", name="数据集").wait_for(timeout=120_000)
    # the upload areas drawn again in gradio's Chinese words (studio.app.REDRAWN_JS): an upload can follow
    page.wait_for_function("document.documentElement.dataset.studioWords === 'zh'", timeout=120_000)


_wait_text = functools.partial(wait_text, timeout=90_000)


def test_datasets_problems_in_chinese(page, shots, fits_width, tmp_path):
    _to_chinese(page)
    open_tab(page, "数据集")
    src = tmp_path / "half bad.jsonl"
    rows = [json.dumps({"instruction": "fine", "output": "ok"}), '{"instruction": "torn']
    rows += [json.dumps({"instruction": f"q{i}", "output": ""}) for i in range(3)]
    src.write_text("\n".join(rows) + "\n")
    page.set_input_files("#ds-upload input[type=file]", str(src))
    _wait_text(page, "#ds-upload-msg", "已保存")
    page.fill("#ds-name input", "half_bad")
    page.click("#ds-register")
    shown = _wait_text(page, "#ds-register-msg", "已注册，但发现问题")
    assert "JSON 行格式错误" in shown and "回复为空（第 2 轮）（另有 2 行同样的问题）" in shown, shown
    assert "malformed" not in shown and "empty response" not in shown
    page.fill("#ds-name input", "bad name!")
    page.click("#ds-register")
    shown = _wait_text(page, "#ds-register-msg", "数据集名称")
    assert "请使用字母、数字" in shown
    page.screenshot(path=str(shots / "datasets-zh.png"), full_page=True)
    assert fits_width(page)


def test_runs_tab_in_chinese(page, shots, fits_width):
    _to_chinese(page)
    open_tab(page, "运行记录")
    page.wait_for_selector("#runs-table", timeout=90_000)
    headers = _wait_text(page, "#runs-table", "最终损失")
    assert "状态" in headers and "final loss" not in headers
    page.get_by_role("button", name="继续训练").click()
    assert "请先选择一个运行" in _wait_text(page, "#runs-msg", "请先选择")
    page.get_by_role("button", name="复制到表单").click()
    _wait_text(page, "#runs-msg", "请先选择一个运行")
    statuses = page.inner_text("#runs-table")
    for english in ("completed", "failed", "stopped", "running", "queued"):
        assert english not in statuses, statuses
    page.screenshot(path=str(shots / "runs-zh.png"), full_page=True)
    assert fits_width(page)


def test_export_tab_and_pt_lengths_in_chinese(page, shots, fits_width):
    _to_chinese(page)
    page.click("#f-method-stage input")  # the Train form's stage decides how the Datasets tab reads the cutoff
    page.get_by_role("option", name="pt", exact=True).click()
    open_tab(page, "数据集")
    page.click("#ds-pick input")
    page.get_by_role("option", name="demo_pretrain").click()
    note = _wait_text(page, "#ds-hist-note", "pt 阶段")
    assert "不截断" in note and "被截断" not in note and "块" in note, note

    open_tab(page, "导出")
    page.click("#export-dtype input")
    assert page.get_by_role("option", name="与基座相同").count() == 1
    page.keyboard.press("Escape")
    page.fill("#export-source input", "/etc")
    page.keyboard.press("Enter")
    page.fill("#export-out input", "/etc/merged")
    page.keyboard.press("Enter")
    shown = _wait_text(page, "#export-estimate", "这里只能使用工作区")
    assert "only folders" not in shown, shown
    page.click("#merge-btn")
    assert "这里只能使用工作区" in _wait_text(page, "#export-result", "工作区")
    page.click("#merge-cancel")
    _wait_text(page, "#export-result", "没有可取消的合并")
    headers = page.locator("#export-recent th").all_inner_texts()  # merges other tests made, when there are any
    assert not headers or ("状态" in headers and "verification" not in headers), headers
    page.screenshot(path=str(shots / "export-zh.png"), full_page=True)
    assert fits_width(page)


def test_gradio_words_and_the_last_english_labels_follow_chinese(page, shots):
    """Issue 27 item 12: gradio's own words (the upload areas) followed the browser's language, not the page's, and
    the command box's label and the Evaluate tab's side-by-side choices stayed English after the switch."""
    _to_chinese(page)
    page.get_by_text("LLaMA-Factory YAML 导入与导出", exact=True).first.click()
    upload = _wait_text(page, "#lf-upload", "点击上传")
    assert "将文件拖放到此处" in upload and "Click to Upload" not in upload and "Drop File Here" not in upload, upload
    page.locator("button.label-wrap", has_text="预览命令").first.click()
    assert "命令与生成的配置" in _wait_text(page, "#preview-out", "命令与生成的配置")
    open_tab(page, "对话")
    shown = page.locator("#tab-chat").inner_text()
    assert "Drop Image Here" not in shown and "Click to Upload" not in shown, shown
    open_tab(page, "评估")
    choices = _wait_text(page, "#eval-show", "回答不同的行")
    assert "全部行" in choices and "微调后变差的行" in choices and "answers differ" not in choices, choices
    page.screenshot(path=str(shots / "gradio-words-zh.png"), full_page=True)

    # after a reload, gradio starts in the page's language: the Chat tab's image area, drawn before any switch
    page.reload()
    page.wait_for_selector("#start-btn:not([disabled])", timeout=90_000)
    page.wait_for_function("document.querySelector('#start-btn').innerText.includes('开始训练')", timeout=120_000)
    open_tab(page, "对话")
    chat = _wait_text(page, "#tab-chat", "点击上传")
    assert "Drop Image Here" not in chat and "Click to Upload" not in chat, chat

    # and back: gradio's words in English again in what is drawn next (the Datasets tab's upload)
    page.click("#lang-picker input")
    page.get_by_role("option", name="English").click()
    page.wait_for_function("document.querySelector('#start-btn').innerText.includes('Start')", timeout=120_000)
    open_tab(page, "Datasets")
    shown = _wait_text(page, "#tab-data", "Click to Upload")
    assert "点击上传" not in shown, shown


def test_gradio_words_and_messages_from_before_a_switch_follow_it(page, tmp_path):
    """Issue 27 item 12: an upload area drawn before the switch kept gradio's English ("Drop File Here") until a
    reload, and what Upload and Register had said stayed in the language they said it in; now the area is drawn
    again in the new language, in the tab shown and in those behind, and the messages are said again in it."""
    page.wait_for_selector("#start-btn:not([disabled])", timeout=60_000)
    open_tab(page, "Chat")
    assert "Click to Upload" in _wait_text(page, "#chat-image", "Click to Upload")
    open_tab(page, "Datasets")
    assert "Drop File Here" in _wait_text(page, "#ds-upload", "Drop File Here")
    page.click("#lang-picker input")  # while the Datasets tab is shown
    page.get_by_role("option", name="中文").click()
    page.get_by_role("tab", name="对话").wait_for(timeout=120_000)
    upload = _wait_text(page, "#ds-upload", "将文件拖放到此处")
    assert "点击上传" in upload and "Drop File Here" not in upload and "Click to Upload" not in upload, upload
    name = f"said_{uuid.uuid4().hex[:6]}"
    src = tmp_path / f"{name}.jsonl"
    src.write_text("\n".join(json.dumps({"instruction": f"Say {i}", "output": f"{i}"}) for i in range(6)) + "\n")
    page.set_input_files("#ds-upload input[type=file]", str(src))
    assert "列：instruction, output" in _wait_text(page, "#ds-upload-msg", "已保存")
    page.fill("#ds-name input", name)
    page.click("#ds-register")
    _wait_text(page, "#ds-register-msg", f"已注册 {name}")
    open_tab(page, "对话")
    image = _wait_text(page, "#chat-image", "点击上传")
    assert "Drop Image Here" not in image and "Click to Upload" not in image, image

    page.click("#lang-picker input")  # back, while the Chat tab is shown
    page.get_by_role("option", name="English").click()
    image = _wait_text(page, "#chat-image", "Click to Upload")
    assert "点击上传" not in image, image
    open_tab(page, "Datasets")
    assert "columns: instruction, output" in _wait_text(page, "#ds-upload-msg", "stored")
    assert "已注册" not in _wait_text(page, "#ds-register-msg", f"registered {name}")
    upload = _wait_text(page, "#ds-upload", name)  # the file stays on the area drawn again
    assert "点击上传" not in upload and "上传文件" not in upload, upload
