"""Merge and export, the light half: check inputs, estimate disk and memory, build the merge subprocess's argv.

Light: stdlib, yaml and engine's light modules only (never torch/transformers/peft). Everything that needs weights
runs in ``python -m engine.trainer.merge`` (engine/trainer/merge.py), started as a command run of the registry by
engine/export/jobs.py, which follows and cancels it.

Sources are run folders (``spec.yaml`` + ``<out>/adapter`` or ``<out>/model``) or PEFT adapter folders. Every input
problem is found here, before any weights load: missing ``adapter_config.json``, a run with no adapter yet, an
adapter whose module shapes do not fit the base (read from the safetensors headers, no torch), an existing target,
too little disk, too little memory (``estimate_memory`` against ``available_memory``; ``force`` skips that one), a
target outside the workspace or owned by a run, the workspace or the base (``engine.runs.registry.folder_problem``).
``plan_export`` raises ``ExportError`` with the message the UI / CLI shows.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from engine.core import events as ev
from engine.core import workspace
from engine.core.messages import Message
from engine.core.messages import message as core_message
from engine.export.messages import message
from engine.machine import hardware
from engine.runs import registry as runs
from engine.runs import store

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
    "processor_config.json",  # a vision-language model's processor (image processor settings, its chat template)
    "preprocessor_config.json",
)
DISK_MARGIN = 1.05  # config, card, tokenizer and filesystem slack on top of the tensor bytes
# Resident memory of the merge process beyond the weights: Python + torch + transformers + peft (the demo model's
# merge peaked at 0.44 GB, nearly all of it this), and on a GPU the CUDA libraries and context on the host.
PROCESS_RAM = {"cpu": 1_000_000_000, "cuda": 3_000_000_000}
ADAPTER_ONLY_RAM = 200_000_000  # --adapter-only copies files and never imports torch
MEM_MARGIN = 1.15  # allocator slack and fragmentation on top of the summed tensors


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
    device: str = "cpu"
    ram_needed: int = 0
    ram_available: int = 0
    ram_source: str = ""  # where ram_available was read (MemAvailable, a cgroup limit, STUDIO_MEM_AVAILABLE)
    head: str = "causal_lm"  # "causal_lm", or "seq_cls" for a reward model (stage rm): the auto class the merge uses


# ----------------------------------------------------------------------------------------------- inputs
def resolve_source(path: str | Path, base: str | None = None) -> Source:
    """Classify one source folder (or a run id, as ``studio runs`` lists them), or raise ExportError saying what is
    missing. ``base``: the model folder an adapter is merged into, in place of the one it names."""
    p = Path(path).expanduser().resolve()
    if not p.exists() and (run_folder := run_id_folder(str(path))) is not None:
        return _run_source(str(path), run_folder, base)
    if not p.exists():
        raise ExportError(message("export.no_source", path=path))
    if not p.is_dir():
        raise ExportError(message("export.is_file", path=path))
    if (p / "spec.yaml").is_file():
        return _run_source(str(path), p, base)
    for cand in (p, p / "adapter"):
        if (cand / "adapter_config.json").is_file():
            return _adapter_source(str(path), cand, None, None, base)
    if (p / "config.json").is_file():
        raise ExportError(message("export.full_model_folder", path=p))
    raise ExportError(message("export.not_adapter", path=p))


def run_id_folder(given: str) -> Path | None:
    """The folder of the run with id ``given`` (the registry's, else the workspace's runs/<id>), or None."""
    if not given or "/" in given or given.startswith((".", "~")):
        return None
    try:
        folder = Path(store.get(given, refresh_status=False).run_dir)
    except store.RunsError:
        folder = workspace.runs_dir() / given
    except Exception:  # an unreadable registry: the workspace layout still finds the folder
        folder = workspace.runs_dir() / given
    return folder if (folder / "spec.yaml").is_file() else None


def _run_source(given: str, run_dir: Path, base: str | None = None) -> Source:
    try:
        spec = yaml.safe_load((run_dir / "spec.yaml").read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ExportError(message("export.spec_unreadable", path=run_dir / "spec.yaml", error=exc)) from None
    out = Path(str((spec.get("output") or {}).get("output_dir") or run_dir)).expanduser()
    if (out / "adapter" / "adapter_config.json").is_file():
        return _adapter_source(given, out / "adapter", run_dir, spec, base)
    if (out / "model" / "config.json").is_file():
        return Source(given, "model", str(out / "model"), str(run_dir), spec, base=str(out / "model"))
    last = ev.last_event(run_dir / "events.jsonl", ev.TERMINAL_TYPES)
    state = message(f"export.run_{last['type']}" if last else "export.run_unfinished")
    what = "adapter" if (spec.get("method") or {}).get("finetuning", "lora") in ("lora", "oft") else "model"
    raise ExportError(message(f"export.run_no_{what}", run=run_dir, wanted=out / what, state=state))


def _adapter_source(
    given: str, adir: Path, run_dir: Path | None, spec: dict | None, base_override: str | None = None
) -> Source:
    try:
        cfg = json.loads((adir / "adapter_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ExportError(
            message("export.adapter_config_bad_json", path=adir / "adapter_config.json", error=exc)
        ) from None
    if not any((adir / n).is_file() for n in ("adapter_model.safetensors", "adapter_model.bin")):
        raise ExportError(message("export.adapter_not_saved", path=adir))
    base = base_override or cfg.get("base_model_name_or_path") or ((spec or {}).get("model") or {}).get("name_or_path")
    if not base:
        raise ExportError(message("export.no_base_name", path=adir / "adapter_config.json"))
    bpath = Path(base).expanduser()
    if not bpath.is_absolute() and (adir / bpath).is_dir():
        bpath = adir / bpath
    if not (bpath / "config.json").is_file():
        raise ExportError(message("export.base_not_local", base=base, adapter=adir))
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


def source_head(src: Source) -> str:
    """What the source's weights are: "seq_cls" for a reward model (stage rm: an adapter of peft task type SEQ_CLS,
    or weights saved as a ...ForSequenceClassification), else "causal_lm"."""
    if src.kind == "adapter":
        return "seq_cls" if str(src.adapter_config.get("task_type") or "").upper() == "SEQ_CLS" else "causal_lm"
    archs = _read_json(Path(src.weights_dir) / "config.json").get("architectures") or []
    return "seq_cls" if any(str(a).endswith("ForSequenceClassification") for a in archs) else "causal_lm"


# Vision-language checkpoints keep their pre-transformers-5 tensor names on disk (LLaVA's language_model.model...),
# which from_pretrained maps to the module names adapters use: module prefix -> stored prefix.
_STORED_AS = (
    ("model.language_model.", "language_model.model."),
    ("model.vision_tower.", "vision_tower."),
    ("model.multi_modal_projector.", "multi_modal_projector."),
    ("model.visual.", "visual."),
)


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
        target = base.get(module + ".weight") or next(
            (base.get(old + module[len(new) :] + ".weight") for new, old in _STORED_AS if module.startswith(new)), None
        )
        trained_on = src.adapter_config.get("base_model_name_or_path")
        where = message("export.adapter_where", path=src.weights_dir, trained_on=trained_on)
        if target is None:
            raise ExportError(message("export.module_missing", where=where, base=base_dir, arch=arch, module=module))
        if len(meta["shape"]) != 2 or not b_meta or len(target["shape"]) != 2:
            continue  # embeddings / convs: shapes differ in layout; PEFT checks them at load time
        a_shape = (b_meta["shape"][0], meta["shape"][1])
        if tuple(a_shape) != tuple(target["shape"]):
            raise ExportError(
                message(
                    "export.shape_mismatch",
                    where=where,
                    base=base_dir,
                    arch=arch,
                    module=module,
                    a_out=a_shape[0],
                    a_in=a_shape[1],
                    b_out=target["shape"][0],
                    b_in=target["shape"][1],
                )
            )


def default_dtype(base_dir: str | Path) -> str:
    cfg = _read_json(Path(base_dir) / "config.json")
    return _CONFIG_DTYPES.get(
        str(cfg.get("dtype") or cfg.get("torch_dtype") or ""), "bf16" if cfg.get("quantization_config") else "fp32"
    )


def weight_bytes(model_dir: str | Path, dtype: str) -> tuple[int, int]:
    """(all tensors, the largest tensor) of a model or adapter folder in bytes, its floating-point tensors held in
    ``dtype`` (others as stored). Read from the safetensors headers; .bin-only folders from their file sizes."""
    tensors = model_tensors(model_dir)
    width = DTYPES[dtype][1]
    if tensors:
        floats = ("F32", "F16", "BF16", "F64")
        sizes = [
            _numel(m["shape"]) * (width if m["dtype"] in floats else _ST_BYTES.get(m["dtype"], 4))
            for m in tensors.values()
        ]
        return sum(sizes), max(sizes)
    stored = DTYPES.get(default_dtype(model_dir), ("", 4))[1]  # .bin only: file sizes scaled from the stored dtype
    files = [f.stat().st_size * width // stored for f in Path(model_dir).glob("*.bin")]
    return sum(files), max(files, default=0)


def estimate_bytes(plan_sources: list[Source], base_dir: str, dtype: str, adapter_only: bool) -> int:
    """Bytes the export writes: the base's tensors re-stored in ``dtype`` (or the adapter folder) plus a margin."""
    if adapter_only:
        total = sum(f.stat().st_size for f in Path(plan_sources[0].weights_dir).rglob("*") if f.is_file())
    else:
        total = weight_bytes(base_dir, dtype)[0]
    total += sum((Path(base_dir) / n).stat().st_size for n in TOKENIZER_FILES if (Path(base_dir) / n).is_file())
    return int(total * DISK_MARGIN)


