"""The Train tab's LLaMA-Factory section: a LLaMA-Factory training YAML (+ its accelerate config), typed or uploaded,
read into the form; and the form saved as LLaMA-Factory YAML files to download. ``engine.lf.compat`` converts both
ways; this module lays out the section and words the results in the page's language.

Light: gradio (inside ``build`` / ``wire``), engine.lf.compat, engine.spec.schema, studio.forms / form_check.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.lf import compat as lf_compat
from engine.spec import schema as spec_mod
from studio import forms
from studio.form_validation import check, colon, problems_markdown, to_values
from studio.i18n.localize import localize, localize_problems
from studio.i18n.page import t


def import_lf(text: str, acc_text: str = "", lang: str = "en") -> tuple[dict[str, Any] | None, str]:
    """A LLaMA-Factory training YAML (+ its accelerate config) as form values, with the import's notes; or None and
    every key refused, one line each (the form is left as it was). engine.lf.compat converts."""
    if not (text or "").strip():
        return None, t("lf_empty", lang)
    notes: list[str] = []
    try:
        spec = lf_compat.lf_text_to_spec(text, acc_text or None, notes=notes)
    except spec_mod.SpecError as exc:
        lines = [f"- `{p}`{colon(lang)}{m}" for p, m in localize_problems(exc.problems, lang)]
        return None, "\n".join([f"❌ {t('lf_refused', lang)}", *lines])
    msg = [f"✅ {t('lf_filled', lang)}"]
    if notes:
        msg += ["", t("lf_notes", lang), *(f"- {localize(n, lang)}" for n in notes)]
    return forms.spec_to_values(spec_mod.spec_to_dict(spec)), "\n".join(msg)


def read_upload(path: Any) -> str:
    """The text of an uploaded YAML file (gradio gives its temporary path)."""
    if not path:
        return ""
    name = path if isinstance(path, str) else getattr(path, "name", "")
    try:
        return Path(name).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return f"# cannot read {Path(name).name}: {exc}"


def save_lf_yaml(values: dict[str, Any], lang: str = "en") -> tuple[list[str] | None, str]:
    """The form as LLaMA-Factory YAML files to download: the training args (fields LF has no key for as comments
    at the end) and, for a launch other than the default, the accelerate config."""
    import tempfile

    spec, errors, _ = check(values)
    if spec is None:
        return None, problems_markdown(errors, [], lang)
    from engine.commands.export_lf import (
        lf_text,  # as Studio runs it: absolute paths, a template LF has, the precision
    )
    from engine.spec.schema import SpecError

    try:
        text, acc, _ = lf_text(spec)
    except SpecError as exc:  # stage grpo: LLaMA-Factory has no GRPO stage
        return None, problems_markdown(exc.problems, [], lang)
    folder = Path(tempfile.mkdtemp(prefix="studio-lf-"))
    files = [folder / "lf_train.yaml"]
    files[0].write_text(text, encoding="utf-8")
    if acc is not None:
        files.append(folder / "accelerate_config.yaml")
        files[1].write_text(acc, encoding="utf-8")
    return [str(f) for f in files], "✅ " + t("lf_saved", lang, files=", ".join(f.name for f in files))


def build_import(texts: Any, lang: str) -> dict[str, Any]:
    """The section's accordion (YAML boxes, uploads, Import button, its message), inside the current column."""
    import gradio as gr

    with gr.Accordion(t("lf_section", lang), open=False, elem_id="lf-yaml") as lf_acc:
        texts.add(lf_acc, "lf_section")
        w = {"acc": lf_acc}
        w["text"] = texts.add(
            gr.Textbox(label=t("lf_text", lang), lines=8, max_lines=30, elem_id="lf-text"), "lf_text"
        )
        w["acc_text"] = texts.add(
            gr.Textbox(label=t("lf_acc_text", lang), lines=3, max_lines=20, elem_id="lf-acc-text"),
            "lf_acc_text",
        )
        # gr.File, not UploadButton: a language switch cannot relabel an UploadButton. No ``height``: gradio sets it
        # on the drop area, not on the block its compact layout watches, and cut the full one (icon, "Drop File
        # Here", "Click to Upload": ~240 px) to the height given.
        with gr.Row():
            w["upload"] = texts.add(
                gr.File(
                    label=t("lf_upload", lang),
                    file_types=[".yaml", ".yml"],
                    type="filepath",
                    elem_id="lf-upload",
                ),
                "lf_upload",
            )
            w["acc_upload"] = texts.add(
                gr.File(
                    label=t("lf_acc_upload", lang),
                    file_types=[".yaml", ".yml"],
                    type="filepath",
                    elem_id="lf-acc-upload",
                ),
                "lf_acc_upload",
            )
        w["import"] = texts.add(
            gr.Button(t("lf_import", lang), size="sm", variant="secondary", elem_id="lf-import"),
            "lf_import",
            "value",
        )
        w["msg"] = gr.Markdown(elem_id="lf-msg")
    return w


def build_save_button(texts: Any, lang: str) -> Any:
    """The "save as LLaMA-Factory YAML" button (beside the command preview's, in the current row)."""
    import gradio as gr

    return texts.add(gr.Button(t("lf_save", lang), size="sm", elem_id="lf-save"), "lf_save", "value")


def build_save_output(texts: Any, lang: str) -> tuple[Any, Any]:
    """(message, files to download) of the save, under the button's row."""
    import gradio as gr

    msg = gr.Markdown(elem_id="lf-save-msg")
    files = texts.add(
        gr.File(label=t("lf_file", lang), file_count="multiple", interactive=False, elem_id="lf-file"), "lf_file"
    )
    return msg, files


def wire(w: dict[str, Any], save: Any, save_out: tuple[Any, Any], fields: list, lang: Any, apply: Any) -> None:
    """The section's events. ``apply`` turns (form values or None, message) into the form's updates."""
    save_msg, save_files = save_out
    save.click(lambda *a: save_lf_yaml(to_values(a[:-1]), a[-1]), [*fields, lang], [save_files, save_msg])

    def _import(text, acc, lang_):
        return apply(import_lf(text, acc, lang_))

    inputs = [w["text"], w["acc_text"], lang]
    w["upload"].upload(read_upload, [w["upload"]], [w["text"]], queue=False).then(_import, inputs, [*fields, w["msg"]])
    w["acc_upload"].upload(read_upload, [w["acc_upload"]], [w["acc_text"]], queue=False)
    w["import"].click(_import, inputs, [*fields, w["msg"]])
