"""The Train tab's plan panel, memory part: whether the run fits this machine's GPUs (or a GPU size typed in), a bar
per GPU, the breakdown by component, what the plan assumed; and "fit to memory", which changes the form until it
fits. Numbers from ``engine.plan.planner`` / ``engine.plan.fit``; the time and cost part is
``studio.tabs.train_estimate``.

Light: html, engine.plan, engine.machine.hardware, engine.spec.schema, studio.forms / form_check (never torch).
"""

from __future__ import annotations

import html
from typing import Any

from engine.machine import hardware
from engine.plan import planner
from engine.plan.fit import fit
from engine.spec import schema as spec_mod
from studio import forms
from studio.form_validation import check, colon
from studio.i18n.localize import localize, localize_error, localize_problems
from studio.i18n.page import t
from studio.tabs import train_estimate


def plan_html(
    values: dict[str, Any], gpu_mem: float | None, lang: str = "en", gpu: str | None = None, price: float | None = None
) -> str:
    """The memory plan, then the time and cost estimate (studio.tabs.train_estimate) for ``gpu`` at ``price``."""
    spec, errors, _ = check(values)
    head = ""
    if spec is None:
        spec = _plannable(values, errors)
        if spec is None:
            return f"<p>{html.escape(t('spec_bad', lang))}</p>"
        head = "".join(f"<p>⚠ {html.escape(msg)}</p>" for _, msg in localize_problems(errors, lang))
    hw = _hardware()
    try:  # the detected GPUs decide auto precision as they do for the trainer
        plan = planner.plan(spec, gpu_mem_gib=gpu_mem or None, hardware=hw)
    except Exception as exc:
        return f"<p>❌ {html.escape(localize_error(exc, lang))}</p>"
    d = plan.to_dict() if hasattr(plan, "to_dict") else dict(plan)
    memory = render_plan(d, lang, assumptions(spec, d, gpu_mem, lang, bool(hw and hw.gpus)))
    return head + memory + train_estimate.estimate_html(spec, d, gpu, price, hw, lang)


# the one refusal that still has a plan: a hub model whose figures are known (the cache's config, Studio's table) but
# whose weights this run could not get now (offline, the hub unreachable, gated): Start refuses it, the plan panel
# shows what it would need (the model picker's rows plan before anything is downloaded)
UNDOWNLOADABLE = ("model_not_downloadable",)


def _plannable(values: dict[str, Any], errors: list) -> spec_mod.RunSpec | None:
    """The form's spec when its only problems are that its hub model cannot be downloaded here, else None."""
    if not errors or any(getattr(msg, "key", "") not in UNDOWNLOADABLE for _, msg in errors):
        return None
    try:
        return spec_mod.parse_spec(forms.values_to_dict(values))
    except spec_mod.SpecError:
        return None


def _hardware() -> Any:
    try:
        return hardware.detect()
    except Exception:  # noqa: BLE001 - detection must never break the page
        return None


def assumptions(
    spec: spec_mod.RunSpec, d: dict, gpu_mem: float | None, lang: str = "en", detected: bool = False
) -> str:
    """What the plan assumed, in words: the precision (and why, when the spec leaves it to auto), the batch, the
    sequence length and the processes. A GPU size typed above changes auto's precision, so the page says so."""
    details = d.get("details") or {}
    precision = str(details.get("precision") or spec.train.precision)
    if spec.train.precision != "auto":
        why = t("prec_set", lang)
    elif spec.launch.device == "cpu":
        why = t("prec_auto_cpu", lang)
    elif detected:
        why = t("prec_auto_detected", lang)
    elif gpu_mem:
        why = t("prec_auto_typed", lang)
    else:
        why = t("prec_auto_none", lang)
    return t(
        "plan_assumes",
        lang,
        precision=precision,
        why=why,
        batch=details.get("batch", spec.train.per_device_batch_size),
        seq=details.get("seq_len", spec.data.cutoff_len),
        world=details.get("world_size", 1),
    )