def estimate_memory(
    plan_sources: list[Source], base_dir: str, dtype: str, device: str, adapter_only: bool, max_shard: int
) -> int:
    """Peak resident memory (bytes) of the merge process on this machine, from the safetensors headers.

    Follows engine/trainer/merge.py step by step. On ``cpu``: the base is loaded in float32 and the adapters beside it,
    while the base's files are mapped and read (their pages count as resident until the kernel drops them);
    merging a module (``safe_merge``) holds its weight twice more (a clone and the B @ A delta) -- that is the peak.
    The cast to ``dtype`` goes tensor by tensor, saving writes from the tensors in place, and the reload for
    verification holds the model in ``dtype`` once the float32 one is freed: never more than the float32 phase,
    so a narrower ``dtype`` does not lower the estimate on CPU. On ``cuda``: weights load straight into GPU memory;
    the host holds the process, one shard on its way to disk and one tensor. Logits of the fixed prompts are added
    for large vocabularies. The result is an upper bound for merges that run alone, not a prediction (tests compare
    it with the measured peak of real merges).
    """
    if adapter_only:
        return ADAPTER_ONLY_RAM
    base32, largest32 = weight_bytes(base_dir, "fp32")
    vocab = int(_read_json(Path(base_dir) / "config.json").get("vocab_size") or 0)
    logits = 4 * 4 * 96 * vocab  # 4 prompts x 24 tokens x vocab in float32, four copies (reference, base, merged)
    if device == "cuda":
        weights = min(max_shard, weight_bytes(base_dir, dtype)[0]) + largest32
    else:
        mapped = sum(f.stat().st_size for pat in ("*.safetensors", "*.bin") for f in Path(base_dir).glob(pat))
        adapters = sum(weight_bytes(s.weights_dir, "fp32")[0] for s in plan_sources if s.kind == "adapter")
        weights = base32 + mapped + adapters + 2 * largest32
    return int(PROCESS_RAM[device] + (weights + logits) * MEM_MARGIN)


