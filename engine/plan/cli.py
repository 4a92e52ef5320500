"""``studio plan``: the memory plan of a spec (ours or a LLaMA-Factory YAML), its time and cost estimate
(``engine.plan.estimate``: tokens, steps, expected duration, cost at ``--price-per-hour`` on ``--gpu``) and, with
``--fit``, the auto-fit ladder. Light. The planner and the fit ladder do not know about each other's command line:
this module sits on top of both."""

from __future__ import annotations

import argparse
import json
import sys

from engine.lf.compat import load_any
from engine.machine import hardware
from engine.plan.estimate import estimate, gpu_names
from engine.plan.estimate import render as render_estimate
from engine.plan.fit import fit
from engine.plan.planner import parse_mem, plan, render
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
        if gib is None:
            hw = hardware.detect()
            gib = (min(g.memory_total_mib for g in hw.gpus) / 1024) if hw.gpus else None
        mp = plan(spec, gpu_mem_gib=gib, hardware=hw)
        if args.price_per_hour is not None and not args.price_per_hour >= 0:
            raise ValueError("--price-per-hour: give a price of 0 or more")
        timed = spec.model_copy(deep=True)
        timed.train.gradient_checkpointing = "on" if mp.checkpointing else "off"  # as the plan resolved auto
        try:
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
