"""Chinese text of the run spec's messages, keyed like ``engine.spec.messages.MESSAGES``, and of pydantic's field
errors, keyed by error type (``studio.i18n.localize`` looks them up). Light: stdlib only."""

from __future__ import annotations

RULES_ZH: dict[str, str] = {
    # cross-field rules
    "quant_needs_lora": "{bits} 位量化只能训练适配器：把 method.finetuning 设为 lora（QLoRA）或 oft，"
    "或把量化位数设为 0",
    "dora_on_8bit": "DoRA 不支持 8 位权重：请用 4 位或不量化",
    "llama_pro_needs_freeze": "use_llama_pro 用冻结微调训练 `studio expand-model` 插入的块：请把 method.finetuning "
    "设为 freeze（当前为 {method}）",
    "llama_pro_layers": "use_llama_pro：模型的 {layers} 层不是 trainable_layers {n} 的整数倍；请设为扩展模型时的 "
    "--num-expand",
    "offload_optimizer_needs_zero": "优化器卸载需要 ZeRO 阶段 1、2 或 3：请提高 launch.deepspeed.zero_stage",
    "offload_param_needs_zero3": "参数卸载需要 ZeRO 阶段 3：把 launch.deepspeed.zero_stage 设为 3，"
    "或把 offload_param 设为 none",
    "nvme_needs_path": "NVMe 卸载需要一个目录：请设置 launch.deepspeed.nvme_path",
    "zero3_8bit": "ZeRO-3 无法切分 8 位 bitsandbytes 权重：请用 4 位（QLoRA）、ZeRO 阶段 0-2，或量化位数 0",
    "zero3_4bit_fp32": "4 位配合 ZeRO-3 需要 bfloat16 或 float16 存储：把 compute_dtype 设为 bfloat16",
    "fsdp_8bit": "FSDP 无法切分 8 位 bitsandbytes 权重：请用 4 位（QLoRA 配合 FSDP）或其他后端",
    "fsdp_4bit_fp32": "4 位配合 FSDP 需要 bfloat16 或 float16 存储：把 compute_dtype 设为 bfloat16",
    "processes_need_backend": "{n} 个进程需要分布式后端：把 launch.backend 设为 ddp、fsdp 或 deepspeed，"
    "或把进程数设为 1",
    "machines_need_backend": "多台机器需要分布式后端（ddp、fsdp、deepspeed）",
    "ddp_one_process": "ddp 总共至少需要 2 个进程（launch.num_processes × launch.num_machines 为 1；"
    "accelerate 拒绝以单进程启动 DDP）：请把 launch.num_processes 设为 2 或更多，或把 launch.backend 设为 single",
    "gpu_ids_invalid": "GPU 编号必须互不相同且 ≥ 0",
    "processes_exceed_gpus": "每台机器 {n} 个进程，但 launch.gpus 只选了 {gpus} 个 GPU：请多选 GPU 或减少进程数",
    "gpus_on_cpu": "选了 GPU，但 launch.device 是 cpu：请清空 launch.gpus，或改用 auto/cuda",
    "main_ip_missing": "{n} 台机器需要在 launch.main_process_ip 中填写 0 号机器的地址",
    "slurm_extra_line": "第 {line} 行不是 sbatch 选项：每行写一个选项，如 --exclusive 或 #SBATCH --mail-type=END",
    "slurm_machine_rank": "在 Slurm 上每个节点的序号来自分配结果：请把 launch.machine_rank 保持为 0",
    "slurm_gpus_on_cpu": "向 Slurm 申请每节点 {gpus} 个 GPU，但 launch.device 是 cpu：请设为 0，或改用 auto/cuda",
    "ray_missing": 'launch.target 为 ray 需要在本机安装 Ray Train：pip install "ray[train]"（ray 附加依赖）',
    "ray_backend": "在 Ray 上各 worker 以数据并行训练：请把 launch.backend 设为 ddp（而不是 {backend}）",
    "ray_counts": "由 Ray 放置各 worker：请把 launch.{field} 保持为 1，并设置 launch.ray.num_workers",
    "ray_gpus_on_cpu": "向 Ray 申请每个 worker {gpus} 个 GPU，但 launch.device 是 cpu：请去掉 GPU，或改用 auto/cuda",
    "machine_rank_range": "机器序号 {rank} 必须小于 launch.num_machines（{n}）",
    "fsdp_on_cpu": "FSDP 需要 GPU：在 CPU 上请用 ddp 或 deepspeed",
    "fp16_on_cpu": "fp16 混合精度需要 GPU：在 CPU 上请用 bf16 或 fp32",
    "fp8_cpu": "FP8 训练需要计算能力 8.9 及以上的 NVIDIA GPU（Ada、Hopper）：launch.device 是 cpu；请关闭 train.fp8",
    "fp8_precision": "FP8 未转换的层以 bf16 训练：请把 train.precision 设为 bf16 或 auto（而不是 {precision}）",
    "fp8_quantized": "FP8 转换的是全精度线性层，{bits} 位量化模型中没有这种层："
    "请关闭 train.fp8，或把 method.quantization.bits 设为 0",
    "fp8_missing": "未安装 FP8 后端 {backend}：{install}",
    "fp8_fsdp_loading": "accelerate 不允许 torchao 的 FP8 与 FSDP 的省内存加载同时使用：请将其设为 false",
    "mix_probs_count": "{probs} 个概率对应 {datasets} 个数据集：每个数据集给一个",
    "mix_probs_sum": "概率必须 ≥ 0 且总和为 1",
    "mix_probs_concat": "概率只用于交错混合：把 data.mix 设为 interleave_under 或 interleave_over，"
    "或清空 data.mix_probs",
    "dataset_twice": "有数据集被列了两次",
    "packing_preference": "打包只适用于 sft 和 pt，不适用于 {stage}：请关闭 data.packing",
    "kto_batch": "kto 每个设备批次至少需要 2 个样本（TRL 用同一批次中别的回答与每个提示配对来估计 KL 项），"
    "而不是 {n}：请提高 train.per_device_batch_size（可降低 train.gradient_accumulation 以保持等效批次）",
    "group_by_length_packing": "按长度分组与打包互斥（打包后的行已经填满）："
    "请关闭 data.group_by_length 或 data.packing",
    "report_to_missing": "本机未安装 {target}：请 pip install {target}，或改选 tensorboard 或 none",
    "template_unknown": "未知模板 {name!r}：请从 {names} 中选择",
    "liger_cpu": "Liger 融合算子只能在 CUDA GPU 上运行：CPU 上请把 train.liger_kernel 设为 auto 或 off",
    "liger_missing": "未安装 liger-kernel：请 pip install liger-kernel，或把 train.liger_kernel 设为 auto 或 off",
    "padding_free_packing": "打包已经把样本无填充地排进行中：请把 data.padding_free 设为 auto 或 off，或关闭打包",
    "packed_attention_sdpa": "per_sample 注意力只用于 sdpa；{attn} 注意力无法使用"
    "（flash_attention_2 本身就按样本计算）："
    "请把 model.packed_attention 设为 auto 或 mask，或把 model.attn_implementation 设为 sdpa",
    "packed_attention_model": "per_sample 注意力支持的模型类型为 {known}，不包括 {model_type}："
    "请把 model.packed_attention 设为 auto 或 mask",
    "packed_attention_sliding": "这个 {model_type} 模型使用滑动窗口注意力，per_sample 注意力不计算它："
    "请把 model.packed_attention 设为 auto 或 mask",
    "padding_free_dpo": "dpo 的无填充批次需要 flash_attention_2（TRL 的 padding_free）；"
    "{attn} 注意力无法隔开各对样本：请把 data.padding_free 设为 auto 或 off，"
    "或把 model.attn_implementation 设为 flash_attention_2",
    "group_by_length_preference": "按长度分组只适用于 sft 和 pt，不适用于 {stage}：请关闭 data.group_by_length",
    "padding_free_stage": "无填充批次只适用于 sft、pt 和 dpo，不适用于 {stage}："
    "请把 data.padding_free 设为 auto 或 off",
    "report_to_none": "'none' 不能与其他记录工具同时选择",
    "lora_all_alone": "'all' 已包含所有线性层：请单独填写 'all'，或填写模块名列表",
    "loraplus_needs_lora": "LoRA+ 设置 LoRA B 矩阵的学习率：需要 method.finetuning 为 lora（而不是 {method}）；请清空 "
    "loraplus_lr_ratio",
    "loraplus_optimizer": "LoRA+ 用 train.optimizer 指定的优化器类构建优化器，而 {optimizer} 自建优化器："
    "请选择 adamw_torch、adamw_8bit、paged_adamw_8bit、adafactor 或 sgd，或清空 loraplus_lr_ratio",
    "pissa_needs_lora": "PiSSA 用于初始化 LoRA 适配器：需要 method.finetuning 为 lora（而不是 {method}）；请关闭 pis"
    "sa_init",
    "pissa_dpo": "PiSSA 把主成分权重移入适配器，{stage} 的参考模型（关闭适配器的基座）就不再是起始模型："
    "{stage} 请关闭 pissa_init",
    "pissa_quantized": "PiSSA 分解的是基座的浮点权重，而不是 {bits} 位权重（peft 不接受）：请关闭 pissa_init，"
    "或把量化位数设为 0",
    "pissa_convert_needs_init": "pissa_convert 用于转换 PiSSA 适配器：请打开 method.lora.pissa_init，或关闭 pissa_co"
    "nvert",
    "oft_rank_or_block": "OFT 的秩与块大小必须恰好一个非零（秩 {rank}，块大小 {size}）：请把另一个设为 0",
    "optimizer_needs_full": "{optimizer} 更新模型的全部权重：请把 method.finetuning 设为 full 或 freeze（而不是 {met"
    "hod}），"
    "或换一个优化器",
    "optimizer_backend": "{optimizer} 自建优化器，{backend} 不接受：请把 launch.backend 设为 single 或 ddp，或换一个"
    "优化器",
    "apollo_proj_type": "APOLLO 只支持 std、right 或 left 投影，不支持 {proj_type}：请设置 train.low_rank.proj_type",
    "layerwise_one_process": "逐层 GaLore / APOLLO 只能单进程运行（本次有 {n} 个）：请关闭 train.low_rank.layerwise "
    "或只用一个进程",
    "layerwise_accumulation": "逐层 GaLore / APOLLO 在反向传播中直接更新，无法累积 {n} 个微步：请把 gradient_accumul"
    "ation 设为 1 "
    "或关闭逐层更新",
    "badam_one_process": "这里 BAdam 只支持单进程（本次有 {n} 个）：请只用一个进程或换一个优化器",
    "optimizer_missing": "{optimizer} 优化器需要的包未安装：请 pip install {package}",
    "save_best_needs_eval": (
        "保存策略 best 保留评估损失最好的检查点：请把 data.val_size 设为大于 0（或设置 data.eval_datasets）"
        "并选择评估策略，或按步保存"
    ),
    "val_size_rows_whole": "data.val_size {value:g}：从 1 起表示行数，必须是整数（小于 1 时表示比例）",
    "eval_datasets_and_val_size": "data.eval_datasets 和 data.val_size 都在指定评估数据：只保留一个"
    "（把 data.val_size 设为 0，或清空 data.eval_datasets）",
    "mask_history_train_on_prompt": "mask_history 只训练最后一轮回答，train_on_prompt 还训练提示词：请关闭其中一个",
    "mask_history_stage": "mask_history 只适用于 sft 阶段（多轮回答），不适用于 {stage}：请关闭它",
    "tool_format_auto": "tool_format {tool_format} 替换具名模板的工具格式；模板 auto 使用模型自带的对话模板："
    "请选择具名模板，或把 tool_format 设为 template",
    "extra_arg_has_field": "{name} 是 Studio 的设置：请设置 {field}，而不是写在 train.extra_args 中",
    "extra_arg_studio": "{name} 由 Studio 设置，不能写在 train.extra_args 中",
    "extra_arg_unknown": "{name} 不是 transformers {version} 的 TrainingArguments 字段",
    "extra_arg_value": "{name} 的取值不可用：{problem}",
    # warnings
    "offload_param_slow": "参数卸载会大幅拖慢训练；请先尝试优化器卸载",
    "backend_one_process": "只有一个进程时，{backend} 比 single 没有任何好处",
    "checkpointing_short": "序列较短时，梯度检查点会慢约 30%，却省不了多少显存",
    "lr_high_full": "{lr:g} 对全参数微调来说偏高（常用：1e-5 到 5e-5）",
    "lr_low_lora": "{lr:g} 对 LoRA 来说偏低（常用：1e-4 到 5e-4）",
    "alpha_rank_high": "alpha/秩 大于 8 会大幅放大更新；常用值为 1-2",
    "single_many_gpus": "单进程运行只用一个 GPU；要用上全部 GPU，请选择 ddp、fsdp 或 deepspeed",
    "eval_without_split": "没有验证集（data.val_size 为 0）：eval_steps 不起作用",
    "split_without_eval": "已设置验证数据（data.val_size 或 data.eval_datasets），但 train.eval_strategy 为 no："
    "它不会被评估（val_size 划出的部分仍不参与训练）；请把 eval_strategy 设为 steps 或 epoch",
    "deepspeed_8bit_optimizer": "DeepSpeed 使用自己的优化器；8 位优化器会被忽略",
    "remote_code": "将运行模型自带的 Python 代码：只用于你信任的模型",
    # context rules
    "model_no_folder": "{path} 处没有模型目录",
    "model_no_config": "{path} 中没有 config.json：不是 transformers 模型目录",
    "model_unresolved": "无法读取该模型的配置：{problem}",
    "model_not_downloadable": "训练无法下载其模型：{problem}",
    "cutoff_over_positions": "{cutoff} 超过了模型的最大位置数（{limit}）：请降低 data.cutoff_len "
    "或设置 model.rope_scaling",
    "lora_targets_unknown": "{bad} 不是 {model_type} 模型中的模块；它的线性模块有 {known}（或 'all'）",
    "freeze_modules_unknown": "{bad} 不是 {model_type} 解码层中的模块；请从 {known} 中选择",
    "freeze_layers_too_many": "要训练 {n} 层，但模型只有 {layers} 层",
    "resume_no_checkpoint": "{path} 处没有检查点（检查点目录中有 trainer_state.json）；"
    "请给出 checkpoint-N 目录或 'last'",
    "registry_missing": "{folder} 中没有 dataset_info.json",
    "registry_bad_json": "{path} 不是有效的 JSON：{error}",
    "registry_not_mapping": "{path} 应把数据集名称映射到条目，实际是 {type}",
    "dataset_unknown": "{path} 中没有 '{name}'（已注册：{known}）",
    "dataset_unknown_empty": "{path} 中没有 '{name}'（还没有注册任何数据集）",
    "dataset_not_entry": "{path} 中的 '{name}' 不是一个条目（JSON 对象）",
    "pairs_needed": "{stage} 需要偏好对，但 '{name}' 没有 chosen/rejected 列"
    '（在 dataset_info.json 中设置 "ranking": true 并给出 chosen/rejected，或换一个数据集）',
    "pairs_need_pair_stage": "'{name}' 是偏好对数据，{stage} 阶段无法用它训练：请使用 dpo 或 rm 阶段，或换一个数据集",
    "kto_needs_tag": "kto 需要标注了好坏的回答，但 '{name}' 没有映射 kto_tag 列"
    "（在 dataset_info.json 中把它的 columns.kto_tag 设为存放 true/false 的列，或换一个数据集）",
    "kto_not_pairs": "'{name}' 是偏好对数据（ranking），不是为 kto 标注的回答：请使用 dpo 或 rm 阶段，"
    "或换一个带 kto_tag 列的数据集",
    "tags_need_kto": "'{name}' 是 kto 数据（列 '{column}' 标注每个回答是否可取），"
    "{stage} 阶段会把每个回答都当作好回答来训练：请使用 kto 阶段，或换一个数据集",
    # the spec as a whole and the checks at submit
    "unknown_field": "未知字段（不属于运行配置）",
    "schema_newer": "配置版本 {version} 由更新的 Studio 写出（本版本最多读取 {supported}）：请升级 Studio 后再加载",
    "schema_unsupported": "不支持的配置版本 {version!r}（本版本最多读取 {supported}）",
    "spec_not_mapping": "配置应是按分组的映射，实际是 {type}",
    "spec_unreadable": "无法读取 {path}：{reason}",
    "spec_bad_yaml": "{path} 不是有效的 YAML：{error}",
    "output_refused": "不能写到这里：{reason}",
    "output_is_file": "无法创建 {path}：{probe} 是文件而不是目录",
    "output_not_writable": "无法写入 {probe}（权限不足）：请换一个目录",
    "notify_bad_address": "不是邮箱地址：{address!r}",
    "notify_email_needs_smtp": "发送邮件需要 SMTP 服务器：请填写 notify.smtp_host（或清空 notify.email_to）",
    "notify_env_missing": "此处没有设置环境变量 {name}：这条通知不会发送",
    # stage grpo
    "grpo_no_reward": "grpo 阶段至少需要一个奖励函数：请在 method.grpo.rewards 中添加",
    "grpo_python_needs_file": "python 奖励函数需要文件和函数名：请设置 file（.py 文件）和 function（函数名）",
    "grpo_reward_name_twice": "有两个奖励函数都叫 '{name}'：请给每个起不同的名字（曲线按名字区分）",
    "grpo_bad_pattern": "不是有效的正则表达式：{error}",
    "grpo_batch_groups": "生成批次（{batch} = 批大小 × 梯度累积 × 进程数）必须容纳整组的 {n} 个生成："
    "请把它设为 method.grpo.num_generations 的倍数，或修改组大小",
    "grpo_vllm_cpu": "vLLM 只能在 GPU 上生成：在 CPU 上请把 method.grpo.generation_backend 设为 transformers",
    "grpo_vllm_missing": "本机未安装 vLLM（请在 GPU 机器上 pip install vllm）：请把 method.grpo.generation_backend "
    "设为 transformers",
    "grpo_vllm_no_gpu": "vLLM 需要 GPU 生成，而本机没有 GPU：请把 method.grpo.generation_backend 设为 transformers",
    "grpo_file_unreadable": "无法读取奖励函数文件 {path}：{reason}",
    "grpo_file_syntax": "奖励函数文件 {path} 不是有效的 Python：{error}",
    "pref_ftx_simpo": "SFT 损失权重（LLaMA-Factory 的 pref_ftx）只加在 SimPO 上（TRL 的 cpo_alpha）："
    "请把 method.dpo.loss_type 设为 simpo，或把 ftx 设为 0（当前损失 {loss}）",
    "grpo_no_function": "{path} 中没有顶层函数 '{name}'（找到的函数：{found}）",
    "loss_stage": "{loss} 损失为 sft 的回答词元加权：请把 method.stage 设为 sft，或把 train.loss 设为 "
    "cross_entropy（当前阶段 {stage}）",
    "asft_pissa": "asft 的参考模型是关闭适配器后的基座，而 PiSSA 改动了基座：请关闭 method.lora.pissa_init，"
    "或换一种 train.loss",
    "asft_zero3": "asft 保留一份冻结的基座副本作参考模型，ZeRO-3 会把它切分：请用 ZeRO 0-2 阶段、LoRA / OFT"
    "（关闭适配器后的基座即参考模型），或换一种 train.loss",
    "liger_loss": "Liger 的融合交叉熵不生成 logits，而 {loss} 损失要用 logits 加权：请把 train.liger_kernel 设为 "
    "auto 或 off，或把 train.loss 设为 cross_entropy",
    "grpo_model_needs_path": "模型奖励需要奖励模型：把 model 设为 Studio rm 运行的 ID 或文件夹，"
    "或序列分类模型的文件夹",
    "grpo_model_missing": "{path} 处没有奖励模型：请给出 Studio rm 运行的 ID 或文件夹，或模型文件夹",
    "grpo_model_spec_unreadable": "无法读取运行的配置 {path}：{error}",
    "grpo_model_unfinished": "运行 {path} 还没有最终权重：请使用已完成的 rm 运行（或其某个检查点的文件夹）",
    "grpo_model_not_weights": "{path} 中既没有适配器（adapter_config.json）也没有模型（config.json）",
    "grpo_model_not_rm": "{path} 不是奖励模型（rm 阶段训练的、输出一个分数的序列分类模型）；"
    "语言模型的权重不能为生成打分",
    "grpo_model_base_missing": "奖励模型的适配器 {path} 基于模型 '{base}'，它在本机不是本地文件夹",
}

