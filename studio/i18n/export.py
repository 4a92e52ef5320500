"""Chinese text of the merge and export messages (``engine.export.messages``), keyed like that catalog
(``studio.i18n.localize`` looks them up). Light: stdlib only."""

from __future__ import annotations

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
    "export.reward_alone": "{first} 是奖励模型（rm 阶段，带打分头）：请单独合并它，不要与其他来源一起",
    "export.adapter_only_one": "--adapter-only 只导出一个适配器（一个 LoRA 运行或一个适配器目录）",
    "export.different_bases": "适配器的基座不同：{first} 基于 {base}，而 {other} 基于 {other_base}："
    "只能合并同一基座的适配器",
    "export.would_replace": "输出目录 {out} 会覆盖 {path}：请换一个输出目录（--out）",
    "export.out_exists": "输出目录 {out} 已存在：请换一个输出目录（--out），或使用 --overwrite",
    "export.serve_vision": "{source} 是视觉语言模型（{model_type}）：服务只支持纯文本模型；"
    "请在“对话”页与它对话（可以带图片）",
    "export.overwrite_not_folder": "--overwrite：{out} 不是目录：Studio 只覆盖之前由合并或导出写入的目录",
    "export.overwrite_not_ours": "拒绝 --overwrite：{out} 不是 Studio 的合并或导出写入的（其中有 {what}）："
    "请换一个输出目录（--out），或自行移走它",
    "export.overwrite_added": "拒绝 --overwrite：{out} 中有 {count} 个文件不是之前的合并或导出写入的（{what}）："
    "请先移走它们，或换一个输出目录（--out）",
    "export.overwrite_removes": "--overwrite：替换之前由合并或导出写入的 {out}：删除 {count} 个文件（{what}）",
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
    "export.lf_yaml_unreadable": "无法读取 LLaMA-Factory 导出 YAML {path}：{error}",
    "export.lf_yaml_refused": "{path}（LLaMA-Factory 导出 YAML）无法合并：\n{problems}",
    "export.lf_gptq_flags": "{flags}：带 export_quantization_bit 的 YAML 运行 GPTQ 导出，不接受这些选项"
    "（保持模型的 dtype，由 gptqmodel 自行分片）",
    "export.lf_yaml_with_sources": "--lf-yaml 自己指定模型和适配器（model_name_or_path、adapter_name_or_path）："
    "不要再同时给出 RUN_OR_ADAPTER",
    "export.no_out": "需要 --out（或带 export_dir 的 --lf-yaml FILE）",
    "export.push_offline": "export_hub_model_id {repo}：无法连接模型中心（已设置 HF_HUB_OFFLINE）："
    "模型会合并到 {out}，但不会上传；之后可用 `hf upload {repo} {out}` 上传",
    "export.push_no_token": "export_hub_model_id {repo}：没有 Hugging Face 令牌（请设置 HF_TOKEN 或运行 `hf auth "
    "login`）：模型会合并到 {out}，但不会上传",
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
    # studio export：GGUF 与量化格式
    "export.bad_format": "--format {fmt!r}：请选择 {choices} 之一",
    "export.gguf_arch": "架构 {arch!r} 在这里无法转换为 GGUF：Studio 可转换 {known}",
    "export.gguf_head": "{archs} 不是因果语言模型：只有 ...ForCausalLM 可以转换为 GGUF",
    "export.gguf_rope": "带 rope 缩放 {rope!r} 的 {arch} 在这里无法转换为 GGUF"
    "（仅支持 default、linear 和 llama3 rope）",
    "export.gguf_no_tokenizer": "缺少 {path}：GGUF 需要携带分词器，只有快速分词器的 tokenizer.json 可以转换",
    "export.gguf_tokenizer": "分词器 {kind} 在这里无法转换为 GGUF：仅支持字节级 BPE（Llama 3、Qwen）和带字节回退的 "
    "SentencePiece BPE（Llama 2、Mistral）",
    "export.gguf_unmapped_tensor": "该 {arch} 模型的张量 {name} 没有对应的 GGUF 名称（gguf 的张量映射）",
    "export.no_gptq_gptqmodel": "--format {fmt} 需要 gptqmodel 包（在 NVIDIA GPU 或 CPU 上做 GPTQ 与 AWQ 量化）："
    "先执行 `pip install --no-deps --target {folder} gptqmodel==7.6.0`（单独的目录，Studio 会把它加入其进程的路径："
    "它的版本约束会替换 torch 和 numpy，并让 `pip check` 失败），再执行 `pip install device-smi logbar tokenicer "
    "pypcre defuser optimum`；bnb-4bit、bnb-8bit 和 gguf 格式都不需要它",
    "export.no_gptq_optimum": "--format {fmt} 需要 optimum（transformers 通过它读取 GPTQ 目录）："
    "`pip install optimum`",
    "export.gptq_no_rows": "--format {fmt} 用该运行自己的训练数据校准：{source} 是模型目录而不是运行；"
    "请导出训练它的运行（会先合并其适配器），或用 --calibration FILE 指定一个校准文本文件（每行有 'text' 字段，"
    "同 LLaMA-Factory 的 export_quantization_dataset）",
    "export.calibration_not_used": "--calibration 只用于需要校准的格式（gptq-4bit、gptq-8bit、awq-4bit），"
    "不用于 {fmt}",
    "export.calibration_count": "校准 {what} 必须是不小于 1 的整数（实际为 {value!r}）",
    "export.calibration_missing": "校准文件 {path}：未找到",
    "export.calibration_type": "校准文件 {path}：不是可读取的类型（{types}）",
    "export.calibration_bad": "校准文件：{problem}",
    "export.calibration_no_text": "校准文件 {path} 第 {row} 行：需要非空的 'text' 字符串（同 LLaMA-Factory 的 "
    'c4_demo.jsonl：{{"text": "..."}}）',
    "export.calibration_empty": "校准文件 {path}：没有数据行",
    "export.detail_gptq_file": "{method} {bits} 位（{device}），用 {file} 中 {rows} 个最多 {maxlen} 个词元的片段校准",
    "export.detail_gptq": "{method} {bits} 位（{device}），用该运行的 {rows} 行训练数据校准",
    "export.gptq_summary": "{fmt}：保存的目录在 transformers 与 gptqmodel 中读出的结果一致，最大 |logit 差| "
    "{diff:.3g} {op} {tol:.3g}；量化使 logits 最多变化 {qerr:.3g}；{n} 个提示中有 {same} 个的贪心文本与浮点模型相同",
    "export.no_quantizer": "--format {fmt} 需要 llama.cpp：`pip install llama-cpp-python`（它会编译 llama.cpp），"
    "或编译 llama.cpp 的 llama-quantize（https://github.com/ggml-org/llama.cpp，`cmake -B build && cmake --build "
    "build --target llama-quantize`），并把它放到 PATH 中或设置 STUDIO_LLAMA_QUANTIZE=/path/to/llama-quantize；"
    "gguf-q8_0、gguf-f16 和 gguf-bf16 无需它",
    "export.no_gguf_disk": "{out} 的磁盘空间不足：{fmt} 导出约需 {need}（文件 {file}{merge}），但那里只有 {free} "
    "可用：请释放空间或换一个 --out",
    "export.merge_part": "，以及运行期间 {merged} 的 float32 合并结果",
    "export.detail_converting": "张量 {name}",
    "export.detail_gguf_verify": "重新加载 GGUF 并比较 logits 与贪心生成文本",
    "export.gguf_summary": "最大 |logit 差| {diff:.3g} {op} {tol:.3g}（{fmt}，transformers 的 GGUF 读取器对比合并后的"
    "模型）；贪心文本在 {same}/{n} 个提示上相同",
    "export.gguf_llama_cpp": "llama.cpp：最大 |logit 差| {diff:.3g}；贪心文本在 {same}/{n} 个提示上相同",
    "export.gguf_no_llama_cpp": "此机器上没有 llama.cpp（pip install llama-cpp-python）：GGUF 仅用 transformers 的 "
    "GGUF 加载器和 gguf 包读回",
    "export.not_export": "运行 {id} 不是导出任务",
    "export.quantizing": "用 llama-quantize 量化为 {fmt}",
    "export.quantize_failed": "llama-quantize 失败（{code}）：{tail}",
    "export.not_serve": "运行 {id} 不是服务",
    "export.port_busy": "{host} 上的端口 {port} 已被占用：请换一个 --port（0：任意空闲端口）",
    "export.serve_bad_port": "--port {port}：请选择 0 到 65535 之间的端口（0：任意空闲端口）",
    "export.serve_bad_host": "--host {host}：无法在此地址监听（{error}）",
    "export.serve_needs_key": "拒绝在 {host} 上无密钥提供服务：任何能访问它的人都可以使用模型；"
    "请把密钥放进一个环境变量，并用 --api-key-env NAME 指明（或绑定到 127.0.0.1）",
    "export.serve_bad_key_env": "--api-key-env {name!r}：请给出环境变量的名字（字母、数字和 _）",
    "export.serve_key_unset": "--api-key-env {name}：环境变量 {name} 未设置或为空：请先把密钥导出到其中",
    "export.serve_bad_setting": "{name}={value!r}：请给出一个正数",
    "export.push_bad_repo": "--repo {repo!r}：请以 owner/name 的形式给出 Hub 仓库",
    "export.push_no_output": "运行 {run} 没有可推送的输出目录 {path}（它没有完成）",
    "export.push_offline_refused": "无法推送到 {repo}：无法连接 Hub（设置了 HF_HUB_OFFLINE 或 TRANSFORMERS_OFFLINE）",
    "export.push_no_token_refused": "无法推送到 {repo}：没有 Hugging Face 令牌（请设置 HF_TOKEN、在令牌栏中输入，"
    "或运行 `hf auth login`）",
    "export.not_push": "运行 {id} 不是推送任务",
    "export.detail_bnb": "用 bitsandbytes 量化为 {fmt}，保存并重新加载",
    "export.bnb_summary": "保存的 {fmt} 目录重新加载后，与内存中的量化模型相比最大 |logit 差| {diff:.3g} "
    "{op} {tol:.3g}；量化使 logits 相对 float32 最多变化 {qerr:.3g}",
}