def available_memory() -> tuple[int, str]:
    """(bytes a new process can use, where that was read): engine.machine.hardware.available_memory (MemAvailable and
    the cgroup limit); ``STUDIO_MEM_AVAILABLE`` (e.g. ``8GB``) replaces the reading: to state a figure, or in tests."""
    given = os.environ.get("STUDIO_MEM_AVAILABLE", "").strip()
    if given:
        return parse_size(given, "STUDIO_MEM_AVAILABLE"), message("export.mem_given")
    found = hardware.available_memory()
    if found is None:
        raise ExportError(message("export.no_meminfo"))
    return found


def memory_problem(plan: ExportPlan, sources: list[Source], max_shard: int) -> Message | None:
    """The refusal message when the merge will not fit in memory (needed vs available and what would help)."""
    if plan.ram_needed <= plan.ram_available:
        return None
    fixes = message("export.fixes")
    if plan.device == "cpu":
        on_gpu = estimate_memory(sources, plan.base, plan.dtype, "cuda", plan.adapter_only, max_shard)
        if on_gpu < plan.ram_needed:
            fixes = message("export.fixes_gpu", ram=_gb(on_gpu))
    return message(
        "export.no_memory_cpu" if plan.device == "cpu" else "export.no_memory_cuda",
        need=_gb(plan.ram_needed),
        available=_gb(plan.ram_available),
        source=plan.ram_source,
        fixes=fixes,
    )


