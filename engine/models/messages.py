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
    "models.local_deleted": "{name} deleted: {size} freed ({path})",
}


def message(key: str, /, **params: Any) -> Message:
    return make(MESSAGES, key, **params)
