"""A table of facts: the English and Chinese texts of the page (``STRINGS``), and the switch between them. Light:
stdlib + gradio.

Field labels come from the spec's metadata (``label``) and ``studio.i18n.labels`` (Chinese); everything else the
page says is here.
``Texts`` remembers which component shows which key, so the language dropdown updates every label in one event.
"""

from __future__ import annotations

from typing import Any

LANGS = {"en": "English", "zh": "中文"}

STRINGS: dict[str, tuple[str, str]] = {
    "title": ("LLM Studio", "LLM 微调工作室"),
    "lang": ("Language", "语言"),
    "logout": ("Log out", "退出登录"),
    "tab_train": ("Train", "训练"),
    "tab_runs": ("Runs", "运行记录"),
    "tab_data": ("Datasets", "数据集"),
    "tab_export": ("Export", "导出"),
    "tab_chat": ("Chat", "对话"),
    "tab_doctor": ("Doctor", "环境检查"),
    "tab_models": ("Models", "模型"),
    # Models tab (studio.tabs.models)
    "m_refresh": ("Refresh", "刷新"),
    "m_repo": ("Hub model or dataset (org/name, datasets/org/name)", "Hub 模型或数据集（组织/名称）"),
    "m_download": ("Download", "下载"),
    "m_modelscope": ("From ModelScope (into its cache)", "从 ModelScope 下载（存入其缓存）"),
    "m_cancel": ("Cancel downloads", "取消下载"),
    "m_target": ("Local model to delete (name as listed)", "要删除的本地模型（列表中的名称）"),
    "m_delete": ("Delete", "删除"),
    "m_gguf": (
        "GGUF file on this machine (Ollama, LM Studio, llama.cpp), imported as a base model",
        "本机上的 GGUF 文件（Ollama、LM Studio、llama.cpp），导入为基础模型",
    ),
    "m_gguf_name": ("Model name (default: the file's)", "模型名称（默认取文件名）"),
    "m_gguf_import": ("Import GGUF", "导入 GGUF"),
    # Train tab: the model picker (studio.tabs.train_model_search)
    "ms_title": ("Find a model on the hub", "在 Hub 上查找模型"),
    "ms_query": ("Part of a model id (org/name)", "模型 ID 的一部分（组织/名称）"),
    "ms_search": ("Search", "搜索"),
    "ms_results": ("Models: click a row to use it (nothing is downloaded)", "模型：点击一行即可选用（不会下载）"),
    "ms_col_id": ("Model", "模型"),
    "ms_col_params": ("Parameters", "参数量"),
    "ms_col_size": ("Weights", "权重大小"),
    "ms_col_licence": ("Licence", "许可证"),
    "ms_col_gated": ("Gated", "访问授权"),
    "ms_col_cached": ("Local cache", "本地缓存"),
    "ms_gated_no": ("no", "无需授权"),
    "ms_gated_manual": ("yes, approved by the authors", "需要，由作者审批"),
    "ms_gated_auto": ("yes, granted on accepting the licence", "需要，接受许可后自动授予"),
    "ms_unknown": ("not known", "未知"),
    "ms_cached_yes": ("downloaded", "已下载"),
    "ms_cached_no": ("not downloaded", "未下载"),
    "m_name": ("name", "名称"),
    "m_source": ("where", "位置"),
    "m_size": ("size", "大小"),
    "m_state": ("state", "状态"),
    "m_path": ("path", "路径"),
    "m_complete": ("complete", "完整"),
    # where a local model is (engine.models.local.LocalModel.source)
    "m_src_workspace": ("workspace", "工作区"),
    "m_src_cache": ("Hugging Face cache", "Hugging Face 缓存"),
    "m_src_modelscope": ("ModelScope cache", "ModelScope 缓存"),
    "m_incomplete": ("incomplete", "不完整"),
    "m_none": ("no local models", "没有本地模型"),
    "m_no_downloads": ("no downloads", "没有下载任务"),
    "m_queued_as": ("download queued as run {id}", "下载已排队，运行 {id}"),
    "m_cancelled": ("{n} download(s) cancelled", "已取消 {n} 个下载"),
    "m_import_queued": ("GGUF import queued as run {id}: {out}", "GGUF 导入已排队，运行 {id}：{out}"),
    "advanced": ("Advanced", "高级"),
    "start": ("Start", "开始训练"),
    "stop": ("Stop", "停止"),
    "preview": ("Preview command", "预览命令"),
    "preview_out": ("Command and generated configs", "命令与生成的配置"),
    "rt_title": ("Try the reward functions (GRPO)", "试运行奖励函数（GRPO）"),
    "grpo_reward_pick": (
        "Built-in reward kinds (each kind picked is a line of Reward functions, where its settings are edited)",
        "内置奖励类型（每个选中的类型是「奖励函数」中的一行，在那里编辑其设置）",
    ),
    "rt_rows": ("Rows", "行数"),
    "rt_source": ("Completions to score", "打分的生成"),
    "rt_answers": ("the dataset's answers", "数据集自带的答案"),
    "rt_model": ("the base model's, generated now", "基座模型现在生成的"),
    "rt_run": ("Run the reward functions", "运行奖励函数"),
    "rt_not_grpo": (
        "Reward functions belong to stage grpo (the form's stage is {stage})",
        "奖励函数只用于 grpo 阶段（表单的阶段是 {stage}）",
    ),
    "rt_dataset": ("dataset", "数据集"),
    "rt_row": ("row", "行"),
    "rt_mean": ("mean {mean} over {n} scored rows (weight {w})", "{n} 个有分数的行的均值 {mean}（权重 {w}）"),
    "rt_upload": ("Upload a reward file (.py) into the reward folder", "上传奖励函数文件（.py）到奖励函数目录"),
    "rt_uploaded": (
        "Saved as `{path}`: name it in a reward as `{{kind: python, file: {path}, function: ...}}`",
        "已保存为 `{path}`：在奖励函数中写 `{{kind: python, file: {path}, function: ...}}`",
    ),
    "problems": ("Problems", "问题"),
    "spec_ok": ("Spec is valid.", "配置有效。"),
    "spec_bad": ("Fix the fields marked in red before starting.", "请先修正标红的字段再开始。"),
    "warnings": ("Warnings", "提醒"),
    "preset_name": ("Preset name", "预设名称"),
    "preset_save": ("Save preset", "保存预设"),
    "preset_load": ("Load preset", "加载预设"),
    "presets": ("Presets", "预设"),
    "model_hint": ("Template proposed for this model", "为此模型建议的模板"),
    "plan": ("Memory plan", "显存规划"),
    "plan_gpu_mem": (
        "GPU memory (GiB) to plan for (0: the detected GPUs)",
        "按此显存规划 (GiB)（0：使用检测到的 GPU）",
    ),
    "autofit": ("Auto-fit", "自动适配"),
    "fits": ("fits", "可以放下"),
    "no_fit": ("does NOT fit", "放不下"),
    "plan_cpu": (
        "predicted peak in host memory (this machine has no GPU: the run trains on the CPU)",
        "预测的主机内存峰值（本机没有 GPU：在 CPU 上训练）",
    ),
    "plan_cpu_fits": (
        "fits this machine's free memory (no GPU here: the run trains on the CPU)",
        "可以放入本机的可用内存（本机没有 GPU：在 CPU 上训练）",
    ),
    "plan_cpu_no_fit": (
        "does NOT fit this machine's free memory (no GPU here: the run trains on the CPU)",
        "放不下本机的可用内存（本机没有 GPU：在 CPU 上训练）",
    ),
    "plan_cpu_row": ("CPU (host memory)", "CPU（主机内存）"),
    "plan_no_gpu": (
        "predicted peak per GPU (no GPU memory to compare: enter one above)",
        "每个 GPU 的预测峰值（没有可比较的显存：请在上方输入）",
    ),
    "run": ("Run", "运行"),
    "refresh": ("Refresh", "刷新"),
    "status": ("Status", "状态"),
    "progress": ("Progress", "进度"),
    "x_axis": ("X axis", "横轴"),
    "log_scale": ("Log-scale loss", "损失取对数坐标"),
    "smooth": ("Smoothing", "平滑"),
    "loss": ("Loss", "损失"),
    "lr": ("Learning rate", "学习率"),
    "grad_norm": ("Grad norm", "梯度范数"),
    "tps": ("Tokens / s", "每秒 token 数"),
    # What each memory figure counts (issue 27 item 15: the chart's and the Runs table's peaks differed unexplained).
    "gpu_mem": ("GPU memory in use, all processes on the GPU (MiB)", "GPU 已用显存，含该卡上全部进程 (MiB)"),
    "gpu_util": ("GPU utilisation (%)", "GPU 利用率 (%)"),
    "ram_mem": ("RAM: all the run's processes, resident (MiB)", "内存：本运行全部进程的常驻内存 (MiB)"),
    "cpu_load": ("CPU load (%, 100 = one core)", "CPU 负载（%，100 = 一个核）"),
    "stage_rewards": ("Rewards of chosen / rejected answers", "被选 / 被拒回答的奖励"),
    "stage_accuracy": ("Accuracy: chosen scored above rejected", "准确率：被选回答得分高于被拒回答"),
    "grpo_rewards": (
        "GRPO rewards: each function's mean and the weighted total",
        "GRPO 奖励：各奖励函数的均值与加权总分",
    ),
    "grpo_std": (
        "Reward spread within the groups (std)",
        "组内奖励的离散度（标准差）",
    ),
    "grpo_kl": ("KL to the reference and entropy", "与参考模型的 KL 及熵"),
    "grpo_length": ("Completion length (tokens) and clipped share (%)", "生成长度（token）与被截断比例（%）"),
    "grpo_samples": ("Sample completions of the newest logged step", "最新记录步的样例生成"),
    "grpo_total": ("total", "总分"),
    "cmp_figure": ("Figure", "指标"),
    "cmp_total_reward": ("total reward", "总奖励"),
    "cmp_reward_of": ("reward: {name}", "奖励：{name}"),
    "grpo_entropy": ("entropy", "熵"),
    "grpo_mean_length": ("mean length", "平均长度"),
    "grpo_clipped": ("clipped %", "截断 %"),
    "grpo_prompt": ("prompt", "提示"),
    "grpo_completion": ("completion", "生成"),
    "log_tail": ("Log", "日志"),
    "failure": ("Why it failed", "失败原因"),
    "no_run": ("No run selected.", "未选择运行。"),
    "runs_table": ("Run history", "运行历史"),
    "select_runs": ("Runs to compare", "对比的运行"),
    "compare": ("Compare", "对比"),
    "spec_diff": ("Spec differences", "配置差异"),
    "resume": ("Resume", "继续训练"),
    "duplicate": ("Duplicate into form", "复制到表单"),
    "delete": ("Delete", "删除"),
    "confirm_delete": ("Yes, delete it", "确认删除"),
    "tensorboard": ("TensorBoard", "TensorBoard"),
    "export_source": ("Finished run or adapter folder", "已完成的运行或适配器目录"),
    "merge": ("Merge", "合并"),
    "cancel": ("Cancel", "取消"),
    "export_out": ("Output folder (empty: default)", "输出目录（留空为默认）"),
    "export_result": ("Result", "结果"),
    "export_dtype": ("Saved dtype", "保存精度"),
    "export_device": ("Merge on", "合并设备"),
    "export_force": (
        "Merge anyway, even if the memory estimate says it will not fit",
        "即使内存估计不足也继续合并",
    ),
    "export_dtype_base": ("the base's", "与基座相同"),
    "export_needs": (
        "RAM: about {ram} needed, {ram_free} available · disk: about {disk}, {disk_free} free ({dtype}, on {device})",
        "内存：约需 {ram}，可用 {ram_free} · 磁盘：约需 {disk}，剩余 {disk_free}（{dtype}，在 {device} 上）",
    ),
    "export_merging": ("merging into `{out}` (run {id}) …", "正在合并到 `{out}`（运行 {id}）…"),
    "export_queued": (
        "queued as run {id}: waits for a free slot (see the Runs tab)",
        "已排队为运行 {id}：等待空闲槽位（见“运行记录”页）",
    ),
    "export_merged": (
        "merged model: {path}  \nsize: {size} MiB  \nverification: {verify}",
        "合并后的模型：{path}  \n大小：{size} MiB  \n校验：{verify}",
    ),
    "export_passed": ("passed", "通过"),
    "export_na": ("n/a", "无"),
    "export_nothing": ("nothing to cancel", "没有可取消的合并"),
    "mstate_finished": ("finished", "已完成"),  # a merge that finished has been verified
    "mstage_starting": ("starting", "正在启动"),
    "mstage_loading": ("loading", "加载"),
    "mstage_merging": ("merging", "合并"),
    "mstage_saving": ("saving", "保存"),
    "mstage_verifying": ("verifying", "校验"),
    "mh_run": ("run", "运行"),
    "mh_state": ("state", "状态"),
    "mh_output": ("output", "输出目录"),
    "mh_size": ("size", "大小"),
    "mh_verification": ("verification", "校验"),
    "dataset": ("Dataset", "数据集"),
    "upload": ("Upload a file (JSON, JSONL, CSV, Parquet)", "上传文件（JSON、JSONL、CSV、Parquet）"),
    "ds_name": ("Name to register", "注册名称"),
    "formatting": ("Format", "格式"),
    "columns": ("Column mapping", "列映射"),
    "register": ("Register", "注册"),
    "preview_rows": ("Rows", "样本行"),
    "sample": ("One sample as the model sees it", "模型看到的一个样本"),
    "sample_legend": (
        "grey: prompt (not trained) · green: response (trained)",
        "灰色：提示词（不训练）· 绿色：回复（训练）",
    ),
    "lengths": ("Token lengths vs cutoff", "token 长度与截断长度"),
    "chat_model": ("Base model", "基座模型"),
    "chat_adapter": ("Tuned: finished run, export or server", "微调后：已完成的运行、导出的模型或服务"),
    "chat_template": ("Chat template", "对话模板"),
    "chat_generation": ("Generation settings", "生成参数"),
    "chat_system": ("System prompt", "系统提示词"),
    "temperature": ("Temperature (0: greedy)", "温度（0：贪心解码）"),
    "top_p": ("Top-p", "Top-p（核采样）"),
    "chat_stop": ("Stop strings (comma-separated; \\n for a line break)", "停止字符串（逗号分隔；\\n 表示换行）"),
    "chat_clear": ("Clear", "清空"),
    "load": ("Load", "加载"),
    "unload": ("Unload", "卸载"),
    "send": ("Send", "发送"),
    "prompt": ("Prompt", "提示词"),
    "base": ("Base", "基座"),
    "tuned": ("Tuned", "微调后"),
    "max_new_tokens": ("Max new tokens", "最大生成长度"),
    "doctor_run": ("Run checks", "运行检查"),
    "started": ("Started run {id}", "已启动运行 {id}"),
    "st_running": ("running", "运行中"),
    "st_waiting": ("waiting", "等待中"),
    "st_queued": ("queued", "排队中"),
    "st_completed": ("completed", "已完成"),
    "st_finished": ("finished", "已结束"),
    "st_failed": ("failed", "失败"),
    "st_stopped": ("stopped", "已停止"),
    "st_cancelled": ("cancelled", "已取消"),
    "w_step": ("step", "步"),
    "w_loss": ("loss", "损失"),
    "w_saved": ("saved to", "保存到"),
    "w_cause": ("cause", "原因"),
    "w_eta": ("ETA", "预计剩余"),
    "w_downloading": ("downloading the model", "正在下载模型"),
    "stopping": (
        "Stopping run {id}: it finishes the current step and saves a checkpoint…",
        "正在停止运行 {id}：完成当前这一步并保存检查点…",
    ),
    "stopping_queued": ("Removing run {id} from the queue…", "正在把运行 {id} 移出队列…"),
    "stop_slow": (
        "Run {id} is still stopping: it saves its checkpoint, or is ended without one once the grace period is over "
        "(the status line says how it ended).",
        "运行 {id} 仍在停止：正在保存检查点，宽限期过后会被直接结束（状态行会说明结果）。",
    ),
    "stop_ended": (
        "Run {id} has already ended ({status}): nothing to stop.",
        "运行 {id} 已经结束（{status}）：无需停止。",
    ),
    "stopped_saved": (
        "Run {id} stopped at step {step}; checkpoint saved at `{path}` (Resume in the Runs tab continues from it).",
        "运行 {id} 已在第 {step} 步停止；检查点已保存到 `{path}`（可在“运行记录”页继续训练）。",
    ),
    "stopped_unsaved": (
        "Run {id} stopped at step {step}; no checkpoint was saved.",
        "运行 {id} 已在第 {step} 步停止；没有保存检查点。",
    ),
    "stopped_early": (
        "Run {id} stopped before its first step; no checkpoint was saved.",
        "运行 {id} 在第一步之前已停止；没有保存检查点。",
    ),
    "stopped_dequeued": ("Run {id} was removed from the queue.", "运行 {id} 已移出队列。"),
    "queued_run": (
        "Queued run {id}: position {pos} in the queue; it starts when a GPU (or CPU slot) is free.",
        "运行 {id} 已排队：队列第 {pos} 位；有空闲 GPU（或 CPU 槽位）时开始。",
    ),
    "queued_behind": (
        "Queued run {id}: position {pos} in the queue; it waits for the slot held by run {runs}: it starts when that "
        "ends, or at once if you stop it (Runs tab).",
        "运行 {id} 已排队：队列第 {pos} 位；它在等待运行 {runs} 占用的槽位：该运行结束后开始，"
        "也可以在“运行”页停止它以立即开始。",
    ),
    "queued_own_limit": (
        "Queued run {id}: your limit of {n} run(s) at once is reached ({runs} running): it starts when one of "
        "yours ends; other people's runs may go before it meanwhile.",
        "运行 {id} 已排队：已达到你同时运行 {n} 个的上限（正在运行：{runs}）：你的某个运行结束后开始；"
        "在此期间其他人的运行可能先开始。",
    ),
    "start_twin": (
        "Run {id} with this very spec is already {status}. Click Start again to start another one anyway.",
        "配置完全相同的运行 {id} 已在{status}。如仍要再启动一个，请再次点击“开始训练”。",
    ),
    # Train tab: action messages, template hint, plan panel, auto-fit
    "spec_invalid": ("Invalid run spec:", "运行配置无效："),
    "preset_saved": ("saved {path}", "已保存 {path}"),
    "preset_loaded": ("loaded {name}", "已加载 {name}"),
    "preset_bad_name": (
        "preset name {name}: use letters, digits, spaces, . _ - (1-80 characters)",
        "预设名称 {name}：请使用字母、数字、空格和 . _ -（1-80 个字符）",
    ),
    "no_template": ("no template proposal: {error}", "无法建议模板：{error}"),
    # Train tab: LLaMA-Factory YAML in and out (studio.tabs.train.import_lf / save_lf_yaml)
    "lf_section": ("LLaMA-Factory YAML", "LLaMA-Factory YAML 导入与导出"),
    "lf_text": (
        "LLaMA-Factory training YAML (paste it here, or upload the file)",
        "LLaMA-Factory 训练 YAML（粘贴到这里，或上传文件）",
    ),
    "lf_acc_text": ("accelerate config YAML (optional)", "accelerate 配置 YAML（可选）"),
    "lf_upload": ("Upload training YAML", "上传训练 YAML"),
    "lf_acc_upload": ("Upload accelerate config", "上传 accelerate 配置"),
    "lf_import": ("Fill the form from this YAML", "用此 YAML 填写表单"),
    "lf_save": ("Save as LF YAML", "另存为 LF YAML"),
    "lf_file": ("LLaMA-Factory YAML of this form", "此表单的 LLaMA-Factory YAML"),
    "lf_empty": ("Paste or upload a LLaMA-Factory training YAML first.", "请先粘贴或上传 LLaMA-Factory 训练 YAML。"),
    "lf_refused": (
        "The form was not changed: this YAML has settings Studio cannot run.",
        "表单未改动：此 YAML 含有 Studio 无法运行的设置。",
    ),
    "lf_filled": ("The form is filled from the LLaMA-Factory YAML.", "已根据 LLaMA-Factory YAML 填写表单。"),
    "lf_notes": (
        "Notes (keys accepted that change nothing in Studio, or where Studio differs):",
        "说明（已接受但在 Studio 中不起作用的键，或 Studio 行为不同之处）：",
    ),
    "lf_saved": (
        "Wrote {files}: download below. Settings LLaMA-Factory has no key for are listed as comments at the end.",
        "已写出 {files}：请在下方下载。LLaMA-Factory 没有对应键的设置以注释形式列在文件末尾。",
    ),
    "plan_peak": ("peak in {phase}", "峰值阶段：{phase}"),
    "plan_ckpt_on": ("Gradient checkpointing on", "梯度检查点：开启"),
    "plan_ckpt_off": ("Gradient checkpointing off", "梯度检查点：关闭"),
    "ph_forward_backward": ("forward backward", "前向/反向传播"),
    "ph_optimizer_step": ("optimizer step", "优化器更新"),
    "ph_generation": ("generation (GRPO)", "生成（GRPO）"),
    "pc_weights": ("weights", "权重"),
    "pc_trainable_weights": ("trainable weights", "可训练权重"),
    "pc_reference_model": ("reference / reward models", "参考 / 奖励模型"),
    "pc_gradients": ("gradients", "梯度"),
    "pc_optimizer_states": ("optimizer states", "优化器状态"),
    "pc_activations": ("activations", "激活值"),
    "pc_logits_loss": ("logits loss", "logits 与损失"),
    "pc_comm_buffers": ("comm buffers", "通信缓冲区"),
    "pc_step_temporaries": ("step temporaries", "更新临时量"),
    "pc_framework": ("framework", "框架开销"),
    "fit_no_gpu": ("no GPU detected: enter the GPU memory (GiB) to fit for", "未检测到 GPU：请输入要适配的显存 (GiB)"),
    "fit_none": (
        "No configuration fits {gib} GiB per GPU: the form is unchanged.",
        "没有能放进每个 GPU {gib} GiB 的配置：表单未改动。",
    ),
    "fit_tried": ("Tried, in order:", "依次尝试了："),
    "fit_already": (
        "Fits {gib} GiB per GPU as it is: nothing changed.",
        "按现有配置已能放进每个 GPU {gib} GiB：未作改动。",
    ),
    "fit_found": ("Fits {gib} GiB per GPU after these changes to the form:", "按以下改动后能放进每个 GPU {gib} GiB："),
    "plan_assumes": (
        "Planned for precision {precision} ({why}), batch {batch} per GPU, sequence length {seq}, {world} process(es)",
        "规划假设：精度 {precision}（{why}），每个 GPU 批大小 {batch}，序列长度 {seq}，{world} 个进程",
    ),
    "prec_set": ("as set in the form", "表单中设定"),
    "prec_auto_cpu": ("auto: training on the CPU is fp32", "auto：CPU 训练使用 fp32"),
    "prec_auto_detected": ("auto: what the detected GPU supports", "auto：按检测到的 GPU 支持的精度"),
    "prec_auto_typed": (
        "auto: bf16 assumed for a GPU of the size entered above",
        "auto：按上方输入的 GPU 显存假设为 bf16",
    ),
    "prec_auto_none": (
        "auto: no GPU detected or entered, so fp32; enter a GPU size to plan for bf16",
        "auto：未检测到也未输入 GPU，因此按 fp32；输入 GPU 显存即按 bf16 规划",
    ),
    # Datasets tab
    "upload_first": ("upload a file first", "请先上传文件"),
    "role_prompt": ("prompt", "prompt（提示词）"),
    "role_query": ("query", "query（补充输入）"),
    "role_response": ("response", "response（回复）"),
    "role_system": ("system", "system（系统提示）"),
    "role_history": ("history", "history（历史对话）"),
    "role_messages": ("messages", "messages（对话轮次）"),
    "role_kto_tag": ("kto_tag (true/false per answer: kto data)", "kto_tag（每个回答 true/false：kto 数据）"),
    "registered": ("registered **{name}**", "已注册 **{name}**"),
    "registered_but": ("registered, but:", "已注册，但发现问题："),
    "not_registered": ("Not registered: ", "未注册："),
    "fix_mapping": (
        "Choose the columns above (Column mapping) or another format, then Register again.",
        "请在上方“列映射”中选择列或换一种格式，然后重新注册。",
    ),
    "rows_shown": (
        "the first {shown} rows as the file has them",
        "按文件原样显示前 {shown} 行",
    ),
    "figures_all": (
        "the sample and the token lengths come from all {rows} rows of the file",
        "样本和 token 长度来自文件的全部 {rows} 行",
    ),
    "figures_head": (
        "the sample and the token lengths come from the file's first {rows} rows (not the whole file)",
        "样本和 token 长度来自文件的前 {rows} 行（不是整个文件）",
    ),
    "checked_head": (
        "checked the first {rows} rows (the page reads at most {mib} MiB of a file); a run checks every row before "
        "training",
        "已检查前 {rows} 行（页面最多读取文件的 {mib} MiB）；训练开始前会检查全部行",
    ),
    "stored": ("stored `{name}` · columns: {columns}", "已保存 `{name}` · 列：{columns}"),
    "no_rows": ("no usable rows", "没有可用的行"),
    "needs_tokenizer": ("needs a local model folder with tokenizer.json", "需要包含 tokenizer.json 的本地模型目录"),
    "lengths_note": (
        "{rows} rows · max {max} tokens · cutoff {cutoff} · **{share} truncated** ({over} rows)",
        "{rows} 行 · 最长 {max} 个 token · 截断长度 {cutoff} · **{share} 被截断**（{over} 行）",
    ),
    "packing_eff": (" · packing efficiency {eff}", " · 打包效率 {eff}"),
    "over_cutoff": ("over cutoff", "超过截断长度"),
    "kept": ("within cutoff", "未超过截断长度"),
    "lengths_note_pt": (
        "{rows} texts · max {max} tokens · stage pt: cut into blocks of {cutoff}, nothing truncated · "
        "**{blocks} blocks** ({per} per text; {split} texts span several)",
        "{rows} 条文本 · 最长 {max} 个 token · pt 阶段：切成每块 {cutoff} 个 token，不截断 · "
        "**{blocks} 块**（平均每条文本 {per} 块；{split} 条文本跨多块）",
    ),
    "lengths_note_pt_packed": (
        "{rows} texts · max {max} tokens · stage pt with packing: {tokens} tokens joined into **{blocks} full "
        "blocks** of {cutoff} · **{tail} tail tokens dropped**",
        "{rows} 条文本 · 最长 {max} 个 token · pt 阶段打包：{tokens} 个 token 首尾相接，切成 **{blocks} 个"
        "满块**（每块 {cutoff}）· **丢弃末尾 {tail} 个 token**",
    ),
    "pt_no_block": (
        " · ⚠ fewer tokens than one block: lower the cutoff or turn packing off",
        " · ⚠ token 数不足一块：请降低截断长度或关闭打包",
    ),
    "pt_one_block": ("one block", "一块"),
    "pt_split": ("several blocks", "跨多块"),
    "pt_joined": ("joined into blocks", "拼接后分块"),
    "registered_pt_only": (
        "registered **{name}** as plain text: it has no response column, so only stage pt (continued pre-training) "
        "can train on it. For sft, choose its response column under Column mapping and Register again.",
        "已将 **{name}** 注册为纯文本：它没有回答（response）列，只有 pt 阶段（继续预训练）能用它训练。"
        "如需 sft，请在“列映射”中选择回答列后重新注册。",
    ),
    "hist_cutoff": ("cutoff {cutoff}", "截断长度 {cutoff}"),
    "hist_tip": ("{first}–{last} tokens: {rows} rows", "{first}–{last} 个 token：{rows} 行"),
    # Doctor tab
    "d_check": ("check", "检查项"),
    "d_status": ("status", "结果"),
    "d_detail": ("detail", "详情"),
    "d_fix": ("fix", "修复建议"),
    "PASS": ("PASS", "通过"),
    "WARN": ("WARN", "警告"),
    "FAIL": ("FAIL", "失败"),
    # Runs tab: table headers, action messages
    "rc_id": ("id", "ID"),
    "rc_name": ("name", "名称"),
    "rc_status": ("status", "状态"),
    "rc_cluster": ("cluster", "集群"),
    "rc_method": ("method", "方法"),
    "rc_model": ("model", "模型"),
    "rc_dataset": ("dataset", "数据集"),
    "rc_started": ("started", "开始时间"),
    "rc_duration": ("duration", "用时"),
    "rc_final_loss": ("final loss", "最终损失"),
    "rc_trainer_peak_MiB": ("trainer peak MiB", "训练进程峰值 MiB"),
    "runs_peak_note": (
        "**trainer peak MiB**: the most one training process reported at its logged steps: on a GPU the peak "
        "torch allocated there, on the CPU the process's resident memory. The dashboard's RAM chart adds up every "
        "process of the run (launcher, ranks, data workers), its GPU chart all of each GPU's use: they read higher.",
        "**训练进程峰值 MiB**：单个训练进程在记录日志的步上报告的最大值：在 GPU 上是 torch 在该卡分配的峰值，在 CPU 上"
        "是该进程的常驻内存。仪表盘的内存图把本运行的全部进程（启动器、各进程、数据加载进程）相加，GPU 图是整块卡的"
        "已用显存，所以读数更高。",
    ),
    "rc_field": ("field", "字段"),
    "select_run_first": ("select a run first", "请先选择一个运行"),
    "copied_to_form": ("{id} copied into the Train form", "已把 {id} 复制到训练表单"),
    "tb_folder": ("folder:", "目录："),
    # Chat tab
    "chat_no_model": ("choose a base model", "请选择基座模型"),
    "chat_loaded": ("loaded {slots}", "已加载：{slots}"),
    "chat_unloaded": ("unloaded {n} worker(s)", "已卸载 {n} 个对话进程"),
    "chat_timeout": ("timed out loading", "加载超时"),
    "chat_reply_timeout": ("no answer from the model for 5 minutes", "模型 5 分钟没有回应"),
    "chat_nothing_loaded": ("no model loaded", "未加载模型"),
    "chat_loading": ("loading …", "正在加载…"),
    "chat_kind_run": ("run", "运行"),
    "chat_kind_export": ("export", "导出"),
    "chat_kind_served": ("served", "服务中"),
    "chat_served_template": ("the server's own", "服务端自带"),
    "chat_served_unknown": ("not a server of this studio", "不是本工作室的服务"),
    "chat_served_down": ("server {run} is not answering ({state})", "服务 {run} 没有响应（{state}）"),
    "chat_served_no_key": (
        "server {run} needs its key, from the environment variable {var}, which this studio's environment does not "
        "have: start the studio with {var} set",
        "服务 {run} 需要密钥（来自环境变量 {var}），但本工作室的环境中没有它：请在设置了 {var} 的环境中启动工作室",
    ),
    "chat_exited": ("worker exited ({detail})", "对话进程已退出（{detail}）"),
    "chat_empty": ("(empty reply: the model ended its turn at once)", "（空回复：模型立即结束了这一轮）"),
    # the Chat tab's feedback section (studio.tabs.chat_feedback)
    "fb_pane": ("Feedback on the answer of", "反馈针对的回答"),
    "fb_good": ("👍 Good", "👍 好"),
    "fb_bad": ("👎 Bad", "👎 不好"),
    "fb_better": ("The better answer", "更好的回答"),
    "fb_edit": ("Edit answer…", "编辑回答…"),
    "fb_save": ("Save the better answer", "保存更好的回答"),
    "fb_train": ("Train on this feedback (DPO)", "用这些反馈训练（DPO）"),
    "fb_counts": (
        "Feedback kept: **{pairs}** better answer(s) (preference pairs, dataset `{dpo}`) · **{good}** "
        "marked good, **{bad}** marked bad (dataset `{kto}`); both are listed in the Datasets tab",
        "已保存的反馈：**{pairs}** 个更好的回答（偏好对，数据集 `{dpo}`）· **{good}** 个标为好、"
        "**{bad}** 个标为不好（数据集 `{kto}`）；两者都列在数据集页",
    ),
    "fb_marked_good": ("Marked the {pane} answer good.", "已将{pane}的回答标为好。"),
    "fb_marked_bad": ("Marked the {pane} answer bad.", "已将{pane}的回答标为不好。"),
    "fb_saved_pair": (
        "Saved your better answer beside the {pane} answer as a preference pair.",
        "已将您更好的回答与{pane}的回答保存为一个偏好对。",
    ),
    "fb_no_model": (
        "Load a model and chat first: feedback is kept for an answer a loaded model wrote",
        "请先加载模型并对话：反馈只针对已加载模型写出的回答",
    ),
    "fb_not_enough": (
        "Nothing to train on yet: save a better answer (a DPO pair), or mark 2 answers or more (KTO)",
        "还没有可训练的反馈：请保存一个更好的回答（DPO 偏好对），或标记至少 2 个回答（KTO）",
    ),
    "fb_started": (
        "Run **{id}** ({status}): {stage} on {rows} feedback row(s) (`{dataset}`), a new LoRA on `{model}`. The "
        "dashboard on the Train tab follows it; compare it with the model you chatted with in Evaluate.",
        "运行 **{id}**（{status}）：在 {rows} 条反馈（`{dataset}`）上做 {stage}，在 `{model}` 上训练新的 LoRA。"
        "训练页的仪表盘会跟踪它；可在评估页将它与您对话过的模型比较。",
    ),
    "fb_adapter_note": (
        "The answers came from run {run}'s adapter, which a run cannot continue: this run trains a new LoRA on the "
        "same base model.",
        "这些回答来自运行 {run} 的适配器，而运行无法接着训练已有的适配器：本次运行在同一基础模型上训练新的 LoRA。",
    ),
    "fb_refused": ("The run was not started:", "未启动运行："),
    "chat_text_only": (
        "this model reads text only (it has no vision tower): the image was not sent",
        "该模型只能读取文本（没有视觉编码器）：图片未发送",
    ),
    "chat_image": ("Image (vision models)", "图片（视觉模型）"),
    # dashboard: axes, legends, GPU-metrics notes, stop reason, failure causes
    "ax_step": ("step", "步"),
    "ax_epoch": ("epoch", "轮次"),
    "ax_tokens": ("tokens seen", "已见 token 数"),
    "ax_log_loss": ("log10 loss", "log10 损失"),
    "ax_seconds": ("seconds", "秒"),
    "ax_curve": ("curve", "曲线"),
    "ax_percent": ("percent", "百分比"),
    "ax_tokens_n": ("tokens", "token 数"),
    "ax_rows": ("rows", "行数"),
    "ax_side": ("length", "长度"),
    "se_train": ("train loss", "训练损失"),
    "se_smoothed": ("train loss (smoothed)", "训练损失（平滑）"),
    "se_eval": ("eval loss", "验证损失"),
    "se_run_eval": ("{run} (eval)", "{run}（验证）"),
    "se_cpu_ram": ("CPU RAM (run)", "CPU 内存（本运行）"),
    "se_used": ("{name} used", "{name} 已用"),
    "se_total": ("{name} total", "{name} 总量"),
    "se_rank": ("rank {rank}", "进程 {rank}"),
    "se_node": ("node {node} · {name}", "节点 {node} · {name}"),
    "ax_value": ("value", "数值"),
    # the trainers' own figures of dpo / kto / rm (TRL's rewards/chosen, rewards/accuracies, accuracy, margin, ...)
    "sf_chosen": ("chosen", "被选"),
    "sf_rejected": ("rejected", "被拒"),
    "sf_margin": ("margin", "差值"),
    "sf_accuracy": ("accuracy", "准确率"),
    "sf_mean_reward": ("mean reward", "平均奖励"),
    "sf_eval": ("{name} (eval)", "{name}（验证）"),
    "gpu_note_ranks": (
        "GPU metrics unavailable: showing the trainer's per-rank memory",
        "GPU 指标不可用：显示训练器报告的各进程显存",
    ),
    "gpu_note_none": ("GPU metrics unavailable", "GPU 指标不可用"),
    "gpu_note_cpu": (" (showing the run's CPU RAM and load)", "（显示本运行的 CPU 内存和负载）"),
    "gpu_note_forced_cpu": (
        "GPU metrics off: STUDIO_FORCE_CPU=1; recording CPU and RAM only",
        "GPU 指标已关闭：STUDIO_FORCE_CPU=1；只记录 CPU 和内存",
    ),
    "gpu_note_unavailable": (
        "GPU metrics unavailable: {detail}; recording CPU and RAM only",
        "GPU 指标不可用：{detail}；只记录 CPU 和内存",
    ),
    "stopped_why": ("stopped ({reason})", "已停止（{reason}）"),
    "stopped_stem": ("stopped", "停止"),  # what a stop reason that says it itself holds (monitor_text.stopped_phrase)
    "stop_by_user": (
        "stopped by the user (process ended before it reported; {how})",
        "由用户停止：进程在报告之前已结束；{how}",
    ),
    "how_signal": ("signal {signal}", "信号 {signal}"),
    "how_exit": ("exit code {code}", "退出码 {code}"),
    "w_error": ("error", "错误"),
    "cause_oom": ("oom", "显存不足（oom）"),
    "cause_communication": ("communication", "进程间通信失败（communication）"),
    "cause_data": ("data", "数据问题（data）"),
    "cause_config": ("config", "配置问题（config）"),
    "cause_killed": ("killed", "进程被终止（killed）"),
    "cause_other": ("other", "其他错误（other）"),
    "cause_disk": ("disk", "磁盘已满或写入出错（disk）"),
    "cause_download": ("download", "模型下载失败（download）"),
    # Train tab: time and cost in the plan panel (studio.tabs.train_estimate)
    "est_gpu": ("Target GPU for time and cost (auto: this machine)", "时间和费用按此 GPU 估算（auto：本机）"),
    "est_price_bad": (
        'Price per GPU-hour: "{value}" is not a number of dollars (e.g. 2.5; empty: the GPU\'s default)',
        "每 GPU 小时价格：“{value}” 不是美元金额（例如 2.5；留空则使用该 GPU 的默认价格）",
    ),
    "est_price": (
        "Price per GPU-hour, USD (empty: the GPU's default)",
        "每 GPU 小时价格，美元（留空：该 GPU 的默认价）",
    ),
    "est_title": ("Time and cost", "时间与费用"),
    "est_tokens": (
        "tokens after the template and cutoff: {tokens} ({trained} trained) in {samples} samples",
        "经模板和截断后的 token：{tokens}（其中参与训练 {trained}），共 {samples} 个样本",
    ),
    "est_steps": ("optimizer steps: {steps}", "优化器步数：{steps}"),
    "est_minutes": (
        "expected time on {where}: {duration} of training, after the start-up (loading the model, preparing the "
        "data), which is not counted",
        "在 {where} 上的预计时间：训练 {duration}，另加启动时间（加载模型、准备数据），未计入",
    ),
    "est_seconds": ("{n} s", "{n} 秒"),
    "est_min": ("{n} min", "{n} 分钟"),
    "est_hours": ("{n} h", "{n} 小时"),
    "est_where_cpu": ("this CPU ({n} process(es))", "本机 CPU（{n} 个进程）"),
    "est_cost": ("cost: {cost} at ${price} per GPU-hour", "费用：{cost}（每 GPU 小时 ${price}）"),
    "est_cost_none": (
        "cost: none on the CPU (type a price per hour to see one)",
        "费用：CPU 上不计（填写每小时价格可计算）",
    ),
    "est_unknown": ("time and cost unknown: {why}", "时间和费用未知：{why}"),
    # health alerts (studio.alerts)
    "al_title": ("Health alerts", "健康告警"),
    "al_step": ("step", "步"),
    "al_rule": ("rule", "规则"),
    "al_action": ("action", "动作"),
    "al_reason": ("reason", "原因"),
    "al_note": ("note", "记录"),
    "al_warn": ("warn", "警告"),
    "al_stop": ("stop", "停止"),
    "rc_alerts": ("alerts", "告警"),
    "alr_loss_nan": ("loss NaN", "损失 NaN"),
    "alr_loss_spike": ("loss spike", "损失突增"),
    "alr_grad_norm": ("grad norm", "梯度范数"),
    "alr_lr_zero": ("LR zero", "学习率为零"),
    "alr_throughput": ("throughput", "吞吐量"),
    "alr_stall": ("no progress", "无进展"),
    "alr_gpu_idle": ("GPU idle", "GPU 空闲"),
    "alr_gpu_memory": ("GPU memory", "GPU 显存"),
    "alr_eval_overfit": ("overfitting", "过拟合"),
    "alr_reward_flat": ("no reward signal", "没有奖励信号"),
    "alr_disk": ("disk", "磁盘"),
    # Evaluate tab
    "tab_eval": ("Evaluate", "评估"),
    "eval_run": ("Training run", "训练运行"),
    "eval_checkpoints": ("Checkpoints", "检查点"),
    "eval_base": ("Base model", "基座模型"),
    "eval_final": ("Final weights", "最终权重"),
    "eval_data": ("Data", "数据"),
    "eval_held_out": ("the run's held-out rows", "该运行留出的评估行"),
    "eval_no_held_out": (
        "run {run} kept no held-out rows (data.val_size 0): {data} is rows it trained on, so the scores show what it "
        "learnt, not how it does on new questions; train with data.val_size above 0 for held-out rows",
        "运行 {run} 没有留出评估行（data.val_size 为 0）：{data} 是它训练过的数据，分数反映它学到了什么，"
        "而不是在新问题上的表现；训练时把 data.val_size 设为大于 0 即可留出评估行",
    ),
    "eval_limit": ("Rows (0: all)", "行数（0：全部）"),
    "eval_measures": ("Measures", "指标"),
    "job_verb_merge": ("merge", "合并"),
    "job_verb_export": ("export", "导出"),
    "job_verb_serve": ("serve", "部署服务"),
    "job_verb_push": ("push", "上传"),
    "job_verb_import": ("import", "导入"),
    "job_verb_download": ("download", "下载"),
    "job_verb_eval": ("eval", "评估"),
    "audit_title": ("Audit log: who did what", "审计日志：谁做了什么"),
    "audit_refresh": ("Refresh", "刷新"),
    "audit_col_time": ("time", "时间"),
    "audit_col_who": ("who", "用户"),
    "audit_col_via": ("via", "途径"),
    "audit_col_action": ("action", "操作"),
    "audit_col_target": ("run / detail", "运行 / 详情"),
    "audit_admins_only": ("The audit log is shown to admins only.", "审计日志仅对管理员显示。"),
    "audit_empty": ("Nothing recorded yet.", "尚无记录。"),
    "audit_action_login": ("logged in", "登录"),
    "audit_action_login-failed": ("login refused", "登录被拒"),
    "audit_action_start": ("started a run", "启动训练"),
    "audit_action_stop": ("stopped", "停止"),
    "audit_action_delete": ("deleted", "删除"),
    "audit_action_rename": ("renamed", "重命名"),
    "audit_action_job": ("started a job", "启动任务"),
    "audit_action_move": ("moved to the front of the queue", "移到队首"),
    "audit_action_token": ("made a command-line token", "创建命令行令牌"),
    "audit_action_revoke-token": ("revoked a command-line token", "撤销命令行令牌"),
    "move_first": ("Move to the front of the queue", "移到队首"),
    "moved_first": ("{id} is first in the queue: it starts when a slot frees", "{id} 已移到队首：有空位时先启动"),
    "secrets_title": ("My secrets: tokens and keys for my runs", "我的密钥：我的运行使用的令牌和密钥"),
    "secrets_help": (
        "Stored for your account only (file mode 600, outside every run's folder) and given to your runs and jobs "
        "under their variable names: `HF_TOKEN` for the hub (downloads, pushes), `WANDB_API_KEY`, or any name a "
        "spec field names (a webhook URL for `notify.webhook_env`, a judge's key for `judge.api_key_env`). Values "
        "are never shown back. Your runs get none of the studio's own secrets unless the operator shares them.",
        "只为你的账号保存（文件权限 600，不在任何运行目录中），并以变量名提供给你的运行和任务：`HF_TOKEN` 用于 "
        "Hub（下载、上传），`WANDB_API_KEY`，或规格字段所指的任何变量名（`notify.webhook_env` 的 webhook 地址、"
        "`judge.api_key_env` 的评审密钥）。保存后不再显示其值。除非管理员共享，你的运行不会得到 studio 自己的密钥。",
    ),
    "secrets_name": ("Variable name", "变量名"),
    "secrets_value": ("Value (not shown again)", "值（保存后不再显示）"),
    "secrets_save": ("Save secret", "保存密钥"),
    "secrets_remove": ("Remove secret", "删除密钥"),
    "secrets_col_name": ("my secrets", "我的密钥"),
    "secrets_none": ("No secrets stored yet.", "尚未保存密钥。"),
    "secrets_saved": ("{name} saved: your next runs and jobs get it", "已保存 {name}：你之后的运行和任务会使用它"),
    "secrets_removed": ("{name} removed", "已删除 {name}"),
    "secrets_unknown": ("You hold no secret named {name}.", "你没有名为 {name} 的密钥。"),
    "secrets_operator": (
        "The operator's secrets are the studio's environment (set where the studio starts); accounts store theirs "
        "here.",
        "管理员的密钥就是 studio 的环境变量（在启动 studio 的地方设置）；各账号在这里保存自己的密钥。",
    ),
    "share_with": (
        "Share read-only with (accounts, comma-separated; * everyone)",
        "只读共享给（账号，逗号分隔；* 表示所有人）",
    ),
    "share": ("Share", "共享"),
    "share_done": ("{id} is shared read-only with {names}", "{id} 已只读共享给 {names}"),
    "share_nobody": ("{id} is no longer shared", "{id} 已不再共享"),
    "share_everyone": ("everyone", "所有人"),
    "share_pick_first": ("Pick what to share first.", "请先选择要共享的内容。"),
    "audit_action_share": ("shared", "共享"),
    "tokens_title": ("Command-line tokens: my runs from my own shell", "命令行令牌：在自己的终端管理我的运行"),
    "tokens_help": (
        "A personal token lets your own command line submit, follow, stop and fetch your runs on this studio: "
        "`export STUDIO_SERVER=<this page's address> STUDIO_TOKEN=<the token>`, then `studio train spec.yaml`, "
        "`studio runs list`, `studio runs logs ID --follow`, `studio runs stop ID`, `studio runs fetch ID`. "
        "The token acts for you only, under the page's rules; it is shown once, and revoking it ends it at once.",
        "个人令牌让你自己的命令行在此 studio 上提交、跟踪、停止并下载你的运行："
        "`export STUDIO_SERVER=<本页地址> STUDIO_TOKEN=<令牌>`，然后 `studio train spec.yaml`、"
        "`studio runs list`、`studio runs logs ID --follow`、`studio runs stop ID`、`studio runs fetch ID`。"
        "令牌只代表你本人，并遵守页面的规则；它只显示一次，撤销后立即失效。",
    ),
    "tokens_label": ("Label (e.g. laptop)", "标签（例如 laptop）"),
    "tokens_create": ("Create token", "创建令牌"),
    "tokens_new": ("New token (copy it now: it is not shown again)", "新令牌（请立即复制：不会再次显示）"),
    "tokens_revoke": ("Revoke token", "撤销令牌"),
    "tokens_col_id": ("token id", "令牌 ID"),
    "tokens_col_label": ("label", "标签"),
    "tokens_col_created": ("created", "创建时间"),
    "tokens_none": ("No tokens yet.", "尚无令牌。"),
    "tokens_made": ("token {id} created: set it as STUDIO_TOKEN", "已创建令牌 {id}：请设为 STUDIO_TOKEN"),
    "tokens_revoked": ("token {id} revoked", "已撤销令牌 {id}"),
    "tokens_operator": (
        "The operator's command line is the server's shell; accounts make tokens here.",
        "管理员的命令行就是服务器上的 shell；各账号在这里创建令牌。",
    ),
    "eval_model_base": ("base", "基座模型"),
    "eval_model_final": ("final", "最终模型"),
    "eval_measure_loss": ("loss", "损失"),
    "eval_measure_bleu": ("bleu", "BLEU 分数"),
    "eval_measure_rouge": ("rouge", "ROUGE 分数"),
    "eval_measure_exact": ("exact", "完全匹配"),
    "eval_measure_accuracy": ("accuracy", "准确率"),
    "eval_measure_lm_eval": ("lm_eval", "lm-eval 基准"),
    "eval_measure_judge": ("judge", "评审模型打分"),
    "eval_max_new": ("Max new tokens", "最多生成 token 数"),
    "eval_batch": ("Batch size", "批大小"),
    "eval_start": ("Evaluate", "开始评估"),
    "eval_pick_run": ("pick a training run", "请选择训练运行"),
    "eval_started": ("evaluation {id} started", "评估 {id} 已开始"),
    "eval_state_queued": ("queued", "排队中"),
    "eval_state_running": ("running", "运行中"),
    "eval_state_finished": ("finished", "已完成"),
    "eval_state_failed": ("failed", "失败"),
    "eval_state_cancelled": ("cancelled", "已取消"),
    "eval_eta": (" · about {s} s left", " · 约剩 {s} 秒"),
    "eval_report": ("Download report.html", "下载报告 report.html"),
    "eval_best_by": ("Best by", "最佳依据"),
    "eval_chart_title": ("{measure} by step (dashed: training loss)", "{measure} 随步数的变化（虚线：训练损失）"),
    "eval_merge_best": ("Merge the best", "合并最佳检查点"),
    "eval_nothing": ("no tuned row to merge yet", "还没有可合并的微调结果"),
    "eval_merge_anyway": ("Merge anyway", "仍然合并"),
    "eval_col_measure": ("measure", "指标"),
    "eval_col_difference": ("difference", "差值"),
    "eval_col_interval": ("95% interval", "95% 区间"),
    "eval_col_verdict": ("verdict", "结论"),
    "eval_col_degenerate": ("degenerate", "退化回答"),
    "eval_show": ("Side by side", "逐行对比"),
    "eval_col_model": ("model", "模型"),
    "eval_col_step": ("step", "步数"),
    "eval_col_prompt": ("question", "问题"),
    "eval_col_reference": ("reference", "参考答案"),
    "eval_col_base": ("base", "基座模型"),
    "eval_col_tuned": ("tuned", "微调后"),
    "eval_show_all": ("all rows", "全部行"),
    "eval_show_differ": ("answers differ", "回答不同的行"),
    "eval_show_worse": ("tuned got worse", "微调后变差的行"),
    "eval_of_run": ("Evaluations: {items}", "评估：{items}"),
    "eval_more": ("lm-eval tasks and the judge", "lm-eval 任务与评审"),
    "eval_tasks": (
        "lm-eval tasks (comma-separated: names lm-eval knows, or task YAML files)",
        "lm-eval 任务（逗号分隔：lm-eval 已知的任务名，或任务 YAML 文件）",
    ),
    "eval_judge_url": ("Judge endpoint (OpenAI-compatible base URL)", "评审接口（OpenAI 兼容的 base URL）"),
    "eval_judge_model": ("Judge model", "评审模型"),
    "eval_judge_key": (
        "Environment variable with the judge's key (its name; the key is never saved)",
        "存放评审密钥的环境变量（只填名字，密钥不会被保存）",
    ),
    "eval_judge_prompt": (
        "Judge prompt ({question}, {reference}, {answer}; pairwise: {answer_a}, {answer_b})",
        "评审提示词（{question}、{reference}、{answer}；成对比较：{answer_a}、{answer_b}）",
    ),
    "eval_judge_pairwise": (
        "Pairwise: the judge sees each model's answer beside the base's, in both orders, and names the better "
        "(win rate against the base; the base is evaluated too)",
        "成对比较：评审同时看到各模型与基座模型的回答（两种顺序各问一次）并选出更好的一个（得出相对基座的胜率；基座模型也会被评测）",
    ),
    "eval_open_chat": ("Open the row in Chat", "在对话中打开此行"),
    "eval_pick_row": ("click a row of the side-by-side table first", "请先点击逐行对比表中的一行"),
    "eval_chat_loading": ("loading the base and tuned models for this prompt…", "正在为此提示词加载基座与微调模型…"),
    "eval_nothing_to_chat": ("this evaluation has no base and tuned pair", "此评估没有基座与微调的对比"),
    # Export tab: GGUF / quantized exports, push, serve (studio.tabs.export_formats)
    "xf_section": ("GGUF, quantized export, push and serve", "GGUF、量化导出、推送与服务"),
    "xf_format": ("Format", "格式"),
    "xf_export": ("Export", "导出"),
    "xf_cancel": ("Cancel export", "取消导出"),
    "xf_started": ("exporting to `{out}` (run {id}, about {size}) …", "正在导出到 `{out}`（运行 {id}，约 {size}）…"),
    "xf_done": ("exported: {path}", "已导出：{path}"),
    "xf_files": ("files", "文件"),
    "xf_size": ("size", "大小"),
    "xf_download": ("Download the exported files", "下载导出的文件"),
    "xf_modelfile": ("Modelfile (Ollama)", "Ollama 的 Modelfile"),
    "xf_verify": ("verification", "校验"),
    "xf_greedy": ("greedy text", "贪心文本"),
    "xf_same": ("same", "相同"),
    "xf_differs": ("differs", "不同"),
    "xf_ollama": ("Ollama", "Ollama 命令"),
    "mstage_converting": ("converting", "转换"),
    "mstage_quantizing": ("quantizing", "量化"),
    "xf_nothing": ("nothing to cancel", "没有可取消的导出"),
    "xf_repo": ("Hub repo (owner/name)", "Hub 仓库（owner/name）"),
    "xf_private": ("private", "私有"),
    "xf_token": ("Hugging Face token (or HF_TOKEN)", "Hugging Face 令牌（或 HF_TOKEN）"),
    "xf_push": ("Push the export", "推送导出结果"),
    "xf_push_progress": (
        "pushing to {repo}: {i}/{n} files, {done}/{total}",
        "正在推送到 {repo}：{i}/{n} 个文件，{done}/{total}",
    ),
    "xf_pushed": ("pushed to {url}", "已推送到 {url}"),
    "xf_serve": ("Serve", "启动服务"),
    "xf_serve_stop": ("Stop serving", "停止服务"),
    "xf_serving": (
        "serving {model} at {url} (the Chat tab's Tuned list offers it: “served: {model}”)",
        "正在 {url} 提供 {model}（对话页的“微调后”列表里可选：“服务中：{model}”）",
    ),
    "xf_loading": ("loading the model (run {id}) …", "正在加载模型（运行 {id}）…"),
    "xf_stopped": ("server stopped", "服务已停止"),
    "ds_images": ("{n} image(s):", "{n} 张图像："),
    "ds_image_tokens": ("{n} tokens", "{n} 个 token"),
    "ds_image_tokens_unknown": ("tokens set by the processor", "token 数由处理器决定"),
    "ds_images_note": (
        "{images} images × {per} tokens = {tokens} image tokens counted",
        "{images} 张图像 × {per} 个 token = 计入 {tokens} 个图像 token",
    ),
    "ds_images_note_sized": (
        "{images} images, each sized as the processor sizes it (image_max_pixels {pixels}) = {tokens} image tokens "
        "counted",
        "{images} 张图像，按处理器的方式逐张确定尺寸（image_max_pixels 为 {pixels}）= 计入 {tokens} 个图像 token",
    ),
    "ds_images_note_unknown": (
        "{images} images (their tokens depend on each image's size: not counted)",
        "{images} 张图像（其 token 数取决于图像尺寸：未计入）",
    ),
}


