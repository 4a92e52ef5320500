"""The engine's own messages on the Chinese page (the spec's: test_i18n_spec.py): every key of the dataset, plan,
doctor, run, export and LLaMA-Factory catalogs has its Chinese (the LF import's notes in use: test_lf_i18n.py); the
engine modules make their user-visible texts from the catalogs; real bad datasets, doctor results, plans, run
refusals, run states and the Export tab's refusals, progress and results come out in Chinese on the page's handlers."""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from engine.core import messages as core_messages
from engine.core import workspace
from engine.data import messages as data_messages
from engine.eval import messages as eval_messages
from engine.export import messages as export_messages
from engine.lf import messages as lf_messages
from engine.machine import messages as doctor_messages
from engine.models import messages as model_messages
from engine.plan import messages as plan_messages
from engine.runs import messages as run_messages
from engine.watch import messages as watch_messages
from studio import forms, monitor, monitor_text
from studio.i18n.data import DATA_ZH
from studio.i18n.eval import EVAL_ZH
from studio.i18n.export import EXPORT_ZH
from studio.i18n.lf import LF_ZH
from studio.i18n.localize import localize, localize_error, placeholders
from studio.i18n.machine import DOCTOR_ZH
from studio.i18n.models import MODELS_ZH
from studio.i18n.page import STRINGS
from studio.i18n.plan import PLAN_ZH
from studio.i18n.runs import RUNS_ZH
from studio.i18n.watch import WATCH_ZH
from studio.i18n.workspace import WORKSPACE_ZH

CJK = re.compile(r"[\u4e00-\u9fff]")
ROOT = Path(__file__).resolve().parents[2]
CATALOGS = [
    (data_messages.MESSAGES, DATA_ZH),
    (plan_messages.MESSAGES, PLAN_ZH),
    (doctor_messages.MESSAGES, DOCTOR_ZH),
    (run_messages.MESSAGES, RUNS_ZH),
    (watch_messages.MESSAGES, WATCH_ZH),
    (export_messages.MESSAGES, EXPORT_ZH),
    (model_messages.MESSAGES, MODELS_ZH),
    (core_messages.MESSAGES, WORKSPACE_ZH),
    (lf_messages.MESSAGES, LF_ZH),
    (eval_messages.MESSAGES, EVAL_ZH),
]


@pytest.mark.parametrize(
    ("english", "chinese"),
    CATALOGS,
    ids=["data", "plan", "doctor", "runs", "watch", "export", "models", "workspace", "lf", "eval"],
)
def test_every_catalog_key_has_chinese_with_the_same_placeholders(english, chinese):
    assert set(chinese) == set(english), "keys without Chinese / Chinese without a key"
    for key, text in english.items():
        assert placeholders(chinese[key]) == placeholders(text), key
        words = re.sub(r"\{[^}]*\}", "", text)  # a place alone ("{file}: {message}") has no words to translate
        assert CJK.search(chinese[key]) or not re.search("[a-z]{2}", words), f"{key}: not Chinese"


def test_page_strings_have_chinese():
    same_in_both = {"tensorboard", "rc_id"}  # names that read the same in Chinese
    for key, (en, zh) in STRINGS.items():
        assert placeholders(en) == placeholders(zh), key
        assert CJK.search(zh) or key in same_in_both, f"{key}: no Chinese ({zh!r})"


