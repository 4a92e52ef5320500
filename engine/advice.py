"""Speed advice for a running run: the seed's slow-training checklist applied to its metrics and events.

Light: stdlib only. ``metrics_rows`` are metrics.jsonl samples (dicts; GPU utilisation under ``gpus[i].util`` or
``gpu_util``, ``cpu_percent``), ``events`` the run's events (engine/events.py schema).
"""

from __future__ import annotations

from statistics import mean


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
        tips.append(
            f"GPU utilisation averages {util:.0f}%: the GPU waits. Check the items below (data loading, "
            "offload, batch size) and watch `nvidia-smi dmon -s u`."
        )
    if t.precision == "fp32" and ln.device != "cpu":
        tips.append(
            "no mixed precision: set train.precision to bf16 (or fp16 on GPUs without bf16): ~2x faster, "
            "half the activation memory."
        )
    if spec.model.attn_implementation == "eager":
        tips.append("eager attention: set model.attn_implementation to sdpa or flash_attention_2.")
    if ln.backend == "deepspeed" and (
        ln.deepspeed.offload_optimizer != "none" or ln.deepspeed.offload_param != "none"
    ):
        tips.append(
            "DeepSpeed offload moves states over PCIe every step: if memory allows, set offload_param and "
            "offload_optimizer to none (engine.plan shows whether it still fits)."
        )
    if ln.backend == "fsdp" and ln.fsdp.offload_params:
        tips.append("FSDP parameter offload is slow: turn launch.fsdp.offload_params off if it fits.")
    if t.per_device_batch_size < 4 and (util is None or util < 80):
        tips.append(
            f"per-device batch {t.per_device_batch_size} is small: raise train.per_device_batch_size toward "
            "the memory limit and lower gradient_accumulation to keep the effective batch."
        )
    if t.gradient_checkpointing and util is not None and util < 80:
        tips.append("gradient checkpointing recomputes activations (~30% slower): turn it off if the plan still fits.")
    cpu = [float(r["cpu_percent"]) for r in metrics_rows[-60:] if isinstance(r.get("cpu_percent"), (int, float))]
    if util is not None and util < 60 and cpu and mean(cpu) > 85:
        tips.append(
            f"CPU is busy ({mean(cpu):.0f}%) while the GPU idles: data loading is the bottleneck; raise "
            "data.preprocessing_workers, pre-tokenise, or turn on data.packing for short samples."
        )
    logs = [
        e
        for e in events
        if e.get("type") == "log" and isinstance(e.get("payload", {}).get("tokens_per_second"), (int, float))
    ]
    if len(logs) >= 4:
        tps = [e["payload"]["tokens_per_second"] for e in logs]
        if min(tps[-3:]) < 0.5 * max(tps):
            tips.append(
                f"throughput dropped from {max(tps):.0f} to {tps[-1]:.0f} tokens/s: look for another process "
                "on the GPU, thermal throttling, or checkpoint saves in the middle of steps."
            )
    if not spec.data.packing and spec.method.stage != "dpo":
        tips.append("packing is off: with many short samples, data.packing avoids computing on padding.")
    return tips