# pydantic's field errors by type; placeholders are the error's ctx. Every type the form can produce is here.
# pydantic's field errors in plain words for the English page (pydantic's own text is "Input should be ...")
PYDANTIC_EN: dict[str, str] = {
    "missing": "required: fill it in",
    "greater_than_equal": "must be at least {ge}",
    "greater_than": "must be more than {gt}",
    "less_than_equal": "must be at most {le}",
    "less_than": "must be less than {lt}",
    "multiple_of": "must be a multiple of {multiple_of}",
    "finite_number": "must be a finite number",
    "literal_error": "must be one of {expected}",
    "enum": "must be one of {expected}",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number, without decimals",
    "int_type": "must be a whole number",
    "float_parsing": "must be a number",
    "float_type": "must be a number",
    "bool_parsing": "must be true or false",
    "bool_type": "must be true or false",
    "string_type": "must be text",
    "string_too_short": "needs at least {min_length} character(s)",
    "string_too_long": "takes at most {max_length} characters",
    "string_pattern_mismatch": "does not have the required form ({pattern})",
    "list_type": "must be a list",
    "too_short": "needs at least {min_length} item(s); it has {actual_length}",
    "too_long": "takes at most {max_length} items; it has {actual_length}",
    "dict_type": "must be a set of fields (a mapping)",
    "model_type": "must be a set of fields (a mapping)",
    "model_attributes_type": "must be a set of fields (a mapping)",
    "none_required": "must be empty",
}