def t(key: str, lang: str = "en", **fmt: Any) -> str:
    en, zh = STRINGS.get(key, (key, key))
    text = zh if lang == "zh" else en
    return text.format(**fmt) if fmt else text


# The Train form's sections (studio.forms lays them out): spec group -> (English, Chinese)
SECTION_TITLES = {
    "model": ("Model", "模型"),
    "method": ("Method", "方法"),
    "method.lora": ("LoRA", "LoRA"),
    "method.oft": ("OFT", "OFT"),
    "method.freeze": ("Freeze", "冻结训练"),
    "method.quantization": ("Quantization", "量化"),
    "method.dpo": ("DPO", "DPO"),
    "method.kto": ("KTO", "KTO"),
    "method.grpo": ("GRPO", "GRPO"),
    "data": ("Data", "数据"),
    "train": ("Training", "训练参数"),
    "train.low_rank": ("GaLore / APOLLO", "GaLore / APOLLO"),
    "train.badam": ("BAdam", "BAdam"),
    "launch": ("Launch: devices and backend", "启动：设备与后端"),
    "launch.deepspeed": ("DeepSpeed", "DeepSpeed"),
    "launch.fsdp": ("FSDP", "FSDP"),
    "launch.slurm": ("Slurm cluster", "Slurm 集群"),
    "launch.ray": ("Ray cluster", "Ray 集群"),
    "output": ("Output", "输出"),
    "model.rope_scaling": ("RoPE scaling", "RoPE 缩放"),
    "model.vision": ("Vision-language model", "视觉语言模型"),
    "health": ("Health rules", "健康规则"),
    "notify": ("Notifications", "通知"),
}


