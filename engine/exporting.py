"""Merge and export, the light half: check inputs, estimate disk, start / follow / cancel the merge subprocess.

Light: stdlib, yaml and engine's light modules only (never torch/transformers/peft). Everything that needs weights
runs in ``python -m engine.merge`` (engine/merge.py), started here with an argv list, an explicit env and its own
process session, so the UI stays small and a cancel (SIGTERM to the process group) stops all of it.

Sources are run folders (``spec.yaml`` + ``<out>/adapter`` or ``<out>/model``) or PEFT adapter folders. Every input
problem is found here, before any weights load: missing ``adapter_config.json``, a run with no adapter yet, an
adapter whose module shapes do not fit the base (read from the safetensors headers, no torch), an existing target,
too little disk. ``plan_export`` raises ``ExportError`` with the message the UI / CLI shows.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from engine import events as ev
from engine import workspace

REPO_ROOT = Path(__file__).resolve().parents[1]
DTYPES = {"bf16": ("bfloat16", 2), "fp16": ("float16", 2), "fp32": ("float32", 4)}
_CONFIG_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
_ST_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "tokenizer.model",
    "vocab.json",
    "merges.txt",
    "added_tokens.json",
    "chat_template.jinja",
    "chat_template.json",
    "vocab.txt",
    "spiece.model",
)
DISK_MARGIN = 1.05  # config, card, tokenizer and filesystem slack on top of the tensor bytes


class ExportError(Exception):
    """An input that cannot be merged or exported; the message names the file or folder and the fix."""


@dataclass
class Source:
    given: str
    kind: str  # "adapter" or "model" (a full / freeze fine-tune's weights)
    weights_dir: str
    run_dir: str | None = None
    spec: dict | None = None
    base: str | None = None
    quant_bits: int = 0
    adapter_config: dict = field(default_factory=dict)


@dataclass
class ExportPlan:
    sources: list[Source]
    base: str
    out_dir: str
    dtype: str
    adapter_only: bool
    bytes_needed: int
    bytes_free: int
    events_path: str


# ----------------------------------------------------------------------------------------------- inputs
def resolve_source(path: str | Path) -> Source:
    """Classify one source folder, or raise ExportError saying what is missing."""
    p = Path(path).expanduser().resolve()
    if not p.exists():
        raise ExportError(f"{path}: no such file or folder")
    if not p.is_dir():
        raise ExportError(f"{path} is a file: give a run folder or a PEFT adapter folder (with adapter_config.json)")
    if (p / "spec.yaml").is_file():
        return _run_source(str(path), p)
    for cand in (p, p / "adapter"):
        if (cand / "adapter_config.json").is_file():
            return _adapter_source(str(path), cand, None, None)
    if (p / "config.json").is_file():
        raise ExportError(
            f"no adapter_config.json in {p}: it is a full model folder, not a PEFT adapter "
            "(give the run folder or the adapter folder that was trained on it)"
        )
    raise ExportError(
        f"no adapter_config.json in {p}: not a PEFT adapter folder (adapter_config.json + "
        "adapter_model.safetensors) nor a run folder (spec.yaml)"
    )


def _run_source(given: str, run_dir: Path) -> Source:
    try:
        spec = yaml.safe_load((run_dir / "spec.yaml").read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ExportError(f"cannot read {run_dir / 'spec.yaml'}: {exc}") from None
    out = Path(str((spec.get("output") or {}).get("output_dir") or run_dir)).expanduser()
    if (out / "adapter" / "adapter_config.json").is_file():
        return _adapter_source(given, out / "adapter", run_dir, spec)
    if (out / "model" / "config.json").is_file():
        return Source(given, "model", str(out / "model"), str(run_dir), spec, base=str(out / "model"))
    last = ev.last_event(run_dir / "events.jsonl", ev.TERMINAL_TYPES)
    state = f"it {last['type']}" if last else "it has not finished"
    method = (spec.get("method") or {}).get("finetuning", "lora")
    wanted = out / ("adapter" if method == "lora" else "model")
    raise ExportError(
        f"run {run_dir} has no {'adapter' if method == 'lora' else 'model'} yet ({wanted} is missing; "
        f"{state}): wait for it to finish, or give an adapter folder"
    )


def _adapter_source(given: str, adir: Path, run_dir: Path | None, spec: dict | None) -> Source:
    try:
        cfg = json.loads((adir / "adapter_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ExportError(f"{adir / 'adapter_config.json'} is not valid JSON: {exc}") from None
    if not any((adir / n).is_file() for n in ("adapter_model.safetensors", "adapter_model.bin")):
        raise ExportError(
            f"{adir} has adapter_config.json but no adapter_model.safetensors: the adapter was not saved"
        )
    base = cfg.get("base_model_name_or_path") or ((spec or {}).get("model") or {}).get("name_or_path")
    if not base:
        raise ExportError(f"{adir / 'adapter_config.json'} names no base_model_name_or_path")
    bpath = Path(base).expanduser()
    if not bpath.is_absolute() and (adir / bpath).is_dir():
        bpath = adir / bpath
    if not (bpath / "config.json").is_file():
        raise ExportError(
            f"base model {base} of adapter {adir} is not a local model folder with config.json "
            "(merging needs the base weights on this machine)"
        )
    bits = int(((spec or {}).get("method") or {}).get("quantization", {}).get("bits", 0) or 0)
    if not bits and isinstance(cfg.get("quantization_config"), dict):  # some trainers record it in the adapter
        bits = 4 if cfg["quantization_config"].get("load_in_4bit") else 8
    return Source(
        given, "adapter", str(adir), str(run_dir) if run_dir else None, spec, str(bpath.resolve()), bits, cfg
    )


def safetensors_header(path: str | Path) -> dict:
    """Tensor names -> {dtype, shape, data_offsets} from a .safetensors file, reading only its JSON header."""
    with open(path, "rb") as fh:
        (size,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(size))
    header.pop("__metadata__", None)
    return header


def model_tensors(model_dir: str | Path) -> dict[str, dict]:
    """Every tensor of a model folder's safetensors files (empty when it only has .bin files)."""
    out: dict[str, dict] = {}
    for f in sorted(Path(model_dir).glob("*.safetensors")):
        out.update(safetensors_header(f))
    return out


