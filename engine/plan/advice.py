"""Speed advice for a running run: the seed's slow-training checklist applied to its metrics and events.

Light: stdlib only. ``metrics_rows`` are metrics.jsonl samples (dicts; GPU utilisation under ``gpus[i].util`` or
``gpu_util``, ``cpu_percent``), ``events`` the run's events (engine/core/events.py schema).
"""

from __future__ import annotations

from statistics import mean

from engine.plan.messages import message


def _gpu_utils(rows: list[dict]) -> list[float]:
    out: list[float] = []
    for r in rows:
        if isinstance(r.get("gpus"), list):
            out += [
                float(g["util"]) for g in r["gpus"] if isinstance(g, dict) and isinstance(g.get("util"), (int, float))
            ]
        elif isinstance(r.get("gpu_util"), (int, float)):
            out.append(float(r["gpu_util"]))
    return out


def advise(spec, metrics_rows: list[dict], events: list[dict]) -> list[str]:
    """What to change to train faster, most likely first. Empty when nothing stands out."""
    tips: list[str] = []
    t, ln = spec.train, spec.launch
    utils = _gpu_utils(metrics_rows[-60:])
    util = mean(utils) if utils else None
    if util is not None and util < 60:
        tips.append(message("advice.low_util", util=util))
    if t.precision == "fp32" and ln.device != "cpu":
        tips.append(message("advice.fp32"))
    if spec.model.attn_implementation == "eager":
        tips.append(message("advice.eager"))
    if ln.backend == "deepspeed" and (
        ln.deepspeed.offload_optimizer != "none" or ln.deepspeed.offload_param != "none"
    ):
        tips.append(message("advice.ds_offload"))
    if ln.backend == "fsdp" and ln.fsdp.offload_params:
        tips.append(message("advice.fsdp_offload"))
    if t.per_device_batch_size < 4 and (util is None or util < 80):
        tips.append(message("advice.small_batch", batch=t.per_device_batch_size))
    if t.gradient_checkpointing == "on" and util is not None and util < 80:
        tips.append(message("advice.checkpointing"))
    cpu = [float(r["cpu_percent"]) for r in metrics_rows[-60:] if isinstance(r.get("cpu_percent"), (int, float))]
    if util is not None and util < 60 and cpu and mean(cpu) > 85:
        tips.append(message("advice.cpu_bound", cpu=mean(cpu)))
    logs = [
        e
        for e in events
        if e.get("type") == "log" and isinstance(e.get("payload", {}).get("tokens_per_second"), (int, float))
    ]
    if len(logs) >= 4:
        tps = [e["payload"]["tokens_per_second"] for e in logs]
        if min(tps[-3:]) < 0.5 * max(tps):
            tips.append(message("advice.throughput_drop", peak=max(tps), now=tps[-1]))
    if not spec.data.packing and spec.method.stage in ("sft", "pt"):  # the stages that can pack
        tips.append(message("advice.packing_off"))
    return tips
