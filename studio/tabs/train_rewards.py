"""The Train tab's reward functions (stage grpo): the picker of the built-in kinds beside the rewards field, and the
dry run: each reward function of the form runs on N real rows of the dataset before launch, with the dataset's own
answers or the base model's completions, and a table shows every function's score per row, with each function's mean
or the error that names the function, row and value.

The picker and the field are one value: a kind picked adds its line to the field (``{kind: math, weight: 1.0}``, its
other settings at their defaults, edited there), a kind unpicked drops its lines, and the picker shows the kinds the
field names. A stage switch changes neither (the form keeps every stage's group).

Light: pandas and the stdlib. The functions (a user's file among them) run in a subprocess started by
``engine.jobs.rewards_try.try_rewards``, never in the page's process; ``studio rewards try`` is the same from the
shell. The page names reward files only in the workspace's reward folder (``engine.core.page_trust``); when the
operator allows it (``STUDIO_PAGE_CODE=on``), the accordion has an upload that puts a file there.
"""

from __future__ import annotations

import html
from typing import Any

import pandas as pd
import yaml

from engine.core import page_trust, workspace
from engine.jobs import rewards_try
from engine.spec.grpo_group import REWARD_KINDS, RewardSpec
from engine.spec.schema import safe_load_yaml
from studio import forms
from studio.form_validation import check, colon
from studio.i18n.localize import localize, localize_problems
from studio.i18n.page import t

MAX_ROWS = 64
COMPLETION_CHARS = 200


REWARDS = "method.grpo.rewards"  # the form's field the picker writes


def build_picker(texts: Any, lang: str, rewards_text: str) -> Any:
    """The picker of the built-in reward kinds, showing the kinds the rewards field names now (laid out in the form's
    GRPO section, below the field)."""
    import gradio as gr

    return texts.add(
        gr.Dropdown(
            choices=list(REWARD_KINDS),
            value=kinds_in(rewards_text),
            multiselect=True,
            label=t("grpo_reward_pick", lang),
            elem_id="grpo-reward-pick",
        ),
        "grpo_reward_pick",
    )


def _kind(line: str) -> str | None:
    """The kind a line of the rewards field names, or None (not a mapping, not YAML, no known kind)."""
    try:
        item = safe_load_yaml(line)
    except (yaml.YAMLError, ValueError):
        return None
    kind = item.get("kind") if isinstance(item, dict) else None
    return kind if kind in REWARD_KINDS else None


def kinds_in(text: str | None) -> list[str]:
    """The kinds the rewards field names, in their order, once each."""
    found: list[str] = []
    for line in (text or "").splitlines():
        kind = _kind(line) if line.strip() else None
        if kind and kind not in found:
            found.append(kind)
    return found


def with_kinds(text: str | None, picked: list[str] | None) -> str:
    """The rewards field once the picker shows ``picked``: the lines of a kind no longer picked dropped, a line
    ``{kind: K, weight: 1.0}`` (RewardSpec's defaults) added for a kind picked that has none, every other line kept
    as written (a line the spec cannot read stays, for the spec to name)."""
    wanted = [k for k in picked or [] if k in REWARD_KINDS]
    kept, present = [], set()
    for line in (text or "").splitlines():
        if not line.strip():
            continue
        kind = _kind(line)
        if kind is not None and kind not in wanted:
            continue
        present.add(kind)
        kept.append(line)
    weight = RewardSpec.model_fields["weight"].default
    added = [{"kind": k, "weight": weight} for k in wanted if k not in present]
    return "\n".join([*kept, forms.to_widget_value(forms.BY_PATH[REWARDS], added)] if added else kept)


def wire_picker(picker: Any, rewards_box: Any) -> None:
    """A person's pick rewrites the field (``input``: the picker's own change, set from the field, writes nothing);
    the field's every change (typed, a preset, an LF import) sets the picker's kinds."""
    import gradio as gr

    picker.input(with_kinds, [rewards_box, picker], [rewards_box], queue=False, show_progress="hidden")
    rewards_box.change(
        lambda text: gr.update(value=kinds_in(text)), [rewards_box], [picker], queue=False, show_progress="hidden"
    )


