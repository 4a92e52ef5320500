"""LLM-as-judge: each generated answer sent with its question and reference to an OpenAI-compatible endpoint
(``POST {base_url}/chat/completions``, the spec's model and prompt, temperature 0), the reply's score (1-10) read
back. The key comes from the environment variable the spec names (``judge.api_key_env``) and goes only into the
request's ``Authorization`` header: never into the spec, the plan, the events or the results. A row the judge could
not score (unreachable, an HTTP error, a reply without a score) keeps its error, named by row; the model's ``judge``
is the mean score over the rows scored, its ``judge_win`` the pairwise win rate of its scores against the base's on
the same rows (a tie counts half), ×100. In pairwise mode (``judge.mode: pairwise``) the judge sees a model's answer
and the base's together, in both orders, and names the better one; the model's ``judge_win`` is then the share of
those verdicts it won (a tie, or verdicts that follow the position, count half), ×100. From the page, the key and
the endpoint are only those the operator allowed (``page_problems``). Light: stdlib (urllib, json, re)."""

from __future__ import annotations

import json
import os
import re
import statistics
import urllib.error
import urllib.request

from engine.core import page_trust
from engine.eval.messages import message

_SCORE = re.compile(r"score\s*[:=：]?\s*\**\s*(\d+(?:\.\d+)?)", re.IGNORECASE)
_NUMBER = re.compile(r"^\s*\**\s*(\d+(?:\.\d+)?)\s*(?:/\s*10)?\s*\**\s*\.?\s*$")


def parse_score(reply: str) -> float | None:
    """The score in a judge's reply: "Score: 7" (anywhere), or a reply that is only a number ("8", "8/10");
    None when there is none or it is outside 1..10."""
    m = _SCORE.search(reply) or _NUMBER.match(reply)
    if not m:
        return None
    value = float(m.group(1))
    return value if 1 <= value <= 10 else None


def page_problems(judge) -> list[tuple[str, object]]:
    """What a judge set from the page may not do (``engine.core.page_trust``): send a key the operator did not bind
    for the page to this endpoint's host, or reach a loopback, link-local or private address the operator did not
    allow. ``judge``: the evaluation spec's ``JudgeSpec``. The shell is not bound by these."""
    dest = page_trust.url_destination(judge.base_url or "")
    if dest is None:
        return []  # no URL, or not one: the spec's own checks name it
    problem = page_trust.destination_problem(dest, judge.api_key_env or "")
    if problem is None:
        return []
    return [("judge.api_key_env" if judge.api_key_env else "judge.base_url", problem)]


def post(judge: dict, prompt: str, row: int) -> tuple[str | None, object]:
    """(the judge's reply text, None) for one prompt, or (None or the raw body, the error naming the row)."""
    body = {
        "model": judge["model"],
        "messages": [{"role": "user", "content": prompt}],
        "temperature": 0,
        "max_tokens": judge["max_tokens"],
    }
    headers = {"Content-Type": "application/json"}
    key = os.environ.get(judge["api_key_env"]) if judge.get("api_key_env") else None
    if key:
        headers["Authorization"] = f"Bearer {key}"
    url = judge["base_url"].rstrip("/") + "/chat/completions"
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=judge["timeout"]) as resp:  # noqa: S310 - the user's endpoint
            raw = resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        text = exc.read().decode("utf-8", "replace")[:200] if exc.fp else ""
        return None, message("eval.judge_http", row=row, code=exc.code, error=text or exc.reason)
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return None, message("eval.judge_unreachable", row=row, url=url, error=reason)
    try:
        return json.loads(raw)["choices"][0]["message"]["content"] or "", None
    except (ValueError, KeyError, IndexError, TypeError):
        return raw[:200], message("eval.judge_bad_reply", row=row, reply=raw[:200])


def ask(judge: dict, question: str, reference: str, answer: str, row: int) -> tuple[float | None, object, str]:
    """(score or None, error message or None, the reply text) for one row."""
    prompt = judge["prompt"].format(question=question, reference=reference, answer=answer)
    reply, error = post(judge, prompt, row)
    if error is not None:
        return None, error, reply or ""
    score = parse_score(reply)
    if score is None:
        return None, message("eval.judge_bad_reply", row=row, reply=reply[:200]), reply
    return score, None, reply


def judge_rows(judge: dict, preds: list[dict], questions: dict[int, str], progress) -> list[str]:
    """Score every row of ``preds`` (their ``prediction``) in place: ``judge_score``, ``judge_reply`` or
    ``judge_error``; the errors' texts."""
    errors = []
    for k, p in enumerate(preds):
        progress(k)
        score, error, reply = ask(judge, questions.get(p["index"], p["prompt"]), p["reference"], p["prediction"],
                                  p["index"])  # fmt: skip
        p["judge_reply"] = reply
        if error is not None:
            p["judge_error"] = str(error)
            errors.append(str(error))
        else:
            p["judge_score"] = score
    return errors


