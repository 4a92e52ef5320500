"""Chinese text of the planner's notes, the auto-fit steps, the speed advice (``engine.plan_messages``), the
doctor's checks (``engine.doctor_messages``), the run registry's refusals (``engine.run_messages``) and the merge
and export messages (``engine.export_messages``), keyed like those catalogs (``studio.i18n_spec.localize`` looks
them up). Light: stdlib only."""

from __future__ import annotations

PLAN_ZH: dict[str, str] = {
    # plan notes
    "plan.no_config": "model.name_or_path：在 {path} 读不到 config.json（规划需要本地模型目录，或传入 model_config）",
    "plan.moe": "混合专家模型（{experts} 个专家，每个 token 用 {per_token} 个）：专家权重按稠密计算，"
    "激活按路由后的 token 计算，因此规划是近似值",
    "plan.unknown_arch": "model_type {model_type!r} 按 Llama 结构的解码器规划；请核对数字",
    "plan.sharded": "参数切分到 {n} 个进程上（另有两个已聚合的层在传输中）",
    "plan.offload_optimizer": "优化器状态卸载到 CPU 内存（DeepSpeed CPU Adam）",
    "plan.offload_params": "参数卸载到 CPU 内存：会大幅变慢",
    "plan.eager": "eager 注意力会生成 批大小 x 头数 x 序列长度² 的分数矩阵：请使用 sdpa 或 flash_attention_2",
    "plan.cpu": "设备是 cpu：这些数字是单个进程占用的主机内存",
    # auto-fit steps
    "fit.batch": "每设备批大小 {b} -> {nb}，梯度累积 {ga} -> {nga}（有效批大小 {effective} 不变）",
    "fit.checkpointing": "开启梯度检查点（反向传播时重算激活，约慢 30%）",
    "fit.zero1": "DeepSpeed ZeRO-1（把优化器状态切分到 {n} 个 GPU）",
    "fit.zero2": "DeepSpeed ZeRO-2（再切分梯度，共 {n} 个 GPU）",
    "fit.zero3": "DeepSpeed ZeRO-3（再切分参数，共 {n} 个 GPU）",
    "fit.offload_optimizer": "把优化器状态卸载到 CPU（DeepSpeed ZeRO-{stage} + CPU Adam；每步更慢）",
    "fit.offload_params": "把参数卸载到 CPU（ZeRO-3；会大幅变慢）",
    "fit.fsdp_offload": "FSDP 参数卸载到 CPU（会大幅变慢）",
    "fit.lora_rank": "LoRA 秩 {r} -> {nr}",
    "fit.qlora_short": "4 位 QLoRA",
    "fit.qlora": "4 位 QLoRA（NF4 基座、双重量化、LoRA 适配器）",
    "fit.qlora_switch": "4 位 QLoRA（NF4 基座、双重量化、LoRA 适配器）；把 {finetuning} 微调改为 LoRA，秩 {rank}",
    "fit.keeping_offload": "{step}（保留卸载步骤）",
    "fit.step": "{step}：每个 GPU {size}",
    "fit.refused": "{step}：被拒绝（{reason}）",
    # speed advice
    "advice.low_util": "GPU 平均利用率 {util:.0f}%：GPU 在等待。请检查下面几项（数据加载、卸载、批大小），"
    "并用 `nvidia-smi dmon -s u` 观察。",
    "advice.fp32": "没有使用混合精度：把 train.precision 设为 bf16（不支持 bf16 的 GPU 用 fp16）：约快 2 倍，"
    "激活显存减半。",
    "advice.eager": "eager 注意力：把 model.attn_implementation 设为 sdpa 或 flash_attention_2。",
    "advice.ds_offload": "DeepSpeed 卸载每一步都要经 PCIe 搬运状态：显存允许时，把 offload_param 和 "
    "offload_optimizer 设为 none（engine.plan 会显示是否仍放得下）。",
    "advice.fsdp_offload": "FSDP 参数卸载很慢：放得下时请关闭 launch.fsdp.offload_params。",
    "advice.small_batch": "每设备批大小 {batch} 偏小：把 train.per_device_batch_size 提高到接近显存上限，"
    "并降低 gradient_accumulation 以保持有效批大小。",
    "advice.checkpointing": "梯度检查点会重算激活（约慢 30%）：如果规划仍放得下，请关闭它。",
    "advice.cpu_bound": "CPU 很忙（{cpu:.0f}%）而 GPU 空闲：瓶颈在数据加载；请提高 data.preprocessing_workers、"
    "预先分词，或对短样本开启 data.packing。",
    "advice.throughput_drop": "吞吐量从 {peak:.0f} 降到 {now:.0f} tokens/s：请检查 GPU 上是否有其他进程、"
    "是否因过热降频，或是否在训练步中间保存检查点。",
    "advice.packing_off": "打包未开启：样本多且短时，data.packing 可以避免在填充上浪费计算。",
}