def build(texts: Any, lang: str) -> dict:
    """The accordion's widgets: rows, source, the button, the summary and the table."""
    import gradio as gr

    with gr.Accordion(t("rt_title", lang), open=False, elem_id="rewards-try") as acc:
        texts.add(acc, "rt_title")
        with gr.Row():
            rows = texts.add(
                gr.Number(value=8, label=t("rt_rows", lang), minimum=1, maximum=MAX_ROWS, step=1, elem_id="rt-rows"),
                "rt_rows",
            )
            source = texts.add(
                gr.Radio(
                    choices=source_choices(lang),
                    value="answers",
                    label=t("rt_source", lang),
                    elem_id="rt-source",
                ),
                "rt_source",
            )
        button = texts.add(gr.Button(t("rt_run", lang), size="sm", elem_id="rt-run"), "rt_run", "value")
        summary = gr.Markdown(elem_id="rt-summary")
        table = gr.Dataframe(  # its real header while empty (issue 45 item 20), one column per function after a try
            headers=[t("rt_dataset", lang), t("rt_row", lang), t("grpo_completion", lang)],
            interactive=False,
            wrap=True,
            elem_id="rt-table",
        )
        upload = texts.add(
            gr.File(
                label=t("rt_upload", lang),
                file_types=[".py"],
                visible=page_trust.page_code_on(),
                elem_id="rt-upload",
            ),
            "rt_upload",
        )
        uploaded = gr.Markdown(elem_id="rt-uploaded")
    return {
        "rows": rows,
        "source": source,
        "button": button,
        "summary": summary,
        "table": table,
        "upload": upload,
        "uploaded": uploaded,
    }


def upload_reward(file: Any, lang: str = "en") -> str:
    """Put an uploaded .py file into the reward folder (``engine.core.page_trust.save_reward``: only when the
    operator allows it) and say how a reward names it; or why not."""
    if not file:
        return ""
    src = getattr(file, "name", None) or str(file)
    try:
        saved = page_trust.save_reward(src, getattr(file, "orig_name", None) or src)
    except page_trust.PageTrustError as exc:
        return "❌ " + localize(exc.args[0], lang)
    rel = saved.relative_to(workspace.home())
    return "✅ " + t("rt_uploaded", lang, path=str(rel))


def source_choices(lang: str) -> list[tuple[str, str]]:
    return [(t("rt_answers", lang), "answers"), (t("rt_model", lang), "model")]


def try_form(values: dict[str, Any], rows: Any, source: str, lang: str = "en") -> tuple[str, pd.DataFrame | None]:
    """(summary, table) of the dry run of the form's spec; the summary alone when the form is not a grpo spec."""
    spec, errors, _ = check(values)
    if spec is None:
        return "\n".join(f"- {p}{colon(lang)}{m}" for p, m in localize_problems(errors, lang)), None
    if spec.method.stage != "grpo":
        return t("rt_not_grpo", lang, stage=spec.method.stage), None
    n = max(1, min(MAX_ROWS, int(rows or 8)))
    return render(rewards_try.try_rewards(spec, n, source or "answers"), lang)


def render(result: dict, lang: str = "en") -> tuple[str, pd.DataFrame | None]:
    """The subprocess's result as the summary (each function's mean over its scored rows, or its error) and a
    table: dataset, row, completion, one column per function."""
    if "rows" not in result:
        return "❌ " + html.escape(str(result.get("error") or "?"), quote=False), None
    rewards = result["rewards"]
    names = [r["name"] for r in rewards]
    cols = [t("rt_dataset", lang), t("rt_row", lang), t("grpo_completion", lang), *names]
    data = []
    for i, row in enumerate(result["rows"]):
        text = " ".join(str(row.get("completion") or "").split())
        text = text if len(text) <= COMPLETION_CHARS else text[: COMPLETION_CHARS - 1] + "…"
        scores = [None if r["scores"] is None else r["scores"][i] for r in rewards]
        data.append([row["dataset"], row["row"], text, *scores])
    lines = []
    for r in rewards:
        if r["error"]:
            lines.append(f"- ❌ **{r['name']}**{colon(lang)}{html.escape(r['error'], quote=False)}")
            continue
        scored = [v for v in r["scores"] or [] if v is not None]
        mean = f"{sum(scored) / len(scored):.4g}" if scored else "–"
        lines.append(
            f"- ✅ **{r['name']}**{colon(lang)}" + t("rt_mean", lang, mean=mean, n=len(scored), w=f"{r['weight']:g}")
        )
    if result.get("error"):
        lines.append("- ❌ " + html.escape(str(result["error"]), quote=False))
    return "\n".join(lines), pd.DataFrame(data, columns=cols)


def wire(widgets: dict, fields: list, ctx: Any, to_values) -> None:
    """The button runs the dry run of the form as it is now; the source's choices follow the page's language."""
    import gradio as gr

    n = len(fields)
    lang_state = ctx.lang
    ctx.on_lang.append((lambda lang: gr.update(choices=source_choices(lang)), [lang_state], [widgets["source"]]))

    def run(*args):
        summary, frame = try_form(to_values(args[:n]), args[n], args[n + 1], args[n + 2])
        return summary, frame

    widgets["upload"].upload(upload_reward, [widgets["upload"], lang_state], [widgets["uploaded"]])
    widgets["button"].click(
        run,
        [*fields, widgets["rows"], widgets["source"], lang_state],
        [widgets["summary"], widgets["table"]],
    )