def check_fits(src: Source, base_dir: str) -> None:
    """Each LoRA A/B pair must fit the base module it targets: adapter (r x in, out x r) vs base (out x in)."""
    afile = Path(src.weights_dir) / "adapter_model.safetensors"
    base = model_tensors(base_dir)
    if not afile.is_file() or not base:
        return  # .bin files cannot be read without torch; the subprocess reports a mismatch at load time
    tensors = safetensors_header(afile)
    arch = _read_json(Path(base_dir) / "config.json").get("model_type", "?")
    for name, meta in tensors.items():
        if ".lora_A." not in name:
            continue
        module = name.split(".lora_A.")[0].removeprefix("base_model.model.")
        b_meta = tensors.get(name.replace(".lora_A.", ".lora_B."))
        target = base.get(module + ".weight")
        where = f"adapter {src.weights_dir} (trained on {src.adapter_config.get('base_model_name_or_path')})"
        if target is None:
            raise ExportError(
                f"{where} does not fit base {base_dir} ({arch}): the adapter targets {module}, "
                "which the base does not have"
            )
        if len(meta["shape"]) != 2 or not b_meta or len(target["shape"]) != 2:
            continue  # embeddings / convs: shapes differ in layout; PEFT checks them at load time
        a_shape = (b_meta["shape"][0], meta["shape"][1])
        if tuple(a_shape) != tuple(target["shape"]):
            raise ExportError(
                f"{where} does not fit base {base_dir} ({arch}): {module} is "
                f"{a_shape[0]}x{a_shape[1]} in the adapter but {target['shape'][0]}x"
                f"{target['shape'][1]} in the base"
            )


def default_dtype(base_dir: str | Path) -> str:
    cfg = _read_json(Path(base_dir) / "config.json")
    return _CONFIG_DTYPES.get(
        str(cfg.get("dtype") or cfg.get("torch_dtype") or ""), "bf16" if cfg.get("quantization_config") else "fp32"
    )


