"""The catalog of the dataset registry's messages (``engine.data.dataset_registry``), the chat templates' refusals
(``engine.data.templates``) and the page's upload checks: a stable key and an English template, made into
``engine.core.messages.Message`` (English text that keeps its key and parameters) by ``message``.

Light: stdlib only. The English is what the CLI prints and the tests match; ``studio.i18n.data`` holds the Chinese,
keyed the same. A problem's place (file, line or row, column) is a message too, with the problem as a parameter.
"""

from __future__ import annotations

from typing import Any

from engine.core.messages import Message, make

MESSAGES: dict[str, str] = {
    # a problem in its place (DataProblem.located)
    "data.at": "{file}: {message}",
    "data.at_column": "{file}, column '{column}': {message}",
    "data.at_line": "{file}, line {row}: {message}",
    "data.at_line_column": "{file}, line {row}, column '{column}': {message}",
    "data.at_row": "{file}, row {row}: {message}",
    "data.at_row_column": "{file}, row {row}, column '{column}': {message}",
    "data.more_rows_one": "{message} (and 1 more row like it)",
    "data.more_rows": "{message} (and {more} more rows like it)",
    # the registry file and its entries
    "data.info_bad_json": "{path}: not valid JSON (line {line}, column {col}: {error})",
    "data.info_not_object": "{path}: expected a JSON object of dataset entries, got {type}",
    "data.no_registry": "dataset registry not found (no dataset_info.json)",
    "data.not_registered": "dataset '{name}' is not registered (known: {known})",
    "data.not_registered_none": "dataset '{name}' is not registered (known: none)",
    "data.entry_not_object": "entry '{name}' must be an object",
    "data.ms_not_installed": "dataset '{name}' is on ModelScope ({hub}): install the modelscope package "
    "(pip install modelscope) to read it, or give the entry an hf_hub_url or a file_name",
    "data.ms_unavailable": "dataset '{name}': ModelScope ({url}) cannot give {hub}: {error}",
    "data.ms_empty": "dataset '{name}': {hub} has no files on ModelScope ({url})",
    "data.entry_num_samples": "entry '{name}': num_samples {value!r} is not a whole number of rows above 0",
    "data.entry_option": "entry '{name}': {key} {value!r} is not a non-empty text",
    "data.entry_files": "dataset '{name}': {problem}",
    "data.option_needs_folder": "entry '{name}': {key} applies to a folder or a hub dataset, and file_name is one "
    "file",
    "data.folder_missing": "no folder '{folder}' in {path}",
    "data.split_missing": "no split '{split}' (splits there: {have})",
    "data.subset_missing": "no subset '{subset}' (subsets there: {known})",
    "data.script_missing": "entry '{name}': script_url folder {path} not found",
    "data.script_unsupported": "entry '{name}' is a dataset loading script ({script}), which datasets {version} no "
    "longer runs: convert the data to JSON / Parquet files and set file_name",
    "data.hub_offline": "dataset '{name}' is on the hub ({hub}) and not in the Hugging Face cache, and the hub is "
    "offline (HF_HUB_OFFLINE): download it first (studio download {hub} --dataset) or unset HF_HUB_OFFLINE",
    "data.hub_not_found": "dataset '{name}': {hub} is not a dataset on the hub ({url})",
    "data.hub_gated": "dataset '{name}': {hub} is gated on the hub: accept its terms there and set HF_TOKEN",
    "data.hub_no_revision": "dataset '{name}': {hub} has no revision '{revision}' on the hub",
    "data.hub_unreachable": "dataset '{name}': the hub ({url}) cannot be reached to get {hub}: {error}",
    "data.val_size_no_train": "data.val_size {val_size} holds out {held} of the {total} samples of {names}: no "
    "training rows are left; lower data.val_size",
    "data.eval_empty": "the evaluation datasets {names} hold no sample with a trainable answer within data.cutoff_len "
    "({cutoff})",
    "data.hub_later": "on the hub ({hub}), not downloaded yet: a run downloads it and checks its rows before training",
    "data.entry_no_file": "entry '{name}' has no file_name",
    "data.entry_formatting": "entry '{name}': formatting {formatting!r} is not alpaca or sharegpt",
    "data.entry_columns": "entry '{name}': unknown column keys {bad} (known: {known})",
    # the dataset against the stage
    "data.pairs_needed": "stage {stage} needs preference pairs, but '{name}' has no chosen/rejected columns: set "
    '"ranking": true with columns chosen and rejected, or use stage sft',
    "data.pairs_need_pair_stage": "'{name}' holds preference pairs, which stage {stage} cannot train on: use stage "
    "dpo or rm",
    "data.kto_needs_tag": "stage kto needs answers tagged desirable or not, but '{name}' maps no kto_tag column: set "
    "columns.kto_tag to the column holding true/false",
    "data.kto_not_pairs": "'{name}' holds preference pairs (ranking), not answers tagged for kto: use stage dpo or rm",
    "data.tags_need_kto": "'{name}' holds kto data (column '{column}' tags each answer desirable or not), which stage "
    "{stage} would train as if every answer were good: use stage kto",
    "data.kto_no_tags": "no row of '{name}' has a kto tag (column '{column}' true or false): nothing to train on",
    "data.kto_ok": "{name}: OK ({rows} rows, stage kto: {desirable} desirable, {undesirable} undesirable, "
    "{untagged} without a tag, left out)",
    "data.text_needs_pt": "'{name}' is plain text with no response column: use stage pt, or map columns.response",
    # reading the file
    "data.file_not_found": "file not found (file_name of '{name}' in {info})",
    "data.cannot_read": "cannot read: {error}",
    "data.no_rows": "no rows",
    "data.bad_json": "not valid JSON at line {line}, column {col}: {error}",
    "data.not_list": "expected a JSON list of records",
    "data.bad_csv": "not valid CSV (line {line}): {error}",
    "data.bad_parquet": "not a readable Parquet file (truncated or not Parquet): {error}",
    "data.multimodal": "dataset '{name}' has a {kind} column ('{column}'): video and audio data is not supported "
    "(images are: an 'images' column); use a dataset without the {kind} column",
    "data.images_not_list": "the images column must hold a path or a list of paths (relative to the dataset folder) "
    "or URLs, not {type}",
    "data.image_count": "{placeholders} <image> placeholder(s) in the messages but {images} image(s) in the row: "
    "each image needs its own <image> placeholder, in order",
    "data.image_missing": "image '{image}' does not exist",
    "data.image_outside": "image '{image}' is outside the dataset folder {folder} and the workspace's uploads",
    "data.image_not_file": "image '{image}' is not a regular file",
    "data.image_unreadable": "image '{image}' cannot be read as an image ({error})",
    "data.image_too_large": "image '{image}' is {width}x{height} ({pixels} pixels), over {factor}x the processor's "
    "maximum of {max_pixels} pixels (image_max_pixels): shrink it before training",
    "data.image_more": "and {more} more image problem(s) like these",
    "data.images_text_model": "dataset(s) {names} hold images but model '{model}' has no vision tower: choose a "
    "vision-language model (its config.json has a vision_config)",
    "data.images_stage": "dataset(s) {names} hold images: image data trains with stage sft or dpo (got '{stage}')",
    "data.images_loss": "dataset(s) {names} hold images: dpo on images trains with TRL's DPOTrainer losses, not "
    "'{loss}' (a text-only trainer): choose sigmoid, ipo, ...",
    "data.bad_type": "unsupported file type '{suffix}' (use .json, .jsonl, .csv, .parquet, .txt, or a folder saved "
    "with datasets' save_to_disk)",
    "data.not_utf8_column": "not UTF-8 text (byte 0x{byte:02x} at column {col}): save the file as UTF-8",
    "data.not_utf8_line": "not UTF-8 text (byte 0x{byte:02x} on line {line}): save the file as UTF-8",
    "data.bad_json_line": "malformed JSON line (column {col}: {error})",
    "data.not_utf8_near": "not UTF-8 text (near byte {offset}): save the file as UTF-8",
    "data.record_too_long": "longer than {limit} MiB, the most the page reads of one row: not shown or checked "
    "here (a run reads it whole)",
    # one row
    "data.kto_tag_not_bool": "the kto tag is {value}, not true or false (a JSON boolean; leave it out or null for "
    "no tag)",
    "data.row_not_object": "expected an object with columns, got {type}",
    "data.missing_column": "missing column '{column}' ({key}); the row has: {have}. Choose the column for {key} "
    "in the Datasets tab's column mapping (or the format) and register it again",
    "data.missing_column_empty": "missing column '{column}' ({key}); the row has no columns. Choose the column "
    "for {key} in the Datasets tab's column mapping (or the format) and register it again",
    # the Datasets tab refuses a file none of whose rows can be trained on as mapped
    "data.untrainable": "none of the {rows} rows read from {file} can be trained on as {formatting} with this "
    "column mapping; its columns: {columns}",
    "data.empty_text": "empty text",
    "data.bad_history": "history must be a list of [prompt, response] pairs",
    "data.empty_answer": "empty {key} answer",
    "data.pair_end_user": "a preference row's conversation must end with a user turn",
    "data.end_assistant": "the conversation must end with an assistant turn",
    "data.empty_response": "empty response (turn {turn})",
    "data.turns_not_list": "expected a list of turns, got {type}",
    "data.turn_keys": "turn {turn} needs '{role_tag}' and '{content_tag}' keys (tags in dataset_info.json)",
    "data.turn_role": "turn {turn} has role '{tag}'; known roles: {known}",
    "data.system_first": "turn {turn}: a system turn may only come first",
    "data.turn_order": "turn {turn} is '{tag}' but '{want}' was expected: turns must alternate {user}/{assistant}, "
    "starting with {user}",
    # registering a file
    "data.bad_name": "dataset name {name!r}: use letters, digits, _ - .",
    "data.name_too_long": "dataset name: {length} characters, at most {limit}",
    "data.bad_formatting": "formatting {formatting!r}: use alpaca or sharegpt",
    "data.unknown_columns": "unknown column keys {bad} (known: {known})",
    "data.file_outside": "file_name {file!r} leaves the dataset folder {folder}",
    "data.entry_outside": "entry '{name}': {key} {value!r} leads outside the dataset folder {folder}; only files "
    "inside it are read",
    "data.file_outside_entry": "entry '{name}': {path} leads outside {folder} (a link?); only files inside it are "
    "read",
    "data.not_regular": "entry '{name}': {path} is {kind}, not a regular file; it is not read",
    "data.file_unreadable": "entry '{name}': {path} cannot be read ({error})",
    "data.file_too_big": "entry '{name}': {path} brings the dataset to {size} MiB, over the {limit} MiB a dataset "
    "may hold (STUDIO_MAX_DATASET_MB)",
    "data.max_dataset_mb": "STUDIO_MAX_DATASET_MB must be a positive number of MiB (got {value!r})",
    "data.file_missing": "file not found: {path}",
    "data.already_registered": "dataset '{name}' is already registered in {path}",
    "data.read_only": "dataset '{name}' is {owner}'s, shared with the team read-only: register your file under "
    "another name",
    # feedback from the Chat tab (engine.data.feedback)
    "data.feedback_no_answer": "there is no answer to judge yet: send a prompt and let the model answer first",
    "data.feedback_images": "this conversation holds an image: feedback is kept for text conversations only",
    "data.feedback_empty_answer": "the answer is empty: there is nothing to mark or to put a better answer beside",
    "data.feedback_empty_edit": "write the better answer first",
    "data.feedback_same_edit": "the better answer is the same as the model's: change it first",
    # uploads through the page (studio.tabs.data)
    "upload.bad_type": "{name!r}: upload a {types} file",
    "upload.no_name": "{name!r}: the file name has no usable characters",
    "upload.too_big": "{name}: {mib} MiB is over the {limit} MiB upload limit",
    "upload.outside": "{name!r} would leave the uploads folder",
    "upload.not_uploaded": "{path}: only files in the uploads folder can be registered here",
    "upload.not_yours": "{path}: not an upload of yours (a member registers only their own uploads)",
    "upload.unreadable": "cannot read the columns of {name}: {error}",
    # chat templates (engine.data.templates, template_table, template_tools)
    "template.refused": "the model's chat template refused this conversation: {message}",
    "template.unknown": "unknown template {name!r}: choose one of {names}",
    "template.role": "a turn with role {role!r}: a template renders user, assistant, function and observation turns",
    "template.tool_format": "unknown tool format {name!r}: choose one of {names}",
    "template.no_tool_support": "this row has tools, but the model's chat template has no tool support: choose a "
    "named template that writes tools (e.g. qwen, default)",
    "template.bad_tools": "the tools column is not a JSON list of function schemas",
    "template.bad_call": 'a function_call turn is not JSON of the form {{"name": ..., "arguments": {{...}}}} '
    "(or a list of them)",
    "template.parallel_calls": "template {name} cannot write several tool calls in one turn",
    "template.not_prefix_stable": "the model's chat template rewrites earlier turns (it is not prefix-stable), so "
    "prompts cannot be masked turn by turn: choose a named template (e.g. chatml)",
}


def message(key: str, /, **params: Any) -> Message:
    return make(MESSAGES, key, **params)
