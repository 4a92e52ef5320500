"""Merge subprocess: ``python -m engine.trainer.merge SOURCE [SOURCE ...] --out DIR --tmp-dir TMP --events FILE ...``.

Heavy: imports torch, transformers, peft, safetensors (inside the functions that need them, so an adapter-only
export never loads torch). Started as a registry command run by engine.export.merge_jobs once engine.export.checks (the
light half) has checked the inputs; re-checks them itself (memory too, unless --force) so it is safe to run by hand.

What it does: loads the base in float32 (never quantized: a QLoRA adapter is merged onto full-precision weights),
applies the adapters unmerged to get reference logits on fixed prompts, merges them (in order) with
``merge_and_unload``, checks the float32 merge against the reference, casts to the chosen dtype, writes sharded
safetensors into TMP, then reloads TMP with ``AutoModelForCausalLM.from_pretrained`` and checks its logits against
the reference within a tolerance that fits the dtype (``tolerance``). A reward model (stage rm: ``plan.head`` is
``seq_cls``) goes the same way with ``AutoModelForSequenceClassification`` (one label): its logits are the scores,
its trained score head comes with the adapter (peft's modules_to_save), and the merged config keeps the pad token id
the scores need to find each sequence's last token. Only a verified TMP is renamed to the target;
SIGTERM, an error or a failed check removes TMP and leaves the target untouched. Progress goes to FILE as
merge_progress / merge_finished / merge_failed events (engine/core/events.py) and to stdout.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import signal
import sys
import time
import traceback
from pathlib import Path

from engine.core import acting
from engine.core import events as ev
from engine.core.messages import from_exception, to_json
from engine.export import checks as xp
from engine.export import sizes, written
from engine.export.checks import ExportError, ExportPlan
from engine.export.messages import message
from engine.trainer import lean

NUM_PROMPTS, PROMPT_LEN = 4, 24
# fp32: 1e-4 absolute on logits of magnitude <= 1 (the demo model: observed ~1e-6), scaled with the logit magnitude
# of real models (|logits| ~ 10-40), where float32 rounding of W + BA vs W x + B(A x) grows with the scale.
FP32_TOL = 1e-4
# bf16 / fp16 keep 8 / 11 significant bits: storing weights and running activations in them moves each logit by a
# few units of roundoff of the logit scale, growing with depth. We allow 16 ulps of the largest reference logit
# (bf16: 16 * 2**-8 = 6.3%, fp16: 16 * 2**-11 = 0.8%), floored at 16 ulps of 1. That is well above the observed
# rounding (see tests) and well below what skipping an adapter or merging it twice changes (the tests check that).
ULPS = 16
EPS = {"bf16": 2.0**-8, "fp16": 2.0**-11}


class Cancelled(Exception):
    pass


class VerificationError(Exception):
    def __init__(self, message: str, report: dict):
        super().__init__(message)
        self.report = report


def tolerance(dtype: str, ref_max_abs: float) -> float:
    if dtype == "fp32":
        return FP32_TOL * max(1.0, ref_max_abs)
    return ULPS * EPS[dtype] * max(1.0, ref_max_abs)


def _on_sigterm(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not interrupt the clean-up
    raise Cancelled(message("export.cancelled"))


class Reporter:
    def __init__(self, events_path: str, out_dir: str):
        self.path, self.out_dir = Path(events_path), out_dir
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def emit(self, type_: str, **payload) -> None:
        event = ev.append_event(self.path, type_, None, out_dir=self.out_dir, **payload)
        print(json.dumps(event, ensure_ascii=False), flush=True)

    def stage(self, stage: str, i: int = 0, n: int = 0, detail: str = "") -> None:
        """A progress event; a catalog ``detail`` keeps its key beside the text (``detail_msg``) for the page."""
        keyed = {"detail_msg": to_json(detail)} if getattr(detail, "key", "") else {}
        self.emit("merge_progress", stage=stage, i=i, n=n, detail=str(detail), **keyed)
        hold = _stage_holds().pop(stage, 0.0)  # tests: "verifying=3" keeps the merge in that stage so a cancel lands
        if hold:
            time.sleep(hold)


def _stage_holds(cache: dict = {}) -> dict[str, float]:  # noqa: B006 - parsed once per process, each hold used once
    """``STUDIO_MERGE_STAGE_DELAY`` (tests only, like ``STUDIO_MERGE_SHARD_DELAY``): ``stage=seconds`` pairs."""
    if "holds" not in cache:
        holds = {}
        for item in os.environ.get("STUDIO_MERGE_STAGE_DELAY", "").split(","):
            stage, _, seconds = item.partition("=")
            try:
                holds[stage.strip()] = float(seconds)
            except ValueError:
                continue
        cache["holds"] = holds
    return cache["holds"]


# ----------------------------------------------------------------------------------------------- merge
def fixed_prompts(vocab_size: int):
    """Deterministic token ids (no tokenizer needed): the same prompts for the reference and the merged model."""
    import torch

    gen = torch.Generator().manual_seed(1234)
    return torch.randint(0, vocab_size, (NUM_PROMPTS, PROMPT_LEN), generator=gen)


def logits_of(model, ids):
    import torch

    with torch.no_grad():
        return model(input_ids=ids.to(model.device)).logits.float().cpu()


def auto_class(plan: ExportPlan):
    """The transformers auto class of the merged model: a reward model's sequence classifier, a vision-language
    model's image-text class (its config has a vision_config), else a causal LM."""
    from engine.trainer.vision import model_class

    try:
        config = json.loads((Path(plan.base) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        config = {}
    return model_class(vision=bool(config.get("vision_config")), reward=plan.head == "seq_cls")


def pad_token_id(plan: ExportPlan) -> int | None:
    """A reward model scores each sequence at its last non-pad token, so its config needs the pad token id: the
    tokenizer's (the adapter's copy first, then the base's), or its end-of-sequence token."""
    from transformers import AutoTokenizer

    dirs = [s.weights_dir for s in plan.sources if s.kind == "adapter"] + [plan.base]
    for d in dirs:
        if any((Path(d) / n).is_file() for n in sizes.TOKENIZER_FILES):
            tok = AutoTokenizer.from_pretrained(d)
            return tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    return None


def merge_weights(
    plan: ExportPlan, tmp: Path, rep: Reporter, device: str, max_shard: int, *, legacy_format: bool = False
) -> dict:
    import torch

    adapters = [s for s in plan.sources if s.kind == "adapter"]
    if device == "cuda" and not torch.cuda.is_available():
        raise ExportError(message("export.no_cuda"))
    rep.stage("loading", 1, len(adapters) + 1, message("export.detail_base", path=plan.base))
    # On a GPU the weights load straight into its memory: the host never holds the float32 model (see
    # exporting.estimate_memory, which the memory check before the merge relies on).
    load = {"device_map": device} if device == "cuda" else {}
    auto = auto_class(plan)
    extra = {"num_labels": 1} if plan.head == "seq_cls" else {}
    model = auto.from_pretrained(plan.base, dtype=torch.float32, **load, **extra)
    if plan.head == "seq_cls" and model.config.pad_token_id is None:
        model.config.pad_token_id = pad_token_id(plan)
    if getattr(model.config, "quantization_config", None):
        model = model.dequantize()  # a pre-quantized base: merge onto dequantized weights, never packed ones
    model.eval()
    ids = fixed_prompts(model.config.get_text_config().vocab_size)
    image_token = getattr(model.config, "image_token_id", None)  # a VLM's: text prompts must not hold it
    if image_token is not None:
        ids[ids == image_token] = (image_token + 1) % model.config.get_text_config().vocab_size
    report: dict = {
        "prompts": list(ids.shape),
        "merge_dtype": "float32",
        "dtype": plan.dtype,
        "device": device,
        "base": plan.base,
        "head": plan.head,
        "adapters": [s.weights_dir for s in adapters],
        # QLoRA adapters are merged onto this float32 base, never onto quantized weights.
        "quantized_training_bits": [s.quant_bits for s in adapters],
    }
    if adapters:
        from peft import PeftModel

        names = [f"adapter_{i}" for i in range(len(adapters))]
        model = PeftModel.from_pretrained(model, adapters[0].weights_dir, adapter_name=names[0])
        for i, (name, src) in enumerate(zip(names[1:], adapters[1:]), start=2):
            rep.stage("loading", i, len(adapters) + 1, message("export.detail_adapter", path=src.weights_dir))
            model.load_adapter(src.weights_dir, adapter_name=name)
        model.base_model.set_adapter(names)  # all active at once: base + every adapter, unmerged
        model.eval()
        ref = logits_of(model, ids)
        with model.disable_adapter():
            base_logits = logits_of(model, ids)
        report["adapter_effect_max_abs"] = float((ref - base_logits).abs().max())
        rep.stage("merging", 1, 1, message("export.detail_merging", n=len(adapters), base=plan.base))
        model = model.merge_and_unload(safe_merge=True, adapter_names=names)
        fp32_diff = float((logits_of(model, ids) - ref).abs().max())
        fp32_tol = tolerance("fp32", float(ref.abs().max()))
        report.update(fp32_merge_max_abs_diff=fp32_diff, fp32_merge_tolerance=fp32_tol)
        if not fp32_diff <= fp32_tol:
            raise VerificationError(message("export.fp32_mismatch", diff=fp32_diff, tol=fp32_tol), report)
    else:
        ref = logits_of(model, ids)
    torch_dtype = getattr(torch, sizes.DTYPES[plan.dtype][0])
    model = model.to(torch_dtype)
    model.config.dtype = torch_dtype
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config.architectures = [type(model).__name__]  # a reward model says so (LlamaForSequenceClassification)
    save_sharded(model, tmp, rep, max_shard, legacy_format=legacy_format)
    del model
    gc.collect()
    rep.stage("verifying", 1, 1, message("export.detail_verifying"))
    loaded = auto.from_pretrained(str(tmp), dtype=torch_dtype, **load).eval()
    diff = float((logits_of(loaded, ids) - ref).abs().max())
    ref_max = float(ref.abs().max())
    tol = tolerance(plan.dtype, ref_max)
    report.update(
        max_abs_diff=diff,
        tolerance=tol,
        reference_max_abs=ref_max,
        passed=diff <= tol,
        reference="base + adapters (PEFT, unmerged, float32)" if adapters else "source model (float32)",
    )
    op = "<=" if diff <= tol else ">"
    report["summary"] = message("export.verify_summary", diff=diff, op=op, tol=tol, dtype=plan.dtype)
    (tmp / "verify.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    if not report["passed"]:
        raise VerificationError(message("export.verify_failed", summary=report["summary"]), report)
    return report


def save_sharded(model, tmp: Path, rep: Reporter, max_shard: int, *, legacy_format: bool = False) -> None:
    """Sharded safetensors with one progress event per shard; tied tensors are stored once (the first name).
    ``legacy_format`` (LLaMA-Factory's export_legacy_format): PyTorch ``.bin`` files (``pytorch_model*.bin`` and
    their index), the names transformers reads them by."""
    import torch
    from huggingface_hub import split_torch_state_dict_into_shards
    from safetensors.torch import save_file

    state, seen = {}, set()
    for name, tensor in model.state_dict().items():
        key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape))
        if key in seen:
            continue  # e.g. lm_head tied to embed_tokens: transformers re-ties it from the config on load
        seen.add(key)
        state[name] = tensor.detach()
    pattern = "pytorch_model{suffix}.bin" if legacy_format else "model{suffix}.safetensors"
    split = split_torch_state_dict_into_shards(state, max_shard_size=max_shard, filename_pattern=pattern)
    delay = float(os.environ.get("STUDIO_MERGE_SHARD_DELAY", "0") or 0)  # tests use it to cancel mid-write
    n = len(split.filename_to_tensors)
    for i, (fname, names) in enumerate(split.filename_to_tensors.items(), start=1):
        rep.stage("saving", i, n, fname)
        # one shard at a time on the host: a GPU merge never copies the whole model into RAM
        shard = {k: state[k].contiguous().cpu() for k in names}
        if legacy_format:
            torch.save(shard, str(tmp / fname))
        else:
            save_file(shard, str(tmp / fname), metadata={"format": "pt"})
        if delay:
            time.sleep(delay)
    if split.is_sharded:
        index = {
            "metadata": {"total_size": sum(t.numel() * t.element_size() for t in state.values())},
            "weight_map": split.tensor_to_filename,
        }
        index_name = "pytorch_model.bin.index.json" if legacy_format else "model.safetensors.index.json"
        (tmp / index_name).write_text(json.dumps(index, indent=2), encoding="utf-8")
    model.config.save_pretrained(str(tmp))
    gen = getattr(model, "generation_config", None)
    if gen is not None and not (tmp / "generation_config.json").exists():
        gen.save_pretrained(str(tmp))


def copy_support_files(plan: ExportPlan, tmp: Path) -> list[str]:
    """Tokenizer, chat template and generation config: the adapter's own copies win (the trainer may have set the
    chat template there), then the base's."""
    copied = []
    dirs = [Path(s.weights_dir) for s in plan.sources if s.kind == "adapter"] + [Path(plan.base)]
    for name in (*sizes.TOKENIZER_FILES, "generation_config.json"):
        for d in dirs:
            if (d / name).is_file():
                shutil.copy2(d / name, tmp / name)
                copied.append(f"{name} (from {d})")
                break
    return copied


def export_adapter(plan: ExportPlan, tmp: Path, rep: Reporter) -> dict:
    src = plan.sources[0]
    rep.stage("saving", 1, 1, message("export.detail_copying", path=src.weights_dir))
    for item in Path(src.weights_dir).iterdir():
        (shutil.copytree if item.is_dir() else shutil.copy2)(item, tmp / item.name)
    report = {
        "adapter_only": True,
        "passed": True,
        "base": plan.base,
        "summary": message("export.adapter_copied"),
    }
    (tmp / "verify.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    return report


def write_card(plan: ExportPlan, path: Path, settings: dict, report: dict) -> None:
    """README.md: what was trained (the run's spec), on what, how it ended, and how this folder was made."""
    lines = ["---", "library_name: " + ("peft" if plan.adapter_only else "transformers"), "tags: [studio]", "---", ""]
    lines += [
        f"# {Path(plan.out_dir).name}",
        "",
        ("PEFT adapter" if plan.adapter_only else "Merged model")
        + f" exported by Studio on {time.strftime('%Y-%m-%d %H:%M:%S')}.",
        "",
        f"Base model: `{plan.base}`",
        "",
    ]
    for src in plan.sources:
        lines += [f"## Source: `{src.run_dir or src.weights_dir}`", ""]
        spec = src.spec or {}
        m, meth, data, train = (spec.get(k) or {} for k in ("model", "method", "data", "train"))
        quant = meth.get("quantization") or {}
        rows = [
            ("model", m.get("name_or_path", plan.base)),
            ("stage", meth.get("stage")),
            ("method", meth.get("finetuning", src.kind if src.kind == "model" else "lora")),
            ("quantization", f"{quant.get('bits')}-bit {quant.get('quant_type', '')}" if quant.get("bits") else None),
            ("datasets", ", ".join(data.get("datasets") or []) or None),
            ("template", data.get("template")),
            ("cutoff length", data.get("cutoff_len")),
            ("learning rate", train.get("learning_rate")),
            ("epochs / max steps", f"{train.get('num_epochs')} / {train.get('max_steps')}" if train else None),
            (
                "batch x accumulation",
                f"{train.get('per_device_batch_size')} x {train.get('gradient_accumulation')}" if train else None,
            ),
            ("precision", train.get("precision")),
            ("seed", train.get("seed")),
        ]
        if src.kind == "adapter":
            cfg = src.adapter_config
            if cfg.get("peft_type") == "OFT":
                rows += [("OFT rank / block size", f"{cfg.get('r')} / {cfg.get('oft_block_size')}")]
            else:
                rows += [
                    ("LoRA rank / alpha", f"{cfg.get('r')} / {cfg.get('lora_alpha')}"),
                    ("DoRA", cfg.get("use_dora")),
                ]
            targets = cfg.get("target_modules") or []
            targets = [targets] if isinstance(targets, str) else targets
            rows += [("targets", ", ".join(sorted(targets)) or None), ("adapter", src.weights_dir)]
        lines += ["| setting | value |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows if v not in (None, "")]
        finished = ev.last_event(Path(src.run_dir) / "events.jsonl", ("finished",)) if src.run_dir else None
        if finished:
            metrics = {k: v for k, v in finished["payload"].items() if isinstance(v, (int, float, str))}
            lines += ["", "Final metrics: " + ", ".join(f"{k}={v}" for k, v in metrics.items())]
        lines.append("")
    lines += ["## Merge settings", "", "| setting | value |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in settings.items()]
    lines += ["", "## Verification", "", report.get("summary", ""), "", "Full report: `verify.json`.", ""]
    path.write_text("\n".join(lines), encoding="utf-8")


def publish(tmp: Path, out: Path, overwrite: bool, kind: str = "merge") -> None:
    """Rename the finished temp folder onto the target, marked as Studio's (``engine.export.written``); an old target
    (``--overwrite``) goes only after that, and only if an earlier merge or export wrote it all."""
    written.mark(tmp, kind)
    old = None
    if out.exists():
        if not overwrite:
            raise ExportError(message("export.out_exists", out=out))
        problem = written.overwrite_problem(out)  # checked again: files may have been added since the plan
        if problem is not None:
            raise ExportError(problem)
        old = out.parent / f".{out.name}.old-{os.getpid()}"
        out.rename(old)
    tmp.rename(out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def push_to_hub(out: Path, repo: str) -> dict:
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return {"pushed": False, "message": f"push to {repo} skipped: offline (HF_HUB_OFFLINE is set)"}
    from huggingface_hub import HfApi, get_token

    token = os.environ.get("HF_TOKEN") or get_token()
    if not token:
        return {
            "pushed": False,
            "message": f"push to {repo} skipped: no Hugging Face token (set HF_TOKEN or run `hf auth login`)",
        }
    try:
        api = HfApi(token=token)
        api.create_repo(repo, exist_ok=True, private=True)
        api.upload_folder(repo_id=repo, folder_path=str(out))
    except Exception as exc:  # noqa: BLE001 -- network or permission: the local export is done and stays
        return {"pushed": False, "message": f"push to {repo} failed: {exc}"}
    return {"pushed": True, "message": f"pushed to https://huggingface.co/{repo}"}


# ----------------------------------------------------------------------------------------------- entry
def main(argv: list[str] | None = None) -> int:
    args = xp.merge_arg_parser().parse_args(argv)
    if args.events:  # a target chosen at the shell (engine.core.acting): the grant in the run's folder
        acting.honour_grant(Path(args.events).parent)
    signal.signal(signal.SIGTERM, _on_sigterm)
    out = Path(args.out).expanduser().resolve()
    tmp = Path(args.tmp_dir) if args.tmp_dir else xp.temp_dir_for(out)
    rep = Reporter(args.events or str(out.parent / f"{out.name}.merge-events.jsonl"), str(out))
    t0 = time.time()
    try:
        plan = xp.plan_export(  # again: a queued merge starts later, when memory or disk may have changed
            args.sources,
            str(out),
            dtype=args.dtype,
            overwrite=args.overwrite,
            adapter_only=args.adapter_only,
            device=args.device,
            max_shard_size=args.max_shard_size,
            force=args.force,
            base=args.base,
        )
        lean.without_quantizers(lean.model_is_quantized(plan.base))  # a pre-quantized base dequantizes with it
        max_shard = sizes.parse_size(args.max_shard_size)
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        if plan.adapter_only:
            report = export_adapter(plan, tmp, rep)
        else:
            report = merge_weights(plan, tmp, rep, args.device, max_shard, legacy_format=args.legacy_format)
        copied = copy_support_files(plan, tmp)
        settings = {
            "dtype": plan.dtype,
            "max_shard_size": args.max_shard_size,
            "device": args.device,
            "adapter_only": plan.adapter_only,
            "format": "bin (legacy)" if args.legacy_format else "safetensors",
            "sources": [s.weights_dir for s in plan.sources],
        }
        write_card(plan, tmp / "README.md", settings, report)
        publish(tmp, out, args.overwrite)
        # The verified model is published: a cancel from now on comes too late to undo it, and must not make the
        # merge read "cancelled" over a complete model (the Export tab and the Runs tab would both lie).
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        late = float(os.environ.get("STUDIO_MERGE_AFTER_PUBLISH_DELAY", "0") or 0)  # tests: a cancel lands here
        if late:
            time.sleep(late)
        push = push_to_hub(out, args.push_to_hub) if args.push_to_hub else None
        if push and not push["pushed"]:
            rep.emit("warning", field="push_to_hub", message=push["message"])
        rep.emit(
            "merge_finished",
            stage="done",
            report=report,
            copied=copied,
            push=push,
            seconds=round(time.time() - t0, 2),
            kind="adapter" if plan.adapter_only else "merged",
            summary_msg=to_json(report.get("summary")),
        )
        return 0
    except Cancelled as exc:
        _fail(rep, "cancelled", from_exception(exc))
        return 130
    except ExportError as exc:
        _fail(rep, "input", from_exception(exc))
        return 2
    except VerificationError as exc:
        _fail(rep, "verification", from_exception(exc), report=exc.report)
        return 1
    except Exception as exc:  # noqa: BLE001 -- anything else: reported whole, so the UI can show it
        _fail(rep, "other", f"{type(exc).__name__}: {exc}", traceback.format_exc()[-4000:])
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _fail(rep: Reporter, cause: str, error: str, tb: str = "", report: dict | None = None) -> None:
    """The merge_failed event; a catalog ``error`` keeps its key beside the text (``error_msg``) for the page."""
    keyed = {"error_msg": to_json(error)} if getattr(error, "key", "") else {}
    try:
        rep.emit("merge_failed", stage="failed", cause=cause, error=str(error), traceback=tb, report=report, **keyed)
    except Cancelled:
        pass


def exit_now(code: int) -> None:
    """End the process with ``code`` once its end is written (events, temp folder removed), without the
    interpreter's shutdown: after a cancel that shutdown sat in native code (torch / bitsandbytes teardown, no Python
    frame) for seconds to minutes, so the run lived on after ``merge_failed: cancelled`` until the stop's SIGKILL."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


if __name__ == "__main__":
    lean.own_process()  # what this job does not use stays unimported (engine.trainer.lean)
    exit_now(main())