PYDANTIC_ZH: dict[str, str] = {
    "missing": "必须填写",
    "greater_than_equal": "应 ≥ {ge}",
    "greater_than": "应 > {gt}",
    "less_than_equal": "应 ≤ {le}",
    "less_than": "应 < {lt}",
    "multiple_of": "应为 {multiple_of} 的倍数",
    "finite_number": "应为有限的数字",
    "literal_error": "应为以下之一：{expected}",
    "enum": "应为以下之一：{expected}",
    "int_parsing": "应为整数（无法把输入解析为整数）",
    "int_from_float": "应为整数，不能带小数部分",
    "int_type": "应为整数",
    "float_parsing": "应为数字（无法把输入解析为数字）",
    "float_type": "应为数字",
    "bool_parsing": "应为 true 或 false（无法解析输入）",
    "bool_type": "应为 true 或 false",
    "string_type": "应为文本",
    "string_too_short": "至少需要 {min_length} 个字符",
    "string_too_long": "最多 {max_length} 个字符",
    "string_pattern_mismatch": "格式不符合要求：{pattern}",
    "list_type": "应为列表",
    "too_short": "至少需要 {min_length} 项，当前 {actual_length} 项",
    "too_long": "最多 {max_length} 项，当前 {actual_length} 项",
    "dict_type": "应为一组字段（映射）",
    "model_type": "应为一组字段（映射）",
    "model_attributes_type": "应为一组字段（映射）",
    "none_required": "应为空",
}

# Every catalog's Chinese by key (the other catalogs' keys carry a prefix: "data.", "plan.", "export.", ...).
