"""Chinese text of the LLaMA-Factory import's and export's notes and refusals (``engine.lf.messages``), keyed like
that catalog (``studio.i18n.localize`` looks them up). LF's key names (``lora_rank``, ``neat_packing``), values
and commands stay as they are written in a YAML. Light: stdlib only."""

from __future__ import annotations

LF_ZH: dict[str, str] = {
    # notes
    "lf.noted": "{key}：已接受，但不起作用（{why}）",
    "lf.hf4_noted": "{key}：已接受，但不起作用（transformers 5 已移除）",
    "lf.noted_overwrite_cache": "Studio 的分词缓存按数据、分词器和设置区分，不会重用过期的缓存",
    "lf.noted_logging_dir": "TensorBoard 日志写入 <output>/tensorboard",
    "lf.noted_plot_loss": "Studio 实时绘制 loss 曲线",
    "lf.noted_disable_tqdm": "Studio 把进度写入 train.log 和页面",
    "lf.noted_use_fast_tokenizer": "Studio 加载快速分词器",
    "lf.noted_low_cpu_mem_usage": "transformers 5 按需延迟加载权重",
    "lf.noted_print_param_status": "运行的事件会给出可训练参数和总参数量",
    "lf.noted_cache_dir": "模型来自 Hugging Face 缓存（HF_HOME）",
    "lf.noted_hf_hub_token": "请在环境变量中设置 HF_TOKEN",
    "lf.noted_other_hub": "Studio 从 Hugging Face Hub 下载",
    "lf.noted_ms_hub_token": "ModelScope 客户端从 MODELSCOPE_API_TOKEN 读取令牌：请在环境变量中设置"
    "（令牌不会写入规格文件）",
    "lf.noted_preprocessing_batch_size": "Studio 按自己的批大小分词",
    "lf.noted_data_shared_file_system": "Studio 每个运行只分词一次",
    "lf.noted_tokens_per_second": "Studio 会报告 tokens/s",
    "lf.noted_use_reentrant_gc": "Studio 的梯度检查点不使用可重入 autograd",
    "lf.noted_do_eval": "评估按 eval_strategy 和 val_size 进行",
    "lf.noted_processor_template": "template {template}：由模型的处理器用其自带的对话模板渲染（template auto）",
    "lf.noted_video": "不支持视频训练（含视频的数据集在检查时被拒绝）；图像可以训练",
    "lf.noted_inference": "这是推理设置，训练中不使用",
    "lf.noted_generation": "这是生成设置（对话、预测），训练中不使用",
    "lf.noted_export": "这是导出设置（llamafactory-cli export）：请把导出 YAML 交给 studio merge --lf-yaml",
    "lf.noted_derived": "LF 自行推导；Studio 也自行推导",
    "lf.noted_studio_sets": "由 Studio 设置",
    "lf.cutoff_default": "cutoff_len 未设置：LLaMA-Factory 的默认值 {default} 超过模型的 {max_pos} 个位置，"
    "因此使用 {max_pos}",
    "lf.no_dataset_dir": "未设置 dataset_dir，也没有 data/dataset_info.json（{looked}）：数据集在 Studio 工作区的 "
    "data 目录中查找",
    "lf.output_inside": "output_dir：{raw} 写在工作区内的 {inside}（LLaMA-Factory 会写到 {found}；"
    "若要写到那里，请用 STUDIO_OUTPUT_ROOTS 允许该目录的根目录）",
    "lf.deepspeed_one_process": "有 deepspeed 但没有 accelerate 配置：只用一个进程；需要更多进程请设置 "
    "launch.num_processes",
    "lf.tokenized_ignored": "tokenized_path：已接受，但不起作用（Studio 自己缓存分词后的数据；不会向 {path} 写入"
    "任何内容）",
    "lf.rope_factor": "rope_scaling：系数 {factor}（LF 根据本地 config.json 推导）",
    "lf.packing_neat": "packing：Studio 打包时样本之间互不注意（即 LF 的 neat_packing）",
    "lf.packing_pt": "packing 为 false 且 stage 为 pt：Studio 把每段文本切成 cutoff_len 长的块（LF 会截断）",
    "lf.checkpointing": "gradient_checkpointing：LLaMA-Factory 默认开启；Studio 使用 auto（显存规划在留出 10% "
    "余量后仍放得下时关闭，训练更快）：如需自行选择，请设置 disable_gradient_checkpointing",
    "lf.kto_batch": "per_device_train_batch_size：1 × gradient_accumulation_steps {accum} 改为 2 × {half}"
    "（等效批大小不变）：TRL 的 KTO 用同一设备批中的回答估计 KL 项",
    "lf.looked": "查找过 {paths}",
    "lf.not_found": "未找到：{looked}",
    # refusals
    "lf.not_supported": "Studio 不支持",
    "lf.unknown_key": "不是 LLaMA-Factory 的训练参数（LLaMA-Factory 也会拒绝）",
    "lf.value_problem": "取值不可用：{problem}",
    "lf.hf4_removed": "transformers 5 已移除（已安装 {version}）：{instead}",
    "lf.stage_ppo": "不支持 PPO（stage ppo）：请用带偏好对的 stage dpo，或带标注回答的 kto（stage rm 训练奖励模型）",
    "lf.dataset_dir_online": "{ddir}：不支持只用 hub id 指定、没有 dataset_info.json 的数据集：请在 "
    "dataset_info.json 中用 hf_hub_url 登记它们（Studio 会从 hub 读取）",
    "lf.no_folder": "没有目录 {ddir}（{looked}）",
    "lf.deepspeed_not_found": "找不到 DeepSpeed 配置 {path}（{looked}）",
    "lf.adapter_refused": "不支持在已有适配器（{where}）之上继续训练：请先把它合并进基座模型（studio merge），"
    "再训练合并后的模型",
    "lf.tokenized_refused": "{path} 中是 LLaMA-Factory 分词过的数据集，Studio 无法加载：请删除 tokenized_path"
    "（Studio 自己分词并缓存）",
    "lf.do_train": "只支持训练运行（do_train: true）",
    "lf.quantization_method": "只支持 bitsandbytes（bnb）量化",
    "lf.freeze_negative": "不支持负数（训练最前面的层）",
    "lf.interleave_probs": "{value!r} 不是以逗号分隔的数字列表",
    "lf.bf16_and_fp16": "bf16 和 fp16 同时为 true：只保留一个",
    "lf.report_to_all": "不支持 'all'：请写出具体的跟踪工具（tensorboard、wandb、mlflow、trackio、swanlab）或 none",
    "lf.two_optimizers": "{first} 和 {second} 同时为 true：LLaMA-Factory 只使用一个优化器；只保留一个",
    "lf.two_losses": "{first} 和 {second} 同时为 true：LLaMA-Factory 只用 {first} 训练；只保留一个",
    "lf.galore_optim": "GaLore 只有 AdamW、8 位 AdamW 和 Adafactor 三种，没有 {optim}：请把 optim 设为 "
    "adamw_torch、adamw_8bit 或 adafactor",
    "lf.apollo_scale_front": "缩放前的范数增长限制（apollo_scale_front）不是 transformers 的 APOLLO 的选项：请删除它",
    "lf.hf4_per_device_train": "请改用 per_device_train_batch_size",
    "lf.hf4_per_device_eval": "请改用 per_device_eval_batch_size",
    "lf.hf4_safetensors": "transformers 5 总是保存 safetensors",
    "lf.hf4_device": "Studio 在 CUDA GPU 或 CPU 上训练",
    "lf.hf4_remove": "请删除它",
    "lf.hf4_apex": "apex 已不再使用：fp16 使用 torch AMP",
    "lf.hf4_include_for_metrics": "请改用 include_for_metrics",
    "lf.hf4_hub_model_id": "请改用 hub_model_id",
    "lf.hf4_hub_token": "请改用 hub_token",
    "lf.hf4_torch_compile": "请改用 torch_compile_backend",
    "lf.refused_multimodal": "不支持此多模态选项（pan-and-scan、分块裁剪、音频、media_dir）："
    "Studio 训练图像，路径相对于数据集文件夹",
    "lf.refused_new_adapter": "不支持在 adapter_name_or_path 之上新建适配器：请先合并该适配器（studio merge）",
    "lf.refused_additional_target": "不支持在 LoRA 之外额外训练模块（additional_target）：请使用 finetuning_type "
    "freeze 或 full",
    "lf.refused_pref_option": "不支持这个偏好损失选项：Studio 的 DPO 使用 pref_beta 和 pref_loss"
    "（sigmoid/hinge/ipo/orpo/simpo），SimPO 另有 simpo_gamma 和 pref_ftx",
    "lf.no_grpo": "LLaMA-Factory 没有 GRPO 阶段：grpo 规格无法写成 LF YAML（请保留 Studio 规格）",
    "lf.refused_ppo": "不支持 PPO 及其 reward_model：请使用 stage dpo 或 kto（stage rm 训练奖励模型）",
    "lf.refused_openmind": "不支持从魔乐社区（openMind Hub，modelers.cn）下载：请自行从那里下载模型"
    "（openmind_hub 的 snapshot_download），并把 model_name_or_path 设为其文件夹；或使用 Hugging Face Hub"
    "（镜像可设 HF_ENDPOINT）或 ModelScope（use_modelscope_hub: true）",
    "lf.refused_openmind_env": "已设置 USE_OPENMIND_HUB，LLaMA-Factory 会从魔乐社区（openMind Hub）下载，"
    "而 Studio 不支持：请取消该变量（使用 Hugging Face Hub，或 use_modelscope_hub: true），或给出本地文件夹",
    "lf.refused_ref_model": "不支持单独的参考模型：DPO 和 KTO 的参考模型就是正在训练的模型（LoRA：其基座）",
    "lf.refused_swanlab": "不导入 use_swanlab：请在 report_to 中加入 swanlab（Studio 以本地模式运行它）",
    "lf.refused_mca": "不支持 Megatron-Core（use_mca）训练：请使用 deepspeed 或 accelerate 的 FSDP 配置",
    "lf.refused_hyper_parallel": "不支持 HyperParallel 训练：请使用 deepspeed 或 accelerate 的 FSDP 配置",
    "lf.refused_compute_accuracy": "评估时不计算 token 准确率：Studio 报告评估 loss",
    "lf.refused_disable_shuffling": "不支持固定的数据顺序（disable_shuffling）：Studio 按随机种子打乱数据",
    "lf.refused_early_stopping": "不支持提前停止：请设置 num_train_epochs 或 max_steps",
    "lf.refused_shift_attn": "不支持 S^2-Attn（shift_attn）：长上下文请使用 rope_scaling",
    "lf.refused_mixture_of_depths": "mixture-of-depths 需要 LF 的 MoD 包（pip install mixture-of-depth），"
    "其最新版本（1.2.0）无法在 transformers 5 下导入（它导入已移除的 TRANSFORMERS_CACHE），"
    "且复制的是 transformers 4 的模型代码：请按模型原样训练",
    "lf.refused_unsloth": "不支持 Unsloth：Studio 使用 transformers 和 PEFT 训练",
    "lf.refused_v1_kernels": "不支持 LLaMA-Factory 的 v1 kernels",
    "lf.refused_kt": "不支持 KTransformers：Studio 使用 transformers 和 PEFT 训练",
    "lf.refused_moe_aux_loss": "不支持设置 MoE 路由损失系数：Studio 保留模型自己的设置",
    "lf.refused_upcast": "不支持把层归一化或 LM head 提升到 fp32：若要完整的 fp32 模型，请把 model.dtype 设为 float32",
    "lf.refused_from_scratch": "不支持从随机权重开始训练：Studio 微调预训练模型",
    "lf.refused_tokens": "不支持添加 token 或调整词表大小：Studio 使用模型原有的分词器训练",
    "lf.refused_quantization_device_map": "量化设备映射用于推理：请删除它",
    "lf.refused_eval_each_dataset": "不支持分别评估每个数据集：Studio 评估混合后的验证集",
    "lf.refused_streaming": "不支持流式读取数据集：Studio 读取数据集文件",
    "lf.refused_ignore_pad": "不支持 ignore_pad_token_for_loss 为 false：Studio 的 loss 从不计入填充",
    "lf.refused_default_system": "不支持 default_system：请把系统提示词放在数据的 system 列中",
    "lf.refused_preserve_thinking": "不支持 preserve_thinking（保留之前轮次的思考）：请使用 enable_thinking",
    "lf.ray_target": "ray 相关键：launch.target 设为 ray（LLaMA-Factory 的 USE_RAY=1）：Ray Train 的 worker 运行在 "
    "RAY_ADDRESS 所指的集群上，否则运行在本机启动的 Ray 上",
    "lf.noted_ray_master": "Ray Train 自行设置各 worker 的会合地址",
    "lf.refused_ray_filesystem": (
        "Ray 的结果要写入所有节点都能看到的目录：请把 ray_storage_path 设为这样的目录（不支持 s3 和 gcs 存储）"
    ),
    "lf.fp8_msamp": "已安装的 accelerate 的 FP8 后端中没有 MS-AMP：请把 fp8_backend 设为 torchao、te 或 auto",
    "lf.fp8_all_gather": "fp8_enable_fsdp_float8_all_gather：已接受，不起作用（float8 all-gather 是 FSDP2 的钩子；"
    "Studio 的 FSDP 是第 1 版，以 bf16 收集权重）",
    "lf.fsdp_option": "{value!r} 不是 Studio 支持的 FSDP 选项（full_shard、shard_grad_op、hybrid_shard、no_shard、"
    "offload、auto_wrap）",
    "lf.fsdp_layers": "要包装的层类有 {n} 个：Studio 只包装一个（launch.fsdp.layer_cls_to_wrap）",
    "lf.fsdp_key_alone": "只有设置了 fsdp（transformers 通过训练参数使用 FSDP）时才起作用",
    "lf.fsdp_one_process": "fsdp 未附带 accelerate 配置：单进程；请把 launch.num_processes 设为要分片的 GPU 数",
    "lf.refused_profiler": "不支持 torch profiler：Studio 的指标会显示吞吐量和显存",
    "lf.refused_predict": "预测（do_predict、predict_with_generate）不是训练：请用 `studio train FILE` 运行该 YAML"
    "（作为评估运行，写出 LLaMA-Factory 的预测文件），或使用评估页",
    "lf.refused_fsdp_args": "不支持通过训练参数使用 FSDP：请提供 accelerate 的 FSDP 配置（--accelerate-config）",
    "lf.refused_accelerator_config": "不支持 accelerator_config：请提供 accelerate 配置（--accelerate-config）",
    "lf.refused_parallelism_config": "不支持 parallelism_config：请提供 accelerate 配置（--accelerate-config）",
    "lf.refused_adapter_folder": "不支持从目录加载适配器：请先合并它们（studio merge）",
    # the accelerate config and DeepSpeed JSON
    "lf.ds_unreadable": "无法读取 DeepSpeed 配置 {path}：{error}",
    "lf.ds_not_object": "{path} 不是 JSON 对象",
    "lf.ds_zero_value": "不支持 {value!r}（只支持 'auto' 或默认值）",
    "lf.ds_precision": "deepspeed.{key}：精度取自训练参数中的 bf16/fp16",
    "lf.ds_batch": "deepspeed.{key}：批大小取自训练参数",
    "lf.acc_distributed_type": "不支持 {value}（可用 NO、MULTI_GPU、MULTI_CPU、FSDP、DEEPSPEED）",
    "lf.acc_processes": "{total} 个进程无法平均分到 {machines} 台机器上",
    "lf.acc_gpu_ids": "{value!r} 既不是 'all'，也不是以逗号分隔的 GPU 编号",
    "lf.acc_mixed_precision": "不支持 {value}（可用 no、bf16、fp16）",
    "lf.acc_precision_differs": "accelerate 的 mixed_precision {value} 与训练参数不同：以训练参数为准",
    "lf.acc_not_mapping": "必须是映射（key: value）",
    "lf.acc_studio_sets": "{key}：已接受，由 Studio 设置",
    "lf.acc_fsdp_fixed": "不支持 {value!r}（Studio 使用 {fixed!r}）",
    # reading the YAML
    "lf.cannot_read": "无法读取 {path}：{error}",
    "lf.bad_yaml_file": "{path} 不是有效的 YAML：{error}",
    "lf.bad_yaml": "不是有效的 YAML：{error}",
    "lf.accelerate_for_lf": "--accelerate-config 用于 LLaMA-Factory YAML；Studio 的 spec 在 launch: 下写启动设置",
    "lf.not_mapping_file": "{path} 不是映射（key: value）",
    "lf.not_lf_yaml": "不是 LLaMA-Factory 训练 YAML（没有 model_name_or_path、stage、dataset、template 等参数）",
    "lf.accelerate_not_mapping": "不是 accelerate 参数的映射（key: value）",
    # an export YAML as a merge
    "lf.export_not_mapping": "不是 LLaMA-Factory 参数的映射（每行 key: value）",
    "lf.export_training_key": "{key}：已接受，但不起作用（这是训练或推理设置，合并不使用）",
    "lf.export_unknown_key": "不是 LLaMA-Factory 的参数（LLaMA-Factory 也会拒绝）",
    "lf.export_gptq_bits": "{value!r}：Studio 的 GPTQ 导出写 4 位或 8 位（gptq-4bit、gptq-8bit）",
    "lf.export_gptq_adapters": '导出时量化只接受不带适配器的模型（LLaMA-Factory 同样拒绝："Please merge adapters '
    'before quantizing the model."）：请先合并，再量化合并后的目录',
    "lf.export_gptq_count": "{value!r}：需要不小于 1 的整数",
    "lf.export_gptq_no_dataset": 'export_quantization_bit 需要一个校准文件（LLaMA-Factory 同样需要："Quantization '
    'dataset is necessary for exporting."）',
    "lf.export_gptq_dataset": "{name}：没有这个文件（{looked}）；需要每行有 'text' 的文件，如 LLaMA-Factory 的 "
    "data/c4_demo.jsonl",
    "lf.export_gptq_legacy": "export_legacy_format：已接受，GPTQ 导出不使用（gptqmodel 保存 safetensors）",
    "lf.export_gptq_size": "export_size：已接受，GPTQ 导出不使用（gptqmodel 自行分片）",
    "lf.export_quantized": "不支持合并进量化模型（LLaMA-Factory 也会拒绝）：请删除 quantization_bit；"
    "Studio 在全精度基座上合并",
    "lf.export_finetuning": "{finetuning}：Studio 合并 LoRA 适配器（lora），或重新导出 full / freeze 模型",
    "lf.export_adapters_need_lora": "适配器需要 finetuning_type lora（而不是 {finetuning}）",
    "lf.export_trust_remote_code": "trust_remote_code：已接受；合并用 transformers 自带的类加载模型，"
    "不运行模型目录中的代码",
    "lf.export_template": "template：{template} 已接受，但不起作用（合并后的目录保留适配器分词器的对话模板，"
    "没有时保留基座的）",
    "lf.export_no_model": "缺少：请指定基座模型（一个目录，或 Hugging Face 缓存中的 hub id）",
    "lf.export_adapter_missing": "{name}：未找到（{looked}）",
    "lf.export_no_dir": "缺少：请指定写入合并后模型的目录",
    "lf.export_size": "{value!r}：请以 GB 为单位给出分片大小，大于 0 的数（如 2）",
    "lf.export_device": "{value!r}：请选择 cpu 或 auto",
    "lf.export_device_cpu": "export_device：auto，但看不到 GPU：合并在 CPU 上进行",
    "lf.export_legacy": "{value!r}：true（.bin 文件）或 false（safetensors）",
    "lf.export_no_config": "{path} 中没有 config.json：不是模型目录",
    "lf.export_model_missing": "{name}：既不是本地模型目录（{looked}），也不在 Hugging Face 缓存中：请先下载"
    "（studio download）",
    "lf.export_precision": "train.precision auto 写为 {precision}（{why}）",
    "lf.export_precision_run": "运行 {run} 训练时所用的精度",
    "lf.export_precision_here": "本机上的运行所用的精度：{device}",
    "lf.export_template_named": "data.template auto 写为 {name}：它的渲染与模型自带的对话模板相同",
    "lf.export_template_default": "data.template auto 写为 default：模型没有自带对话模板",
    "lf.export_template_parsed": "data.template auto：未写 template，LLaMA-Factory 会解析模型自带的对话模板"
    "（没有与之渲染相同的命名模板）",
    "lf.export_template_unknown": "data.template auto：本机没有 {model} 的分词器；未写 template，"
    "LLaMA-Factory 会解析模型的对话模板（没有时使用 empty）",
    "lf.export_written_as_ran": "以下各项按 Studio 运行该配置时的解析结果写出",
}
