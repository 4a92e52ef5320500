"""The catalog of model resolution's messages (``engine.models.resolve``): which source a model's figures came from
and why none had them. A stable key and an English template, made into ``engine.core.messages.Message`` by
``message``, so the page can show them in its language (``studio.i18n.models``). Light: stdlib only.
"""

from __future__ import annotations

from typing import Any

from engine.core.messages import Message, make

MESSAGES: dict[str, str] = {
    # where the figures came from
    "models.source_local": "model figures from the local folder {where}",
    "models.source_cache": "model figures from the Hugging Face cache ({where})",
    "models.source_hub": "model figures from the hub's config.json ({where})",
    "models.source_table": "model figures from Studio's table of published configs ({where}); the weights are not "
    "downloaded yet",
    "models.source_none": "no figures for {name}",
    # why none had them
    "models.no_folder": "no model folder at {path}",
    "models.no_config": "{path} has no config.json: not a transformers model folder",
    "models.bad_id": "{name!r} is neither a local folder nor a hub id (org/name)",
    "models.gated": "{name} is gated on the hub: accept its licence there and set HF_TOKEN to a token with access",
    "models.not_on_hub": "{name} was not found on the hub ({url}): check the spelling, or give a local folder",
    "models.no_revision": "{name} has no revision {revision!r} on the hub",
    "models.no_config_on_hub": "{name} has no config.json on the hub: not a transformers model",
    "models.unreachable": "{name} is not in the Hugging Face cache and the hub ({url}) cannot be reached",
    "models.hub_error": "the hub answered an error for {name}: {error}",
    "models.not_in_workspace": "{name} is not in the workspace ({path} is missing): import or download it first "
    "(`studio demo` imports SmolLM2-135M-Instruct, `studio import-gguf FILE --name NAME` a GGUF of yours)",
    "models.offline_unknown": "{name} is not a local folder, not in the Hugging Face cache and not in Studio's table "
    "of known models, and the hub is not asked (HF_HUB_OFFLINE is set): download it or give a local folder",
    # the hub does not answer (engine.models.reach), and a hub model a run could not download (the check before launch)
    "models.hub_down": "the hub ({url}) cannot be reached ({why}; asked once, {timeout} s): working offline, from the "
    "Hugging Face cache, then Studio's table of published configs",
    "models.not_downloadable_offline": "{name} is not in the Hugging Face cache and cannot be downloaded while "
    "HF_HUB_OFFLINE is set: unset it, run `studio download {name}` where the hub can be reached, or give a local "
    "folder",
    "models.not_downloadable_unreachable": "{name} is not in the Hugging Face cache and cannot be downloaded: the hub "
    "({url}) cannot be reached; run `studio download {name}` where it can, or give a local folder",
    # downloads (engine.models.download): progress, the end, and why one could not finish
    "models.download_listing": "asking the hub ({url}) for the files of {name}",
    # which hub this process talks to (engine.models.reach.where): the Models tab and `studio download` say it
    "models.hub_where": "hub: {url}",
    "models.hub_where_mirror": "hub: {url} (HF_ENDPOINT: a mirror or a private hub)",
    "models.hub_where_offline": "hub: {url}, not asked (HF_HUB_OFFLINE is set): only the Hugging Face cache",
    # ModelScope models (engine.models.ms_models, model.hub: modelscope, LF's use_modelscope_hub)
    "models.source_ms_cache": "model figures from ModelScope's cache ({where})",
    "models.source_ms_hub": "model figures from ModelScope's config.json ({where})",
    "models.ms_where": "ModelScope: {url} (cache {cache})",
    "models.ms_not_installed": "{name} is a ModelScope model: install the modelscope package (pip install "
    "modelscope) to download it, or give a local folder",
    "models.ms_unreachable": "{name} is not in ModelScope's cache and ModelScope ({url}) cannot be reached ({why}): "
    "check the network or MODELSCOPE_ENDPOINT, or give a local folder",
    "models.ms_not_found": "{name} was not found on ModelScope ({url}): check the spelling, or give a local folder",
    "models.ms_error": "ModelScope ({url}) answered an error for {name}: {error}",
    "models.ms_no_config": "{name} has no config.json on ModelScope ({url}): not a transformers model",
    "models.ms_download_listing": "asking ModelScope ({url}) for the files of {name}",
    "models.ms_download_nothing": "{name} is already complete in ModelScope's cache ({where})",
    "models.download_progress": "downloading {name}: {done} of {total} ({percent}%), {speed}/s, {eta} left",
    "models.download_verifying": "checking {file} of {name}",
    "models.download_finished": "{name} downloaded: {files} files, {size}, in {where}",
    "models.download_nothing": "{name} is already complete in the Hugging Face cache ({where})",
    "models.download_gated_token": "the token in HF_TOKEN has no access to {name}, which is gated on the hub: "
    "accept its licence there with that account",
    "models.download_unreachable": "the hub ({url}) cannot be reached to download {name}: check the network or "
    "HF_ENDPOINT",
    "models.download_offline": "{name} cannot be downloaded while HF_HUB_OFFLINE is set: unset it, or copy the "
    "model into the Hugging Face cache",
    "models.download_offline_dataset": "the dataset {name} cannot be downloaded while HF_HUB_OFFLINE is set: "
    "unset it, or copy the dataset into the Hugging Face cache",
    "models.download_no_space": "not enough disk space for {name}: {need} to download, {free} free in {path}",
    "models.download_checksum": "{file} of {name} does not match the hub's checksum ({algo} {got}, expected "
    "{expected}): the download was thrown away, start it again",
    "models.download_stalled": "the hub stopped sending {file} of {name} (nothing for {timeout} s, after retries): "
    "start the download again to resume where it stopped",
    "models.download_incomplete": "{file} of {name} arrived incomplete: {error}",
    "models.download_cancelled": "the download of {name} was cancelled; {done} kept for a resume",
    "models.download_not_download": "run {id} is not a download",
    # the Train tab's model picker (engine.models.search): where the rows came from, in one line
    "models.search_type": "type part of a model id (e.g. qwen 7b) to search the hub, or Studio's table offline",
    "models.search_hub": "{count} models on the hub ({url}) match {query!r}; nothing is downloaded until a run starts",
    "models.search_table": "{count} models of Studio's table of published configs match {query!r}: {why}; licence "
    "and gating as the models' cards stated them when the table was written, the size is the bf16 weights'",
    "models.search_why_offline": "the hub is not asked (HF_HUB_OFFLINE is set)",
    "models.search_why_unreachable": "the hub ({url}) cannot be reached ({why})",
    "models.search_why_error": "the hub ({url}) answered an error to the search ({error})",
    "models.search_why_slow": "the hub ({url}) did not answer the search within {timeout} s",
    "models.local_in_use": "{path} is the model of run {run}, which is {status}: stop it first",
    "models.local_unknown": "no local model {name}",
    "models.local_read_only": "{name} is shared with the team read-only: only the operator or an admin deletes it",
    "models.local_deleted": "{name} deleted: {size} freed ({path})",
    # GGUF files as base models (engine.models.gguf_file, engine.trainer.gguf_import, `studio import-gguf`)
    "models.gguf_no_file": "no GGUF file at {path}",
    "models.gguf_unreadable": "{path} cannot be read as a GGUF file: {error}",
    "models.gguf_not_gguf": "{path} is not a GGUF file (it does not begin with GGUF's magic bytes)",
    "models.gguf_architecture": "{path}: architecture {arch!r} cannot be imported; transformers' GGUF loader maps "
    "these causal language models: {known}",
    "models.gguf_quantization": "{path}: {n} tensors are of type {types}, which the gguf package cannot dequantize "
    "(e.g. {tensor}): nothing was imported",
    "models.expand_count": "--num-expand {n} must be at least 1 and divide the {layers} layers of {path}",
    "models.gguf_bad_name": "model name {name!r}: use letters, digits, '.', '_' and '-' (it becomes a folder in "
    "{root})",
    "models.gguf_exists": "{path} already exists: an import never overwrites a folder; choose another --name, or "
    "delete it first (`studio models delete models/{name}`)",
    "models.gguf_no_space": "not enough disk space to import: the float32 weights need {need}, {free} free in {path}",
    "models.gguf_reading": "dequantizing {file} ({quant}, {tensors} tensors, {arch}) with transformers' GGUF loader",
    "models.gguf_writing": "writing {out}: float32 safetensors, tokenizer, chat template, generation config",
    "models.gguf_verifying": "comparing the folder's logits with the GGUF read by transformers and by llama.cpp",
    "models.gguf_summary": "max logit difference {diff:.3g} {op} {tol:.3g} against the GGUF read by transformers' "
    "loader",
    "models.gguf_llama_cpp": "llama.cpp: max logit difference {diff:.3g} {op} {tol:.3g} (it multiplies with "
    "activations rounded to 8 bits), greedy text the same on {same}/{n} prompts",
    "models.gguf_no_llama_cpp": "llama.cpp: not installed (llama-cpp-python), not compared",
    "models.gguf_verify_failed": "the imported weights do not match the GGUF ({summary}); nothing was written",
    "models.gguf_finished": "{file} ({quant}) imported as {out}: {summary}",
    "models.gguf_cancelled": "the import was cancelled; nothing was written",
    "models.gguf_not_import": "run {id} is not a GGUF import",
    "models.gguf_demo_missing": "the demo's real model is not here (`bash scripts/bootstrap.sh` fetches "
    "SmolLM2-135M-Instruct as a GGUF into .venv/share/studio): the tiny demo models are built without it",
    "models.gguf_demo_ready": "{out} already imported from {file} and verified",
    "models.gguf_demo_foreign": "{out} exists and is not the import of {file}: it is left as it is",
}


def message(key: str, /, **params: Any) -> Message:
    return make(MESSAGES, key, **params)
