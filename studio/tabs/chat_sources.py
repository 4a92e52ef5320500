"""What the Chat tab can chat with: the base models (workspace models, merged exports), the tuned sources
(finished runs with their adapter or weights, exported models, the models Studio serves now; never a reward model,
which writes no answers), the chat template and base model a picked source was trained with, and what its Tuned pane
loads.

Light: the workspace, the run registry (through studio.backend), engine.export.checks' reading of a source and
studio.tabs.chat_remote's list of servers.
"""

from __future__ import annotations

from pathlib import Path

from engine.core import workspace
from engine.export import checks as xp
from engine.export import sources as sources_mod
from engine.export.merge_jobs import MERGE_TAG
from engine.runs import owners
from engine.runs.messages import message as run_message
from studio import backend
from studio.i18n.page import t
from studio.tabs import chat_remote


def _colon(lang: str) -> str:
    return "：" if lang == "zh" else ": "


def _short(path: str | Path) -> str:
    """A folder as the page names it: relative to the workspace when inside it."""
    p = Path(path)
    try:
        return str(p.resolve().relative_to(workspace.home().resolve()))
    except (ValueError, OSError):
        return str(p)


def _is_model(p: Path) -> bool:
    return (p / "config.json").is_file() and not (p / "adapter_config.json").is_file()


def _is_reward_model(p: Path) -> bool:
    """A merged reward model (stage rm: ...ForSequenceClassification) or a reward adapter (peft SEQ_CLS)."""
    import json

    for name, key in (("config.json", "architectures"), ("adapter_config.json", "task_type")):
        try:
            value = json.loads((p / name).read_text(encoding="utf-8")).get(key)
        except (OSError, ValueError, AttributeError):
            continue
        values = value if isinstance(value, list) else [value]
        if any(str(v).endswith("ForSequenceClassification") or str(v) == "SEQ_CLS" for v in values):
            return True
    return False


def _finished_merges() -> list[tuple[Path, list[str]]]:
    """(target folder, sources) of the merges that finished, newest first, read from their registry rows."""
    out = []
    for r in backend.list_runs():
        argv = getattr(r, "command", None) or []
        if getattr(r, "kind", "") != "command" or MERGE_TAG not in (getattr(r, "tags", None) or []):
            continue
        if getattr(r, "status", "") != "completed" or argv[1:3] != ["-m", "engine.trainer.merge"]:
            continue
        try:
            args = xp.merge_arg_parser().parse_args(argv[3:])
        except SystemExit:
            continue
        out.append((Path(args.out), list(args.sources)))
    return out


