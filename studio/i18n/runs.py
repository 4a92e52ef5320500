"""Chinese text of the run registry's and scheduler's messages (``engine.runs.messages``), keyed like that catalog
(``studio.i18n.localize`` looks them up). Light: stdlib only."""

from __future__ import annotations

RUNS_ZH: dict[str, str] = {
    "runs.unknown_id": "没有 id 为 {id!r} 的运行（见 `studio runs list`）",
    "runs.unknown": "没有 id 为 {id!r} 的运行",
    "runs.no_free_id": "无法分配运行 id",
    "runs.id_taken": "运行 id {id} 已在注册表中；请重新提交",
    "runs.bad_command": "命令：应为非空的字符串列表",
    "runs.delete_running": "运行 {id} 正在进行：请先停止它（`studio runs stop {id}`）",
    "runs.bad_name": "名称：请填写 1 到 120 个字符",
    "runs.is_command": "运行 {id} 是一条命令，不是训练运行",
    "runs.still_running": "运行 {id} 仍在进行",
    "runs.spec_bad_yaml": "不是有效的 YAML：{error}",
    "runs.spec_invalid": "无效",
    "runs.no_adapter": "{source}：那里没有 adapter_config.json（运行完成了吗？）",
    "runs.wrapper_failed": "运行包装进程启动失败：{error}",
    "runs.deleted": "已删除运行 {id}",
    "runs.removed": "已删除 {path}",
    "runs.kept_owned": "保留了 {path}：它属于{owner}",
    "runs.kept_holds": "保留了 {path}：其中包含{owner}",
    "runs.kept_outside": "保留了 {path}：它在工作区之外（Studio 只删除工作区内的目录）",
    "runs.remove_failed": "无法删除 {path}：{error}",
    "runs.checkpoint_skipped": "检查点 {path} 不完整或已损坏；改用更早的检查点",
    "runs.no_loadable_checkpoint": "运行 {id} 没有可用于继续训练的完整检查点（{path} 中的检查点以及它起始的"
    "检查点都不完整）：请复制它并重新开始",
    "runs.resumed": "已将运行 {parent} 作为运行 {id} 从 {checkpoint} 继续训练；其检查点写入 {out}，"
    "最终权重写入 {weights}",
    "runs.from_scratch": "尚无检查点（从头开始）",
    "runs.not_queued": "运行 {id} 当前状态为 {status}，不在队列中（请用 `studio runs stop`）",
    "runs.user_stop_early": "由用户停止：进程在报告之前已结束；{how}",
    "runs.user_stop_saved": "由用户在第 {step} 步停止；检查点已保存到 {checkpoint}",
    "runs.user_stop_unsaved": "由用户在第 {step} 步停止；没有保存检查点",
    "runs.how_signal": "信号 {signal}",
    "runs.how_exit": "退出码 {code}",
    "runs.killed_by_signal": "被信号 {signal} 终止",
    "runs.no_terminal_event": "以退出码 {code} 结束，未写下结束事件",
    "runs.user_stop": "由用户停止（{how}）",
    "runs.killed_by": "被 {signal} 终止",
    "runs.no_exit_record": "运行的进程已结束但没有退出记录（其包装进程被终止）",
    "runs.exit0_unfinished": "训练进程以退出码 0 结束，但没有报告已完成",
    "runs.command_exit": "命令以退出码 {code} 结束",
    "runs.trainer_exit": "训练进程以退出码 {code} 结束",
    "runs.registry_rebuilt_corrupt": (
        "运行注册表已损坏（{error}）：原文件已另存为 {aside}，并已根据 {count} 个运行文件夹重建"
    ),
    "runs.registry_rebuilt_missing": "运行注册表缺失：已根据 {count} 个运行文件夹重建",
    "runs.stopped_before_start": "在开始之前已停止",
    "runs.stalled": "停滞（已 {duration} 没有进展）",
    "runs.disk_full": "磁盘已满：{path} 所在磁盘没有剩余空间",
    "runs.io_error": "写入 {path} 下的文件时发生 I/O 错误：{error}",
    "runs.slurm_missing": "缺少 Slurm 命令（在 {where} 中找不到 {tools}）：请安装 Slurm 客户端，"
    "或设置 sbatch 所在位置（STUDIO_SLURM_BIN）",
    "runs.slurm_no_shared": "未设置共享运行目录：Slurm 运行需要一个所有节点都能以相同路径访问的目录"
    "（STUDIO_SLURM_SHARED）",
    "runs.slurm_shared_unusable": "共享运行目录 {path} 不存在或不可写",
    "runs.slurm_not_shared": "运行目录 {path} 位于本地文件系统（{fs}），但集群还有其他节点："
    "请把 STUDIO_SLURM_SHARED 设为共享文件系统（NFS、Lustre 等）上的目录",
    "runs.slurm_submit_failed": "sbatch 拒绝了作业：{error}",
    "runs.slurm_active": "Slurm 作业 {job}：{state}{reason}",
    "runs.slurm_cancelled": "已取消（Slurm 作业 {job}）",
    "runs.slurm_ended": "Slurm 作业 {job} 已结束：{state}（{slurm}）",
    "runs.slurm_state_pending": "排队等待中",
    "runs.slurm_state_running": "运行中",
    "runs.slurm_state_completed": "已完成",
    "runs.slurm_state_failed": "失败",
    "runs.slurm_state_cancelled": "已取消",
    "runs.slurm_state_timeout": "超时",
    "runs.slurm_state_node_failure": "节点故障",
    "runs.slurm_state_out_of_memory": "内存不足",
    "runs.slurm_state_unknown": "状态未知",
}
