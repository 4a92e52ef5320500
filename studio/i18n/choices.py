"""The Train form's choices in the page's language: the Chinese name of each plain-word value a spec field takes.

Light: data only. The English page shows the spec's own values (what a YAML holds); the Chinese page shows these
names for words (``off``, ``warn``, ``cosine``) and keeps names of things (``lora``, ``adamw_torch``, ``q_proj``,
``sdpa``) as they are written. A value a field gives another meaning is in ``BY_FIELD_ZH`` under the field's path
(or its group's, ending in a dot).
"""

from __future__ import annotations

from typing import Any

GENERAL_ZH: dict[str, str] = {
    "auto": "自动",
    "off": "关闭",
    "on": "开启",
    "none": "无",
    "all": "全部",
    "epoch": "每轮",
    "steps": "按步数",
    "best": "最佳检查点",
    "no": "不评估",
    "concat": "依次拼接",
    "interleave_under": "交替抽取（最短者用完即止）",
    "interleave_over": "交替抽取（最长者用完为止）",
    "local": "本机",
    "single": "单进程",
    "full": "全参数",
    "freeze": "冻结部分层",
    "random": "随机",
    "fixed": "固定",
    "ascending": "由浅到深",
    "descending": "由深到浅",
    "adjacent": "相邻",
    "scatter": "分散",
    "layer": "按层",
    "ratio": "按比例",
    "channel": "按通道",
    "tensor": "按张量",
    "constant": "恒定",
    "constant_with_warmup": "预热后恒定",
    "cosine": "余弦",
    "cosine_with_restarts": "余弦（周期重启）",
    "linear": "线性",
    "polynomial": "多项式",
    "dynamic": "动态",
    "non_padding": "非填充 token",
    "cross_entropy": "交叉熵",
    "batch": "按批",
    "group": "按组",
    "per_sample": "逐样本",
    "mask": "块对角掩码",
    "template": "随模板",
    "default": "默认",
    "empty": "空模板",
    "cpu": "CPU",
    "cuda": "CUDA（GPU）",
    "nvme": "NVMe 磁盘",
}

BY_FIELD_ZH: dict[str, dict[str, str]] = {
    "health.": {"off": "关闭", "note": "记录", "warn": "警告", "stop": "停止运行"},
    "notify.on": {"alert": "健康告警", "completed": "完成", "failed": "失败", "stopped": "已停止"},
    "train.eval_strategy": {"epoch": "每轮结束时", "steps": "每隔若干步"},
    "train.save_strategy": {"epoch": "每轮结束时", "steps": "每隔若干步"},
    "train.count_input_tokens": {"all": "全部 token"},
    "method.grpo.scale_rewards": {"none": "不缩放"},
    "launch.deepspeed.": {"none": "不卸载"},
    "notify.smtp_security": {"none": "不加密"},
    "output.report_to": {"none": "不上报"},
}


def choice_label(path: str, value: Any, lang: str) -> str:
    """What the page shows for ``value`` of the field at ``path``."""
    text = str(value)
    if lang != "zh":
        return text
    for key, names in BY_FIELD_ZH.items():
        if (path == key or (key.endswith(".") and path.startswith(key))) and text in names:
            return names[text]
    return GENERAL_ZH.get(text, text)


def choices_for(path: str, values: list, lang: str) -> list[tuple[str, Any]]:
    """gradio's (label, value) pairs of a field's choices in the page's language."""
    return [(choice_label(path, v, lang), v) for v in values]
