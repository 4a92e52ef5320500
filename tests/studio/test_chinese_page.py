"""Texts of the Datasets and Doctor tabs on the Chinese page (the spec's messages: test_i18n_spec.py)."""

from __future__ import annotations

from studio.tabs import data, data_register


def test_datasets_and_doctor_texts_in_chinese(demo_paths, monkeypatch):
    from types import SimpleNamespace

    from engine.data.rows import DataProblem
    from studio.tabs import doctor

    assert data_register.register("", "x", "alpaca", {}, "zh") == "❌ 请先上传文件"
    _, note = data.lengths(demo_paths["datasets"][0], demo_paths["model_dir"], "auto", 16, packing=True, lang="zh")
    assert "被截断" in note and "打包效率" in note and "truncated" not in note
    problem = DataProblem("/d/x.jsonl", 3, "output", "empty response")
    assert data_register.problem_text(problem, "zh") == "/d/x.jsonl，第 3 行，列 'output'：empty response"
    assert data_register.problem_text(problem, "en") == str(problem)

    fake = [SimpleNamespace(name="torch", status="PASS", detail="2.x", fix="")]
    monkeypatch.setattr(doctor, "run_checks", lambda: fake)
    zh = doctor.checks_frame("zh")
    assert list(zh.columns) == ["检查项", "结果", "详情", "修复建议"] and zh.iloc[0]["结果"] == "通过"
    assert doctor.checks_frame()["status"].tolist() == ["PASS"]
