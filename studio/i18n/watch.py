"""Chinese text of the health rules' messages (``engine.watch.messages``), keyed like that catalog
(``studio.i18n.localize`` looks them up). Light: stdlib only."""

from __future__ import annotations

WATCH_ZH: dict[str, str] = {
    "watch.health_loss_nan": "损失为 {loss}",
    "watch.health_loss_spike": "损失突增：{loss} > {factor} × 近期中位数 {median}",
    "watch.health_grad_not_finite": "梯度范数为 {grad_norm}",
    "watch.health_grad_norm": "梯度范数 {grad_norm} 超过上限 {limit}",
    "watch.health_lr_zero": "第 {step} 步学习率为 0，还剩 {remaining} 步",
    "watch.health_throughput": "吞吐量骤降：{tps} tokens/s < {fraction} × 近期中位数 {median}",
    "watch.health_overfit": "过拟合：验证损失已有 {n} 次评估没有改进（最佳 {best}，当前 {now}），"
    "而训练损失下降（{train_from} → {train_to}）",
    "watch.health_reward_flat": "没有学习信号：连续 {n} 个记录步中，每组补全的奖励都相同（奖励组内标准差为 0，"
    "平均奖励 {reward}）；用 `studio rewards try SPEC --source model` 查看模型写了什么、每个奖励函数给了多少",
    "watch.health_disk": "磁盘将满：剩余 {free_mib} MiB，下一个检查点约需 {need_mib} MiB"
    "（检查点 {checkpoint_mib} MiB）",
    "watch.health_stall": "{idle_s} 秒没有进展（上限 {limit_s} 秒）",
    "watch.health_gpu_idle": "GPU {gpu} 已空闲 {minutes} 分钟（利用率最高 {max_pct}%）",
    "watch.health_gpu_memory": "GPU {gpu} 显存已用 {used_mib} / {total_mib} MiB（{pct}%）",
    "watch.health_stop_saved": "被健康规则停止：第 {step} 步{what}；已保存 {checkpoint}",
    "watch.health_stop_kept": "被健康规则停止：第 {step} 步{what}；保留 {checkpoint}",
    "watch.health_stop_none": "被健康规则停止：第 {step} 步{what}；没有保留检查点",
}