def free_bytes(out_dir: Path) -> int:
    probe = out_dir
    while not probe.exists():
        probe = probe.parent
    return shutil.disk_usage(probe).free


def plan_export(
    sources: list[str],
    out_dir: str,
    *,
    dtype: str | None = None,
    overwrite: bool = False,
    adapter_only: bool = False,
    device: str = "cpu",
    max_shard_size: str | int = "2GB",
    force: bool = False,
    base: str | None = None,
) -> ExportPlan:
    """Check every input without loading weights; raise ExportError with the first problem. With ``force`` a merge
    that the memory estimate says will not fit is let through (the estimate is still in the plan).

    ``base`` (a model folder; LLaMA-Factory's model_name_or_path) is the model the adapters are merged into, in place
    of the base each adapter names; with no sources it is the model re-exported (sharded, cast, verified)."""
    if not sources and base:
        bdir = Path(base).expanduser().resolve()
        if not (bdir / "config.json").is_file():
            raise ExportError(message("export.no_source", path=base))
        srcs = [Source(base, "model", str(bdir), None, None, base=str(bdir))]
    elif not sources:
        raise ExportError(message("export.no_sources"))
    else:
        srcs = [resolve_source(s, str(Path(base).expanduser().resolve()) if base else None) for s in sources]
    if dtype is not None and dtype not in DTYPES:
        raise ExportError(message("export.bad_dtype", dtype=dtype, choices=", ".join(DTYPES)))
    if device not in ("cpu", "cuda"):
        raise ExportError(message("export.bad_device", device=device))
    max_shard = parse_size(max_shard_size)
    if any(s.kind == "model" for s in srcs) and len(srcs) > 1:
        raise ExportError(message("export.model_alone"))
    if adapter_only and (len(srcs) > 1 or srcs[0].kind != "adapter"):
        raise ExportError(message("export.adapter_only_one"))
    base = srcs[0].base or ""
    for s in srcs[1:]:
        if s.base != base:
            raise ExportError(
                message(
                    "export.different_bases",
                    first=srcs[0].weights_dir,
                    base=base,
                    other=s.weights_dir,
                    other_base=s.base,
                )
            )
    heads = [source_head(s) for s in srcs]
    if "seq_cls" in heads and len(srcs) > 1:
        raise ExportError(message("export.reward_alone", first=srcs[heads.index("seq_cls")].weights_dir))
    for s in srcs:
        if s.kind == "adapter":
            check_fits(s, base)
    out = Path(out_dir).expanduser().resolve()  # a relative --out is taken from where the command runs
    owners = [(Path(base), core_message("workspace.owner_model", path=Path(base)), True)]
    problem = runs.folder_problem(out, owners)  # the workspace's rule: inside it or an allowed root, owned by nobody
    if problem is not None:
        raise ExportError(problem)
    protected = [Path(s.weights_dir).resolve() for s in srcs] + [Path(base).resolve()]
    protected += [Path(s.run_dir).resolve() for s in srcs if s.run_dir]
    for p in protected:
        if out == p or p.is_relative_to(out):
            raise ExportError(message("export.would_replace", out=out, path=p))
    if out.exists() and not overwrite:
        raise ExportError(message("export.out_exists", out=out))
    dtype = dtype or default_dtype(base)
    need, free = estimate_bytes(srcs, base, dtype, adapter_only), free_bytes(out.parent)
    if need > free:
        raise ExportError(message("export.no_disk", out=out, need=_gb(need), dtype=dtype, free=_gb(free)))
    plan = ExportPlan(srcs, base, str(out), dtype, adapter_only, need, free, device, head=heads[0])
    plan.ram_needed = estimate_memory(srcs, base, dtype, device, adapter_only, max_shard)
    plan.ram_available, plan.ram_source = available_memory()
    problem = memory_problem(plan, srcs, max_shard)
    if problem and not force:
        raise ExportError(problem)
    return plan


