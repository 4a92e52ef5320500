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
    "models.offline_unknown": "{name} 不是本地目录，不在 Hugging Face 缓存中，也不在 Studio 的已知模型表中，"
    "且未询问 Hub（已设置 HF_HUB_OFFLINE）：请先下载，或填写本地目录",
}