DOCTOR_ZH: dict[str, str] = {
    "doctor.name_gpu": "{index} 号 GPU",
    "doctor.name_gpus": "GPU 检测",
    "doctor.name_torch": "torch 训练栈",
    "doctor.name_torch_build": "torch 构建",
    "doctor.name_bf16": "bf16 精度",
    "doctor.name_flash": "flash-attention 注意力",
    "doctor.name_ds_ops": "deepspeed 算子",
    "doctor.name_versions": "软件栈版本",
    "doctor.name_allreduce": "all-reduce 通信",
    "doctor.name_disk": "磁盘",
    "doctor.name_doctor": "环境检查",
    "doctor.gpu": "{name}，{gib:.1f} GiB，驱动 {driver}，{vendor}",
    "doctor.no_gpu": "没有 GPU：{reason}",
    "doctor.no_gpu_fix": "训练将在 CPU 上运行（很慢）；请安装 NVIDIA 驱动 / ROCm，或检查 CUDA_VISIBLE_DEVICES",
    "doctor.timeout": "{seconds:.0f} 秒后超时",
    "doctor.exit_code": "退出码 {code}",
    "doctor.no_stack": "无法导入训练软件栈：{error}",
    "doctor.no_stack_fix": "重新安装：scripts/bootstrap 或 pip install -e .",
    "doctor.torch_blind": "torch {torch}（{build}）看不到 GPU",
    "doctor.torch_blind_fix": "请安装与你的 CUDA/ROCm 版本匹配的 torch",
    "doctor.torch": "torch {torch}（{build}），{n} 个设备",
    "doctor.bf16_yes": "支持 bf16",
    "doctor.bf16_no": "此 GPU 不支持 bf16",
    "doctor.bf16_fix": "请使用 fp16 精度",
    "doctor.bf16_cpu": "没有 CUDA 设备：bf16 混合精度只能在 CPU 上使用",
    "doctor.flash_ok": "flash_attn 可以导入",
    "doctor.flash_missing": "flash_attn 不可用（{state}）",
    "doctor.flash_fix": "pip install flash-attn，或继续使用 sdpa 注意力",
    "doctor.ds_ops": "兼容：{ok}；不兼容：{missing}",
    "doctor.ds_ops_fix": "{need} 无法在此编译：请安装 CUDA toolkit / ninja，或不使用卸载",
    "doctor.ds_missing_fix": "pip install deepspeed（ZeRO 需要它）",
    "doctor.versions_missing": "缺少：{names}",
    "doctor.allreduce_unfinished": "测试没有完成：{error}",
    "doctor.allreduce_unfinished_fix": "请检查 NCCL（NCCL_DEBUG=INFO）、127.0.0.1 上的防火墙、共享内存（/dev/shm）",
    "doctor.allreduce_ok": "{backend}，{n} 个进程：求和正确",
    "doctor.allreduce_wrong": "{backend}，{n} 个进程：结果错误或缺失 {results}",
    "doctor.allreduce_wrong_fix": "请尝试 NCCL_P2P_DISABLE=1 / NCCL_IB_DISABLE=1，并检查驱动",
    "doctor.disk": "{path} 中剩余 {free:.1f} GiB",
    "doctor.disk_fix": "请清理空间：7B 模型的每个检查点约需 15 GiB",
    "hardware.forced_cpu": "已设置 STUDIO_FORCE_CPU=1（强制使用 CPU）",
    "hardware.none": "无法读取 GPU 信息：{nvidia}；{amd}",
    "hardware.no_nvml": "未安装 nvidia-ml-py",
    "hardware.no_nvidia_driver": "找不到 NVIDIA 驱动（{error}）",
    "hardware.nvml_failed": "NVML 查询失败：{error}",
    "hardware.no_nvidia_gpu": "有 NVIDIA 驱动，但看不到任何 GPU",
    "hardware.no_rocm": "没有 ROCm（找不到 rocm-smi）",
    "hardware.rocm_failed": "rocm-smi 运行失败：{error}",
    "hardware.rocm_no_gpu": "rocm-smi 没有找到 GPU",
    "hardware.mem_available": "/proc/meminfo 中的 MemAvailable",
    "hardware.cgroup_limit": "cgroup {name} 的内存上限",
}

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
    "runs.not_queued": "运行 {id} 当前状态为 {status}，不在队列中（请用 `studio runs stop`）",
    "runs.user_stop_early": "由用户停止：进程在报告之前已结束；{how}",
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
}

