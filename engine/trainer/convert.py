"""Export subprocess: ``python -m engine.trainer.convert SOURCE --format FMT --out DIR --tmp-dir TMP --events F``.

Heavy: torch, transformers, peft (through engine.trainer.merge), gguf. Started as a registry command run by
engine.export.convert_jobs once engine.export.convert_plan (the light half) has checked the source and the format;
checks them again itself (a queued export starts later, when disk or memory may have changed).

One job: an adapter (a run, a run folder, an adapter folder) is first merged in float32 into TMP/merged with the
merge's own code and verification (engine.trainer.merge); a model folder is taken as it is. Then the model is written
as a GGUF (engine.trainer.gguf_write; Q4_K_M / Q5_K_M: an F16 GGUF passed through llama.cpp's llama-quantize), read
back and compared (engine.trainer.gguf_verify), an Ollama Modelfile is written beside it (engine.export.modelfile,
with the template pieces measured here on the tokenizer), and TMP (the merge removed) is renamed onto DIR. SIGTERM,
an error or a failed check removes TMP and leaves DIR untouched. Progress: export_progress / export_finished /
export_failed events in FILE.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

from engine.core import acting
from engine.core.messages import from_exception, to_json
from engine.export import convert_plan as cp
from engine.export import gguf_checks as gc
from engine.export import modelfile as mf
from engine.export import sizes
from engine.export.checks import ExportError
from engine.export.messages import message
from engine.trainer import bnb_export, gguf_verify, gguf_write
from engine.trainer import merge as mg

CHECK_CONVERSATIONS = [
    [{"role": "user", "content": "Hi"}],
    [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "and 3+3?"},
    ],
    [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}],
]


class Reporter(mg.Reporter):
    """The merge's reporter, its progress named for an export (export_progress)."""

    def stage(self, stage: str, i: int = 0, n: int = 0, detail: str = "") -> None:
        keyed = {"detail_msg": to_json(detail)} if getattr(detail, "key", "") else {}
        self.emit("export_progress", stage=stage, i=i, n=n, detail=str(detail), **keyed)


def file_stem(plan: cp.ConvertPlan) -> str:
    return Path(plan.out_dir).name


def quantize(f16: Path, out: Path, fmt: str, rep: Reporter) -> None:
    """F16 -> Q4_K_M / Q5_K_M by llama.cpp: its llama-quantize binary, else its ``llama_model_quantize`` through
    llama-cpp-python in this process (``gguf_checks.quantizer``)."""
    rep.stage("quantizing", 1, 1, message("export.quantizing", fmt=fmt))
    kind = fmt.removeprefix("gguf-").upper()
    tool = gc.quantizer()
    if tool == gc.IN_PROCESS:
        code = quantize_in_process(f16, out, kind)
        if code != 0:
            raise ExportError(message("export.quantize_failed", code=code, tail="llama_model_quantize"))
        return
    done = subprocess.run([tool, str(f16), str(out), kind], capture_output=True, text=True)
    if done.returncode != 0:
        raise ExportError(message("export.quantize_failed", code=done.returncode, tail=done.stderr[-800:]))


def quantize_in_process(f16: Path, out: Path, kind: str) -> int:
    """llama.cpp's ``llama_model_quantize`` with its default parameters and the file type ``kind`` (Q4_K_M, ...), as
    ``llama-quantize F16 OUT KIND`` runs it; llama.cpp's return code (0: written)."""
    import ctypes

    from llama_cpp import llama_cpp as lib

    params = lib.llama_model_quantize_default_params()
    params.ftype = getattr(lib, f"LLAMA_FTYPE_MOSTLY_{kind}")
    params.nthread = int(os.environ.get("OMP_NUM_THREADS") or 0)  # 0: llama.cpp's own count
    return int(lib.llama_model_quantize(str(f16).encode(), str(out).encode(), ctypes.byref(params)))


