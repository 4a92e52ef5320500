"""Chinese text of the planner's notes, the auto-fit steps and the speed advice (``engine.plan.messages``), keyed like
that catalog (``studio.i18n.localize`` looks them up). Light: stdlib only."""

from __future__ import annotations

PLAN_ZH: dict[str, str] = {
    # plan notes
    "plan.no_config": "model.name_or_path：没有 {path} 的模型参数：{why}",
    "plan.moe": "混合专家模型（{experts} 个专家，每个 token 用 {per_token} 个）：专家权重按稠密计算，"
    "激活按路由后的 token 计算，因此规划是近似值",
    "plan.vision": "视觉语言模型：视觉塔 {tower} 个参数，投影层 {projector} 个参数（参与训练：{learns}）；"
    "一张图像在视觉塔中是 {patches} 个图块，在序列中占 {tokens} 个 token（由其 {per_image} 决定；"
    "image_max_pixels 为 {pixels}）",
    "plan.vision_sample": "每个样本的图像读自数据的前 {rows} 行：按最重的样本规划，"
    "{images} 张图像共 {tokens} 个 token",
    "plan.vision_unread": "启动前无法读取数据中的图像：按每个样本一张最大尺寸的图像规划",
    "plan.vision_over_cutoff": "一个样本的图像（{images} 张）就有 {tokens} 个 token，"
    "不小于 data.cutoff_len（{cutoff}）："
    "请增大 cutoff_len 或减小 model.vision.image_max_pixels",
    "plan.vision_approx": "model_type {model_type!r}：其视觉塔按 vision_config 的通用字段（宽度、层数、MLP 宽度）"
    "计算；"
    "数字为近似值",
    "plan.unknown_arch": "model_type {model_type!r} 按 Llama 结构的解码器规划；请核对数字",
    "plan.sharded": "参数切分到 {n} 个进程上（另有两个已聚合的层在传输中）",
    "plan.offload_optimizer": "优化器状态卸载到 CPU 内存（DeepSpeed CPU Adam）",
    "plan.offload_params": "参数卸载到 CPU 内存：会大幅变慢",
    "plan.eager": "eager 注意力会生成 批大小 x 头数 x 序列长度² 的分数矩阵：请使用 sdpa 或 flash_attention_2",
    "plan.cpu": "设备是 cpu：这些数字是单个进程占用的主机内存",
    "plan.oft": "OFT 按 LoRA 的方式估算：每个目标层 r × b(b-1)/2 个旋转参数（r 个大小为 b 的块），并为反向传播保留每"
    "个目标层输入的一份旋转副本；"
    "构造旋转矩阵（Cayley 变换）的临时内存未计入",
    "plan.optimizer_estimate": "{optimizer}：其优化器状态为估算值（GaLore / APOLLO 按每个二维权重的低秩投影，Adam-mi"
    "ni 与 Muon "
    "按每个元素一个动量），不是校准过的数字",
    "plan.badam": "BAdam：每次只为一组层保存 Adam 状态（约一层的份额）；整个模型的梯度仍被计入",
    "plan.mask_bias": "多样本行使用块对角掩码：sdpa 在每一层为反向传播保留 行长 x 行长 的注意力偏置"
    "（已计入激活，共 {size}）：把 model.packed_attention 设为 per_sample（或使用 flash_attention_2）则不保留",
    "plan.liger": "Liger 融合线性层与交叉熵：logits 分块计算，从不完整保存",
    "plan.reference_model": "不用 LoRA 的 {stage} 阶段会保留一份冻结的参考模型副本（TRL 的 ref_model）；"
    "LoRA 不需要（其参考模型是关闭适配器后的基座）",
    "plan.reward_models": "grpo 阶段：奖励模型在训练进程中为生成打分（{size}，计入“参考 / 奖励模型”一项）",
    "plan.reward_head": "rm 阶段：单输出的打分头取代语言模型头，没有词表大小的 logits；"
    "chosen 与 rejected 回答在同一批次中计算",
    "plan.ckpt_on": "配置中设为开启",
    "plan.ckpt_off": "配置中设为关闭",
    "plan.ckpt_auto_off": "自动：不开启时需要 {need}，在 {limit} 以内（{where} 内存减去 10% 的规划误差余量），"
    "因此保留激活，不做重算",
    "plan.ckpt_auto_on": "自动：不开启时需要 {need}，超过 {limit}（{where} 内存减去 10% 余量），"
    "因此在反向传播时重算激活",
    "plan.ckpt_auto_unknown": "自动：目标 GPU 的内存未知（本机没有 GPU，也未指定），因此开启",
    # auto-fit steps
    "fit.batch": "每设备批大小 {b} -> {nb}，梯度累积 {ga} -> {nga}（有效批大小 {effective} 不变）",
    "fit.per_sample": "在无填充 / 打包的行内按样本计算注意力（model.packed_attention 设为 per_sample："
    "结果相同，不再保留掩码每层 行长 x 行长 的偏置）",
    "fit.checkpointing": "开启梯度检查点（反向传播时重算激活，约慢 30%）",
    "fit.zero1": "DeepSpeed ZeRO-1（把优化器状态切分到 {n} 个 GPU）",
    "fit.zero2": "DeepSpeed ZeRO-2（再切分梯度，共 {n} 个 GPU）",
    "fit.zero3": "DeepSpeed ZeRO-3（再切分参数，共 {n} 个 GPU）",
    "fit.offload_optimizer": "把优化器状态卸载到 CPU（DeepSpeed ZeRO-{stage} + CPU Adam；每步更慢）",
    "fit.offload_params": "把参数卸载到 CPU（ZeRO-3；会大幅变慢）",
    "fit.fsdp_offload": "FSDP 参数卸载到 CPU（会大幅变慢）",
    "fit.lora_rank": "LoRA 秩 {r} -> {nr}",
    "fit.freeze_vision_tower": "冻结视觉塔（model.vision.freeze_vision_tower，LLaMA-Factory 的默认值）："
    "保留其预训练所学",
    "fit.grpo_beta": "GRPO beta {beta} -> 0（不加载参考模型；策略不再被约束在它附近）",
    "fit.grpo_completion": "GRPO 最大生成长度 {n} -> {nn} 个 token（生成时的 KV 缓存更小）",
    "fit.grpo_group": "GRPO 组大小 {n} -> {nn}（每个提示的生成数，method.grpo.num_generations）",
    "plan.grpo_kv": "grpo 阶段：一次生成 {n} 个回答，每个保留 {tokens} 个 token 的 KV 缓存（{size}，生成时计为激活）",
    "fit.qlora_short": "4 位 QLoRA",
    "fit.qlora": "4 位 QLoRA（NF4 基座、双重量化、LoRA 适配器）",
    "fit.qlora_switch": "4 位 QLoRA（NF4 基座、双重量化、LoRA 适配器）；把 {finetuning} 微调改为 LoRA，秩 {rank}",
    "fit.keeping_offload": "{step}（保留卸载步骤）",
    "fit.instead_of_offload": "{step}，取代上面的卸载步骤（已撤销：4 位权重无需卸载即可放下）",
    "fit.step": "{step}：每个 GPU {size}",
    "fit.refused": "{step}：被拒绝（{reason}）",
    # speed advice
    "advice.low_util": "GPU 平均利用率 {util:.0f}%：GPU 在等待。请检查下面几项（数据加载、卸载、批大小），"
    "并用 `nvidia-smi dmon -s u` 观察。",
    "advice.fp32": "没有使用混合精度：把 train.precision 设为 bf16（不支持 bf16 的 GPU 用 fp16）：约快 2 倍，"
    "激活显存减半。",
    "advice.eager": "eager 注意力：把 model.attn_implementation 设为 sdpa 或 flash_attention_2。",
    "advice.ds_offload": "DeepSpeed 卸载每一步都要经 PCIe 搬运状态：显存允许时，把 offload_param 和 "
    "offload_optimizer 设为 none（engine.plan.planner 会显示是否仍放得下）。",
    "advice.fsdp_offload": "FSDP 参数卸载很慢：放得下时请关闭 launch.fsdp.offload_params。",
    "advice.small_batch": "每设备批大小 {batch} 偏小：把 train.per_device_batch_size 提高到接近显存上限，"
    "并降低 gradient_accumulation 以保持有效批大小。",
    "advice.checkpointing": "梯度检查点会重算激活（约慢 30%）：如果规划仍放得下，请关闭它。",
    "advice.cpu_bound": "CPU 很忙（{cpu:.0f}%）而 GPU 空闲：瓶颈在数据加载；请提高 data.preprocessing_workers、"
    "预先分词，或对短样本开启 data.packing。",
    "advice.throughput_drop": "吞吐量从 {peak:.0f} 降到 {now:.0f} tokens/s：请检查 GPU 上是否有其他进程、"
    "是否因过热降频，或是否在训练步中间保存检查点。",
    "advice.packing_off": "打包未开启：样本多且短时，data.packing 可以避免在填充上浪费计算。",
    # time and cost
    "estimate.no_tokenizer": "token 数和步数未知：{path} 没有本地 tokenizer.json，无法统计数据",
    "estimate.approx_tokens": "token 数按约 4 个字符（或一个中日韩字符）一个 token 估算：{path} 还没有本地 "
    "tokenizer.json；步数由行数得出，时长为近似值",
    "estimate.no_data": "token 数和步数未知：此处无法读取数据（{why}）",
    "estimate.approximate": "按均匀抽样的行统计，或混合 / 验证集划分按比例估算：token 数和步数为近似值",
    "estimate.split": "{held} 个样本留作评估（data.val_size）：只统计训练部分",
    "estimate.unknown_gpu": "GPU {gpu!r} 不在吞吐量表中（{known}）：时长未知",
    "estimate.grpo": "grpo 阶段：每个进程分 {rounds} 轮生成 {generated} 条回答（{steps} 个解码步，每步一个 token），"
    "每条含 {prompt} 个提示 token 与至多 {tokens} 个回答 token，按最大长度计：提前结束的回答用时更短",
    "estimate.grpo_no_bandwidth": "带宽表中没有 {gpu!r} 的显存带宽：解码只按 FLOPs 计，会低估其用时",
    "estimate.cpu": "CPU：一个空闲核心所需的时间，来自在 Studio 构建机上测得的每步开销和 FLOP 速率"
    "（bench/results/estimate_calibration.md）；机器繁忙或换一种 CPU 时，用时会不同",
}