# Calls whose text argument reaches the page: (module, callee name, index of the text arguments or None for all).
_TEXT_CALLS = [
    ("engine/data/dataset_registry.py", "DataProblem", [3]),
    ("engine/data/dataset_registry.py", "ValueError", None),
    ("engine/data/files.py", "DataProblem", [3]),
    ("engine/data/rows.py", "DataProblem", [3]),
    ("engine/data/rows.py", "_RowError", [1]),
    ("engine/data/templates.py", "TemplateError", None),
    ("engine/data/template_tools.py", "TemplateError", None),
    ("engine/runs/registry.py", "RunsError", None),
    ("engine/commands/runs_cli.py", "RunsError", None),
    ("engine/export/checks.py", "ExportError", None),
    ("engine/export/merge_jobs.py", "ExportError", None),
    ("engine/trainer/merge.py", "ExportError", None),
    ("engine/trainer/merge.py", "VerificationError", [0]),
    ("engine/trainer/merge.py", "Cancelled", None),
    ("engine/trainer/merge.py", "stage", [3]),  # a progress event's detail, shown on the Export tab
    ("studio/tabs/export.py", "ValueError", None),
    ("engine/core/folders.py", "FolderError", None),
    ("engine/machine/doctor.py", "Check", [0, 2, 3]),
    ("engine/plan/planner.py", "append", None),
    ("engine/plan/model_shape.py", "append", None),
    ("engine/plan/fit.py", "append", None),
    ("engine/plan/advice.py", "append", None),
]


def _literal_texts(node: ast.AST) -> list[ast.AST]:
    """f-strings, non-empty string constants and string concatenations inside an argument (both arms of an if)."""
    if isinstance(node, ast.IfExp):
        return _literal_texts(node.body) + _literal_texts(node.orelse)
    if isinstance(node, ast.JoinedStr) or (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)):
        return [node]
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value:
        return [node]
    return []