# ----------------------------------------------------------------------------------------------- Modelfile
def template_pieces(model_dir: Path) -> tuple[dict | None, bool]:
    """(pieces of the chat template measured on the tokenizer, whether they reproduce it on other conversations)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    if not tok.chat_template:
        return None, False
    s = mf.SENTINELS

    def apply(msgs, gen):
        return tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=gen)

    turns = [
        {"role": "user", "content": s["user1"]},
        {"role": "assistant", "content": s["assistant1"]},
        {"role": "user", "content": s["user2"]},
    ]
    try:
        with_system = apply([{"role": "system", "content": s["system"]}, *turns], True)
    except Exception:  # noqa: BLE001 - a template that refuses a system message
        with_system = None
    pieces = mf.pieces_from(with_system, apply(turns, True), apply(turns[:2], False))
    checked = all(
        mf.render(pieces, c) == apply(c, c[-1]["role"] == "user")
        for c in CHECK_CONVERSATIONS
        if pieces["system"] or c[0]["role"] != "system"
    )
    pieces["stops"] = mf.stop_tokens(pieces, list(tok.all_special_tokens), tok.eos_token)
    return pieces, checked


def write_modelfile(model_dir: Path, tmp: Path, gguf_name: str, out_dir: str) -> dict:
    pieces, checked = template_pieces(model_dir)
    if pieces is None:
        return {"written": False}
    generation = gc.read_json(model_dir / "generation_config.json")
    text = mf.modelfile_text(gguf_name, pieces, pieces["stops"], generation)
    (tmp / "Modelfile").write_text(text, encoding="utf-8")
    name = Path(out_dir).name.lower().replace("_", "-")
    return {
        "written": True,
        "template_checked": checked,
        "stops": pieces["stops"],
        "parameters": mf.sampling(generation),
        "command": mf.create_command(out_dir, name),
    }


# ----------------------------------------------------------------------------------------------- the job
def run(args, rep: Reporter, tmp: Path) -> dict:
    plan = cp.plan_convert(
        args.source,
        args.format,
        args.out,
        overwrite=args.overwrite,
        force=args.force,
        calibration=cp.calibration_of(args),
    )
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    merge_report = None
    if plan.needs_merge:
        merged = tmp / "merged"
        merged.mkdir()
        merge_report = mg.merge_weights(plan.merge, merged, rep, "cpu", sizes.parse_size("2GB"))
        mg.copy_support_files(plan.merge, merged)
        model_dir = merged
    else:
        model_dir = Path(plan.model_dir)
    if plan.fmt in gc.BNB_FORMATS:
        rep.stage("quantizing", 1, 1, message("export.detail_bnb", fmt=plan.fmt))
        report = bnb_export.export(model_dir, tmp, plan.fmt)
        op = "<=" if report["passed"] else ">"
        report["summary"] = message(
            "export.bnb_summary",
            fmt=plan.fmt,
            diff=report["max_abs_diff"],
            op=op,
            tol=report["tolerance"],
            qerr=report["quantization_error_max_abs"],
        )
        report["llama_cpp_summary"] = ""
    elif plan.fmt in gc.CALIBRATED_FORMATS:
        report = gptq_part(plan, model_dir, tmp, rep)
    else:
        report = gguf_part(plan, model_dir, tmp, rep)
    if merge_report is not None:
        report["merge"] = {k: merge_report[k] for k in ("max_abs_diff", "tolerance", "passed") if k in merge_report}
    if not report["passed"]:
        raise mg.VerificationError(message("export.verify_failed", summary=report["summary"]), report)
    if plan.fmt in gc.GGUF_FORMATS:
        report["modelfile"] = write_modelfile(model_dir, tmp, f"{file_stem(plan)}.gguf", plan.out_dir)
    shutil.rmtree(tmp / "merged", ignore_errors=True)
    saved = {**report, "summary": str(report["summary"]), "llama_cpp_summary": str(report["llama_cpp_summary"])}
    (tmp / "verify.json").write_text(json.dumps(saved, indent=2, ensure_ascii=False), encoding="utf-8")
    mg.publish(tmp, Path(plan.out_dir), args.overwrite, kind=f"export {plan.fmt}")
    return report


def gptq_part(plan: cp.ConvertPlan, model_dir: Path, tmp: Path, rep: Reporter) -> dict:
    """GPTQ or AWQ, calibrated on the run's training rows or the plan's calibration file
    (engine.trainer.gptq_export); its report."""
    from engine.export.sources import resolve_source
    from engine.trainer import gptq_export

    cal = plan.calibration
    run_dir = None if cal is not None else resolve_source(plan.source).run_dir
    bits, method = gptq_export.bits_of(plan.fmt), gptq_export.method_of(plan.fmt)

    def started(rows: int, device: str) -> None:
        if cal is not None:
            detail = message(
                "export.detail_gptq_file",
                method=method,
                bits=bits,
                rows=rows,
                maxlen=cal.maxlen,
                device=device.upper(),
                file=Path(cal.file).name,
            )
        else:
            detail = message("export.detail_gptq", method=method, bits=bits, rows=rows, device=device.upper())
        rep.stage("quantizing", 1, 1, detail)

    report = gptq_export.export(model_dir, tmp, plan.fmt, run_dir, started, calibration=cal)
    report["summary"] = message(
        "export.gptq_summary",
        fmt=plan.fmt,
        diff=report["max_abs_diff"],
        op="<=" if report["passed"] else ">",
        tol=report["tolerance"],
        qerr=report["quantization_error_max_abs"],
        same=report["greedy_same"],
        n=report["prompts"],
    )
    report["llama_cpp_summary"] = ""
    return report


def gguf_part(plan: cp.ConvertPlan, model_dir: Path, tmp: Path, rep: Reporter) -> dict:
    """Write, (quantize,) read back and compare the GGUF; the verification report."""
    stem = file_stem(plan)
    gguf_name = f"{stem}.gguf"
    target = tmp / gguf_name
    direct = plan.fmt not in gc.NEEDS_QUANTIZER
    first = target if direct else tmp / f"{stem}.f16.gguf"

    def progress(i: int, n: int, name: str) -> None:
        rep.stage("converting", i, n, message("export.detail_converting", name=name))

    conversion = gguf_write.write_gguf(model_dir, first, plan.fmt if direct else "gguf-f16", progress)
    if not direct:
        quantize(first, target, plan.fmt, rep)
        first.unlink()
    rep.stage("verifying", 1, 1, message("export.detail_gguf_verify"))
    report = gguf_verify.verify(model_dir, target, plan.fmt)
    report["conversion"] = conversion
    op = "<=" if report["passed"] or report["max_abs_diff"] <= report["tolerance"] else ">"
    report["summary"] = message(
        "export.gguf_summary",
        diff=report["max_abs_diff"],
        op=op,
        tol=report["tolerance"],
        fmt=plan.fmt,
        same=report["greedy_same"],
        n=report["prompts"],
    )
    cpp = report["llama_cpp"]
    report["llama_cpp_summary"] = (
        message("export.gguf_llama_cpp", diff=cpp["max_abs_diff"], same=cpp["greedy_same"], n=report["prompts"])
        if cpp
        else message("export.gguf_no_llama_cpp")
    )
    return report


def main(argv: list[str] | None = None) -> int:
    args = cp.convert_arg_parser().parse_args(argv)
    if args.events:  # a target chosen at the shell (engine.core.acting): the grant in the run's folder
        acting.honour_grant(Path(args.events).parent)
    signal.signal(signal.SIGTERM, mg._on_sigterm)
    out = Path(args.out).expanduser().resolve()
    args.out = str(out)
    tmp = Path(args.tmp_dir)
    rep = Reporter(args.events, str(out))
    t0 = time.time()
    try:
        report = run(args, rep, tmp)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # published: a late cancel must not read "cancelled"
        rep.emit(
            "export_finished",
            stage="done",
            format=args.format,
            files=cp.files_of(out),
            report={k: v for k, v in report.items() if not k.endswith("summary")},
            summary=str(report["summary"]),
            summary_msg=to_json(report["summary"]),
            llama_cpp_summary=str(report["llama_cpp_summary"]),
            llama_cpp_summary_msg=to_json(report["llama_cpp_summary"]),
            seconds=round(time.time() - t0, 2),
        )
        return 0
    except mg.Cancelled as exc:
        _fail(rep, "cancelled", from_exception(exc))
        return 130
    except ExportError as exc:
        _fail(rep, "input", from_exception(exc))
        return 2
    except mg.VerificationError as exc:
        rep_ = {k: (str(v) if k.endswith("summary") else v) for k, v in exc.report.items()}
        _fail(rep, "verification", from_exception(exc), report=rep_)
        return 1
    except Exception as exc:  # noqa: BLE001 -- anything else: reported whole, so the UI can show it
        _fail(rep, "other", f"{type(exc).__name__}: {exc}", traceback.format_exc()[-4000:])
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _fail(rep: Reporter, cause: str, error, tb: str = "", report: dict | None = None) -> None:
    keyed = {"error_msg": to_json(error)} if getattr(error, "key", "") else {}
    try:
        rep.emit("export_failed", stage="failed", cause=cause, error=str(error), traceback=tb, report=report, **keyed)
    except mg.Cancelled:
        pass


if __name__ == "__main__":
    sys.exit(main())
