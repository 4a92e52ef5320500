"""Chinese text of model resolution's messages (``engine.models.messages``), keyed like that catalog
(``studio.i18n.localize`` looks them up). Light: stdlib only."""

from __future__ import annotations

MODELS_ZH: dict[str, str] = {
    "models.source_local": "模型参数来自本地目录 {where}",
    "models.source_cache": "模型参数来自 Hugging Face 缓存（{where}）",
    "models.source_hub": "模型参数来自 Hub 上的 config.json（{where}）",
    "models.source_table": "模型参数来自 Studio 收录的官方配置表（{where}）；权重尚未下载",
    "models.source_none": "没有 {name} 的模型参数",
    "models.no_folder": "{path} 处没有模型目录",
    "models.no_config": "{path} 中没有 config.json：不是 transformers 模型目录",
    "models.bad_id": "{name!r} 既不是本地目录，也不是 Hub 模型 ID（组织/名称）",
    "models.gated": "{name} 在 Hub 上需要授权：请在 Hub 上接受其许可，并把 HF_TOKEN 设为有权限的令牌",
    "models.not_on_hub": "Hub 上找不到 {name}（{url}）：请检查拼写，或填写本地目录",
    "models.no_revision": "{name} 在 Hub 上没有版本 {revision!r}",
    "models.no_config_on_hub": "{name} 在 Hub 上没有 config.json：不是 transformers 模型",
    "models.unreachable": "{name} 不在 Hugging Face 缓存中，且无法连接 Hub（{url}）",
    "models.hub_error": "Hub 对 {name} 返回了错误：{error}",
    "models.not_in_workspace": "{name} 不在工作区中（{path} 不存在）：请先导入或下载"
    "（`studio demo` 会导入 SmolLM2-135M-Instruct，`studio import-gguf FILE --name NAME` 导入你的 GGUF）",
    "models.offline_unknown": "{name} 不是本地目录，不在 Hugging Face 缓存中，也不在 Studio 的已知模型表中，"
    "且未询问 Hub（已设置 HF_HUB_OFFLINE）：请先下载，或填写本地目录",
    "models.hub_down": "无法连接 Hub（{url}）（{why}；只询问一次，{timeout} 秒）：改为离线工作，"
    "先读 Hugging Face 缓存，再读 Studio 收录的官方配置表",
    "models.not_downloadable_offline": "{name} 不在 Hugging Face 缓存中，且已设置 HF_HUB_OFFLINE，无法下载："
    "请取消该设置，在能连接 Hub 的机器上运行 `studio download {name}`，或填写本地目录",
    "models.not_downloadable_unreachable": "{name} 不在 Hugging Face 缓存中，且无法连接 Hub（{url}），无法下载："
    "请在能连接 Hub 的机器上运行 `studio download {name}`，或填写本地目录",
    "models.download_listing": "正在向 Hub（{url}）查询 {name} 的文件",
    "models.hub_where": "模型来源 Hub：{url}",
    "models.hub_where_mirror": "模型来源 Hub：{url}（HF_ENDPOINT：镜像或私有 Hub）",
    "models.source_ms_cache": "模型参数来自 ModelScope 缓存（{where}）",
    "models.source_ms_hub": "模型参数来自 ModelScope 上的 config.json（{where}）",
    "models.ms_where": "ModelScope：{url}（缓存 {cache}）",
    "models.ms_not_installed": "{name} 是 ModelScope 模型：请安装 modelscope 包（pip install modelscope）后下载，"
    "或填写本地目录",
    "models.ms_unreachable": "{name} 不在 ModelScope 缓存中，且无法连接 ModelScope（{url}）（{why}）："
    "请检查网络或 MODELSCOPE_ENDPOINT，或填写本地目录",
    "models.ms_not_found": "ModelScope（{url}）上找不到 {name}：请检查拼写，或填写本地目录",
    "models.ms_error": "ModelScope（{url}）对 {name} 返回了错误：{error}",
    "models.ms_no_config": "{name} 在 ModelScope（{url}）上没有 config.json：不是 transformers 模型",
    "models.ms_download_listing": "正在向 ModelScope（{url}）查询 {name} 的文件",
    "models.ms_download_nothing": "{name} 已完整地在 ModelScope 缓存中（{where}）",
    "models.hub_where_offline": "模型来源 Hub：{url}，未询问（已设置 HF_HUB_OFFLINE）：只用 Hugging Face 缓存",
    "models.download_progress": "正在下载 {name}：{done} / {total}（{percent}%），{speed}/s，剩余 {eta}",
    "models.download_verifying": "正在校验 {name} 的 {file}",
    "models.download_finished": "{name} 已下载：{files} 个文件，{size}，位于 {where}",
    "models.download_nothing": "{name} 已完整存在于 Hugging Face 缓存中（{where}）",
    "models.download_gated_token": "HF_TOKEN 中的令牌无权访问 {name}（该模型在 Hub 上需要授权）："
    "请用该账号在 Hub 上接受其许可",
    "models.download_unreachable": "无法连接 Hub（{url}）来下载 {name}：请检查网络或 HF_ENDPOINT",
    "models.download_offline": "已设置 HF_HUB_OFFLINE，无法下载 {name}："
    "请取消该设置，或把模型复制到 Hugging Face 缓存中",
    "models.download_offline_dataset": "已设置 HF_HUB_OFFLINE，无法下载数据集 {name}："
    "请取消该设置，或把数据集复制到 Hugging Face 缓存中",
    "models.download_no_space": "磁盘空间不足，无法下载 {name}：需要 {need}，{path} 仅剩 {free}",
    "models.download_checksum": "{name} 的 {file} 与 Hub 上的校验和不符（{algo} 为 {got}，应为 {expected}）："
    "已丢弃该下载，请重新开始",
    "models.download_stalled": "Hub 停止发送 {name} 的 {file}（{timeout} 秒无数据，已重试）："
    "重新开始下载即可从中断处继续",
    "models.download_incomplete": "{name} 的 {file} 下载不完整：{error}",
    "models.download_cancelled": "{name} 的下载已取消；已下载的 {done} 保留，可继续下载",
    "models.download_not_download": "运行 {id} 不是下载任务",
    "models.local_in_use": "{path} 是运行 {run} 的模型，该运行状态为 {status}：请先停止它",
    "models.local_unknown": "没有本地模型 {name}",
    "models.local_read_only": "{name} 以只读方式共享给团队：只有运营者或管理员能删除它",
    "models.local_deleted": "已删除 {name}：释放 {size}（{path}）",
    "models.gguf_no_file": "{path} 处没有 GGUF 文件",
    "models.gguf_unreadable": "无法以 GGUF 格式读取 {path}：{error}",
    "models.gguf_not_gguf": "{path} 不是 GGUF 文件（开头不是 GGUF 的魔数）",
    "models.gguf_architecture": "{path}：架构 {arch!r} 无法导入；transformers 的 GGUF 加载器支持这些因果语言模型："
    "{known}",
    "models.gguf_quantization": "{path}：有 {n} 个张量的类型为 {types}，gguf 包无法反量化（例如 {tensor}）："
    "未导入任何内容",
    "models.expand_count": "--num-expand {n} 必须至少为 1，并整除 {path} 的 {layers} 层",
    "models.gguf_bad_name": "模型名 {name!r}：只能使用字母、数字、'.'、'_' 和 '-'（它会成为 {root} 下的目录）",
    "models.gguf_exists": "{path} 已存在：导入从不覆盖已有目录；请换一个 --name，或先删除它"
    "（`studio models delete models/{name}`）",
    "models.gguf_no_space": "磁盘空间不足，无法导入：float32 权重需要 {need}，{path} 只剩 {free}",
    "models.gguf_reading": "正在用 transformers 的 GGUF 加载器反量化 {file}（{quant}，{tensors} 个张量，{arch}）",
    "models.gguf_writing": "正在写入 {out}：float32 safetensors、分词器、对话模板、生成配置",
    "models.gguf_verifying": "正在把该目录的 logits 与 transformers 和 llama.cpp 读取的 GGUF 对比",
    "models.gguf_summary": "与 transformers 加载器读取的 GGUF 相比，logits 最大差 {diff:.3g} {op} {tol:.3g}",
    "models.gguf_llama_cpp": "llama.cpp：logits 最大差 {diff:.3g} {op} {tol:.3g}（它用舍入到 8 位的激活做乘法），"
    "{same}/{n} 个提示的贪心输出相同",
    "models.gguf_no_llama_cpp": "llama.cpp：未安装（llama-cpp-python），未对比",
    "models.gguf_verify_failed": "导入的权重与 GGUF 不一致（{summary}）；未写入任何内容",
    "models.gguf_finished": "{file}（{quant}）已导入为 {out}：{summary}",
    "models.gguf_cancelled": "导入已取消；未写入任何内容",
    "models.gguf_not_import": "运行 {id} 不是 GGUF 导入",
    "models.gguf_demo_missing": "这里没有演示用的真实模型（`bash scripts/bootstrap.sh` 会把 GGUF 形式的 "
    "SmolLM2-135M-Instruct 下载到 .venv/share/studio）：只构建微型演示模型",
    "models.gguf_demo_ready": "{out} 已从 {file} 导入并验证过",
    "models.gguf_demo_foreign": "{out} 已存在且不是 {file} 的导入结果：保持原样",
    "models.search_type": "输入模型 ID 的一部分（例如 qwen 7b）来搜索 Hub；离线时搜索 Studio 收录的配置表",
    "models.search_hub": "Hub（{url}）上有 {count} 个模型匹配 {query!r}；在启动运行之前不会下载任何内容",
    "models.search_table": "Studio 收录的官方配置表中有 {count} 个模型匹配 {query!r}：{why}；"
    "许可证和访问授权取自收录时各模型卡片的说明，大小按 bf16 权重估算",
    "models.search_why_offline": "未询问 Hub（已设置 HF_HUB_OFFLINE）",
    "models.search_why_unreachable": "无法连接 Hub（{url}）（{why}）",
    "models.search_why_error": "Hub（{url}）对搜索返回了错误（{error}）",
    "models.search_why_slow": "Hub（{url}）在 {timeout} 秒内没有回答搜索",
}
