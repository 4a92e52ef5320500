"""The evaluation subprocess: every model of a plan (``engine.jobs.evals.resolve``) on the same rows, loss and
perplexity on the answers, generated answers scored against the references; results after every model, a
self-contained HTML report at the end. Heavy: torch, transformers, peft (only in this process).

- Rows: the run's held-out rows rebuilt as the trainer split them (the same loading, LF's num_samples, max_samples,
  tokenisation and empty-sample filter, then ``train_test_split`` with the run's seed), or registered datasets.
- Loss: each row tokenised by ``engine.trainer.dataset._encode_batch``, the trainer's own tokenisation, so the
  positions scored are the ones training scored (prompt masked unless train_on_prompt, mask_history, cutoff);
  loss = the summed token negative log-likelihood over all rows / the number of scored tokens; perplexity =
  exp(loss).
- Answers: the prompt rendered by the run's template (``engine.data.templates.prompt_text``), generated in batches
  sorted by length, padded on the left, with the KV cache; greedy (temperature 0) or sampled (seeded); cut at the
  template's stop words. Scored by ``engine.eval.measures`` (LLaMA-Factory's BLEU-4 / ROUGE).
- Judge and lm-eval: each answer scored by the judge endpoint (``engine.eval.judge``); lm-evaluation-harness tasks
  run by ``engine.trainer.lm_eval_run`` per model (their data loaded once, before any model).
- Models: the base is loaded once; a checkpoint's or the final adapter is put on it and taken off after
  (``PeftModel.unload``); a full model folder is loaded on its own.

Events (``events.jsonl``): eval_progress (i, n, label, phase, done, total, progress, eta_seconds, detail),
eval_model_finished (label, metrics), eval_finished (results), eval_failed (cause: input | load | cancelled | other,
error). SIGTERM (Stop) ends it between batches; the models finished keep their results.
Usage: python -m engine.trainer.evaluate --plan RUN_DIR/eval_plan.json --events RUN_DIR/events.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import sys
import time
import traceback
from pathlib import Path

from engine.core.events import append_event
from engine.core.messages import to_json
from engine.eval import measures as ms
from engine.eval.messages import message
from engine.trainer import lean

IGNORE = -100


class Cancelled(Exception):
    pass


class Evaluation:
    def __init__(self, plan: dict, out: Path, events: Path):
        self.plan, self.out, self.events_path = plan, out, events
        self.stop = False
        self.results: dict = {
            "columns": plan["columns"],
            "measures": plan["measures"],
            "rows": [],
            "train_loss": plan.get("train_loss") or [],
            "run_id": plan.get("run_id"),
            "n_rows": 0,
            "state": "running",
        }
        self.gen = [m for m in plan["measures"] if m in ms_generation()]
        self.started = time.time()
        self.units_done = 0
        self.units_total = 0
        self.lm_manager = None
        self.judge_base: dict = {}  # what the base left the judge of the models after it (engine.eval.judge)

    # ------------------------------------------------------------------ events
    def event(self, type_: str, **payload) -> None:
        for key in ("detail", "error"):
            msg = payload.get(key)
            if getattr(msg, "key", ""):
                payload[f"{key}_msg"] = to_json(msg)
                payload[key] = str(msg)
        append_event(self.events_path, type_, None, **payload)

    def progress(self, i: int, label: str, phase: str, done: int, total: int, task: str = "") -> None:
        if self.stop:
            raise Cancelled
        elapsed = time.time() - self.started
        frac = self.units_done / max(1, self.units_total)
        eta = elapsed / frac * (1 - frac) if frac > 0 else None
        key = {"loss": "eval.progress_loss", "generate": "eval.progress_generate", "judge": "eval.progress_judge",
               "lm_eval": "eval.progress_lm_eval"}.get(phase, "eval.progress_load")  # fmt: skip
        self.event(
            "eval_progress",
            i=i,
            n=len(self.plan["targets"]),
            label=label,
            phase=phase,
            done=done,
            total=total,
            progress=round(frac, 4),
            eta_seconds=round(eta, 1) if eta is not None else None,
            detail=message(key, label=label, done=done, total=total, **({"task": task} if task else {})),
        )

    def save(self) -> None:
        tmp = self.out / "results.json.tmp"
        tmp.write_text(json.dumps(self.results, indent=1, ensure_ascii=False), encoding="utf-8")
        tmp.replace(self.out / "results.json")

    # ------------------------------------------------------------------ the run
    def run(self) -> int:
        import torch

        from engine.eval.report import write_report

        plan = self.plan
        torch.manual_seed(plan["generation"]["seed"])
        targets = plan["targets"]
        try:
            tok = load_tokenizer(targets[0]["model"])
            rows = prepare_rows(plan, tok) if plan["data"]["datasets"] else []
            if "lm_eval" in plan["measures"]:
                from engine.trainer import lm_eval_run

                self.lm_manager = lm_eval_run.prepare(plan["lm_eval"], self.out)
        except Exception as exc:  # noqa: BLE001 - a task or bad data ends the evaluation with its cause
            if getattr(exc, "msg", None) is not None:  # lm_eval_run.TaskProblem: the task named
                self.fail("input", exc.msg)
                return 2  # noqa: BLE001 - bad data ends the evaluation with its cause
            self.fail("input", message("eval.data_failed", error=f"{type(exc).__name__}: {exc}"))
            return 2
        self.results["n_rows"] = len(rows)
        per_model = len(rows) * (("loss" in plan["measures"]) + bool(self.gen) + ("judge" in plan["measures"]))
        per_model += len(plan["lm_eval"]["tasks"]) if "lm_eval" in plan["measures"] else 0
        self.units_total = per_model * len(targets)
        (self.out / "predictions.jsonl").write_text("", encoding="utf-8")
        base = base_name = None
        for i, t in enumerate(targets):
            try:
                self.progress(i, t["label"], "load", 0, len(rows))
                t0 = time.time()
                try:  # (lm-eval alone: its HFLM loads the model itself)
                    if rows and (base is None or base_name != t["model"]):
                        base, base_name = None, None
                        base = load_model(t["model"], plan["device"])
                        base_name = t["model"]
                        tok = load_tokenizer(t["model"])
                    model = base
                    if rows and t["adapter"]:
                        from peft import PeftModel

                        model = PeftModel.from_pretrained(base, t["adapter"])
                    if model is not None:
                        model.eval()
                except Exception as exc:  # noqa: BLE001
                    self.fail(
                        "load", message("eval.load_failed", label=t["label"], error=f"{type(exc).__name__}: {exc}")
                    )
                    return 1
                load_s = time.time() - t0
                metrics, preds = self.evaluate(i, t, model, tok, rows) if rows else ({}, [])
                if rows and t["adapter"]:
                    base = model.unload()
                errors = self.judge(i, t, preds, metrics, rows) if "judge" in plan["measures"] and rows else []
                if self.lm_manager is not None:
                    metrics |= self.lm_eval(i, t)
                self.results["rows"].append(
                    {
                        "label": t["label"],
                        "kind": t["kind"],
                        "step": t["step"],
                        "metrics": metrics,
                        "seconds": round(time.time() - t0, 2),
                        "load_seconds": round(load_s, 3),
                        **({"judge_errors": errors} if errors else {}),
                    }
                )
                with open(self.out / "predictions.jsonl", "a", encoding="utf-8") as fh:
                    for p in preds:
                        fh.write(json.dumps({"model": t["label"], **p}, ensure_ascii=False) + "\n")
                self.save()
                self.event("eval_model_finished", label=t["label"], metrics=metrics)
                if plan.get("lf_output_dir") and i == len(targets) - 1:
                    write_lf_files(Path(plan["lf_output_dir"]), preds, metrics, self.results["rows"][-1], plan)
            except Cancelled:
                self.fail("cancelled", message("eval.cancelled", done=i, total=len(targets)))
                return 143
            except Exception as exc:  # noqa: BLE001
                tb = traceback.format_exc(limit=6)
                self.fail("other", message("eval.failed", label=t["label"], error=f"{type(exc).__name__}: {exc}"), tb)
                return 1
        self.results["state"] = "finished"
        self.save()
        write_report(self.out)
        self.event(
            "eval_finished", results=self.results, detail=message("eval.finished", n=len(targets), rows=len(rows))
        )
        return 0

    def fail(self, cause: str, error, tb: str = "") -> None:
        from engine.eval.report import write_report

        self.results["state"] = "cancelled" if cause == "cancelled" else "failed"
        self.results["error"] = str(error)
        self.save()
        try:
            write_report(self.out)
        except Exception:  # noqa: BLE001 - the report is a convenience; the failure is what matters
            pass
        self.event("eval_failed", cause=cause, error=error, traceback=tb)

    def judge(self, i: int, t: dict, preds: list[dict], metrics: dict, rows: list[dict]) -> list[str]:
        """Every answer scored by the judge endpoint (``engine.eval.judge``); the rows' errors."""
        from engine.eval import judge as jd

        def step(k: int) -> None:
            self.progress(i, t["label"], "judge", k, len(preds))
            self.units_done += 1 if k else 0

        questions = {r["index"]: r["question"] for r in rows}
        found, errors = jd.judge_model(self.plan["judge"], t["kind"], preds, questions, step, self.judge_base)
        self.units_done += 1 if preds else 0
        metrics |= found
        return errors

    def lm_eval(self, i: int, t: dict) -> dict:
        """lm-evaluation-harness on this model (``engine.trainer.lm_eval_run``): {TASK/acc}; its documents kept."""
        from engine.trainer import lm_eval_run

        def step(task: str) -> None:
            self.progress(i, t["label"], "lm_eval", 0, 1, task=task)
            self.units_done += len(self.plan["lm_eval"]["tasks"])

        metrics, samples = lm_eval_run.run(t, self.plan, self.lm_manager, step)
        with open(self.out / "lm_eval_samples.jsonl", "a", encoding="utf-8") as fh:
            for x in samples:
                fh.write(json.dumps({"model": t["label"], **x}, ensure_ascii=False) + "\n")
        return metrics

    def evaluate(self, i: int, t: dict, model, tok, rows: list[dict]) -> tuple[dict, list[dict]]:
        plan = self.plan
        keep = ("index", "prompt", "question", "history", "system", "reference")
        preds = [{k: r[k] for k in keep} for r in rows]
        metrics: dict = {}
        bs = plan["generation"]["batch_size"]
        if "loss" in plan["measures"]:
            nll_total, count_total = 0.0, 0
            for start in range(0, len(rows), bs):
                self.progress(i, t["label"], "loss", start, len(rows))
                batch = rows[start : start + bs]
                nll, counts = batch_nll(model, tok, batch, plan["device"])
                for k, (a, c) in enumerate(zip(nll, counts)):
                    preds[start + k]["loss"] = round(a / c, 6) if c else None
                nll_total += sum(nll)
                count_total += sum(counts)
                self.units_done += len(batch)
            loss = nll_total / max(1, count_total)
            metrics["loss"] = round(loss, 6)
            metrics["perplexity"] = round(math.exp(min(loss, 700)), 4)
        if self.gen:
            order = sorted(range(len(rows)), key=lambda k: len(rows[k]["prompt_ids"]))
            for start in range(0, len(order), bs):
                self.progress(i, t["label"], "generate", start, len(rows))
                idx = order[start : start + bs]
                texts = generate_batch(model, tok, [rows[k]["prompt_ids"] for k in idx], plan)
                for k, text in zip(idx, texts):
                    preds[k]["prediction"] = text
                    preds[k]["scores"] = ms.row_scores(text, rows[k]["reference"], self.gen)
                self.units_done += len(idx)
            names = [c for c in plan["columns"] if c in ms.ROW_COLUMNS]
            metrics |= ms.average([p["scores"] for p in preds], names)
        return metrics, preds


