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
    "workspace.owner_rewards": "奖励函数目录 {path}",
    "workspace.page_setting_bad": "{var}：{entry!r} 不是 {form} 格式",
    "workspace.page_reward_outside": "{path} 在工作区的奖励函数目录（{folder}）之外：页面只运行该目录中的奖励代码"
    "（由管理员放入，或管理员设置 {switch}=on 后从页面上传）",
    "workspace.page_code_off": "页面不能上传奖励代码：管理员可用 {switch}=on 允许（或把文件放入 {folder}）",
    "workspace.page_file_outside": "{path} 在工作区（{home}）之外：页面只读取工作区中的文件；"
    "请把它放到 {uploads} 下，或在命令行运行 studio 命令（命令行可以指定任意文件）",
    "workspace.page_dataset_dir_outside": "{path} 在工作区（{home}）之外：页面只读取工作区中的数据集"
    "（请在数据集页注册或上传）；studio 命令可以指定任意目录",
    "workspace.page_remote_code": "{model} 带有自己的 Python 代码（{code}），"
    "trust_remote_code 会在本服务器上运行它：页面不运行工作区以外的代码"
    "（管理员可用 {switch}=on 允许；在命令行用 `studio train` 可以运行），或关闭 trust_remote_code",
    "workspace.page_remote_code_unknown": "这里读不到 {model} 的配置，"
    "无法判断 trust_remote_code 是否会运行它自带的代码："
    "请先下载模型、关闭 trust_remote_code，或由管理员用 {switch}=on 允许页面这样做",
    "workspace.token_operator": "令牌属于团队模式下的各个账号：管理员的命令行就是服务器上的 shell",
    "workspace.token_unknown": "你没有令牌 {id!r}（可能已被撤销）",
    "workspace.share_unknown": "{name!r} 不是本 studio 的账号（见 `studio users list`；* 表示与所有人共享）",
    "workspace.share_no_team": "共享只用于团队模式：此工作区没有账号，能访问 studio 的人都能使用其中的一切",
    "workspace.share_already": "{what} 已与整个团队共享：操作员或管理员添加的内容属于所有人",
    "workspace.share_not_yours": "{what} 属于 {owner}：只有其本人（或管理员）可以共享",
    "workspace.share_no_dataset": "{path} 中没有登记你的数据集 {name!r}",
    "workspace.share_no_model": "{path} 不是工作区模型文件夹中你的模型",
    "workspace.secret_operator": "管理员的密钥就是 studio 的环境变量（在启动 studio 的地方设置）；"
    "这里保存的是团队模式下各账号自己的密钥",
    "workspace.secret_bad_name": "{name!r} 不是有效的变量名：以字母或 _ 开头，其后为字母、数字或 _（最多 64 个）",
    "workspace.secret_bad_value": "{name}：值须为一行，最多 {n} 个字符（要删除密钥，请移除它）",
    "workspace.page_reward_name": "{name!r} 不是有效的奖励文件名：只能含字母、数字、_ . -，并以 .py 结尾",
    "workspace.page_secret_unbound": "页面不能使用环境变量 {name}：管理员没有为页面绑定它（{var}={name}=HOST[:PORT]）",
    "workspace.page_secret_elsewhere": "页面只能把 {name} 发送到 {allowed}，不能发送到 {dest}（{var}）",
    "workspace.page_private_host": "{dest} 是回环、链路本地或私有地址（{address}）："
    "只有管理员允许时页面才能发送到那里（{var}）",
    "workspace.page_host_unresolved": "此处无法解析 {dest}（{error}），无法确认它是公网地址："
    "只有管理员允许时页面才能发送到那里（{var}）",
    "workspace.accounts_unreadable": "无法读取账户文件 {path}（{error}）：请修复或删除它",
    "workspace.account_bad_name": "{name!r} 不是有效的账户名：1 到 32 个字母、数字、_ . -，以字母或数字开头",
    "workspace.account_exists": "账户 {name!r} 已存在：用 `studio users passwd` 修改其密码",
    "workspace.account_unknown": "没有账户 {name!r}：`studio users list` 列出所有账户",
    "workspace.account_short_password": "密码太短：至少 {n} 个字符",
    "workspace.account_bad_quota": "配额是运行数量或 GB 数，0 表示不限：收到 {value}",
    "workspace.account_last_admin": "{name!r} 是最后一个管理员：请先设立另一个管理员，或先删除其他成员",
    "workspace.account_mismatch": "两次输入的密码不一致：未做任何更改",
}