EXPORT_ZH: dict[str, str] = {
    # sources
    "export.no_source": "{path}：没有这个文件或目录",
    "export.is_file": "{path} 是一个文件：请给出运行目录或 PEFT 适配器目录（含 adapter_config.json）",
    "export.full_model_folder": "{path} 中没有 adapter_config.json：这是完整的模型目录，不是 PEFT 适配器"
    "（请给出在它上面训练的运行目录或适配器目录）",
    "export.not_adapter": "{path} 中没有 adapter_config.json：既不是 PEFT 适配器目录（adapter_config.json + "
    "adapter_model.safetensors），也不是运行目录（spec.yaml）",
    "export.spec_unreadable": "无法读取 {path}：{error}",
    "export.run_no_adapter": "运行 {run} 还没有适配器（缺少 {wanted}；{state}）：请等它完成，或给出适配器目录",
    "export.run_no_model": "运行 {run} 还没有模型（缺少 {wanted}；{state}）：请等它完成，或给出适配器目录",
    "export.run_unfinished": "它还没有结束",
    "export.run_finished": "它已完成",
    "export.run_failed": "它已失败",
    "export.run_stopped": "它已停止",
    "export.adapter_config_bad_json": "{path} 不是有效的 JSON：{error}",
    "export.adapter_not_saved": "{path} 有 adapter_config.json，但没有 adapter_model.safetensors：适配器没有保存",
    "export.no_base_name": "{path} 没有写明 base_model_name_or_path",
    "export.base_not_local": "适配器 {adapter} 的基座模型 {base} 不是含 config.json 的本地模型目录"
    "（合并需要本机上有基座权重）",
    "export.adapter_where": "适配器 {path}（在 {trained_on} 上训练）",
    "export.module_missing": "{where} 与基座 {base}（{arch}）不匹配：适配器作用于 {module}，而基座没有这个模块",
    "export.shape_mismatch": "{where} 与基座 {base}（{arch}）不匹配：{module} 在适配器中是 {a_out}x{a_in}，"
    "在基座中是 {b_out}x{b_in}",
    # the plan
    "export.no_sources": "请至少给出一个运行目录或适配器目录",
    "export.bad_dtype": "--dtype {dtype!r}：请从 {choices} 中选择",
    "export.bad_device": "--device {device!r}：请选择 cpu 或 cuda",
    "export.model_alone": "全参数微调得到的模型不能与其他来源一起合并：请单独导出它",
    "export.adapter_only_one": "--adapter-only 只导出一个适配器（一个 LoRA 运行或一个适配器目录）",
    "export.different_bases": "适配器的基座不同：{first} 基于 {base}，而 {other} 基于 {other_base}："
    "只能合并同一基座的适配器",
    "export.would_replace": "输出目录 {out} 会覆盖 {path}：请换一个输出目录（--out）",
    "export.out_exists": "输出目录 {out} 已存在：请换一个输出目录（--out），或使用 --overwrite",
    "export.no_disk": "{out} 磁盘空间不足：导出约需 {need}（{dtype}），那里只剩 {free}：请清理空间或换一个输出目录"
    "（--out）",
    "export.bad_size": "{what} {text!r}：请填写 2GB、500MB 或 1GiB 这样的大小",
    "export.no_meminfo": "无法从 /proc/meminfo 读取可用内存：请设置 STUDIO_MEM_AVAILABLE",
    "export.no_memory_cpu": "内存不足，无法合并：约需 {need} 内存（在 cpu 上：float32 的基座加上适配器），"
    "但只有 {available} 可用（{source}）：{fixes}。如果确定放得下，请勾选“即使内存估计不足也继续合并”（--force）",
    "export.no_memory_cuda": "内存不足，无法合并：约需 {need} 内存（在 cuda 上：进程本身加一个分片），"
    "但只有 {available} 可用（{source}）：{fixes}。如果确定放得下，请勾选“即使内存估计不足也继续合并”（--force）",
    "export.fixes": "释放内存（停止其他运行或程序）；或换一台内存更大的机器",
    "export.fixes_gpu": "在 GPU 上合并（--device cuda：约需 {ram} 内存）；或释放内存（停止其他运行或程序）；"
    "或换一台内存更大的机器",
    "export.mem_given": "STUDIO_MEM_AVAILABLE 设定值",
    # the Export and Chat tabs
    "export.outside_workspace": "{path}：这里只能使用工作区（{root}）内的目录",
    # following a merge
    "export.not_merge": "运行 {id} 不是合并任务",
    "export.cleaned": "已删除未完成的输出 {path}",
    # the merge subprocess
    "export.detail_base": "基座 {path}（float32）",
    "export.detail_adapter": "适配器 {path}",
    "export.detail_merging": "{n} 个适配器合并进 {base}",
    "export.detail_verifying": "重新加载保存的目录并比较 logits",
    "export.detail_copying": "复制适配器 {path}",
    "export.no_cuda": "--device cuda，但此进程看不到 CUDA GPU：请使用 --device cpu",
    "export.cancelled": "已取消（SIGTERM）",
    "export.fp32_mismatch": "float32 合并结果与 基座 + 适配器 相差 {diff:.3g}（> {tol:.3g}）：这些适配器无法精确合并"
    "（例如多个 DoRA 适配器，其合并结果取决于顺序）",
    "export.verify_summary": "最大 |logit 差| {diff:.3g} {op} {tol:.3g}（{dtype}）",
    "export.verify_failed": "校验失败：{summary}",
    "export.adapter_copied": "已复制适配器；其 A/B 形状已与基座的 safetensors 头信息核对",
}
