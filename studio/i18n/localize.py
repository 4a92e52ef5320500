"""``localize``: any engine message in the page's language. A message keeps its catalog key
(``engine.core.messages.Message``); its Chinese template is looked up in the tables of this package, one module
per engine part (``spec``, ``lf``, ``models``, ``data``, ``plan``, ``machine``, ``runs``, ``export``; ``workspace`` for
``engine.core``), and pydantic's field errors by error type. Light: stdlib only.

The engine and the CLI keep English; a test checks that every catalog key has a Chinese template with the same
placeholders, and that every error the form can produce comes out in Chinese.
"""

from __future__ import annotations

import re
import string
from typing import Any

from studio.i18n.data import DATA_ZH
from studio.i18n.eval import EVAL_ZH
from studio.i18n.export import EXPORT_ZH
from studio.i18n.lf import LF_ZH
from studio.i18n.machine import DOCTOR_ZH
from studio.i18n.models import MODELS_ZH
from studio.i18n.plan import PLAN_ZH
from studio.i18n.runs import RUNS_ZH
from studio.i18n.spec import PYDANTIC_EN, PYDANTIC_ZH, RULES_ZH
from studio.i18n.watch import WATCH_ZH
from studio.i18n.workspace import WORKSPACE_ZH

CATALOG_ZH: dict[str, str] = {
    **RULES_ZH,
    **DATA_ZH,
    **PLAN_ZH,
    **DOCTOR_ZH,
    **RUNS_ZH,
    **WATCH_ZH,
    **EXPORT_ZH,
    **MODELS_ZH,
    **WORKSPACE_ZH,
    **LF_ZH,
    **EVAL_ZH,
}

_FALLBACK_ZH = "取值无效：{english}"  # a pydantic type this table does not know yet: Chinese head, English detail
_OR = re.compile(r" or (?=[^ ]+$)")


def placeholders(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def localize(msg: Any, lang: str) -> str:
    """``msg`` (an ``engine.core.messages.Message`` or any text) in ``lang``; text without a key stays as it is.
    pydantic's field errors are put in plain words on the English page too."""
    key = getattr(msg, "key", "")
    if lang != "zh" and not (key.startswith("pydantic.") and key[len("pydantic.") :] in PYDANTIC_EN):
        return str(msg)
    from studio.forms import number_text

    params = {
        k: localize(v, lang) if getattr(v, "key", "") else v for k, v in (getattr(msg, "params", {}) or {}).items()
    }
    if key.startswith("pydantic."):
        kind = key[len("pydantic.") :]
        if "expected" in params:  # "'sft', 'pt' or 'dpo'" -> "'sft'、'pt'、'dpo'"
            params["expected"] = _OR.sub(", ", str(params["expected"])).replace(", ", "、")
        for bound in ("ge", "gt", "le", "lt", "multiple_of"):
            if bound in params:
                params[bound] = number_text(params[bound])
        if lang != "zh":  # plain English; the expected choices as pydantic listed them
            return _format(PYDANTIC_EN[kind], {**params, "expected": (getattr(msg, "params", {}) or {}).get(
                "expected", params.get("expected"))}, msg)  # fmt: skip
        template = PYDANTIC_ZH.get(kind)
        if template is None:
            return _FALLBACK_ZH.format(english=str(msg))
        return _format(template, params, msg)
    template = CATALOG_ZH.get(key) or CATALOG_ZH.get(_renamed(key))
    return _format(template, params, msg) if template else str(msg)


# Catalog keys that moved with their module: events written before keep the old key (an alert's reason in a run's
# events.jsonl), and the page still shows them in its language.
RENAMED_PREFIXES = {"runs.health_": "watch.health_"}  # engine.runs.health became engine.watch.health (issue 48)


def _renamed(key: str) -> str:
    return next((new + key[len(old) :] for old, new in RENAMED_PREFIXES.items() if key.startswith(old)), key)


def localize_error(exc: BaseException, lang: str) -> str:
    """An exception's text in ``lang``: raised with a catalog message (``ValueError(message(...))``), translated."""
    from engine.core.messages import from_exception

    return localize(from_exception(exc), lang)


def _format(template: str, params: dict, msg: Any) -> str:
    try:
        return template.format(**params)
    except (KeyError, IndexError, ValueError):  # a message made with other params than its template names
        return _FALLBACK_ZH.format(english=str(msg))


def localize_problems(problems: list[tuple[str, Any]], lang: str) -> list[tuple[str, str]]:
    return [(path, localize(msg, lang)) for path, msg in problems]
