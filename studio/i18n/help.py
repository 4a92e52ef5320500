"""Chinese help text of every run-spec field, keyed by field path (the English text is the spec's description).

Light: data only. A test checks that every field of ``engine.spec.schema.RunSpec`` has an entry, so a new spec field
cannot ship without its Chinese help.
"""

HELP_ZH: dict[str, str] = {
    "model.name_or_path": "本地模型目录或 Hugging Face 模型 ID（组织/名称）",
    "model.revision": "Hub 版本（分支、标签或提交）；本地目录忽略此项",
    "model.hub": "模型 ID 从哪里下载：Hugging Face Hub（或 HF_ENDPOINT 指定的镜像）或 ModelScope（LLaMA-Factory 的 "
    "use_modelscope_hub；MODELSCOPE_ENDPOINT，缓存 MODELSCOPE_CACHE）。本地目录忽略此项",
    "model.trust_remote_code": "运行模型自带的 Python 代码。仅用于你信任的模型。",
    "model.dtype": "基座权重的加载精度（auto：随计算精度）",
    "model.attn_implementation": "注意力实现：sdpa（PyTorch）、eager 或 flash_attention_2（CUDA，fp16/bf16）",
    "model.packed_attention": "含多个样本的行（无填充或打包批次）里 sdpa 如何计算注意力："
    "per_sample 只在每个样本自己的 token 上计算；mask 在整行上按块对角掩码计算，每层保留 行长 x 行长 的偏置。"
    "结果相同。auto：CPU 上用 per_sample，GPU 上用 mask（GPU 上尚未测量 per_sample 的速度；内存计划会计入该偏置）。"
    "flash_attention_2 本身就按样本计算",
    "model.rope_scaling": "用 RoPE 缩放扩展上下文长度（不勾选：关闭）",
    "model.rope_scaling.type": "RoPE 缩放方法",
    "model.rope_scaling.factor": "上下文长度倍数",
    "model.vision.freeze_vision_tower": "冻结视觉塔（图像编码器）",
    "model.vision.freeze_multi_modal_projector": "冻结多模态投影层（把图像特征送入语言模型）",
    "model.vision.freeze_language_model": "冻结语言模型（只训练未冻结的视觉部分）",
    "model.vision.image_max_pixels": "更大的图像在送入处理器前缩小到这么多像素（保持宽高比）",
    "model.vision.image_min_pixels": "更小的图像在送入处理器前放大到这么多像素（保持宽高比）",
    "method.stage": "sft：监督微调；pt：文本继续预训练；dpo：偏好对训练；kto：每个回答标注可取与否（kto_tag）；"
    "rm：在偏好对上训练奖励模型（打分头）；grpo：在提示上做强化学习，由奖励函数打分（method.grpo）",
    "method.finetuning": "lora：训练适配器（配合量化即 QLoRA）；oft：正交微调适配器；full：训练全部权重；freeze：只"
    "训练最后几层",
    "method.lora.rank": "LoRA 秩 r",
    "method.lora.alpha": "LoRA alpha（缩放 = alpha / 秩；rsLoRA 时为 alpha / sqrt(秩)）",
    "method.lora.dropout": "LoRA 输入上的丢弃率",
    "method.lora.targets": "要适配的模块名（如 q_proj、v_proj），或 all 表示所有线性层",
    "method.lora.use_rslora": "秩稳定的 LoRA 缩放",
    "method.lora.use_dora": "权重分解 LoRA（DoRA）",
    "method.lora.loraplus_lr_ratio": "LoRA+：B 矩阵以 学习率 × 此倍数 学习（留空：关闭；LoRA+ 论文用 16）",
    "method.lora.loraplus_lr_embedding": "LoRA+：嵌入层上 LoRA 的学习率",
    "method.lora.pissa_init": "PiSSA：用每个权重的主奇异向量初始化适配器（基座保留其余部分），而不是 B = 0；比普通 L"
    "oRA 收敛更快",
    "method.lora.pissa_iter": "PiSSA：快速 SVD 的迭代次数（-1：精确 SVD，较慢）",
    "method.lora.pissa_convert": "PiSSA：把训练好的适配器转换为作用于原始基座的普通 LoRA 适配器保存（否则 PiSSA 适配"
    "器需要修改后的基座）",
    "method.oft.rank": "OFT 秩：每层的正交块数（0：由块大小决定；两者只填一个）",
    "method.oft.block_size": "OFT 块大小：每层输入维度按此大小切成正交块（0：由秩决定；必须整除各层的输入维度）",
    "method.oft.targets": "要适配的模块名（如 q_proj、v_proj），或 all 表示所有线性层",
    "method.oft.dropout": "OFT 模块丢弃率（训练时整块丢弃）",
    "method.freeze.trainable_layers": "训练最后 N 个解码层（其余冻结）",
    "method.freeze.use_llama_pro": (
        "LLaMA Pro：只训练 studio expand-model 插入的扩展块（按 LLaMA-Factory 的层号），其余层冻结"
    ),
    "method.freeze.trainable_modules": "仅训练可训练层中的这些模块（留空：这些层的全部模块）",
    "method.freeze.extra_modules": "层之外额外训练的模块，如 lm_head、embed_tokens",
    "method.quantization.bits": "用 bitsandbytes 以 4 位或 8 位加载基座（QLoRA）；0 = 关闭",
    "method.quantization.quant_type": "4 位数据类型",
    "method.quantization.double_quant": "对量化常数再量化（每参数约省 0.4 位）",
    "method.quantization.compute_dtype": "反量化权重上矩阵乘的精度（auto：随计算精度）",
    "method.dpo.beta": "DPO 温度系数 beta",
    "method.dpo.loss_type": "偏好损失：sigmoid、hinge、ipo（带参考模型的 DPO）；"
    "orpo（TRL 的 ORPOTrainer：几率比 + NLL，无参考模型）；"
    "simpo（TRL 的 CPOTrainer，loss_type simpo：长度归一化的间隔，带 simpo_gamma，无参考模型）"
    "——即 LLaMA-Factory 的 pref_loss",
    "method.dpo.simpo_gamma": "SimPO 的目标奖励间隔（LLaMA-Factory 的 simpo_gamma）",
    "method.dpo.ftx": "加到 SimPO 上的、在优选回答上的 SFT（NLL）损失权重"
    "（LLaMA-Factory 的 pref_ftx；TRL 的 cpo_alpha）；ORPO 自带 NLL 项",
    "method.kto.beta": "KTO beta：模型可偏离参考模型的程度（越大偏离越少）",
    "method.kto.desirable_weight": "可取回答（kto_tag 为 true）损失的权重；它们较少时调高",
    "method.kto.undesirable_weight": "不可取回答（kto_tag 为 false）损失的权重；它们较少时调高",
    "method.grpo.num_generations": "每个提示采样的生成数（组；GRPO 把每个生成与组内均值比较）。生成批次"
    "（批大小 × 梯度累积 × 进程数）必须是它的倍数",
    "method.grpo.max_prompt_length": "超过这么多 token 的提示只保留最后的部分",
    "method.grpo.max_completion_length": "每个生成最多的 token 数（更长的被截断并计数）",
    "method.grpo.temperature": "采样温度",
    "method.grpo.top_p": "核采样",
    "method.grpo.beta": "KL 系数：策略被约束在参考模型附近的程度"
    "（0：不加载参考模型，TRL 的默认值；DeepSeek-R1 用 0.001）",
    "method.grpo.loss_type": "TRL 的 loss_type：dapo（按整批 token）、grpo（按序列）、dr_grpo（常数）、"
    "bnpo（按本地批 token）、cispo、sapo",
    "method.grpo.epsilon": "裁剪 epsilon",
    "method.grpo.epsilon_high": "上裁剪 epsilon（留空：与 epsilon 相同；DAPO 用 0.28）",
    "method.grpo.num_iterations": "每个生成批次上的优化轮数（TRL 的 mu）",
    "method.grpo.scale_rewards": "优势除以组内、批内的奖励标准差，或不缩放（Dr. GRPO）",
    "method.grpo.generation_backend": "由谁生成：transformers 的 generate（CPU 和 GPU），"
    "或 vLLM（需要 GPU 和 vllm 包）",
    "method.grpo.rewards": "奖励函数，每行一个 YAML 映射，如 {kind: math, weight: 1.0}；"
    "kind 为 exact、normalized、math、regex（pattern）、length（target_length）、"
    "json（json_schema）、model（model：Studio rm 运行的 ID 或文件夹）或 python（file、function）；"
    "grpo 阶段至少需要一个",
    "method.grpo.log_completions": "每个记录步写入运行事件的样例生成数（带各奖励）",
    "data.datasets": "注册表（dataset_info.json）中的数据集名；多个会混合",
    "data.dataset_dir": "dataset_info.json 所在目录（留空：工作区的 data 目录）",
    "data.mix": "多个数据集的组合方式：拼接，或交错（到最短者停止 / 过采样到最长者）",
    "data.mix_probs": "交错采样概率，每个数据集一个（留空：均等）",
    "data.template": (
        "对话模板：auto（分词器自带，否则 default）、llama3、chatml、qwen、mistral、gemma、alpaca、default、empty"
    ),
    "data.cutoff_len": "每个样本的最大 token 数；更长的样本会被截断（pt 阶段：文本按此长度切块，不丢 token）",
    "data.max_samples": "每个数据集最多使用的行数（留空或 0：全部）",
    "data.val_size": "留作评估的行数，按 LLaMA-Factory 的 val_size 解读：小于 1 是比例（0.1：十分之一），"
    "从 1 起是整数行数（0：不评估）",
    "data.eval_datasets": "注册表中单独的评估数据集（LLaMA-Factory 的 eval_dataset），按评估策略评估，"
    "不再从训练数据中切分（留空：无）",
    "data.mask_history": "每段对话只训练最后一轮助手回答；之前的回答只作上下文（sft；超出截断长度的样本保留最后几轮）",
    "data.enable_thinking": "推理模板（qwen3、deepseekr1 等）：开启时没有思考的回答会得到一个空的 <think> 块"
    "并参与训练；关闭时去掉思考内容，空块放进提示词",
    "data.tool_format": "工具和工具调用的写法：所选模板自己的格式，或另一种格式（LLaMA-Factory 的 tool_format）",
    "data.packing": (
        "把多个样本打包进一行且互不注意（短数据更快）。pt 阶段：文本首尾相接后切成整块（块内文本之间可相互注意，"
        "以 EOS 分隔；最后不满一块的部分丢弃）；关闭时每条文本各自切块"
    ),
    "data.padding_free": "无填充批次：一步的样本拼成一行，位置编号按样本重新开始，样本之间互不注意"
    "（与填充批次的样本和损失相同，不在填充 token 上计算）。"
    "auto：sft 和 pt 且未打包时开启；dpo 仅在 flash_attention_2 下；kto 和 rm 从不开启",
    "data.group_by_length": "把长度相近的样本放进同一批：填充更少，顺序随机性较低"
    "（sft、pt；不能与打包同用；不适用于 dpo、kto、rm）",
    "data.train_on_prompt": "提示词部分也计算损失",
    "data.preprocessing_workers": "分词预处理的进程数",
    "data.dataloader_workers": "训练时加载批次的工作进程数（0：在训练进程内加载）",
    "train.num_epochs": "训练轮数（最大步数 > 0 时忽略）",
    "train.max_steps": "达到此优化步数后停止（-1：按轮数）",
    "train.learning_rate": "峰值学习率",
    "train.lr_scheduler": "学习率调度方式",
    "train.warmup_ratio": "预热占总步数的比例（预热步数为 0 时使用）",
    "train.warmup_steps": "预热步数（> 0 时覆盖比例）",
    "train.weight_decay": "AdamW 权重衰减",
    "train.optimizer": "优化器（8 位版本来自 bitsandbytes）。仅 full / freeze：galore_* 与 apollo_adamw 把线性层的梯"
    "度投影到低秩"
    "（train.low_rank；需 galore-torch / apollo-torch 包），badam 每次只更新一组层（train.badam；需 badam 包）。adam"
    "_mini（需 "
    "adam-mini 包）和 muon（需 muon 包）也可训练适配器",
    "train.low_rank.targets": "GaLore / APOLLO：梯度被投影的线性模块（如 q_proj、v_proj），或 all 表示解码器的所有线"
    "性层",
    "train.low_rank.rank": "GaLore / APOLLO：投影梯度的秩",
    "train.low_rank.update_interval": "GaLore / APOLLO：投影矩阵的更新间隔步数",
    "train.low_rank.scale": "GaLore / APOLLO：投影更新的缩放（留空：GaLore 为 2，APOLLO 为 32，与 LLaMA-Factory 默认"
    "一致）",
    "train.low_rank.proj_type": "GaLore / APOLLO：投影哪一侧（APOLLO 支持 std、right、left）",
    "train.low_rank.apollo_proj": "APOLLO：随机投影或 SVD 投影",
    "train.low_rank.apollo_scale_type": "APOLLO：按通道或按张量缩放",
    "train.low_rank.layerwise": "GaLore / APOLLO：反向传播时逐层更新（更省内存；仅单进程，不能梯度累积）",
    "train.badam.mode": "BAdam：每次更新一组层（layer）或每个权重的一部分（ratio）",
    "train.badam.start_block": "BAdam layer 模式：最先训练的块（留空：第一个）",
    "train.badam.switch_mode": "BAdam layer 模式：各块轮换的顺序",
    "train.badam.switch_interval": "BAdam layer 模式：切换到下一块前的步数（-1：不切换）",
    "train.badam.update_ratio": "BAdam ratio 模式：每个权重被更新的比例",
    "train.badam.mask_mode": "BAdam ratio 模式：被更新的元素相邻或分散",
    "train.badam.verbose": "BAdam：0 不输出，1 输出当前块，2 输出可训练参数",
    "train.per_device_batch_size": "每个设备每个微步的样本数",
    "train.gradient_accumulation": "每个优化步累积的微步数",
    "train.max_grad_norm": "梯度裁剪到此范数（0：关闭）",
    "train.precision": "混合精度：auto 在支持的 GPU 上选 bf16，否则 fp16；CPU 上为 fp32",
    "train.fp8": "通过 accelerate 进行 FP8 训练：线性层的矩阵乘以 FP8 计算，其余以 bf16。"
    "需要计算能力 8.9 及以上的 NVIDIA GPU（Ada、Hopper）及所选后端的软件包",
    "train.fp8_backend": "FP8 后端：torchao、te（NVIDIA Transformer Engine），"
    "或 auto（已安装 torchao 时用它，否则用 te）",
    "train.loss": "sft 的词元损失：cross_entropy 为交叉熵；dft 用模型对该词元的概率（不回传梯度）"
    "给每个词元的交叉熵加权；asft 为 dft 加上 asft_alpha 乘以与冻结基座模型的 KL 散度；eaft 用前 20 个 logits "
    "的熵除以 3 的 eaft_alpha 次方加权（LLaMA-Factory 的 use_dft_loss / use_asft_loss / use_eaft_loss）",
    "train.asft_alpha": "asft：与冻结基座模型之间 KL 散度的权重（LLaMA-Factory 默认 0.1）",
    "train.eaft_alpha": "eaft：熵权重的指数（LLaMA-Factory 默认 1.0）",
    "train.liger_kernel": "CUDA 上的 Liger 融合算子（融合线性层与交叉熵，不生成完整 logits；RMSNorm、RoPE、SwiGLU）："
    "auto 在已安装 liger-kernel 且架构受支持时使用；CPU 上不可用",
    "train.trained_logits_only": "只在下一个词元参与训练的位置计算输出层与损失（跳过提示词与填充位置）：损失不变，"
    "更省时间和内存。用于 sft，且模型的 forward 支持（transformers 的 logits_to_keep）、Liger 融合算子关闭时",
    "train.gradient_checkpointing": "反向时重算激活：省显存，约慢 30%。auto：规划在 GPU 内存（留 10% 余量）内"
    "放得下时关闭，否则开启（true / false 即 on / off）",
    "train.seed": "随机种子",
    "train.logging_steps": "每 N 个优化步记录一次日志",
    "train.save_steps": "每 N 步保存一个检查点",
    "train.eval_steps": "每 N 步评估一次（需有验证集）",
    "train.save_total_limit": "最多保留的检查点数（留空：全部）",
    "train.resume_from": "从检查点目录继续，或 last 表示输出目录中最新的检查点",
    "train.save_strategy": (
        "何时保存检查点：每隔保存间隔步、每轮、评估损失改善时（best，需有验证集），或不保存（最终模型照常保存）"
    ),
    "train.save_only_model": "检查点只含权重（不含优化器和调度器状态）：更小，但不能从中续训",
    "train.eval_strategy": "何时在验证集上评估：每隔评估间隔步、每轮，或不评估",
    "train.per_device_eval_batch_size": "评估时每个设备每步的样本数（留空：同训练批大小）",
    "train.neftune_noise_alpha": "NEFTune：训练时给输入嵌入加上此尺度的噪声（留空：关闭；常用 5）",
    "train.count_input_tokens": "统计已见输入 token（用于 token/s 和总数）：non_padding、all（含填充）或 no",
    "train.extra_args": (
        "其他 Hugging Face TrainingArguments，原样传给 Trainer（YAML 或 JSON 映射，如 {adam_beta2: 0.95}）；"
        "仅限已安装 transformers 的字段且没有其他设置覆盖"
    ),
    "launch.target": (
        "local：本机队列；slurm：集群上的批处理作业（设置：sbatch 位置、共享目录）；"
        "ray：Ray 集群上的 Ray Train worker（RAY_ADDRESS，否则本机启动的 Ray）"
    ),
    "launch.backend": "单进程、DDP（数据并行）、FSDP（分片）或 DeepSpeed ZeRO",
    "launch.device": "auto：有 GPU 用 GPU，否则用 CPU",
    "launch.gpus": "指定 GPU 编号（留空：任意空闲 GPU，数量与进程数相同）",
    "launch.num_processes": "每台机器的进程数（每个 GPU 一个）",
    "launch.share_gpus": "允许与其他运行共用 GPU",
    "launch.num_machines": "参与训练的机器（节点）数",
    "launch.machine_rank": "本机序号（0 = 主节点）",
    "launch.main_process_ip": "0 号机器的地址（多机时）",
    "launch.main_process_port": "集合通信端口",
    "launch.ddp_timeout": "进程在集合通信中互相等待的秒数，超时则运行失败",
    "launch.deepspeed.stage3_param_persistence_threshold": "ZeRO-3：元素数少于此值的参数在每张 GPU 上完整保留"
    "（留空：DeepSpeed 默认值）",
    "launch.deepspeed.stage3_prefetch_bucket_size": "ZeRO-3：提前取回的参数元素数（留空：DeepSpeed 默认值）",
    "launch.deepspeed.extra_config": "更多 DeepSpeed 顶层配置项，原样写入 ds_config.json"
    "（如 {comms_logger: {enabled: true}}）；不能是上面的设置或 Trainer 会填写的项",
    "launch.deepspeed.zero_stage": "ZeRO 阶段：1 切分优化器状态，2 再切分梯度，3 再切分参数",
    "launch.deepspeed.offload_optimizer": "优化器状态存放位置（需 ZeRO 阶段 ≥ 1）",
    "launch.deepspeed.offload_param": "参数存放位置（仅 ZeRO-3；明显变慢）",
    "launch.deepspeed.nvme_path": "NVMe 卸载目录",
    "launch.deepspeed.pin_memory": "卸载到 CPU 的内存使用锁页",
    "launch.deepspeed.overlap_comm": "归约与反向计算重叠",
    "launch.deepspeed.contiguous_gradients": "把梯度拷贝到连续缓冲区",
    "launch.deepspeed.sub_group_size": "ZeRO-3 子组大小（元素数）",
    "launch.deepspeed.reduce_bucket_size": "归约桶大小（元素数）",
    "launch.deepspeed.steps_per_print": "DeepSpeed 自身的日志间隔",
    "launch.fsdp.sharding_strategy": "FSDP 切分的内容",
    "launch.fsdp.auto_wrap_policy": "模块的包装方式",
    "launch.fsdp.layer_cls_to_wrap": "要包装的解码层类（auto：从模型配置读取）",
    "launch.fsdp.min_num_params": "SIZE_BASED_WRAP 的大小阈值",
    "launch.fsdp.offload_params": "把参数卸载到 CPU",
    "launch.fsdp.state_dict_type": "检查点的保存方式",
    "launch.fsdp.cpu_ram_efficient_loading": "只在 0 号进程加载权重",
    "launch.slurm.partition": "Slurm 分区（留空：设置中的默认分区，否则集群默认）",
    "launch.slurm.account": "作业计费的 Slurm 账户（留空：你的默认账户）",
    "launch.slurm.qos": "服务质量（留空：默认）",
    "launch.slurm.gpus_per_node": "每节点 GPU 数（留空：GPU 上等于每机进程数，CPU 上为 0）",
    "launch.slurm.cpus_per_node": "每节点 CPU 数（0：Slurm 默认）",
    "launch.slurm.memory": "每节点内存，如 64G（留空：默认；0：全部）",
    "launch.slurm.time_limit": "时间限制：分钟数、HH:MM:SS 或 D-HH:MM:SS（留空：分区的限制）",
    "launch.slurm.constraint": "所需节点特性，如 a100（sbatch --constraint）",
    "launch.slurm.extra_sbatch": "更多 sbatch 选项，每行一个，如 --exclusive 或 #SBATCH --mail-type=END",
    "launch.ray.num_workers": "Ray worker 数，每个一个训练进程（LLaMA-Factory 的 ray_num_workers）",
    "launch.ray.resources_per_worker": (
        "每个 worker 向 Ray 申请的资源，如 {GPU: 1, CPU: 4}（留空：cuda 上一个 GPU，cpu 上一个 CPU）"
    ),
    "launch.ray.placement_strategy": (
        "Ray 如何在节点上放置 worker：PACK（少节点）、SPREAD（多节点）、STRICT_*（必须如此）"
    ),
    "launch.ray.init_kwargs": (
        "ray.init 的其他参数，如 {runtime_env: {env_vars: {A: b}}}（LLaMA-Factory 的 ray_init_kwargs）；"
        "集群地址来自 RAY_ADDRESS"
    ),
    "launch.ray.storage_path": "Ray Train 保存结果的位置（留空：运行目录下的 ray/；多节点：所有节点都能看到的目录）",
    "launch.ray.run_name": "存储路径下 Ray Train 运行的名称（留空：运行的 id）",
    "output.run_name": "运行名称（字母、数字、. _ - 和空格）",
    "output.output_dir": "检查点和适配器的保存位置（留空：运行目录）",
    "output.overwrite": "替换之前一个已结束运行的输出目录（LLaMA-Factory 的 overwrite_output_dir）："
    "只限该运行自己创建、且没有其他文件的目录；之前的运行保留记录、运行目录和日志，并标记为已被本运行覆盖",
    "output.report_to": "实验记录工具，保存在运行目录中（tensorboard；mlflow 文件存储；trackio 本地存储；"
    "wandb 离线；swanlab 本地）",
    "output.layout": "最终权重在输出目录中的位置：studio（其中的 adapter/ 或 model/ 目录）或 llamafactory"
    "（输出目录本身，与 LLaMA-Factory 的保存方式相同；LLaMA-Factory YAML 的 output_dir 即此含义）",
}