def ms_generation() -> tuple[str, ...]:
    from engine.eval.spec import GENERATION_MEASURES

    return GENERATION_MEASURES


# ---------------------------------------------------------------------------------------------- models
def _location(name: str) -> str:
    from engine.models.resolve import looks_local, model_path

    return str(model_path(name)) if looks_local(name) else name


def load_tokenizer(name: str):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(_location(name))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token or tok.unk_token
    return tok


def load_model(name: str, device: str):
    import torch
    from transformers import AutoModelForCausalLM

    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    model = AutoModelForCausalLM.from_pretrained(_location(name), dtype=dtype)
    model.config.use_cache = True
    return model.to(device).eval()


# ---------------------------------------------------------------------------------------------- rows
def prepare_rows(plan: dict, tok) -> list[dict]:
    """The rows to evaluate: index, canonical row, prompt text, reference answer, the trainer's input_ids / labels
    (``_encode_batch``), the prompt's token ids. The run's held-out split is rebuilt exactly (see the docstring)."""
    from engine.data.dataset_registry import _resolve, load_rows
    from engine.data.templates import prompt_text, tokenizer_info
    from engine.trainer.dataset import _encode_batch, sample_rows

    d = plan["data"]
    ddir = Path(d["dataset_dir"])
    info = tokenizer_info(tok)
    stage = "pt" if d["text"] else "sft"
    rows: list[dict] = []
    for name in d["datasets"]:
        part = load_rows(name, ddir, stage)
        if d["held_out"]:
            entry, _ = _resolve(name, ddir)
            if entry is not None and entry.num_samples:
                part = sample_rows(part, entry.num_samples, d["held_out"]["seed"])
        part = part[: d["max_samples"] or None]
        rows += part
    kwargs = {
        "tokenizer": tok,
        "template": d["template"],
        "info": info,
        "stage": stage,
        "train_on_prompt": d["train_on_prompt"],
        "cutoff": d["cutoff_len"],
        "mask_history": d["mask_history"],
        "enable_thinking": d["enable_thinking"],
        "tool_format": d["tool_format"],
    }
    enc = _encode_batch({"row": [json.dumps(r, ensure_ascii=False) for r in rows]}, **kwargs)
    if stage == "pt":
        enc["input_ids"] = [x[: d["cutoff_len"]] for x in enc["input_ids"]]
        enc["labels"] = [x[: d["cutoff_len"]] for x in enc["labels"]]
    keep = [k for k, labels in enumerate(enc["labels"]) if any(x != IGNORE for x in labels)]
    if d["held_out"]:
        from datasets import Dataset

        v = d["held_out"]["val_size"]
        n_eval = int(v) if v >= 1 else math.ceil(len(keep) * v)
        split = Dataset.from_dict({"k": keep}).train_test_split(
            test_size=n_eval, seed=d["held_out"]["seed"], shuffle=True
        )
        keep = list(split["test"]["k"])
    keep = keep[: d["limit"] or None]
    out = []
    for k in keep:
        row = rows[k]
        earlier: list[dict] = []  # the turns before the question, for the Chat tab's *Open the row in Chat*
        if stage == "pt":
            prompt, reference, question = "", "", ""
        else:
            *history, answer = row["messages"]
            prompt = prompt_text(
                d["template"], info, row.get("system", ""), history, row.get("tools"), tool_format=d["tool_format"]
            )
            reference = answer["content"]
            question = history[-1]["content"] if history else ""
            earlier = [
                {k: m[k] for k in ("role", "content")} for m in history[:-1] if m["role"] in ("user", "assistant")
            ]
        out.append(
            {
                "index": k,
                "prompt": prompt,
                "reference": reference,
                "question": question,
                **{"history": earlier, "system": row.get("system", "")},  # for Open the row in Chat
                "input_ids": enc["input_ids"][k],
                "labels": enc["labels"][k],
                "prompt_ids": tok(prompt, add_special_tokens=False)["input_ids"] if prompt else [],
            }
        )
    return out


