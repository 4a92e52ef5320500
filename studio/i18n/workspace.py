"""Chinese text of the workspace's folder rules (``engine.core.messages.MESSAGES``, used by ``engine.core.folders``),
keyed like that catalog (``studio.i18n.localize`` looks them up). Light: stdlib only."""

from __future__ import annotations

WORKSPACE_ZH: dict[str, str] = {
    "workspace.outside": "{path} 在工作区（{home}）和 STUDIO_OUTPUT_ROOTS 允许的所有目录（{roots}）之外："
    "请选择工作区内的目录，或用 STUDIO_OUTPUT_ROOTS 允许它的根目录",
    "workspace.root_refused": "{path} 位于 {root} 内；STUDIO_OUTPUT_ROOTS 虽列出了它，但它永远不被允许"
    "（系统目录、/ 或主目录本身）：请选择工作区内的目录",
    "workspace.system": "{path} 是系统目录、主目录本身或 /，或位于系统目录内：Studio 从不写入那里；请选择其他目录",
    "workspace.is_root": "{path} 本身就是输出根目录（STUDIO_OUTPUT_ROOTS）：请选择其中的一个目录",
    "workspace.owned": "{path} 属于{owner}：请选择其他目录",
    "workspace.holds": "{path} 包含{owner}：请选择不包含任何运行、数据集或模型文件的目录",
    "workspace.roots_none": "无",
    "workspace.owner_workspace": "工作区 {path}",
    "workspace.owner_data": "数据集目录 {path}",
    "workspace.owner_models": "模型目录 {path}",
    "workspace.owner_model": "基础模型 {path}",
    "workspace.owner_runs": "运行目录 {path}",
    "workspace.owner_run": "运行 {id}（{path}）",
    "workspace.owner_exports": "导出目录 {path}",
    "workspace.owner_uploads": "上传目录 {path}",
    "workspace.owner_presets": "预设目录 {path}",
    "workspace.owner_registry": "运行注册表 {path}",
    "workspace.owner_cache": "分词数据缓存 {path}",
    "workspace.in_exports": "{path} 位于导出目录 {exports} 内，那里存放合并和导出的模型：请为运行选择它自己的目录",
    "workspace.not_empty": "{path} 已包含不是该运行写入的文件（{found}）：请选择新的或空的目录",
}