def aggregate(preds: list[dict], base: dict[int, float] | None) -> dict[str, float | None]:
    """{judge: mean score, judge_win: win rate vs the base's scores ×100 (None without a base or shared rows)}."""
    scores = {p["index"]: p["judge_score"] for p in preds if p.get("judge_score") is not None}
    out: dict[str, float | None] = {"judge": round(statistics.fmean(scores.values()), 4) if scores else None}
    shared = [i for i in scores if base and i in base]
    if shared and base is not None:
        wins = sum(1.0 if scores[i] > base[i] else 0.5 if scores[i] == base[i] else 0.0 for i in shared)
        out["judge_win"] = round(100 * wins / len(shared), 4)
    else:
        out["judge_win"] = None
    return out


def judge_model(
    judge: dict, kind: str, preds: list[dict], questions: dict[int, str], progress, base: dict
) -> tuple[dict, list[str]]:
    """(the judge's columns, the rows' errors) for one evaluated model. ``base`` carries what the base model (judged
    first) leaves for the models after it: its scores, or in pairwise mode its answers."""
    if judge.get("mode") == "pairwise":
        if kind == "base":  # the other side of every pair: nothing to judge yet
            for k in range(len(preds)):
                progress(k)
            base["answers"] = {p["index"]: p["prediction"] for p in preds}
            return {"judge": None, "judge_win": None}, []
        errors = judge_pairs(judge, preds, base.get("answers") or {}, questions, progress)
        return aggregate_pairs(preds), errors
    errors = judge_rows(judge, preds, questions, progress)
    found = aggregate(preds, None if kind == "base" else base.get("scores"))
    if kind == "base":
        base["scores"] = {p["index"]: p["judge_score"] for p in preds if p.get("judge_score") is not None}
    return found, errors


# ---------------------------------------------------------------------------------------------- pairwise
_VERDICT = re.compile(r"(?:winner|verdict|better)\s*[:=：]?\s*\**\s*\(?(A|B|tie)\b", re.IGNORECASE)
_ONLY = re.compile(r"^\s*\**\s*\(?(A|B|tie)\)?\s*\**\s*\.?\s*$", re.IGNORECASE)


def parse_verdict(reply: str) -> str | None:
    """The winner a pairwise reply names: "A", "B" or "tie" ("Winner: B", "**A**", "tie"); None when it names none."""
    m = _VERDICT.search(reply) or _ONLY.match(reply)
    if not m:
        return None
    word = m.group(1)
    return "tie" if word.lower() == "tie" else word.upper()


def judge_pairs(
    judge: dict, preds: list[dict], base: dict[int, str], questions: dict[int, str], progress
) -> list[str]:
    """Each row of ``preds`` that the base answered too, shown to the judge with the base's answer twice, in both
    orders (the model's answer as B, then as A), so a judge that favours a position favours neither. In place:
    ``judge_pair`` (the model's points: 1 a win, 0.5 a tie, 0 a loss, per order), ``judge_replies`` or
    ``judge_error``; the errors' texts."""
    errors = []
    for k, p in enumerate(preds):
        progress(k)
        if p["index"] not in base:
            continue
        question = questions.get(p["index"], p["prompt"])
        points, replies = [], []
        for model_is in ("B", "A"):
            a, b = (base[p["index"]], p["prediction"]) if model_is == "B" else (p["prediction"], base[p["index"]])
            fields = {"question": question, "reference": p["reference"], "answer_a": a, "answer_b": b}
            prompt = judge["pairwise_prompt"].format(**fields)
            reply, error = post(judge, prompt, p["index"])
            replies.append(reply or "")
            verdict = parse_verdict(reply) if error is None else None
            if error is None and verdict is None:
                error = message("eval.judge_bad_verdict", row=p["index"], reply=(reply or "")[:200])
            if error is not None:
                p["judge_error"] = str(error)
                errors.append(str(error))
                break
            points.append(0.5 if verdict == "tie" else 1.0 if verdict == model_is else 0.0)
        p["judge_replies"] = replies
        if len(points) == 2:
            p["judge_pair"] = points
    return errors


def aggregate_pairs(preds: list[dict]) -> dict[str, float | None]:
    """{judge: None (no scores in this mode), judge_win: the model's share of points against the base ×100 over the
    rows judged in both orders (None when none was)}."""
    judged = [sum(p["judge_pair"]) / 2 for p in preds if p.get("judge_pair")]
    return {"judge": None, "judge_win": round(100 * statistics.fmean(judged), 4) if judged else None}