# ---------------------------------------------------------------------------------------------- loss, generation
def batch_nll(model, tok, batch: list[dict], device: str) -> tuple[list[float], list[int]]:
    """Per row: the summed negative log-likelihood of its scored tokens (labels != -100, shifted by one as in
    training) and their count."""
    import torch
    import torch.nn.functional as F

    from engine.trainer.collators import PadCollator

    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id or 0
    b = PadCollator(int(pad))([{"input_ids": r["input_ids"], "labels": r["labels"]} for r in batch])
    with torch.no_grad():
        logits = model(input_ids=b["input_ids"].to(device), attention_mask=b["attention_mask"].to(device)).logits
    logits = logits[:, :-1].float()
    labels = b["labels"][:, 1:].to(logits.device)
    nll = F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=IGNORE, reduction="none"
    )
    nll = nll.view(labels.shape).sum(1)
    counts = (labels != IGNORE).sum(1)
    return [float(x) for x in nll.cpu()], [int(c) for c in counts.cpu()]


def stop_ids(tok, template: str) -> tuple[list[int], list[str]]:
    from engine.data.templates import stop_words, tokenizer_info

    words = stop_words(template, tokenizer_info(tok))
    ids = [tok.eos_token_id] if tok.eos_token_id is not None else []
    for w in words:
        piece = tok(w, add_special_tokens=False)["input_ids"]
        if len(piece) == 1 and piece[0] not in ids:
            ids.append(piece[0])
    return ids, words