class Texts:
    """Remembers (component, key, attribute) so a language switch can relabel everything at once."""

    def __init__(self) -> None:
        self.items: list[tuple[Any, str, str]] = []
        self.fields: list[tuple[Any, Any]] = []  # (component, forms.FieldInfo)
        self.sections: list[tuple[Any, tuple[str, str]]] = []  # (accordion, (en, zh))

    def add_section(self, component: Any, titles: tuple[str, str]) -> Any:
        self.sections.append((component, titles))
        return component

    def add(self, component: Any, key: str, attr: str = "label") -> Any:
        self.items.append((component, key, attr))
        return component

    def add_field(self, component: Any, info: Any) -> Any:
        self.fields.append((component, info))
        return component

    def components(self) -> list[Any]:
        return [c for c, _, _ in self.items] + [c for c, _ in self.fields] + [c for c, _ in self.sections]

    def updates(self, lang: str) -> list[Any]:
        import gradio as gr

        out = []
        for _component, key, attr in self.items:
            text = t(key, lang)
            out.append(gr.update(value=text) if attr == "value" else gr.update(**{attr: text}))
        for _component, info in self.fields:
            if info.kind in ("choice", "list_choice"):  # the choices' names too (studio.i18n.choices)
                from studio.i18n.choices import choices_for

                out.append(gr.update(label=info.label_for(lang), choices=choices_for(info.path, info.choices, lang)))
            else:
                out.append(gr.update(label=info.label_for(lang)))
        for _component, (en, zh) in self.sections:
            out.append(gr.update(label=zh if lang == "zh" else en))
        return out
