"""GGUF import subprocess: ``python -m engine.trainer.gguf_import FILE.gguf --out DIR --tmp-dir TMP --events F``.

Heavy: torch, transformers (its GGUF loader, which dequantizes through the ``gguf`` package), llama_cpp where
installed (engine.trainer.gguf_verify). Started as a registry command run by engine.jobs.gguf_imports once
engine.models.gguf_file (the light half) has read the header; reads it again itself (a queued import starts later).
``studio demo`` calls ``import_gguf`` in its own process for the demo's SmolLM2 (engine.trainer.demo).

What it does: transformers' loader dequantizes every tensor to float32 (``from_pretrained(dir, gguf_file=...)``) and
reads the tokenizer and its chat template from the file. ``save_pretrained`` refuses a model loaded so ("quantized
with gguf and is not serializable"), so a plain model is built from the same config without the quantization config,
the dequantized state dict assigned to it, and that is saved into TMP as float32 safetensors with the tokenizer, the
chat template and the generation config. TMP is then verified: its logits on a few prompts against the GGUF read by
transformers' loader (the same float32 values: 16 units of 2**-20 of the largest logit, for a different summation
order at most) and by llama.cpp, which multiplies the quantized weights with activations rounded to 8 bits (Q8_0 /
Q8_1 / Q8_K blocks), so its logits carry that rounding too: 16 units of 2**-7, as the Q8_0 export check allows.
The record ``gguf_import.json`` (source file, sha256, quantization, tolerances and the differences measured) goes
into TMP, and only a verified TMP is renamed onto DIR, which must not exist: an import never overwrites. SIGTERM, an
error or a failed check removes TMP. The weights carry the GGUF's rounding: they are the quantized values, not the
original model's. Progress: gguf_import_progress / gguf_import_finished / gguf_import_failed events in F.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
import traceback
from pathlib import Path

from engine.core import events as ev
from engine.core.messages import from_exception, to_json
from engine.models import gguf_file as gf
from engine.models.messages import message
from engine.trainer import gguf_verify, lean

EXACT_EPS = 2.0**-20  # the folder against transformers' read of the GGUF: the same float32 values
CPP_EPS = 2.0**-7  # against llama.cpp: its activations rounded to 8 bits in each block's dot products


class Cancelled(Exception):
    pass


class VerificationError(Exception):
    def __init__(self, msg, report: dict):
        super().__init__(msg)
        self.report = report


def _on_sigterm(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not interrupt the clean-up
    raise Cancelled(message("models.gguf_cancelled"))


class Reporter:
    """Events into the run's file (and stdout); ``events=None``: printed only (``studio demo``)."""

    def __init__(self, events: str | None, out: Path):
        self.path, self.out = (Path(events) if events else None), str(out)

    def emit(self, type_: str, **payload) -> None:
        if self.path is not None:
            event = ev.append_event(self.path, type_, None, out_dir=self.out, **payload)
            print(json.dumps(event, ensure_ascii=False), flush=True)

    def stage(self, stage: str, detail) -> None:
        self.emit("gguf_import_progress", stage=stage, detail=str(detail), detail_msg=to_json(detail))
        if self.path is None:
            print(f"[import-gguf] {detail}", flush=True)