def generate_batch(model, tok, prompts: list[list[int]], plan: dict) -> list[str]:
    """Answers for token-id prompts of any lengths in one ``generate``: left padding, KV cache; cut at the first stop
    token or stop word."""
    import torch

    g, device = plan["generation"], plan["device"]
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for k, p in enumerate(prompts):
        ids[k, width - len(p) :] = torch.tensor(p)
        mask[k, width - len(p) :] = 1
    eos, words = stop_ids(tok, plan["data"]["template"])
    kwargs = {
        "max_new_tokens": g["max_new_tokens"],
        "do_sample": g["temperature"] > 0,
        "pad_token_id": pad,
        "eos_token_id": eos,
        "use_cache": True,
    }
    if g["temperature"] > 0:
        kwargs |= {"temperature": g["temperature"], "top_p": g["top_p"], "top_k": g.get("top_k") or 0}
    else:
        kwargs |= {"temperature": None, "top_p": None, "top_k": None}
    with torch.no_grad():
        out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), **kwargs)
    texts = []
    for row in out[:, width:].tolist():
        cut = next((j for j, x in enumerate(row) if x in eos), len(row))
        text = tok.decode(row[:cut], skip_special_tokens=True)
        ends = [text.find(w) for w in words if w and w in text]
        texts.append(text[: min(ends)] if ends else text)
    return texts