# The health rules' actions, said once (engine.spec.watch_group).
_ACTIONS_ZH = (
    "：off 关闭，note 记录告警（仪表盘上显示），warn 告警并发送通知，"
    "stop 告警、通知并像「停止」一样停止运行（先保存检查点，除非权重已不再是有限值）"
)
HELP_ZH.update(
    {
        "health.loss_nan": "损失为 NaN 或无穷" + _ACTIONS_ZH,
        "health.loss_spike": "损失突然高于近期中位数的 k 倍" + _ACTIONS_ZH,
        "health.loss_spike_factor": "损失突增规则的 k：损失高于近期记录损失中位数的 k 倍时触发",
        "health.window": "损失突增与吞吐量规则取中位数时使用的近期记录步数",
        "health.grad_norm": "梯度范数为 NaN / 无穷或超过上限" + _ACTIONS_ZH,
        "health.grad_norm_max": "梯度范数上限（裁剪之前）；NaN 或无穷总会触发该规则",
        "health.lr_zero": "预热结束后学习率为零而训练步数尚未用完" + _ACTIONS_ZH,
        "health.throughput": "每秒 token 数降到近期中位数的一定比例以下" + _ACTIONS_ZH,
        "health.throughput_fraction": "每秒 token 数低于近期中位数的这个比例时触发吞吐量规则",
        "health.stall": "没有进展：训练进程长时间没有写出任何内容，远超平时的间隔（卡住检测）" + _ACTIONS_ZH,
        "health.gpu_idle": "训练期间某块 GPU 一直空闲" + _ACTIONS_ZH,
        "health.gpu_idle_minutes": "GPU 利用率持续低于 5% 多少分钟后触发空闲规则",
        "health.gpu_memory": "某块 GPU 的显存接近用满" + _ACTIONS_ZH,
        "health.gpu_memory_fraction": "已用显存达到 GPU 总显存的这个比例时触发显存规则",
        "health.eval_overfit": "过拟合：验证损失连续 n 次评估没有低于此前最佳（同早停），而训练损失下降" + _ACTIONS_ZH,
        "health.eval_patience": "过拟合规则的 n（耐心）：最佳验证损失之后没有改进的评估次数",
        "health.eval_min_delta": "过拟合规则的最小改进：验证损失比此前最佳低出超过这个值才算改进",
        "health.reward_flat": "GRPO 没有学习信号：连续 n 个记录步中每组补全的奖励都相同（组内差异为 0）" + _ACTIONS_ZH,
        "health.reward_flat_steps": "无奖励信号规则的 n：奖励组内差异为 0 的连续记录步数",
        "health.disk": "运行目录所在磁盘的剩余空间不够保存下一个检查点" + _ACTIONS_ZH,
        "health.disk_margin": "剩余空间低于检查点大小的这个倍数时触发磁盘规则",
        "notify.webhook_env": "保存 Webhook URL 的环境变量名（URL 含令牌，因此从不写入配置）；留空：不发送 Webhook",
        "notify.webhook_format": "Webhook 的消息格式：通用 JSON，或 Slack、飞书、钉钉、企业微信的机器人消息",
        "notify.email_to": "接收通知的邮箱（逗号分隔）；留空：不发送邮件",
        "notify.email_from": "邮件的发件人地址",
        "notify.smtp_host": "发送邮件的 SMTP 服务器",
        "notify.smtp_port": "SMTP 服务器端口（587 STARTTLS，465 SSL，25 明文）",
        "notify.smtp_security": "与 SMTP 服务器连接的加密方式",
        "notify.smtp_user": "SMTP 登录名（留空：不登录）",
        "notify.smtp_password_env": "保存 SMTP 密码的环境变量名（从不写入配置）",
        "notify.on": "何时通知：运行结束（完成、失败、停止）以及设为 warn 或 stop 的规则的告警",
    }
)
