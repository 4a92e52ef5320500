"""Heavy half of ``studio doctor``: run as ``python -m engine.trainer.doctor_probe [stack|allreduce]``, prints JSON.

Heavy: imports torch (and tries flash_attn, deepspeed). Runs in a subprocess with a timeout so a hung driver or
NCCL cannot hang the caller. ``allreduce`` spawns one process per visible GPU (NCCL) or two CPU processes (gloo)
on 127.0.0.1 and checks that the sum is right.
"""

from __future__ import annotations

import importlib.metadata as md
import json
import os
import socket
import sys


def stack() -> dict:
    import torch

    out: dict = {
        "torch": torch.__version__,
        "cuda_build": torch.version.cuda,
        "hip_build": getattr(torch.version, "hip", None),
        "cuda_available": torch.cuda.is_available(),
        "device_count": torch.cuda.device_count(),
    }
    out["bf16"] = bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    out["nccl"] = bool(torch.distributed.is_available() and torch.distributed.is_nccl_available())
    out["versions"] = {}
    for pkg in (
        "torch",
        "transformers",
        "peft",
        "accelerate",
        "datasets",
        "trl",
        "deepspeed",
        "bitsandbytes",
        "flash-attn",
        "gradio",
    ):
        try:
            out["versions"][pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out["versions"][pkg] = None
    try:
        import flash_attn  # noqa: F401

        out["flash_attn"] = "importable"
    except Exception as exc:  # noqa: BLE001 - ImportError or a CUDA ABI mismatch: reported, not raised
        out["flash_attn"] = f"not available: {type(exc).__name__}: {str(exc)[:120]}"
    try:
        from deepspeed.ops.op_builder.all_ops import ALL_OPS

        ops = {}
        for name, builder in ALL_OPS.items():
            try:
                ops[name] = bool(builder.is_compatible(verbose=False))
            except Exception:  # noqa: BLE001 - a broken builder is reported as incompatible
                ops[name] = False
        out["deepspeed_ops"] = ops
    except Exception as exc:  # noqa: BLE001 - reported to the user
        out["deepspeed_ops"] = f"deepspeed not importable: {type(exc).__name__}: {str(exc)[:120]}"
    return out


def _worker(rank: int, world: int, port: int, backend: str, q) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group(backend, rank=rank, world_size=world)
    dev = torch.device(f"cuda:{rank}") if backend == "nccl" else torch.device("cpu")
    t = torch.full((4,), float(rank + 1), device=dev)
    dist.all_reduce(t)
    q.put((rank, t.cpu().tolist()))
    dist.destroy_process_group()


def allreduce() -> dict:
    import torch
    import torch.multiprocessing as mp

    gpus = torch.cuda.device_count()
    backend, world = ("nccl", gpus) if gpus >= 1 and torch.distributed.is_nccl_available() else ("gloo", 2)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    q = ctx.SimpleQueue()
    procs = [ctx.Process(target=_worker, args=(r, world, port, backend, q)) for r in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    results = [q.get() for _ in range(world) if not q.empty()]
    expected = float(world * (world + 1) / 2)
    ok = len(results) == world and all(v == [expected] * 4 for _, v in results)
    return {
        "backend": backend,
        "world_size": world,
        "ok": ok,
        "results": results,
        "exitcodes": [p.exitcode for p in procs],
    }


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    what = sys.argv[1] if len(sys.argv) > 1 else "stack"
    print(json.dumps(allreduce() if what == "allreduce" else stack()))