def plain_model(loaded):
    """The dequantized model as one ``save_pretrained`` writes: its config without the GGUF quantization config, its
    float32 state dict assigned (no copy), tied weights tied again, the generation config kept."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = loaded.config.to_dict()
    config.pop("quantization_config", None)
    config.pop("_model_name_or_path", None)
    config = AutoConfig.for_model(**config)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict(), assign=True, strict=True)
    model.tie_weights()
    model.generation_config = loaded.generation_config
    return model.eval()


def import_gguf(gguf_path: Path, out: Path, tmp: Path, rep: Reporter) -> dict:
    """Dequantize, save into ``tmp``, verify, record, rename onto ``out``; the record. GgufError for a file or
    target refused (``out`` existing among them), VerificationError when the logits differ."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    header = gf.read_header(gguf_path)
    if out.exists() or out.is_symlink():
        raise gf.GgufError(message("models.gguf_exists", path=out, name=out.name))
    gf.check_space(header, out)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    src = Path(header.path)
    rep.stage(
        "reading",
        message(
            "models.gguf_reading",
            file=src.name,
            quant=header.quantization,
            tensors=sum(header.tensor_types.values()),
            arch=header.architecture,
        ),
    )
    sha = gf.sha256_of(src)
    tok = AutoTokenizer.from_pretrained(str(src.parent), gguf_file=src.name)
    loaded = AutoModelForCausalLM.from_pretrained(str(src.parent), gguf_file=src.name, dtype=torch.float32).eval()
    rep.stage("writing", message("models.gguf_writing", out=out))
    model = plain_model(loaded)
    model.save_pretrained(str(tmp))
    tok.save_pretrained(str(tmp))
    del model
    rep.stage("verifying", message("models.gguf_verifying"))
    fmt = f"gguf-{header.quantization.lower()}"
    report = gguf_verify.verify(tmp, src, fmt, got=loaded, eps=EXACT_EPS, cpp_eps=CPP_EPS)
    saved_tok = AutoTokenizer.from_pretrained(str(tmp))
    cpp = report["llama_cpp"]
    record = {
        "source": str(src),
        "file": src.name,
        "sha256": sha,
        "bytes": header.size,
        "architecture": header.architecture,
        "gguf_name": header.name,
        "quantization": header.quantization,
        "tensor_types": header.tensor_types,
        "weights": f"float32, dequantized from {header.quantization}: the GGUF's values with its rounding, not the "
        "original model's weights",
        "imported": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "max_abs_diff": report["max_abs_diff"],
        "tolerance": report["tolerance"],
        "tolerance_rule": "16 x 2**-20 x max(1, largest logit): the same float32 values read two ways",
        "llama_cpp": None
        if cpp is None
        else {
            "max_abs_diff": cpp["max_abs_diff"],
            "tolerance": cpp["tolerance"],
            "tolerance_rule": "16 x 2**-7 x max(1, largest logit): llama.cpp rounds activations to 8 bits",
            "greedy_same": cpp["greedy_same"],
            "passed": cpp["passed"],
        },
        "greedy_same": report["greedy_same"],
        "prompts": report["prompts"],
        "chat_template": bool(saved_tok.chat_template) and saved_tok.chat_template == tok.chat_template,
        "generation_config": (tmp / "generation_config.json").is_file(),
        "passed": bool(report["passed"]),
    }
    summary = _summary(record)
    if not record["passed"]:
        raise VerificationError(message("models.gguf_verify_failed", summary=summary), record)
    (tmp / gf.RECORD).write_text(json.dumps(record, indent=2, ensure_ascii=False), encoding="utf-8")
    if out.exists() or out.is_symlink():  # made while the import ran: still never overwritten
        raise gf.GgufError(message("models.gguf_exists", path=out, name=out.name))
    tmp.rename(out)
    return {**record, "summary": summary}


def _summary(record: dict):
    op = "<=" if record["max_abs_diff"] <= record["tolerance"] else ">"
    summary = message("models.gguf_summary", diff=record["max_abs_diff"], op=op, tol=record["tolerance"])
    cpp = record["llama_cpp"]
    if cpp is None:
        return f"{summary}; {message('models.gguf_no_llama_cpp')}"
    op = "<=" if cpp["passed"] else ">"
    said = message(
        "models.gguf_llama_cpp",
        diff=cpp["max_abs_diff"],
        op=op,
        tol=cpp["tolerance"],
        same=cpp["greedy_same"],
        n=record["prompts"],
    )
    return f"{summary}; {said}"


def main(argv: list[str] | None = None) -> int:
    args = gf.import_arg_parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _on_sigterm)
    out, tmp = Path(args.out).expanduser().resolve(), Path(args.tmp_dir)
    rep = Reporter(args.events, out)
    t0 = time.time()
    try:
        record = import_gguf(Path(args.gguf), out, tmp, rep)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # published: a late cancel must not read "cancelled"
        done = message(
            "models.gguf_finished",
            file=record["file"],
            quant=record["quantization"],
            out=out,
            summary=record["summary"],
        )
        rep.emit(
            "gguf_import_finished",
            stage="done",
            record={k: v for k, v in record.items() if k != "summary"},
            summary=str(done),
            summary_msg=to_json(done),
            seconds=round(time.time() - t0, 2),
        )
        return 0
    except Cancelled as exc:
        _fail(rep, "cancelled", from_exception(exc))
        return 130
    except gf.GgufError as exc:
        _fail(rep, "input", from_exception(exc))
        return 2
    except VerificationError as exc:
        _fail(rep, "verification", from_exception(exc), record=exc.report)
        return 1
    except Exception as exc:  # noqa: BLE001 -- anything else: reported whole, so the page can show it
        _fail(rep, "other", f"{type(exc).__name__}: {exc}", traceback.format_exc()[-4000:])
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _fail(rep: Reporter, cause: str, error, tb: str = "", record: dict | None = None) -> None:
    keyed = {"error_msg": to_json(error)} if getattr(error, "key", "") else {}
    try:
        rep.emit(
            "gguf_import_failed", stage="failed", cause=cause, error=str(error), traceback=tb, record=record, **keyed
        )
    except Cancelled:
        pass


if __name__ == "__main__":
    lean.own_process()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