def render_plan(d: dict, lang: str = "en", assumed: str = "") -> str:
    """The verdict, a bar per GPU of this machine (predicted peak vs its memory), the breakdown and what the plan
    assumed (``assumed``: precision, batch, sequence length, processes)."""
    fits = d.get("fits")
    details = d.get("details") or {}
    total, avail = d.get("total_gib") or 0.0, d.get("gpu_mem_gib")
    on_cpu = details.get("device") == "cpu" and avail is None  # a run on the CPU, no GPU size typed
    if on_cpu:  # a CPU run: the figure is host memory, compared with what this machine has free
        avail = (details.get("host_budget_bytes") or 0) / 2**30 or None
        fits = None if avail is None else total <= avail
        verdict = t("plan_cpu_fits" if fits else "plan_cpu_no_fit", lang) if fits is not None else t("plan_cpu", lang)
    else:
        verdict = (t("fits", lang) if fits else t("no_fit", lang)) if fits is not None else t("plan_no_gpu", lang)
    n_gpus = 1 if on_cpu else max(1, int(details.get("world_size") or 1))
    frac = min(1.0, total / avail) if avail else 0.0
    cls = "ok" if fits else "over" if fits is False else "unknown"
    label = f"{total:.2f} GiB" + (f" / {avail:.1f} GiB" if avail else "")
    rows = [
        f'<div class="plan-row"><span>{html.escape(t("plan_cpu_row", lang) if on_cpu else f"GPU {i}")}: '
        f'{html.escape(label)}</span><div class="plan-bar">'
        f'<div class="{cls}" style="width:{frac * 100:.0f}%"></div></div></div>'
        for i in range(min(n_gpus, 8))
    ]
    parts = [f'<div class="plan" id="plan-verdict"><b class="{cls}">{html.escape(verdict)}</b>', *rows]
    if assumed:
        parts.append(f'<small id="plan-assumes">{html.escape(assumed)}</small>')
    comps = d.get("components") or {}
    if comps:
        items = ("，" if lang == "zh" else ", ").join(
            f"{_plan_word('pc_', k, lang)} {v / 2**20:.0f} MiB"
            for k, v in comps.items()
            if isinstance(v, (int, float)) and v
        )
        peak = t("plan_peak", lang, phase=_plan_word("ph_", str(d.get("peak_phase", "")), lang))
        peak = f"（{peak}）" if lang == "zh" else f" ({peak})"
        parts.append(f"<small>{html.escape(items)}{html.escape(peak)}</small>")
    if d.get("checkpointing") is not None:
        head = t("plan_ckpt_on" if d["checkpointing"] else "plan_ckpt_off", lang)
        why = localize(d.get("checkpointing_reason") or "", lang)
        parts.append(f'<small id="plan-checkpointing">{html.escape(head)}{colon(lang)}{html.escape(why)}</small>')
    for note in d.get("notes") or []:
        parts.append(f"<small>• {html.escape(localize(note, lang))}</small>")
    return "<br>".join(parts) + "</div>"


def _plan_word(prefix: str, key: str, lang: str) -> str:
    """A plan component or phase name in the page's language (an unknown one as the planner wrote it)."""
    from studio.i18n.page import STRINGS

    return t(prefix + key, lang) if prefix + key in STRINGS else key.replace("_", " ")


def autofit(values: dict[str, Any], gpu_mem: float | None, lang: str = "en") -> tuple[dict[str, Any] | None, str]:
    spec, errors, _ = check(values)
    if spec is None:
        return None, "\n".join(f"{p}{colon(lang)}{m}" for p, m in localize_problems(errors, lang))
    if not gpu_mem:
        gpus = hardware.detect().gpus
        if not gpus:
            return None, t("fit_no_gpu", lang)
        gpu_mem = min(g.memory_total_mib for g in gpus) / 1024
    result = fit(spec, gpu_mem or 80.0)
    steps = [localize(s, lang) for s in getattr(result, "steps", []) or []]
    listed = "".join(f"\n{i}. {s}" for i, s in enumerate(steps, 1))
    gib = f"{gpu_mem:g}"
    if not getattr(result, "fits", False):  # the form stays as the user left it
        return None, "❌ " + t("fit_none", lang, gib=gib) + (f"\n\n{t('fit_tried', lang)}{listed}" if steps else "")
    if not steps:
        return None, "✅ " + t("fit_already", lang, gib=gib)
    return forms.spec_to_values(spec_mod.spec_to_dict(result.spec)), "✅ " + t("fit_found", lang, gib=gib) + listed


def fit_and_plan(
    values: dict[str, Any], gpu_mem: float | None, lang: str, gpu: str | None = None, price: float | None = None
) -> tuple[dict[str, Any] | None, str, str | None]:
    """Auto-fit, and the plan of the fitted form in the same answer: the panel shows the new verdict with the new
    values, not the old one until each changed field has asked for a plan of its own. None: nothing changed."""
    fitted, msg = autofit(values, gpu_mem, lang)
    return fitted, msg, (None if fitted is None else plan_html(fitted, gpu_mem, lang, gpu, price))
