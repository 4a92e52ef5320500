"""Chinese text of the dataset registry's, the chat templates' and the upload checks' messages, keyed like
``engine.data.messages.MESSAGES`` (``studio.i18n.localize.localize`` looks them up). Light: stdlib only."""

from __future__ import annotations

DATA_ZH: dict[str, str] = {
    # a problem in its place
    "data.at": "{file}：{message}",
    "data.at_column": "{file}，列 '{column}'：{message}",
    "data.at_line": "{file}，第 {row} 行：{message}",
    "data.at_line_column": "{file}，第 {row} 行，列 '{column}'：{message}",
    "data.at_row": "{file}，第 {row} 条记录：{message}",
    "data.at_row_column": "{file}，第 {row} 条记录，列 '{column}'：{message}",
    "data.more_rows_one": "{message}（另有 1 行同样的问题）",
    "data.more_rows": "{message}（另有 {more} 行同样的问题）",
    # the registry file and its entries
    "data.info_bad_json": "{path}：不是有效的 JSON（第 {line} 行，第 {col} 列：{error}）",
    "data.info_not_object": "{path}：应是由数据集条目组成的 JSON 对象，实际是 {type}",
    "data.no_registry": "找不到数据集注册表（没有 dataset_info.json）",
    "data.not_registered": "数据集 '{name}' 未注册（已注册：{known}）",
    "data.not_registered_none": "数据集 '{name}' 未注册（还没有注册任何数据集）",
    "data.entry_not_object": "条目 '{name}' 必须是一个对象",
    "data.ms_not_installed": "数据集 '{name}' 在 ModelScope 上（{hub}）：请安装 modelscope 包"
    "（pip install modelscope）后再读取，或给该条目 hf_hub_url 或 file_name",
    "data.ms_unavailable": "数据集 '{name}'：无法从 ModelScope（{url}）获取 {hub}：{error}",
    "data.ms_empty": "数据集 '{name}'：{hub} 在 ModelScope（{url}）上没有文件",
    "data.entry_num_samples": "条目 '{name}'：num_samples {value!r} 不是大于 0 的整数行数",
    "data.entry_option": "条目 '{name}'：{key} {value!r} 不是非空文本",
    "data.entry_files": "数据集 '{name}'：{problem}",
    "data.option_needs_folder": "条目 '{name}'：{key} 只适用于文件夹或 Hub 数据集，而 file_name 是单个文件",
    "data.folder_missing": "{path} 中没有文件夹 '{folder}'",
    "data.split_missing": "没有划分 '{split}'（现有划分：{have}）",
    "data.subset_missing": "没有子集 '{subset}'（现有子集：{known}）",
    "data.script_missing": "条目 '{name}'：找不到 script_url 文件夹 {path}",
    "data.script_unsupported": "条目 '{name}' 是数据集加载脚本（{script}），datasets {version} 已不再运行脚本："
    "请把数据转换为 JSON / Parquet 文件并设置 file_name",
    "data.hub_offline": "数据集 '{name}' 在 Hub 上（{hub}），不在 Hugging Face 缓存中，且 Hub 处于离线模式"
    "（HF_HUB_OFFLINE）：请先下载（studio download {hub} --dataset）或取消 HF_HUB_OFFLINE",
    "data.hub_not_found": "数据集 '{name}'：{hub} 不是 Hub（{url}）上的数据集",
    "data.hub_gated": "数据集 '{name}'：{hub} 在 Hub 上受限访问：请在 Hub 上接受其条款并设置 HF_TOKEN",
    "data.hub_no_revision": "数据集 '{name}'：{hub} 在 Hub 上没有版本 '{revision}'",
    "data.hub_unreachable": "数据集 '{name}'：无法连接 Hub（{url}）获取 {hub}：{error}",
    "data.val_size_no_train": "data.val_size {val_size} 从 {names} 的 {total} 个样本中留出 {held} 个："
    "没有剩下训练数据；请调小 data.val_size",
    "data.eval_empty": "评估数据集 {names} 在 data.cutoff_len（{cutoff}）之内没有任何带可训练回答的样本",
    "data.hub_later": "在 Hub 上（{hub}），尚未下载：训练运行会先下载它并在训练前检查每一行",
    "data.entry_no_file": "条目 '{name}' 没有 file_name",
    "data.entry_formatting": "条目 '{name}'：格式 {formatting!r} 既不是 alpaca 也不是 sharegpt",
    "data.entry_columns": "条目 '{name}'：未知的列键 {bad}（可用：{known}）",
    # the dataset against the stage
    "data.pairs_needed": "{stage} 阶段需要偏好对，但 '{name}' 没有 chosen/rejected 列："
    '请设置 "ranking": true 并给出 chosen 和 rejected 列，或使用 sft 阶段',
    "data.pairs_need_pair_stage": "'{name}' 是偏好对数据，{stage} 阶段无法用它训练：请使用 dpo 或 rm 阶段",
    "data.kto_needs_tag": "kto 阶段需要标注了好坏的回答，但 '{name}' 没有映射 kto_tag 列："
    "请把 columns.kto_tag 设为存放 true/false 的列",
    "data.kto_not_pairs": "'{name}' 是偏好对数据（ranking），不是为 kto 标注的回答：请使用 dpo 或 rm 阶段",
    "data.tags_need_kto": "'{name}' 是 kto 数据（列 '{column}' 标注每个回答是否可取），"
    "{stage} 阶段会把每个回答都当作好回答来训练：请使用 kto 阶段",
    "data.kto_no_tags": "'{name}' 没有一行带 kto 标签（列 '{column}' 为 true 或 false）：没有可训练的数据",
    "data.kto_ok": "{name}：正常（{rows} 行，kto 阶段：{desirable} 行可取，{undesirable} 行不可取，"
    "{untagged} 行没有标签，不参与训练）",
    "data.text_needs_pt": "'{name}' 是纯文本，没有回复列：请使用 pt 阶段，或映射 columns.response",
    # reading the file
    "data.file_not_found": "找不到文件（{info} 中 '{name}' 的 file_name）",
    "data.cannot_read": "无法读取：{error}",
    "data.no_rows": "没有数据行",
    "data.bad_json": "不是有效的 JSON（第 {line} 行，第 {col} 列：{error}）",
    "data.not_list": "应是由记录组成的 JSON 列表",
    "data.bad_csv": "不是有效的 CSV（第 {line} 行）：{error}",
    "data.bad_parquet": "不是可读取的 Parquet 文件（文件被截断或不是 Parquet）：{error}",
    "data.multimodal": "数据集 '{name}' 带有 {kind} 列（'{column}'）：不支持视频和音频数据（图像支持：'images' 列）；"
    "请使用不含 {kind} 列的数据集",
    "data.images_not_list": "images 列必须是一个路径或路径列表（相对于数据集文件夹）或 URL，而不是 {type}",
    "data.image_count": "消息中有 {placeholders} 个 <image> 占位符，但该行有 {images} 张图像："
    "每张图像需要按顺序对应一个 <image> 占位符",
    "data.image_missing": "图像 '{image}' 不存在",
    "data.image_outside": "图像 '{image}' 不在数据集文件夹 {folder} 或工作区的 uploads 中",
    "data.image_not_file": "图像 '{image}' 不是普通文件",
    "data.image_unreadable": "图像 '{image}' 无法作为图像读取（{error}）",
    "data.image_too_large": "图像 '{image}' 为 {width}x{height}（{pixels} 像素），超过处理器最大值 {max_pixels} 像素"
    "（image_max_pixels）的 {factor} 倍：请在训练前缩小它",
    "data.image_more": "另有 {more} 个类似的图像问题",
    "data.images_text_model": "数据集 {names} 含有图像，但模型 '{model}' 没有视觉塔："
    "请选择视觉语言模型（其 config.json 含 vision_config）",
    "data.images_stage": "数据集 {names} 含有图像：图像数据使用 sft 或 dpo 阶段训练（当前为 '{stage}'）",
    "data.images_loss": "数据集 {names} 含有图像：图像上的 dpo 使用 TRL DPOTrainer 的损失，而非 '{loss}'"
    "（仅支持文本的训练器）：请选择 sigmoid、ipo 等",
    "data.bad_type": "不支持的文件类型 '{suffix}'（请使用 .json、.jsonl、.csv、.parquet、.txt，"
    "或用 datasets 的 save_to_disk 保存的目录）",
    "data.not_utf8_column": "不是 UTF-8 文本（第 {col} 列的字节 0x{byte:02x}）：请把文件另存为 UTF-8",
    "data.not_utf8_line": "不是 UTF-8 文本（第 {line} 行的字节 0x{byte:02x}）：请把文件另存为 UTF-8",
    "data.bad_json_line": "JSON 行格式错误（第 {col} 列：{error}）",
    "data.not_utf8_near": "不是 UTF-8 文本（第 {offset} 字节附近）：请把文件另存为 UTF-8",
    "data.record_too_long": "超过 {limit} MiB，即页面读取单行的上限：此处不显示也不检查（训练时会完整读取）",
    # one row
    "data.kto_tag_not_bool": "kto 标签是 {value}，不是 true 或 false（须为 JSON 布尔值；没有标签时省略或设为 null）",
    "data.row_not_object": "应是包含各列的对象，实际是 {type}",
    "data.missing_column": "缺少列 '{column}'（{key}）；该行有：{have}。请在“数据集”页的列映射中为 {key} "
    "选择列（或改变格式）后重新注册",
    "data.missing_column_empty": "缺少列 '{column}'（{key}）；该行没有任何列。请在“数据集”页的列映射中为 {key} "
    "选择列（或改变格式）后重新注册",
    "data.untrainable": "从 {file} 读取的 {rows} 行中，按 {formatting} 格式和当前列映射没有一行可以训练；"
    "文件的列：{columns}",
    "data.empty_text": "文本为空",
    "data.bad_history": "history 必须是由 [提示, 回复] 对组成的列表",
    "data.empty_answer": "{key} 回答为空",
    "data.pair_end_user": "偏好数据行的对话必须以用户轮次结尾",
    "data.end_assistant": "对话必须以助手轮次结尾",
    "data.empty_response": "回复为空（第 {turn} 轮）",
    "data.turns_not_list": "应是由对话轮次组成的列表，实际是 {type}",
    "data.turn_keys": "第 {turn} 轮需要 '{role_tag}' 和 '{content_tag}' 键（见 dataset_info.json 中的 tags）",
    "data.turn_role": "第 {turn} 轮的角色是 '{tag}'；已知角色：{known}",
    "data.system_first": "第 {turn} 轮：system 轮次只能出现在最前面",
    "data.turn_order": "第 {turn} 轮是 '{tag}'，但应为 '{want}'：轮次必须按 {user}/{assistant} 交替，并以 {user} 开始",
    # registering a file
    "data.bad_name": "数据集名称 {name!r}：请使用字母、数字和 _ - .",
    "data.name_too_long": "数据集名称：{length} 个字符，最多 {limit} 个",
    "data.bad_formatting": "格式 {formatting!r}：请使用 alpaca 或 sharegpt",
    "data.unknown_columns": "未知的列键 {bad}（可用：{known}）",
    "data.file_outside": "file_name {file!r} 超出了数据集目录 {folder}",
    "data.entry_outside": "条目 '{name}'：{key} {value!r} 指向数据集目录 {folder} 之外；只读取目录内的文件",
    "data.file_outside_entry": "条目 '{name}'：{path} 指向 {folder} 之外（链接？）；只读取目录内的文件",
    "data.not_regular": "条目 '{name}'：{path} 是{kind}，不是普通文件；不会读取",
    "data.file_unreadable": "条目 '{name}'：无法读取 {path}（{error}）",
    "data.file_too_big": "条目 '{name}'：{path} 使数据集达到 {size} MiB，"
    "超过数据集上限 {limit} MiB（STUDIO_MAX_DATASET_MB）",
    "data.max_dataset_mb": "STUDIO_MAX_DATASET_MB 必须是正数（MiB），当前为 {value!r}",
    "data.file_missing": "找不到文件：{path}",
    "data.already_registered": "数据集 '{name}' 已在 {path} 中注册",
    "data.read_only": "数据集 '{name}' 属于 {owner}，以只读方式共享给团队：请用另一个名字注册你的文件",
    # feedback from the Chat tab
    "data.feedback_no_answer": "还没有可评价的回答：请先发送提示词并等模型回答",
    "data.feedback_images": "这段对话包含图片：反馈只保存纯文本对话",
    "data.feedback_empty_answer": "回答为空：无法标记，也无法在旁边放一个更好的回答",
    "data.feedback_empty_edit": "请先写出更好的回答",
    "data.feedback_same_edit": "更好的回答与模型的回答相同：请先修改",
    # uploads through the page
    "upload.bad_type": "{name!r}：请上传 {types} 文件",
    "upload.no_name": "{name!r}：文件名中没有可用的字符",
    "upload.too_big": "{name}：{mib} MiB 超过了 {limit} MiB 的上传上限",
    "upload.outside": "{name!r} 会超出上传目录",
    "upload.not_uploaded": "{path}：这里只能注册上传目录中的文件",
    "upload.not_yours": "{path}：不是你上传的文件（成员只能注册自己上传的文件）",
    "upload.unreadable": "无法读取 {name} 的列：{error}",
    # chat templates
    "template.refused": "模型的对话模板拒绝了这段对话：{message}",
    "template.unknown": "未知模板 {name!r}：请从 {names} 中选择",
    "template.role": "角色为 {role!r} 的轮次：模板只渲染 user、assistant、function 和 observation 轮次",
    "template.tool_format": "未知的工具格式 {name!r}：请从 {names} 中选择",
    "template.no_tool_support": "这一行带有工具，但模型自带的对话模板不支持工具："
    "请选择能写出工具的命名模板（如 qwen、default）",
    "template.bad_tools": "tools 列不是函数描述的 JSON 列表",
    "template.bad_call": 'function_call 轮次不是 {{"name": ..., "arguments": {{...}}}} 形式的 JSON（或它们的列表）',
    "template.parallel_calls": "模板 {name} 无法在一轮中写出多个工具调用",
    "template.not_prefix_stable": "模型的对话模板会改写之前的轮次（不是前缀稳定的），无法逐轮遮盖提示："
    "请选择一个命名模板（例如 chatml）",
}
