"""The dashboard's GRPO panel: each reward function's mean over steps with the weighted total, their spread (std)
within the groups, the KL to the reference, the completions' mean length and clipped share, and a table of the newest
sample completions with their rewards.

Light: pandas and the stdlib (never torch). ``studio.monitor.read_new`` hands it the run's ``log`` events that carry
TRL's GRPO figures (``rewards/<name>/mean`` and ``/std``, ``reward``, ``reward_std``, ``kl``, ``entropy``,
``completions/mean_length``, ``completions/clipped_ratio``) and its ``completions`` events; ``studio.tabs.dashboard``
draws the frames. Everything is kept in the view, so a reload rebuilds it from the run's folder.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from studio.i18n.page import t

MAX_SAMPLE_CHARS = 400  # of a prompt or completion in the table (the event keeps more)


def is_grpo(metrics: dict) -> bool:
    return isinstance(metrics, dict) and any(str(k).startswith("rewards/") and k.endswith("/mean") for k in metrics)


def add_log(view: dict, step: Any, metrics: dict) -> None:
    """One logged step's GRPO figures into the view (a list of (step, {figure: value}))."""
    kept = {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float)) and math.isfinite(v)}
    view.setdefault("grpo", []).append((step, kept))


def add_samples(view: dict, step: Any, payload: dict) -> None:
    view["grpo_samples"] = (step, list(payload.get("samples") or []))


def shown(view: dict) -> bool:
    return bool(view.get("grpo"))


def _frame(view: dict, picks: list[tuple[str, str]]) -> pd.DataFrame:
    rows = [
        {"x": float(step), "value": figures[key], "curve": label}
        for step, figures in view.get("grpo") or []
        for key, label in picks
        if key in figures and step is not None
    ]
    return pd.DataFrame(rows, columns=["x", "value", "curve"])


def reward_names(view: dict) -> list[str]:
    names: list[str] = []
    for _, figures in view.get("grpo") or []:
        for key in figures:
            if key.startswith("rewards/") and key.endswith("/mean") and key[8:-5] not in names:
                names.append(key[8:-5])
    return names


def rewards_frame(view: dict, lang: str = "en") -> pd.DataFrame:
    """Each reward function's mean per step, and the weighted total (TRL's ``reward``)."""
    picks = [(f"rewards/{n}/mean", n) for n in reward_names(view)] + [("reward", t("grpo_total", lang))]
    return _frame(view, picks)


def std_frame(view: dict, lang: str = "en") -> pd.DataFrame:
    """Each reward function's standard deviation per step (TRL's ``rewards/<name>/std``) and the total's
    (``reward_std``): a reward that scores every completion of a group alike gives GRPO nothing to learn from."""
    picks = [(f"rewards/{n}/std", n) for n in reward_names(view)] + [("reward_std", t("grpo_total", lang))]
    return _frame(view, picks)


def kl_frame(view: dict, lang: str = "en") -> pd.DataFrame:
    return _frame(view, [("kl", "KL"), ("entropy", t("grpo_entropy", lang))])


def length_frame(view: dict, lang: str = "en") -> pd.DataFrame:
    """The completions' mean length (tokens) and the share clipped at max_completion_length, in percent."""
    frame = _frame(
        view, [("completions/mean_length", t("grpo_mean_length", lang)), ("completions/clipped_ratio", "clip")]
    )
    clipped = frame["curve"] == "clip"
    frame.loc[clipped, "value"] = frame.loc[clipped, "value"] * 100
    frame.loc[clipped, "curve"] = t("grpo_clipped", lang)
    return frame


def _short(text: Any) -> str:
    text = str(text or "")
    return text if len(text) <= MAX_SAMPLE_CHARS else text[: MAX_SAMPLE_CHARS - 1] + "…"


def samples_frame(view: dict, lang: str = "en") -> pd.DataFrame:
    """The newest logged step's sample completions: step, prompt, completion, each reward, the total."""
    step, samples = view.get("grpo_samples") or (None, [])
    names: list[str] = []
    for s in samples:
        names += [n for n in (s.get("rewards") or {}) if n not in names]
    cols = [t("ax_step", lang), t("grpo_prompt", lang), t("grpo_completion", lang), *names, t("grpo_total", lang)]
    rows = []
    for s in samples:
        rewards = s.get("rewards") or {}
        scores = [rewards.get(n) for n in names]
        rows.append([step, _short(s.get("prompt")), _short(s.get("completion")), *scores, s.get("total")])
    return pd.DataFrame(rows, columns=cols)
