"""``studio plan``: the memory plan of a spec (ours or a LLaMA-Factory YAML), its time and cost estimate
(``engine.plan.estimate``: tokens, steps, expected duration, cost at ``--price-per-hour`` on ``--gpu``) and, with
``--fit``, the auto-fit ladder. Light. The planner and the fit ladder do not know about each other's command line:
this module sits on top of both."""

from __future__ import annotations

import argparse
import json
import sys

from engine.core.units import memory_size
from engine.lf.compat import load_any
from engine.machine import hardware
from engine.plan.estimate import MEMORY_GIB, estimate, gpu_entry, gpu_names
from engine.plan.estimate import render as render_estimate
from engine.plan.fit import fit
from engine.plan.planner import COMPONENTS, MemoryPlan, parse_mem, plan
from engine.spec.schema import SpecError, dump_spec, save_spec


def cli(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="studio plan", description="Predict per-GPU memory for a run spec.")
    ap.add_argument("spec", help="run spec YAML (ours, or a LLaMA-Factory training YAML)")
    ap.add_argument(
        "--gpu-mem",
        "--gpu-mem-gib",  # validate's and preview's old name for the same thing
        dest="gpu_mem",
        help="memory per GPU, e.g. 24GiB or 24 (GiB) (default: the GPUs on this machine)",
    )
    ap.add_argument("--accelerate-config", help="a LLaMA-Factory YAML's accelerate config (its processes, backend)")
    ap.add_argument("--fit", action="store_true", help="walk the out-of-memory ladder until it fits")
    ap.add_argument("-o", "--output", help="with --fit: write the fitted spec here")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ap.add_argument(
        "--gpu", help=f"target GPU for the time estimate: {', '.join(gpu_names())} (default: this machine's)"
    )
    ap.add_argument(
        "--price-per-hour", type=float, help="USD per GPU-hour for the cost (default: the GPU's in the table)"
    )
    args = ap.parse_args(argv)
    try:
        # context=False: planning needs the model's config.json, not the dataset registry
        notes: list[str] = []
        spec = load_any(args.spec, args.accelerate_config, context=False, notes=notes)
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
        gib = parse_mem(args.gpu_mem) if args.gpu_mem else None
        hw = None
        named = gpu_entry(args.gpu) if args.gpu else None
        if args.gpu and named is None:
            raise ValueError(f"--gpu {args.gpu!r}: choose one of {', '.join(gpu_names())}")
        if gib is None and named is not None:  # the GPU named for the time is the one the memory is planned for
            gib = MEMORY_GIB[named[0]]
            print(f"note: memory planned for the {named[0]}'s {gib} GiB (--gpu-mem for another size)", file=sys.stderr)
        if gib is None:
            hw = hardware.detect()
            gib = (min(g.memory_total_mib for g in hw.gpus) / 1024) if hw.gpus else None
        timed_on_cpu = args.gpu_mem and not args.gpu and not (hw or hardware.detect()).gpus
        mp = plan(spec, gpu_mem_gib=gib, hardware=hw)
        if args.price_per_hour is not None and not args.price_per_hour >= 0:
            raise ValueError("--price-per-hour: give a price of 0 or more")
        timed = spec.model_copy(deep=True)
        timed.train.gradient_checkpointing = "on" if mp.checkpointing else "off"  # as the plan resolved auto
        try:
            if timed_on_cpu:  # memory for a GPU, time for this CPU: two machines in one plan
                raise ValueError(f"--gpu-mem plans a GPU: name it with --gpu ({', '.join(gpu_names())})")
            est = estimate(timed, hardware=hw, gpu=args.gpu, price_per_hour=args.price_per_hour)
        except (ValueError, OSError) as exc:  # the time estimate is advisory: the memory plan still prints
            est = None
            print(f"note: time estimate unavailable: {exc}", file=sys.stderr)
    except (SpecError, ValueError) as exc:
        print(f"studio plan: {exc}")
        return 2
    result = None
    if args.fit:
        if gib is None:
            print("studio plan: --fit needs the GPU memory: pass --gpu-mem (no GPU found here)")
            return 2
        result = fit(spec, gib)
        if args.output:
            save_spec(result.spec, args.output)
    if args.json:
        out = {"plan": mp.to_dict(), "estimate": est.to_dict() if est else None}
        if result is not None:
            out["fit"] = result.to_dict()
        print(json.dumps(out, indent=2))
    else:
        print(render(mp))
        if est is not None:
            print("\n" + render_estimate(est))
        if result is not None:
            print("\n--fit:")
            print("\n".join(f"  {i + 1}. {s}" for i, s in enumerate(result.steps)) or "  (already fits: no change)")
            print(render(result.plan))
            if args.output:
                print(f"fitted spec written to {args.output}")
            else:
                print("\nfitted spec:\n" + dump_spec(result.spec))
    if result is not None:
        return 0 if result.fits else 1
    return 0 if mp.fits is not False else 1


def render(mp: MemoryPlan) -> str:
    """A text table of the breakdown, then the verdict: against the GPU's memory, or for a run on this machine's CPU
    against the host memory it has free."""
    d = mp.details
    cpu = d.get("device") == "cpu" and mp.fits is None  # no GPU size given for a run on the CPU
    head = (
        f"model: {d['model_type']}, {d['params_total'] / 1e6:.1f}M params, {d['layers']} layers; trainable "
        f"{d['trainable_params'] / 1e6:.2f}M; precision {d['precision']}; world size {d['world_size']}; "
        f"batch {d['batch']} x seq {d['seq_len']}"
    )
    per = "per process" if cpu else "per GPU"
    lines = [head, "", f"{'component':<20}{per:>14}"]
    for k in COMPONENTS:
        v = mp.components.get(k, 0)
        if v:
            lines.append(f"{k:<20}{memory_size(v):>14}")
    lines.append(f"{'total':<20}{memory_size(mp.total_bytes):>14}   (peak during {mp.peak_phase.replace('_', ' ')})")
    if mp.cpu_ram_bytes:
        lines.append(f"{'cpu ram':<20}{memory_size(mp.cpu_ram_bytes):>14}   (per machine)")
    lines.append("")
    host = d.get("host_budget_bytes")
    if mp.fits is not None:  # a GPU size given: the verdict for it
        verdict = "FITS" if mp.fits else "DOES NOT FIT"
        lines.append(f"{verdict} in {memory_size(mp.gpu_mem_bytes)} per GPU")
    elif cpu and host:
        verdict = "FITS" if mp.total_bytes <= host else "DOES NOT FIT"
        lines.append(f"{verdict} in {memory_size(host)} of free host memory (no GPU here: the run trains on the CPU)")
    else:
        lines.append("fits: unknown (no GPU memory given: use --gpu-mem)")
    if mp.checkpointing is not None:
        lines.append(f"gradient checkpointing: {'on' if mp.checkpointing else 'off'} ({mp.checkpointing_reason})")
    if mp.approximate:
        lines.append("approximate: see the notes")
    lines += [f"note: {n}" for n in mp.notes]
    return "\n".join(lines)