def test_engine_texts_for_the_page_come_from_the_catalogs():
    """A message written as an f-string bypasses the catalog and stays English on the Chinese page."""
    for module, callee, indexes in _TEXT_CALLS:
        tree = ast.parse((ROOT / module).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            if name != callee:
                continue
            if callee == "append":  # plan notes, advice tips, auto-fit steps; other lists are not shown
                owner = getattr(node.func.value, "id", None) or getattr(node.func.value, "attr", "")
                if owner not in ("notes", "tips", "steps", "tried"):
                    continue
            args = node.args if indexes is None else [node.args[i] for i in indexes if i < len(node.args)]
            for arg in args:
                assert not _literal_texts(arg), f"{module}:{node.lineno}: {callee}(...) has text outside the catalog"


def _bad_files(folder: Path) -> dict[str, tuple[str, str, dict]]:
    """name -> (file, formatting, columns): one file per kind of problem the registry names."""
    rows = [
        json.dumps({"instruction": "fine", "output": "ok"}),
        '{"instruction": "torn',
        json.dumps({"instruction": "x", "output": ""}),
        json.dumps({"instruction": "y", "output": " "}),
        json.dumps({"instruction": "z", "output": ""}),
        json.dumps({"instruction": "no answer"}),
        json.dumps([1, 2]),
        json.dumps({"instruction": "h", "output": "o", "history": [["only one"]]}),
    ]
    (folder / "rows.jsonl").write_bytes(("\n".join(rows) + "\n").encode() + b'{"instruction": "\xe9"}\n')
    (folder / "broken.json").write_text('[{"instruction": "a",')
    (folder / "scalar.json").write_text('"just text"')
    (folder / "latin.csv").write_bytes(b"instruction,output\ncaf\xe9,1\n")
    (folder / "garbage.parquet").write_bytes(b"this is not parquet at all")
    (folder / "empty.jsonl").write_text("\n")
    turns = [
        {"conversations": [{"from": "gpt", "value": "first"}]},
        {"conversations": [{"from": "alien", "value": "?"}]},
        {"conversations": "not a list"},
        {"conversations": [{"speaker": "human"}]},
        {"conversations": [{"from": "human", "value": "only a question"}]},
        {"other": 1},
    ]
    (folder / "chat.json").write_text(json.dumps(turns))
    late = [{"conversations": [{"from": "human", "value": "q"}, {"from": "system", "value": "late"}]}]
    (folder / "late.json").write_text(json.dumps(late))
    alpaca = {"prompt": "instruction", "response": "output"}
    return {
        "rows": ("rows.jsonl", "alpaca", alpaca),
        "broken": ("broken.json", "alpaca", alpaca),
        "scalar": ("scalar.json", "alpaca", alpaca),
        "latin": ("latin.csv", "alpaca", alpaca),
        "garbage": ("garbage.parquet", "alpaca", alpaca),
        "empty": ("empty.jsonl", "alpaca", alpaca),
        "chat": ("chat.json", "sharegpt", {"messages": "conversations"}),
        "late": ("late.json", "sharegpt", {"messages": "conversations"}),
    }


def _keys(msg) -> set[str]:
    """A message's key and the keys of the messages inside its parameters."""
    out = {getattr(msg, "key", "")}
    for value in (getattr(msg, "params", {}) or {}).values():
        if getattr(value, "key", ""):
            out |= _keys(value)
    return out - {""}


def test_bad_datasets_through_the_datasets_tab_come_out_in_chinese(run_registry):
    from engine.data import dataset_registry as reg
    from studio.tabs import data_register

    uploads = workspace.uploads_dir()
    uploads.mkdir(parents=True, exist_ok=True)
    seen: set[str] = set()
    for name, (file, fmt, cols) in _bad_files(uploads).items():
        shown = data_register.register(str(uploads / file), name, fmt, cols, "zh")
        # a file with a trainable row is registered with its problems; one without is refused (not registered)
        assert shown.startswith(("⚠ 已注册，但发现问题：", "❌ 未注册：")), shown
        lines = [line for line in shown.splitlines()[1:] if line.startswith("- ")]
        assert lines, shown
        for line in lines:
            assert CJK.search(line.split("：", 1)[-1]), f"English left on the Chinese page: {line!r}"
        assert not re.search(r"[A-Za-z]{5,} [a-z]{3,} [a-z]{3,}", shown.splitlines()[0]), shown  # no English head
        english = data_register.register(str(uploads / file), name + "_en", fmt, cols, "en")
        assert not CJK.search(english) and english.startswith(("⚠ registered, but:", "❌ Not registered: "))
        for problem in reg.check_entry(workspace.data_dir(), name, str(uploads / file), fmt, cols)[0]:
            seen |= _keys(problem.located())
    for stage, name in (("dpo", "rows"), ("sft", "nope")):
        for problem in reg.check_datasets([name], workspace.data_dir(), stage):
            seen |= _keys(problem.located())
            assert CJK.search(data_register.problem_text(problem, "zh"))
    row_keys = {"data.bad_json_line", "data.empty_response", "data.missing_column", "data.row_not_object"}
    file_keys = {"data.bad_json", "data.not_list", "data.not_utf8_line", "data.bad_parquet", "data.no_rows"}
    turn_keys = {"data.turn_order", "data.turn_role", "data.turns_not_list", "data.turn_keys", "data.system_first"}
    more = {"data.bad_history", "data.not_utf8_column", "data.more_rows", "data.end_assistant"}
    places = {"data.at", "data.at_line_column", "data.at_row_column", "data.at_line"}
    stage_keys = {"data.pairs_needed", "data.not_registered"}
    assert row_keys | file_keys | turn_keys | more | places | stage_keys <= seen, sorted(
        (row_keys | file_keys | turn_keys | more | places | stage_keys) - seen
    )

    # refusals before anything is registered, and the upload checks
    for shown in (
        data_register.register(str(uploads / "rows.jsonl"), "bad name!", "alpaca", {}, "zh"),
        data_register.register(str(uploads / "rows.jsonl"), "rows", "alpaca", {}, "zh"),  # already registered
        data_register.register("/etc/passwd", "x", "alpaca", {}, "zh"),
    ):
        assert shown.startswith("❌") and CJK.search(shown), shown
    for bad in ("notes.exe", "....json"):
        with pytest.raises(ValueError) as exc:
            data_register.safe_upload_name(bad)
        assert CJK.search(localize_error(exc.value, "zh")) and not CJK.search(str(exc.value))


def test_start_refused_for_bad_data_in_chinese(run_registry, demo_paths):
    from studio.tabs import data_register, train_actions

    uploads = workspace.uploads_dir()
    uploads.mkdir(parents=True, exist_ok=True)
    rows = [{"instruction": "fine", "output": "ok"}, {"instruction": "a", "output": ""}]
    (uploads / "half.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    data_register.register(str(uploads / "half.jsonl"), "half", "alpaca", {}, "zh")
    values = forms.spec_to_values(yaml.safe_load(Path(demo_paths["example_spec"]).read_text(encoding="utf-8")))
    values |= {"data.datasets": ["half"], "data.dataset_dir": str(workspace.data_dir())}
    shown, run_id, _ = train_actions.start_run(values, "zh")
    assert run_id is None and shown.startswith("❌ 运行配置无效："), shown
    assert "回复为空（第 2 轮）" in shown and "第 2 行" in shown and "empty response" not in shown
    english, _, _ = train_actions.start_run(values, "en")
    assert "half.jsonl, line 2, column 'output': empty response (turn 2)" in english


def test_template_refusal_in_the_sample_box_in_chinese(run_registry, demo_paths):
    from engine.data.template_table import TemplateError
    from engine.data.templates import resolve, tokenizer_info

    with pytest.raises(TemplateError) as exc:
        resolve("no-such-template", tokenizer_info(demo_paths["model_dir"]))
    assert localize_error(exc.value, "zh").startswith("未知模板 'no-such-template'")


def _fake_stack(**over) -> dict:
    stack = {
        "cuda_build": "12.4",
        "hip_build": None,
        "cuda_available": True,
        "torch": "2.9.0",
        "device_count": 1,
        "bf16": False,
        "flash_attn": "not available: ImportError: no flash_attn",
        "deepspeed_ops": {"cpu_adam": False, "fused_adam": True},
        "versions": {"transformers": "5.0", "peft": None, "flash-attn": None},
    }
    return stack | over


@pytest.mark.parametrize(
    ("gpus", "stack", "allreduce"),
    [
        (1, _fake_stack(), {"ok": False, "backend": "nccl", "world_size": 2, "results": [1, 3]}),
        (1, _fake_stack(cuda_available=False, deepspeed_ops="deepspeed not importable: x"), None),
        (0, None, None),
        (0, _fake_stack(cuda_available=False, device_count=0), {"ok": True, "backend": "gloo", "world_size": 2}),
    ],
    ids=["gpu-warnings", "torch-blind", "no-stack", "cpu"],
)
def test_doctor_checks_in_chinese(monkeypatch, gpus, stack, allreduce):
    from engine.machine import doctor, hardware
    from studio.tabs import doctor as doctor_tab

    real_detect = hardware.detect
    gpu = SimpleNamespace(index=0, name="H100", memory_total_mib=81559, driver="550", vendor="nvidia")
    monkeypatch.setattr(hardware, "detect", lambda: SimpleNamespace(gpus=[gpu] * gpus, reason="no driver"))
    results = {"stack": stack, "allreduce": allreduce}
    timeout = doctor_messages.message("doctor.timeout", seconds=120)
    monkeypatch.setattr(doctor, "_probe", lambda what, _t: (results[what], "" if results[what] else timeout))
    checks = doctor.run_checks()
    real_detect.cache_clear()  # the reason the real detection gives for no GPU, in Chinese too
    monkeypatch.setenv("STUDIO_FORCE_CPU", "0")
    for reason in (hardware.cpu_only(doctor_messages.message("hardware.no_rocm")).reason, real_detect().reason):
        assert not reason or CJK.search(localize(reason, "zh")), reason
    real_detect.cache_clear()
    frame = doctor_tab.checks_frame("zh")
    assert list(frame.columns) == ["检查项", "结果", "详情", "修复建议"] and len(frame) == len(checks)
    raw = []  # texts the probe reported (versions, an import error): shown as they are
    for check, row in zip(checks, frame.itertuples(index=False)):
        assert row[1] in ("通过", "警告", "失败")
        for text, cell in ((check.name, row[0]), (check.detail, row[2]), (check.fix, row[3])):
            if not text:
                continue
            if getattr(text, "key", ""):
                assert CJK.search(cell), f"{text.key}: {cell!r}"
            else:
                raw.append(str(text))
    assert all(t.startswith(("deepspeed not importable", "transformers ")) for t in raw), raw
    english = doctor_tab.checks_frame("en")
    assert not CJK.search(english.to_string())


def test_plan_notes_and_autofit_steps_in_chinese(demo_paths):
    from studio.tabs import train, train_plan

    values = forms.spec_to_values(yaml.safe_load(Path(demo_paths["example_spec"]).read_text(encoding="utf-8")))
    values |= {"model.attn_implementation": "eager", "launch.device": "cpu", "method.finetuning": "full"}
    shown = train.plan_html(values, 80, "zh")
    notes = re.findall(r"<small>• (.*?)</small>", shown)
    assert len(notes) >= 2 and all(CJK.search(n) for n in notes), notes
    english = train.plan_html(values, 80, "en")
    assert "eager attention materialises" in english and "device is cpu" in english

    values |= {"launch.device": "auto", "train.per_device_batch_size": 8, "data.cutoff_len": 1024}
    new, note = train_plan.autofit(values, 0.05, "zh")
    steps = note.split("依次尝试了：", 1)[-1].strip().splitlines()
    assert new is None and "表单未改动" in note and steps and all(CJK.search(s) for s in steps), note
    _, english = train_plan.autofit(values, 0.05, "en")
    assert "per-device batch 8 -> 4" in english and not CJK.search(english)


def test_speed_advice_in_chinese():
    from engine.plan.advice import advise
    from engine.spec.schema import parse_spec

    spec = parse_spec(
        {
            "model": {"name_or_path": "m", "attn_implementation": "eager"},
            "data": {"datasets": ["d"]},
            "train": {"precision": "fp32", "per_device_batch_size": 1, "gradient_checkpointing": True},
            "launch": {"device": "cuda", "backend": "deepspeed", "num_processes": 2}
            | {"deepspeed": {"zero_stage": 2, "offload_optimizer": "cpu"}},
        }
    )
    logs = [{"type": "log", "payload": {"tokens_per_second": v}} for v in (1000, 900, 300, 200)]
    tips = advise(spec, [{"gpu_util": 30, "cpu_percent": 95}] * 5, logs)
    keys = {t.key for t in tips}
    assert {"advice.low_util", "advice.fp32", "advice.cpu_bound", "advice.throughput_drop"} <= keys
    assert all(CJK.search(localize(t, "zh")) for t in tips)


def test_runs_tab_in_chinese(run_registry, monkeypatch):
    from studio.tabs import runs

    assert runs.act("resume", None, "zh") == "请先选择一个运行"
    for action in ("resume", "delete"):
        shown = runs.act(action, "no-such-run", "zh")
        assert shown.startswith("❌ 没有 id 为 'no-such-run' 的运行"), shown
        assert runs.act(action, "no-such-run", "en").startswith("❌ no run with id 'no-such-run'")
    frame = runs.table("zh")
    assert list(frame.columns) == [
        "ID",
        "名称",
        "状态",
        "集群",
        "方法",
        "模型",
        "数据集",
        "开始时间",
        "用时",
        "最终损失",
        "训练进程峰值 MiB",
        "告警",
    ]
    assert list(runs.table().columns) == runs.COLUMNS
    assert runs.tensorboard_info("no-such-run", "zh").startswith("目录：")
    assert list(runs.spec_diff([], "zh").columns) == ["字段"]


def _terminal_view(tmp_path, kind: str, **payload) -> dict:
    from engine.core import events

    path = tmp_path / "events.jsonl"
    events.append_event(path, "run_started", 0, total_steps=4)
    events.append_event(path, "log", 1, loss=2.0, progress=0.25, eta_seconds=30, tokens_per_second=10.0)
    events.append_event(path, kind, 1, **payload)
    (tmp_path / "metrics.jsonl").write_text(
        json.dumps(
            {
                "ts": 1,
                "gpus": [],
                "cpu_pct": 50,
                "rss_mib": 300,
                "gpu_note": "GPU metrics off: STUDIO_FORCE_CPU=1; recording CPU and RAM only",
            }
        )
        + "\n"
    )
    view = monitor.new_view("r1", tmp_path)
    monitor.read_new(view)
    return view


@pytest.mark.parametrize("cause", ["oom", "communication", "data", "config", "killed", "other"])
def test_failed_run_on_the_dashboard_in_chinese(tmp_path, cause):
    view = _terminal_view(tmp_path, "failed", cause=cause, error="CUDA out of memory", traceback="Traceback ...")
    status = monitor_text.status_line(view, "failed", "zh")
    assert "失败" in status and "原因：" in status and CJK.search(monitor_text.cause_text(cause, "zh"))
    failure = monitor_text.failure_text(view, "zh")
    assert failure.startswith(f"原因：{monitor_text.cause_text(cause, 'zh')}\n错误：CUDA out of memory")
    assert monitor_text.failure_text(view).startswith(f"cause: {cause}\nerror: CUDA out of memory")


def test_stopped_and_running_dashboard_in_chinese(tmp_path):
    from studio.tabs import dashboard

    view = _terminal_view(tmp_path, "stopped", reason="SIGTERM")
    out = dashboard.render(view, "tokens", 0.6, True, "zh")
    loss, mem, util, progress, status = out[0], out[4], out[5], out[6], out[7]
    assert loss["x_title"] == "已见 token 数" and loss["y_title"] == "log10 损失" and mem["x_title"] == "秒"
    assert set(loss["value"]["curve"]) <= {"训练损失", "训练损失（平滑）", "验证损失"}
    assert set(mem["value"]["curve"]) == {"CPU 内存（本运行）"} and set(util["value"]["curve"]) == {"CPU"}
    assert "已停止（SIGTERM）" in status and "GPU 指标已关闭" in status and "显示本运行的 CPU 内存" in status
    assert "预计剩余" not in progress or "步" in progress
    english = dashboard.render(view, "step", 0, False, "en")
    assert not CJK.search(english[7]) and "stopped (SIGTERM)" in english[7]
    assert [label for label, _ in dashboard.axis_choices("zh")] == ["步", "轮次", "已见 token 数"]
    by_runner = "stopped by the user (process ended before it reported; signal SIGKILL)"
    assert monitor_text.stop_reason(by_runner, "zh") == "由用户停止：进程在报告之前已结束；信号 SIGKILL"
    assert monitor_text.stop_reason(by_runner) == by_runner
    # what the runner writes now: the English text with its catalog key beside it
    from engine.core.messages import to_json
    from engine.runs.messages import message as run_message

    how = run_message("runs.how_signal", signal="SIGKILL")
    reason = run_message("runs.user_stop_early", how=how)
    stopped = {"reason": str(reason), "reason_msg": to_json(reason)}
    assert str(reason) == by_runner
    assert monitor_text.stop_reason(stopped, "zh") == "由用户停止：进程在报告之前已结束；信号 SIGKILL"
    assert monitor_text.stop_reason(stopped) == by_runner
    error = run_message("runs.killed_by_signal", signal="SIGKILL")
    failed = {"cause": "killed", "error": str(error), "error_msg": to_json(error), "traceback": "tail"}
    assert monitor_text.event_text(failed, "error", "zh") == "被信号 SIGKILL 终止"
    assert monitor_text.event_text(failed, "error") == "killed by signal SIGKILL"
    assert monitor_text.event_text({"error": "CUDA out of memory"}, "error", "zh") == "CUDA out of memory"


def test_chat_statuses_in_chinese(run_registry):
    from studio.tabs import chat

    assert chat.load("", "", "zh") == "❌ 请选择基座模型"
    assert chat.unload("zh") == "已卸载 0 个对话进程"
    run = workspace.runs_dir() / "unfinished"
    run.mkdir(parents=True)
    shown = chat.load("m", str(run), "zh")
    assert shown.startswith("❌ ") and "没有 adapter_config.json" in shown, shown
    assert "no adapter_config.json there" in chat.load("m", str(run), "en")
    # a line written before a language switch follows it (issue 45 item 19); an error keeps its words
    assert chat.status_in(chat.unload("en"), "zh") == chat.loaded_text("zh") == "未加载模型"
    import gradio as gr

    skip = gr.skip()
    assert chat.status_in("❌ Pick a base model", "zh") == skip and chat.status_in("", "zh") == skip


def test_export_tab_in_chinese(run_registry, demo_paths, monkeypatch):
    """The Export tab's refusals (outside the workspace, bad folders, not enough memory), its estimate line, a merge's
    progress, a real failed merge read back from the registry, the list of merges and Cancel, in Chinese; the
    English stays the engine's."""
    from engine.core import events
    from engine.export import checks as xp
    from engine.export import merge_jobs as mj
    from engine.runs import registry as runs
    from engine.trainer import merge
    from studio.tabs import chat, export

    assert export.estimate("/etc", "", lang="zh").startswith("❌ /etc：这里只能使用工作区")
    assert export.estimate("/etc", "").startswith("❌ /etc: only folders inside the workspace")
    assert "这里只能使用工作区" in chat.load("m", "/etc", "zh")
    assert export.cancel(None, "zh")[1] == "没有可取消的合并" and export.cancel(None)[1] == "nothing to cancel"
    assert export.dtype_choices("zh")[0] == ("与基座相同", "")

    runs_dir = workspace.runs_dir()
    (runs_dir / "empty").mkdir(parents=True)
    (runs_dir / "model-copy").mkdir()
    (runs_dir / "model-copy" / "config.json").write_text("{}")
    unfinished = runs_dir / "unfinished"
    unfinished.mkdir()
    (unfinished / "spec.yaml").write_text(yaml.safe_dump({"method": {"finetuning": "lora"}}))
    events.append_event(unfinished / "events.jsonl", "failed", 1, cause="oom", error="x")
    for folder, chinese in (
        ("nope", "没有这个文件或目录"),
        ("empty", "既不是 PEFT 适配器目录"),
        ("model-copy", "这是完整的模型目录"),
        ("unfinished", "还没有适配器"),
    ):
        job, shown = export.start(str(runs_dir / folder), "", lang="zh")
        assert job is None and chinese in shown and not re.search("[a-z]{3,} [a-z]{3,}", shown), shown
    assert "它已失败" in export.start(str(unfinished), "", lang="zh")[1]
    assert (
        "(it failed)" not in export.start(str(unfinished), "")[1]
        and "it failed" in export.start(str(unfinished), "")[1]
    )

    # an adapter folder on the demo model: the estimate line, and the memory refusal with its fixes
    adapter = runs_dir / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": demo_paths["model_dir"]}))
    (adapter / "adapter_model.safetensors").write_bytes(len(b"{}").to_bytes(8, "little") + b"{}")
    needs = export.estimate(str(adapter), "exports/x", "bf16", "cpu", "zh")
    assert needs.startswith("✅ 内存：约需") and "（bf16，在 cpu 上）" in needs, needs
    monkeypatch.setenv("STUDIO_MEM_AVAILABLE", "1MB")
    refused = export.estimate(str(adapter), "exports/x", "", "cpu", "zh")
    assert refused.startswith("⚠️ 内存不足，无法合并") and "释放内存" in refused and "STUDIO_MEM_AVAILABLE" in refused
    job, shown = export.start(str(adapter), "exports/x", "", "cpu", False, "zh")
    assert job is None and "内存不足" in shown and "not enough" not in shown
    with pytest.raises(xp.ExportError) as exc:  # the CLI's English is unchanged
        xp.plan_export([str(adapter)], str(workspace.exports_dir() / "x"))
    assert str(exc.value).startswith("not enough memory for this merge: it needs about")
    monkeypatch.delenv("STUDIO_MEM_AVAILABLE")

    # a target someone owns, or outside the workspace: the workspace's folder rule (engine.core.folders), in Chinese
    job, shown = export.start(str(adapter), "data", "", "cpu", False, "zh")
    assert job is None and "属于数据集目录" in shown and "belongs" not in shown, shown
    job, shown = export.start(str(adapter), "/etc", "", "cpu", False, "zh")
    assert job is None and "在工作区" in shown and "STUDIO_OUTPUT_ROOTS" in shown and "outside" not in shown, shown

    # progress as the merge subprocess writes it, read back as the page reads it
    path = runs_dir / "progress.jsonl"
    rep = merge.Reporter(str(path), str(runs_dir / "x"))
    rep.stage("loading", 1, 2, export_messages.message("export.detail_base", path="/m"))
    rep.stage("saving", 1, 3, "model-00001-of-00003.safetensors")
    shown = []
    for e in events.read_events(path, 0)[0]:
        progress = {**e["payload"], "detail": core_messages.payload_message(e["payload"], "detail")}
        shown.append(export.describe({"state": "running", "progress": progress}, "zh"))
    assert shown == ["⏳ 加载 1/2 基座 /m（float32）", "⏳ 保存 1/3 model-00001-of-00003.safetensors"], shown
    assert export.describe({"state": "queued", "run_id": "r1"}, "zh").startswith("⏳ 已排队为运行 r1")

    # a merge whose source is gone when its subprocess checks again: a registry run, its failed event read back
    gone = runs_dir / "gone"
    argv = [sys.executable, "-m", "engine.trainer.merge", str(gone), "--out", str(workspace.exports_dir() / "gone")]
    argv += ["--tmp-dir", str(workspace.exports_dir() / ".gone.tmp"), "--events", "{run_dir}/events.jsonl"]
    job = mj.MergeJob(runs.submit_command(argv, name="merge gone", tags=[mj.MERGE_TAG]))
    status = job.wait(timeout=120)
    assert status["state"] == "failed" and status["error"].key == "export.no_source", status
    assert export.describe(status) == f"❌ failed: {gone}: no such file or folder"
    assert export.describe(status, "zh") == f"❌ 失败：{gone}：没有这个文件或目录"
    listed = export.recent(lang="zh")
    assert listed.startswith("| 运行 | 状态 | 输出目录 | 大小 | 校验 |") and "| 失败 |" in listed, listed
    assert "没有这个文件或目录" in listed
    deep = "/deep" * 40 + "：没有这个文件或目录"  # however deep the folder, the reason at the end stays in the cell
    assert export._clip(deep, 100).endswith("：没有这个文件或目录") and len(export._clip(deep, 100)) == 100
    assert export.recent().startswith("| run | state | output | size | verification |")
    assert runs.get(job.run_id).status == "failed"


def test_merge_messages_survive_the_event_file(tmp_path):
    """A catalog message written into an event by the merge subprocess is read back with its key and parameters,
    nested ones too; plain text stays text."""
    from engine.core import events
    from engine.core.messages import from_json, to_json
    from engine.trainer import merge

    inner = export_messages.message("export.verify_summary", diff=0.5, op=">", tol=0.01, dtype="bf16")
    outer = export_messages.message("export.verify_failed", summary=inner)
    assert from_json(to_json(outer)) == outer and from_json(to_json(outer)).params["summary"].key == inner.key
    assert from_json(to_json("plain")) == "plain" and to_json(None) is None
    rep = merge.Reporter(str(tmp_path / "events.jsonl"), str(tmp_path / "out"))
    merge._fail(rep, "verification", outer)
    payload = events.read_events(tmp_path / "events.jsonl", 0)[0][-1]["payload"]
    assert payload["error"] == str(outer) == "verification failed: max |logit diff| 0.5 > 0.01 (bf16)"
    error = core_messages.payload_message(payload, "error")
    assert localize(error, "zh") == "校验失败：最大 |logit 差| 0.5 > 0.01（bf16）"


def test_an_alert_written_before_the_health_catalog_moved_is_still_shown_in_chinese():
    """A run's events.jsonl keeps the key its alert was written with: runs.health_* before issue 48's move."""
    from engine.core.messages import Message

    old = Message("loss nan", "runs.health_loss_nan", {"loss": "nan"})
    assert localize(old, "zh") == WATCH_ZH["watch.health_loss_nan"].format(loss="nan")
    assert localize(old, "en") == "loss nan"
