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
}


def message(key: str, /, **params: Any) -> Message:
    return make(MESSAGES, key, **params)