def estimate_bytes(plan_sources: list[Source], base_dir: str, dtype: str, adapter_only: bool) -> int:
    """Bytes the export writes: the base's tensors re-stored in ``dtype`` (or the adapter folder) plus a margin."""
    if adapter_only:
        total = sum(f.stat().st_size for f in Path(plan_sources[0].weights_dir).rglob("*") if f.is_file())
    else:
        tensors = model_tensors(base_dir)
        if tensors:
            width = DTYPES[dtype][1]
            total = sum(
                _numel(m["shape"])
                * (width if m["dtype"] in ("F32", "F16", "BF16", "F64") else _ST_BYTES.get(m["dtype"], 4))
                for m in tensors.values()
            )
        else:  # .bin only: file sizes scaled from the stored dtype
            stored = DTYPES.get(default_dtype(base_dir), ("", 4))[1]
            total = sum(f.stat().st_size for f in Path(base_dir).glob("*.bin")) * DTYPES[dtype][1] // stored
    total += sum((Path(base_dir) / n).stat().st_size for n in TOKENIZER_FILES if (Path(base_dir) / n).is_file())
    return int(total * DISK_MARGIN)


def free_bytes(out_dir: Path) -> int:
    probe = out_dir
    while not probe.exists():
        probe = probe.parent
    return shutil.disk_usage(probe).free


def events_path_for(sources: list[Source], out_dir: Path) -> Path:
    """A run's merges are logged in its folder; a bare adapter's beside the target."""
    if sources and sources[0].run_dir:
        return Path(sources[0].run_dir) / "merge_events.jsonl"
    return out_dir.parent / f"{out_dir.name}.merge-events.jsonl"


def plan_export(
    sources: list[str], out_dir: str, *, dtype: str | None = None, overwrite: bool = False, adapter_only: bool = False
) -> ExportPlan:
    """Check every input without loading weights; raise ExportError with the first problem."""
    if not sources:
        raise ExportError("give at least one run folder or adapter folder")
    if dtype is not None and dtype not in DTYPES:
        raise ExportError(f"--dtype {dtype!r}: choose one of {', '.join(DTYPES)}")
    srcs = [resolve_source(s) for s in sources]
    if any(s.kind == "model" for s in srcs) and len(srcs) > 1:
        raise ExportError("a full fine-tune's model cannot be combined with other sources: export it alone")
    if adapter_only and (len(srcs) > 1 or srcs[0].kind != "adapter"):
        raise ExportError("--adapter-only exports exactly one adapter (a LoRA run or an adapter folder)")
    base = srcs[0].base or ""
    for s in srcs[1:]:
        if s.base != base:
            raise ExportError(
                f"adapters have different bases: {srcs[0].weights_dir} is on {base} but "
                f"{s.weights_dir} is on {s.base}: merge adapters of one base only"
            )
    for s in srcs:
        if s.kind == "adapter":
            check_fits(s, base)
    out = Path(out_dir).expanduser().resolve()
    protected = [Path(s.weights_dir).resolve() for s in srcs] + [Path(base).resolve()]
    protected += [Path(s.run_dir).resolve() for s in srcs if s.run_dir]
    for p in protected:
        if out == p or p.is_relative_to(out):
            raise ExportError(f"output folder {out} would replace {p}: choose another --out")
    if out.exists() and not overwrite:
        raise ExportError(f"output folder {out} already exists: choose another --out or pass --overwrite")
    dtype = dtype or default_dtype(base)
    need, free = estimate_bytes(srcs, base, dtype, adapter_only), free_bytes(out.parent)
    if need > free:
        raise ExportError(
            f"not enough disk space for {out}: the export needs about {_gb(need)} ({dtype}) but only "
            f"{_gb(free)} is free there: free space or choose another --out"
        )
    return ExportPlan(srcs, base, str(out), dtype, adapter_only, need, free, str(events_path_for(srcs, out)))