def exported_models() -> list[Path]:
    """Exports that can be chatted with: targets of finished merges that are still there, then any other folder
    under exports/ holding a model or an adapter (copied in). Hidden folders (a merge's temp output) never."""
    found: list[Path] = []
    candidates = [out for out, _ in _finished_merges()]
    root = workspace.exports_dir()
    candidates += sorted((p for p in root.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime, reverse=True)
    for p in candidates:
        p = p.resolve()
        if p.name.startswith(".") or p in found:
            continue
        if _is_reward_model(p):  # scores answers, writes none
            continue
        if owners.path_problem(p) is not None:  # team mode: another member's merge wrote it
            continue
        if (p / "config.json").is_file() or (p / "adapter_config.json").is_file():
            found.append(p)
    return found


def tuned_choices(lang: str = "en") -> list[tuple[str, str]]:
    """(label, folder): completed training runs that saved weights, then exported models, then the registry's
    servers that answer now (``serve:RUN_ID``). Merge jobs are command runs of the registry (engine.export.merge_jobs);
    they are offered through the model they wrote, not as runs."""
    out = []
    for r in backend.list_runs():
        if getattr(r, "kind", "train") != "train" or getattr(r, "status", "") != "completed":
            continue
        try:
            src = sources_mod.resolve_source(r.run_dir)
        except xp.ExportError:  # its adapter or weights are gone
            continue
        if sources_mod.source_head(src) == "seq_cls":  # a reward model scores answers; it does not write them
            continue
        name = f"{r.id} · {r.name}" if r.name and r.name != r.id else r.id
        out.append((f"{t('chat_kind_run', lang)}{_colon(lang)}{name}", str(r.run_dir)))
    out += [(f"{t('chat_kind_export', lang)}{_colon(lang)}{_short(p)}", str(p)) for p in exported_models()]
    served = t("chat_kind_served", lang)
    return out + [(f"{served}{_colon(lang)}{st['model']} · {st['url']}", src) for src, st in chat_remote.serving()]


def picks_for(choices: list[tuple[str, str]]) -> dict[str, list[str]]:
    """{source: [its chat template, its base model folder or ""]} for the Tuned picker's choices: the page applies a
    pick in the browser, at once, so a Load clicked right after it never sends the model picked before. Each source
    is resolved once for both."""
    picks = {}
    for _, source in choices:
        src = _trained_source(source)
        picks[source] = [_template_of(src), _base_of(src) or ""]
    return picks


def model_choices() -> list[str]:
    """Base models: the workspace's models, then merged exports (full models)."""
    models = backend.local_models()
    return models + [str(p) for p in exported_models() if _is_model(p) and str(p) not in models]


def default_model(models: list[str]) -> str | None:
    """The base the Chat tab starts with: SmolLM2-135M-Instruct when the demo imported it (a real model that
    answers), else the demo's text model; the newest model only when neither is there (the newest is often the
    demo's vision-language model, which a text chat does not need)."""
    from engine.models import gguf_file as gf

    for preferred in (workspace.models_dir() / gf.DEMO_NAME, workspace.demo_model_dir()):
        if str(preferred) in models:
            return str(preferred)
    return models[0] if models else None


def _spec_template(spec: dict | None) -> str:
    return str(((spec or {}).get("data") or {}).get("template") or "auto")


def _trained_source(source: str) -> sources_mod.Source | None:
    """What a picked source was trained as: the run (or adapter) itself, or the first source of the finished merge
    that wrote it; None for anything else (a bare model, an unknown folder, a path outside the workspace)."""
    if chat_remote.is_served(source):  # a server: what it serves
        source = chat_remote.served_source(source) or ""
    if not source:
        return None
    try:
        p = workspace_path(source)
        if (p / "spec.yaml").is_file() or (p / "adapter_config.json").is_file():
            return sources_mod.resolve_source(p)
        for out, sources in _finished_merges():
            if out.resolve() == p and sources:
                return sources_mod.resolve_source(sources[0])
    except (ValueError, xp.ExportError):
        pass
    return None


def template_for(source: str) -> str:
    """The chat template a run (or the run an export was merged from) was trained with; ``auto`` otherwise."""
    return _template_of(_trained_source(source))


def _template_of(src: sources_mod.Source | None) -> str:
    return _spec_template(src.spec) if src else "auto"


def workspace_path(path: str) -> Path:
    from studio.tabs.export import inside_workspace

    return inside_workspace(path)


def load_target(model: str, tuned: str) -> tuple[str, str | None] | None:
    """What Load puts in the Tuned pane (``tuned_target``; None for a served model or no source), once the base
    ``model`` is one the page's user may load: not a folder inside another member's run or job folder
    (engine.runs.owners; a hub id or a name that is no folder here passes). ValueError otherwise."""
    p = Path(model).expanduser()
    if p.exists() and (why := owners.path_problem(p, field="model")) is not None:
        raise ValueError(why)
    return None if chat_remote.is_served(tuned) else tuned_target(tuned)


def tuned_target(source: str) -> tuple[str, str | None] | None:
    """What the Tuned pane loads for a picked source: (model folder, adapter folder or None). A run folder gives its
    adapter on the base it was trained from (or its full weights); an export folder is a merged model (or an
    adapter). None for no source; ValueError for a path outside the workspace or without weights."""
    if not source:
        return None
    p = workspace_path(source)
    if _is_model(p) and not (p / "spec.yaml").is_file():
        return str(p), None
    try:
        src = sources_mod.resolve_source(p)
    except xp.ExportError as exc:  # a run's own words (not finished, adapter not saved, ...), else the plain one
        said = exc.args[0] if (p / "spec.yaml").is_file() else run_message("runs.no_adapter", source=source)
        raise ValueError(said) from None
    return (src.weights_dir, None) if src.kind == "model" else (str(src.base), src.weights_dir)


def base_for(source: str) -> str | None:
    """The base model a picked run (or adapter, or the run an export was merged from) was trained on, when it is a
    folder here; None otherwise (a full model, an unknown source). The Chat tab's model follows it, so the two panes
    compare a tuned model with its own base."""
    return _base_of(_trained_source(source))


def _base_of(src: sources_mod.Source | None) -> str | None:
    base = src.base if src else None
    return str(base) if base and (Path(base) / "config.json").is_file() else None
