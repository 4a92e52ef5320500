"""The Train tab's actions: Start (a twin run reported first, a queued run's place) and Stop (signals in the click's
own request, then where the checkpoint went), and what each says.

Every message is a ``Said``: the text in the page's language, with its text in each language beside it, so what
the page has already shown follows a language switch (studio.tabs.train keeps the texts in a session state).
Plain functions of widget values: tests call them without a browser. Light: engine.runs, engine.spec.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from engine.runs import records, scheduler
from engine.runs import registry as runs
from engine.runs.scheduler import stop_grace_s
from engine.spec import schema as spec_mod
from studio.form_validation import check, problems_markdown
from studio.form_validation import colon as _colon
from studio.form_validation import where as _where
from studio.i18n.localize import localize_error, localize_problems
from studio.i18n.page import t
from studio.i18n.said import Said, said

# Each Start request, one line on the server's stderr (its log): when and what it answered. A second request after
# one click was seen once in a browser test (issue 27); these lines tell a double dispatch (milliseconds apart)
# from a later resend.
log = logging.getLogger("studio.start")
if not log.handlers:
    _handler = logging.StreamHandler(sys.stderr)
    _handler.setFormatter(logging.Formatter("%(asctime)s studio.start %(levelname)s: %(message)s"))
    log.addHandler(_handler)
    log.setLevel(logging.INFO)
    log.propagate = False


def fingerprint(spec: spec_mod.RunSpec) -> str:
    """A short hash of a valid spec: a second Start of the same form state confirms a duplicate run."""
    import hashlib
    import json

    text = json.dumps(_comparable(spec_mod.spec_to_dict(spec)), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _comparable(data: dict) -> dict:
    """A spec as a dict with what submit changes made the same: the model's local folder resolved (submit stores it
    absolute) and the run name left out (it does not change what is trained)."""
    import copy

    from engine.models.resolve import looks_local, model_path

    data = copy.deepcopy(data)
    model = data.get("model") or {}
    name = str(model.get("name_or_path") or "")
    if name and looks_local(name):
        model["name_or_path"] = str(model_path(name).resolve())
    (data.get("output") or {}).pop("run_name", None)
    return data


def identical_active_run(spec: spec_mod.RunSpec) -> Any:
    """A queued or running training run (here or a Slurm job) whose spec is this one (a double click, a second
    tab), or None."""
    mine = _comparable(spec_mod.spec_to_dict(spec))
    for rec in runs.list_runs(records.ACTIVE):
        if getattr(rec, "kind", "train") not in ("train", "slurm") or not rec.spec:
            continue
        try:
            theirs = spec_mod.spec_to_dict(spec_mod.parse_spec(yaml.safe_load(rec.spec)))
        except Exception:  # a spec from an older schema: not the same as this one
            continue
        if _comparable(theirs) == mine:
            return rec
    return None


def queue_position(run_id: str) -> int:
    """1 for the next queued run to start, in the order the scheduler offers them the machine (moved runs first,
    then the users' turns: engine.runs.scheduler.queue_order)."""
    ids = [str(r.id) for r in scheduler.queue_order()]
    return ids.index(str(run_id)) + 1 if str(run_id) in ids else 0


def _status_word(status: str, lang: str) -> str:
    from studio.i18n.page import STRINGS

    return t(f"st_{status}", lang) if f"st_{status}" in STRINGS else status


def start_run(values: dict[str, Any], lang: str = "en", confirm: str = "") -> tuple[Said, str | None, str]:
    """Validate and submit; (message, run id or None, the fingerprint a second click confirms or "").

    A queued or running run with this very spec is reported first; the next Start of the same form state
    (``confirm`` = the fingerprint returned) submits it anyway."""
    spec, errors, _ = check(values)
    if spec is None:
        log.info("Start request: the form has problems, nothing started")
        return said(lambda code: problems_markdown(errors, [], code), lang), None, ""
    try:
        fp = fingerprint(spec)
        if confirm != fp:
            twin = identical_active_run(spec)
            if twin is not None:
                log.info("Start request for spec %s: run %s has it, %s; reported", fp[:12], twin.id, twin.status)
                word = twin.status
                return (
                    said(lambda c: "⚠ " + t("start_twin", c, id=twin.id, status=_status_word(word, c)), lang),
                    None,
                    fp,
                )
        run_id = runs.submit(spec, name=spec.output.run_name or None)
        status = str(getattr(runs.get(run_id), "status", ""))
        log.info("Start request for spec %s%s: run %s %s", fp[:12], " (confirmed)" if confirm else "", run_id, status)
    except spec_mod.SpecError as exc:  # submit's own checks: the output folder, the rows of the data

        def refused(code: str, problems=exc.problems) -> str:
            lines = [f"- {_where(p, code)}{_colon(code)}{m}" for p, m in localize_problems(problems, code)]
            return "\n".join([f"❌ {t('spec_invalid', code)}", *lines])

        return said(refused, lang), None, ""
    except Exception as exc:  # the registry refuses (queue full, GPUs busy): show its message
        return said(lambda code, err=exc: f"❌ {localize_error(err, code)}", lang), None, ""
    if status == "queued":
        own = own_limit(runs.get(run_id))
        if own is not None:
            return said(lambda code: t("queued_own_limit", code, id=run_id, **own), lang), str(run_id), ""
        pos = queue_position(run_id)
        holders = ", ".join(f"{r.id} ({r.name})" for r in scheduler.slot_holders(runs.get(run_id)))
        key = "queued_behind" if holders else "queued_run"
        return said(lambda code: t(key, code, id=run_id, pos=pos, runs=holders), lang), str(run_id), ""
    return said(lambda code: t("started", code, id=run_id), lang), str(run_id), ""


def own_limit(rec) -> dict | None:
    """{n, runs} when the queued ``rec`` waits for its owner's own ``max_running`` (engine.runs.fair), else None."""
    from engine.runs import fair

    limit = fair.running_limit(rec.owner or "")
    if limit is None:
        return None
    mine = [r.id for r in runs.list_runs("running", refresh_status=False) if (r.owner or "") == (rec.owner or "")]
    return {"n": limit, "runs": ", ".join(mine)} if len(mine) >= limit else None


def stop_begin(run_id: str | None, lang: str = "en") -> tuple[Said, str | None]:
    """What Stop says at once: (message, the run to stop or None). A run that has ended is not stopped again."""
    if not run_id:
        return said(lambda code: t("no_run", code), lang), None
    try:
        rec = runs.get(run_id)
    except Exception as exc:  # an unknown id
        return said(lambda code, err=exc: f"❌ {localize_error(err, code)}", lang), None
    status = str(getattr(rec, "status", ""))
    if status == "queued":
        return said(lambda code: t("stopping_queued", code, id=run_id), lang), str(run_id)
    if status != "running":
        return said(lambda code: t("stop_ended", code, id=run_id, status=_status_word(status, code)), lang), None
    return said(lambda code: t("stopping", code, id=run_id), lang), str(run_id)


def stop_now(run_id: str | None, lang: str = "en") -> tuple[Said, str | None]:
    """Stop's click: ``stop_begin`` and the signals in the click's own request (a second request, sent once the
    browser has drawn the first answer, reached the trainer 18 s late on a loaded machine: issue 27 item 14)."""
    msg, target = stop_begin(run_id, lang)
    if target:
        runs.stop(target, wait=False)
    return msg, target


def stop_finish(run_id: str | None, lang: str = "en") -> Any:
    """Stop the run and say how it ended: the step it stopped at and where its checkpoint is. The stop itself never
    holds the page: signals go out at once and a run that does not end within the grace period is killed in the
    background (engine.runs.scheduler); this waits for the end, at most the grace period and a little more."""
    if not run_id:
        return gr_skip()
    try:
        if not getattr(runs.get(run_id, refresh_status=False), "stop_requested", None):  # stop_now has signalled it
            runs.stop(run_id, wait=False)
        deadline = time.time() + stop_grace_s() + 15.0
        rec = runs.get(run_id)
        while str(getattr(rec, "status", "")) in ("running", "queued") and time.time() < deadline:
            time.sleep(0.5)
            rec = runs.get(run_id)
    except Exception as exc:
        return said(lambda code, err=exc: f"❌ {localize_error(err, code)}", lang)
    if str(getattr(rec, "status", "")) in ("running", "queued"):  # still saving (a busy machine): not "ended"
        return said(lambda code: "⏳ " + t("stop_slow", code, id=rec.id), lang)
    return said(lambda code: stop_report(rec, code), lang)


def stop_report(rec: Any, lang: str = "en") -> str:
    """How a stopped (or meanwhile ended) run ended, from its terminal event."""
    from engine.core import events as events_mod

    status = str(getattr(rec, "status", ""))
    term = events_mod.last_event(Path(rec.run_dir) / "events.jsonl", events_mod.TERMINAL_TYPES) or {}
    if status != "stopped" or term.get("type") not in (None, "stopped"):
        return t("stop_ended", lang, id=rec.id, status=_status_word(status, lang))
    if term.get("type") is None and not getattr(rec, "started", None):
        return t("stopped_dequeued", lang, id=rec.id)
    if term.get("type") is None or term.get("step") is None:  # ended before it reported a step
        return t("stopped_early", lang, id=rec.id)
    checkpoint = (term.get("payload") or {}).get("checkpoint")
    if checkpoint:
        return "✅ " + t("stopped_saved", lang, id=rec.id, step=term["step"], path=checkpoint)
    return "⚠ " + t("stopped_unsaved", lang, id=rec.id, step=term["step"])


def texts_of(message: Any) -> dict[str, str] | Any:
    """A handler's answer for the session state that keeps what the page shows in every language (a ``Said``'s
    texts; a message without them leaves the state as it is)."""
    return getattr(message, "texts", None) or gr_skip()


def gr_skip() -> Any:
    import gradio as gr

    return gr.skip()


def stop_run(run_id: str | None, lang: str = "en") -> str:
    """Stop in one call (tests, scripts): the final report, or why nothing was stopped."""
    msg, target = stop_begin(run_id, lang)
    return stop_finish(target, lang) if target else msg