def parse_size(text: str | int) -> int:
    """'2GB' -> 2e9 bytes, '500MiB' -> 500 * 2**20, like transformers' max_shard_size."""
    if isinstance(text, int):
        return text
    s = str(text).strip().upper()
    units = {"KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "KB": 10**3, "MB": 10**6, "GB": 10**9, "B": 1}
    for unit, mult in units.items():
        if s.endswith(unit):
            try:
                value = float(s[: -len(unit)])
            except ValueError:
                break
            if value > 0:
                return int(value * mult)
    if s.isdigit() and int(s) > 0:
        return int(s)
    raise ExportError(f"--max-shard-size {text!r}: give a size like 2GB, 500MB or 1GiB")


def default_export_dir(run_id: str) -> Path:
    return workspace.exports_dir() / f"{run_id}-merged"


def temp_dir_for(out_dir: str | Path) -> Path:
    """Beside the target (same filesystem, so the final rename is atomic), hidden, unique per merge."""
    out = Path(out_dir).expanduser().resolve()
    return out.parent / f".{out.name}.tmp-{os.getpid()}-{int(time.time() * 1000)}"


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _numel(shape: list[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


# ----------------------------------------------------------------------------------------------- the subprocess
class MergeJob:
    """A running ``python -m engine.merge``; ``poll()`` is cheap and safe to call from a UI timer."""

    def __init__(self, proc: subprocess.Popen, plan: ExportPlan, tmp_dir: Path, offset: int, log_path: Path):
        self.proc, self.plan, self.tmp_dir, self.log_path = proc, plan, tmp_dir, log_path
        self.events_path = Path(plan.events_path)
        self._offset = offset
        self.events: list[dict] = []
        self._cancelled = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    def poll(self) -> dict:
        """{"state": running|finished|failed|cancelled, "events", "progress", "result", "error", "out_dir", ...}."""
        new, self._offset = ev.read_events(self.events_path, self._offset)
        self.events += new
        rc = self.proc.poll()
        terminal = next((e for e in reversed(self.events) if e["type"] in ("merge_finished", "merge_failed")), None)
        state, result, error = "running", None, None
        if rc is not None:
            if terminal and terminal["type"] == "merge_finished" and rc == 0:
                state, result = "finished", terminal["payload"]
            else:
                state = (
                    "cancelled"
                    if self._cancelled or (terminal and terminal["payload"].get("cause") == "cancelled")
                    else "failed"
                )
                error = terminal["payload"].get("error") if terminal else self._log_tail() or f"exit code {rc}"
                if state == "cancelled":
                    error = error or "cancelled"
        progress = [e for e in self.events if e["type"] == "merge_progress"]
        return {
            "state": state,
            "returncode": rc,
            "events": list(self.events),
            "progress": progress[-1]["payload"] if progress else None,
            "result": result,
            "error": error,
            "out_dir": self.plan.out_dir,
            "events_path": str(self.events_path),
            "log_path": str(self.log_path),
        }

    def wait(self, timeout: float | None = None) -> dict:
        self.proc.wait(timeout)
        return self.poll()

    def cancel(self, grace: float = 10.0) -> dict:
        """SIGTERM the whole process group (the merge cleans up and exits), SIGKILL after ``grace`` seconds."""
        self._cancelled = True
        if self.proc.poll() is None:
            _signal_group(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                _signal_group(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        # A SIGKILLed child cannot clean up: its temp folder is ours to remove; the target was never written.
        shutil.rmtree(self.tmp_dir, ignore_errors=True)
        return self.poll()

    def _log_tail(self, chars: int = 2000) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")[-chars:].strip()
        except OSError:
            return ""


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)  # start_new_session made the child its own group leader
    except ProcessLookupError:
        pass


def merge_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH", "")]))
    env.setdefault("OMP_NUM_THREADS", "1")  # see STACK-NOTES: more threads than cores is ~100x slower on CPU
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def merge_argv(
    plan: ExportPlan, tmp_dir: Path, *, max_shard_size: str, device: str, overwrite: bool, push_to_hub: str | None
) -> list[str]:
    argv = [
        sys.executable,
        "-m",
        "engine.merge",
        *[s.given for s in plan.sources],
        "--out",
        plan.out_dir,
        "--dtype",
        plan.dtype,
        "--max-shard-size",
        str(max_shard_size),
        "--device",
        device,
        "--tmp-dir",
        str(tmp_dir),
        "--events",
        plan.events_path,
    ]
    argv += ["--overwrite"] if overwrite else []
    argv += ["--adapter-only"] if plan.adapter_only else []
    argv += ["--push-to-hub", push_to_hub] if push_to_hub else []
    return argv


def start_merge(
    sources: list[str],
    out_dir: str,
    *,
    dtype: str | None = None,
    max_shard_size: str = "2GB",
    device: str = "cpu",
    overwrite: bool = False,
    adapter_only: bool = False,
    push_to_hub: str | None = None,
) -> MergeJob:
    """Check the inputs (ExportError on any problem) and start the merge subprocess."""
    if device not in ("cpu", "cuda"):
        raise ExportError(f"--device {device!r}: choose cpu or cuda")
    parse_size(max_shard_size)
    plan = plan_export(sources, out_dir, dtype=dtype, overwrite=overwrite, adapter_only=adapter_only)
    tmp = temp_dir_for(plan.out_dir)
    events_path = Path(plan.events_path)
    events_path.parent.mkdir(parents=True, exist_ok=True)
    offset = events_path.stat().st_size if events_path.exists() else 0
    log_path = events_path.with_suffix(".log")  # the subprocess's stdout + stderr, for errors it could not report
    argv = merge_argv(
        plan, tmp, max_shard_size=max_shard_size, device=device, overwrite=overwrite, push_to_hub=push_to_hub
    )
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            argv,
            cwd=str(REPO_ROOT),
            env=merge_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    return MergeJob(proc, plan, tmp, offset, log_path)


def merge(sources: list[str], out_dir: str, *, echo: bool = False, poll_interval: float = 0.3, **kwargs) -> dict:
    """Blocking merge: start, follow to the end, return the final ``poll()`` dict (echo prints each event)."""
    job = start_merge(sources, out_dir, **kwargs)
    seen = 0
    try:
        while True:
            status = job.poll()
            if echo:
                for e in status["events"][seen:]:
                    print(describe_event(e), flush=True)
                seen = len(status["events"])
            if status["state"] != "running":
                return status
            time.sleep(poll_interval)
    except KeyboardInterrupt:
        return job.cancel()


def describe_event(event: dict) -> str:
    p = event.get("payload", {})
    if event["type"] == "merge_progress":
        count = f" {p.get('i')}/{p.get('n')}" if p.get("n") else ""
        return f"[merge] {p.get('stage')}{count} {p.get('detail', '')}".rstrip()
    if event["type"] == "merge_finished":
        rep = p.get("report") or {}
        return f"[merge] finished: {p.get('out_dir')} (verify: {rep.get('summary', 'n/a')})"
    if event["type"] == "merge_failed":
        return f"[merge] failed ({p.get('cause')}): {p.get('error')}"
    return f"[merge] {event['type']}: {p.get('message', p)}"


# ----------------------------------------------------------------------------------------------- CLI
def cli(argv: list[str]) -> int:
    """``studio merge``: 0 merged and verified, 1 merge or verification failed, 2 bad input, 130 cancelled."""
    ap = argparse.ArgumentParser(
        prog="studio merge",
        description="Merge run adapters into their base model "
        "(or export the adapter), verify the result, write it atomically.",
    )
    ap.add_argument(
        "sources",
        nargs="+",
        metavar="RUN_DIR_OR_ADAPTER",
        help="run folders or PEFT adapter folders, applied in order",
    )
    ap.add_argument("--out", required=True, help="output folder (must not exist unless --overwrite)")
    ap.add_argument("--dtype", choices=list(DTYPES), default=None, help="saved dtype (default: the base's)")
    ap.add_argument("--max-shard-size", default="2GB", help="largest safetensors shard (default 2GB)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="where to merge (default cpu)")
    ap.add_argument("--overwrite", action="store_true", help="replace an existing output folder")
    ap.add_argument("--adapter-only", action="store_true", help="export the PEFT adapter, tokenizer and card only")
    ap.add_argument(
        "--push-to-hub",
        metavar="REPO",
        default=None,
        help="also upload to this Hub repo (needs a token and network; skipped offline)",
    )
    args = ap.parse_args(argv)
    try:
        status = merge(
            args.sources,
            args.out,
            echo=True,
            dtype=args.dtype,
            max_shard_size=args.max_shard_size,
            device=args.device,
            overwrite=args.overwrite,
            adapter_only=args.adapter_only,
            push_to_hub=args.push_to_hub,
        )
    except ExportError as exc:
        print(f"studio merge: {exc}", file=sys.stderr)
        return 2
    if status["state"] == "finished":
        res = status["result"] or {}
        print(f"merged model written to {res.get('out_dir')}")
        if (res.get("push") or {}).get("message"):
            print(res["push"]["message"])
        return 0
    print(f"studio merge: {status['state']}: {status['error']}", file=sys.stderr)
    if status["state"] == "failed" and status["events"] and status["events"][-1]["payload"].get("cause") == "input":
        return 2
    return 130 if status["state"] == "cancelled" else 1