# ---------------------------------------------------------------------------------------------- LLaMA-Factory's files
def write_lf_files(out: Path, preds: list[dict], metrics: dict, row: dict, plan: dict) -> None:
    """What LLaMA-Factory writes in its output_dir: for ``do_predict`` with ``predict_with_generate``,
    ``generated_predictions.jsonl`` (prompt, predict, label per row); ``predict_results.json`` (or
    ``eval_results.json`` for ``do_eval``): the metrics under the prefix, runtime and speed, as transformers'
    ``save_metrics`` writes them (indent 4, keys sorted), merged into ``all_results.json`` likewise."""
    prefix = plan.get("lf_prefix") or "predict"
    out.mkdir(parents=True, exist_ok=True)
    if prefix == "predict" and any("prediction" in p for p in preds):
        with open(out / "generated_predictions.jsonl", "w", encoding="utf-8") as fh:
            for p in preds:
                line = {"prompt": p["prompt"], "predict": p.get("prediction", ""), "label": p["reference"]}
                fh.write(json.dumps(line, ensure_ascii=False) + "\n")
    runtime = max(1e-9, row["seconds"] - row["load_seconds"])
    steps = math.ceil(len(preds) / plan["generation"]["batch_size"])
    names = ("loss", "bleu-4", "rouge-1", "rouge-2", "rouge-l")
    result = {f"{prefix}_{k}": v for k, v in metrics.items() if k in names and v is not None}
    result |= {
        f"{prefix}_model_preparation_time": round(row["load_seconds"], 4),
        f"{prefix}_runtime": round(runtime, 4),
        f"{prefix}_samples_per_second": round(len(preds) / runtime, 3),
        f"{prefix}_steps_per_second": round(steps / runtime, 3),
    }
    text = json.dumps(result, indent=4, sort_keys=True) + "\n"
    (out / f"{prefix}_results.json").write_text(text, encoding="utf-8")
    try:
        combined = json.loads((out / "all_results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        combined = {}
    combined.update(result)
    (out / "all_results.json").write_text(json.dumps(combined, indent=4, sort_keys=True) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m engine.trainer.evaluate")
    ap.add_argument("--plan", required=True)
    ap.add_argument("--events", required=True)
    args = ap.parse_args(argv)
    plan_path = Path(args.plan)
    plan = json.loads(plan_path.read_text(encoding="utf-8"))
    quantized = any(lean.model_is_quantized(str(t.get("model") or "")) for t in plan["targets"])
    lean.without_quantizers(quantized)  # only as `python -m` (own_process)
    job = Evaluation(plan, plan_path.parent, Path(args.events))
    signal.signal(signal.SIGTERM, lambda *_: setattr(job, "stop", True))
    print(f"[eval] {len(plan['targets'])} models: {', '.join(t['label'] for t in plan['targets'])}", flush=True)
    return job.run()


if __name__ == "__main__":
    lean.own_process()  # what this job does not use stays unimported (engine.trainer.lean)
    sys.exit(main())
