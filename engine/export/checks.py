"""Merge and export, the light half: check inputs, estimate disk and memory, build the merge subprocess's argv.

Light: stdlib, yaml and engine's light modules only (never torch/transformers/peft). What the weights weigh (bytes
on disk, peak memory of the merge) is ``engine.export.sizes``'s; ``ExportError`` is defined in
``engine.export.messages`` and imported here, where its callers have always found it; so are the sources (a run or
an adapter folder read into a ``Source``: ``engine.export.sources``). Everything that needs weights
runs in ``python -m engine.trainer.merge`` (engine/trainer/merge.py), started as a command run of the registry by
engine/export/merge_jobs.py, which follows and cancels it.

Sources are run folders (``spec.yaml`` + ``<out>/adapter`` or ``<out>/model``) or PEFT adapter folders. Every input
problem is found here, before any weights load: missing ``adapter_config.json``, a run with no adapter yet, an
adapter whose module shapes do not fit the base (read from the safetensors headers, no torch), an existing target,
too little disk, too little memory (``estimate_memory`` against ``available_memory``; ``force`` skips that one), a
target outside the workspace or owned by a run, the workspace or the base (``engine.runs.registry.folder_problem``).
``plan_export`` raises ``ExportError`` with the message the UI / CLI shows.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from engine.core import workspace
from engine.core.messages import Message
from engine.core.messages import message as core_message
from engine.export import sizes, written
from engine.export.messages import ExportError, message
from engine.export.sources import Source, resolve_source, source_head
from engine.runs import registry as runs


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
    base = sizes.model_tensors(base_dir)
    if not afile.is_file() or not base:
        return  # .bin files cannot be read without torch; the subprocess reports a mismatch at load time
    tensors = sizes.safetensors_header(afile)
    arch = sizes.read_json(Path(base_dir) / "config.json").get("model_type", "?")
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


def memory_problem(plan: ExportPlan, sources: list[Source], max_shard: int) -> Message | None:
    """The refusal message when the merge will not fit in memory (needed vs available and what would help)."""
    if plan.ram_needed <= plan.ram_available:
        return None
    fixes = message("export.fixes")
    if plan.device == "cpu":
        on_gpu = sizes.estimate_memory(sources, plan.base, plan.dtype, "cuda", plan.adapter_only, max_shard)
        if on_gpu < plan.ram_needed:
            fixes = message("export.fixes_gpu", ram=sizes.gb(on_gpu))
    return message(
        "export.no_memory_cpu" if plan.device == "cpu" else "export.no_memory_cuda",
        need=sizes.gb(plan.ram_needed),
        available=sizes.gb(plan.ram_available),
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
    if dtype is not None and dtype not in sizes.DTYPES:
        raise ExportError(message("export.bad_dtype", dtype=dtype, choices=", ".join(sizes.DTYPES)))
    if device not in ("cpu", "cuda"):
        raise ExportError(message("export.bad_device", device=device))
    max_shard = sizes.parse_size(max_shard_size)
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
    problem = written.overwrite_problem(out)  # --overwrite replaces only what an earlier merge or export wrote
    if problem is not None:
        raise ExportError(problem)
    dtype = dtype or sizes.default_dtype(base)
    need, free = sizes.estimate_bytes(srcs, base, dtype, adapter_only), free_bytes(out.parent)
    if need > free:
        raise ExportError(message("export.no_disk", out=out, need=sizes.gb(need), dtype=dtype, free=sizes.gb(free)))
    plan = ExportPlan(srcs, base, str(out), dtype, adapter_only, need, free, device, head=heads[0])
    plan.ram_needed = sizes.estimate_memory(srcs, base, dtype, device, adapter_only, max_shard)
    plan.ram_available, plan.ram_source = sizes.available_memory()
    problem = memory_problem(plan, srcs, max_shard)
    if problem and not force:
        raise ExportError(problem)
    return plan


def default_export_dir(run_id: str) -> Path:
    return workspace.exports_dir() / f"{run_id}-merged"


def temp_dir_for(out_dir: str | Path) -> Path:
    """Beside the target (same filesystem, so the final rename is atomic), hidden, unique per merge."""
    out = Path(out_dir).expanduser().resolve()
    return out.parent / f".{out.name}.tmp-{os.getpid()}-{int(time.time() * 1000)}"


# ----------------------------------------------------------------------------------------------- the subprocess
def merge_arg_parser() -> argparse.ArgumentParser:
    """Arguments of ``python -m engine.trainer.merge``; engine.export.merge_jobs reads a merge's folders back from
    them."""
    ap = argparse.ArgumentParser(prog="python -m engine.trainer.merge")
    ap.add_argument("sources", nargs="*")
    ap.add_argument("--base", default=None, help="merge into this model folder (no sources: re-export it)")
    ap.add_argument("--legacy-format", action="store_true", help="write .bin files instead of safetensors")
    ap.add_argument("--out", required=True)
    ap.add_argument("--dtype", choices=list(sizes.DTYPES), default=None)
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