def parse_size(text: str | int, what: str = "--max-shard-size") -> int:
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
    raise ExportError(message("export.bad_size", what=what, text=text))


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
def merge_arg_parser() -> argparse.ArgumentParser:
    """Arguments of ``python -m engine.trainer.merge``; engine.export.jobs reads a merge's folders back from them."""
    ap = argparse.ArgumentParser(prog="python -m engine.trainer.merge")
    ap.add_argument("sources", nargs="*")
    ap.add_argument("--base", default=None, help="merge into this model folder (no sources: re-export it)")
    ap.add_argument("--legacy-format", action="store_true", help="write .bin files instead of safetensors")
    ap.add_argument("--out", required=True)
    ap.add_argument("--dtype", choices=list(DTYPES), default=None)
    ap.add_argument("--max-shard-size", default="2GB")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--tmp-dir", default=None)
    ap.add_argument("--events", default=None)
    ap.add_argument("--overwrite", action="store_true")
    ap.add_argument("--adapter-only", action="store_true")
    ap.add_argument("--force", action="store_true", help="merge even if the memory estimate says it will not fit")
    ap.add_argument("--push-to-hub", default=None)
    return ap


def merge_argv(
    plan: ExportPlan,
    tmp_dir: Path,
    events_path: str,
    *,
    max_shard_size: str,
    overwrite: bool,
    force: bool,
    push_to_hub: str | None,
    base: str | None = None,
    legacy_format: bool = False,
) -> list[str]:
    argv = [
        sys.executable,
        "-m",
        "engine.trainer.merge",
        *[s.given for s in plan.sources if not (base and s.kind == "model" and s.run_dir is None)],
        "--out",
        plan.out_dir,
        "--dtype",
        plan.dtype,
        "--max-shard-size",
        str(max_shard_size),
        "--device",
        plan.device,
        "--tmp-dir",
        str(tmp_dir),
        "--events",
        events_path,
    ]
    argv += ["--overwrite"] if overwrite else []
    argv += ["--adapter-only"] if plan.adapter_only else []
    argv += ["--force"] if force else []
    argv += ["--push-to-hub", push_to_hub] if push_to_hub else []
    argv += ["--base", base] if base else []
    argv += ["--legacy-format"] if legacy_format else []
    return argv
