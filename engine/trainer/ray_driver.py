"""Ray as a launch target (``launch.target: ray``): ``python -m engine.trainer.ray_driver SPEC.yaml --run-dir RUN_DIR``
is the run's command in place of the trainer (``engine.runs.launch``), so the registry, the runner, events.jsonl,
stop and merge treat the run like a local one.

The driver connects to Ray (``RAY_ADDRESS``, else a local Ray started for the run; ``launch.ray.init_kwargs`` passed
to ``ray.init``) and runs Ray Train's ``TorchTrainer`` with ``launch.ray``'s workers (``num_workers``,
``resources_per_worker``, ``placement_strategy``; GPUs per ``launch.device``). Each worker runs the trainer's own
``engine.trainer.train.main`` in its process, in the process group Ray made (gloo on CPU, NCCL on GPUs), with the
environment the launch gave the driver (the trainer's device, precision, threads, the hub's settings); rank 0
writes events.jsonl into the run folder, which a worker on another node must see at the same path (a shared folder,
as for Slurm). Ray Train's own results go to ``launch.ray.storage_path`` (default: the run folder's ``ray/``) under
``launch.ray.run_name`` (default: the run's folder name).

Stop: SIGTERM (or SIGINT) to the driver writes ``STOP_REQUEST`` into the run folder; every worker's
``GracefulStop`` reads it at the end of its step, the ranks agree, save a checkpoint and end with a ``stopped`` event,
and the driver ends with them. Killed, the driver takes its Ray job with it: Ray ends the actors a driver owns.

Heavy: ray (and, in the workers, torch and the trainer).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import traceback
from pathlib import Path

from engine.core.events import TERMINAL_TYPES, append_event, last_event

STOP_REQUEST = "stop.request"  # written by the driver on SIGTERM; GracefulStop stops the workers on it
# The driver's environment that belongs to its own machine, never set on a worker (which has its own).
NODE_LOCAL = {
    "PATH",
    "HOME",
    "USER",
    "LANG",
    "LC_ALL",
    "TMPDIR",
    "PWD",
    "OLDPWD",
    "SHLVL",
    "_",
    "VIRTUAL_ENV",
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
    "RAY_ADDRESS",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
}


def worker_env(device: str, run_dir: Path) -> dict[str, str]:
    """What each worker's process gets: the driver's environment (the launch's, explicit: engine.runs.launch) less
    what belongs to this machine, this repository on PYTHONPATH, and the stop request's path."""
    env = {k: v for k, v in os.environ.items() if k not in NODE_LOCAL and not k.startswith("RAY_")}
    if device == "cuda":
        env.pop("CUDA_VISIBLE_DEVICES", None)  # Ray gives each worker its GPUs
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    env["STUDIO_STOP_REQUEST"] = str(run_dir / STOP_REQUEST)
    return env


def train_worker(config: dict) -> None:
    """One Ray Train worker: the trainer's entry in this process (Ray set RANK, WORLD_SIZE, LOCAL_RANK and the process
    group). A failed trainer (its ``failed`` event written) fails the worker, so Ray ends the others."""
    from engine.trainer import lean, train

    lean.own_process()  # a worker process of its own: what the run cannot use stays unimported (engine.trainer.lean)
    code = train.main([config["spec"], "--run-dir", config["run_dir"]])
    if code:
        raise RuntimeError(f"the trainer ended with exit code {code} (events.jsonl says why)")


def scaling(spec, device: str):
    """Ray Train's ScalingConfig of ``launch.ray``: resources default to one GPU (cuda) or one CPU per worker."""
    from ray.train import ScalingConfig

    ray = spec.launch.ray
    use_gpu = device == "cuda"
    resources = dict(ray.resources_per_worker) or ({"GPU": 1.0} if use_gpu else {"CPU": 1.0})
    if use_gpu:
        resources.setdefault("GPU", 1.0)
    return ScalingConfig(
        num_workers=ray.num_workers,
        use_gpu=use_gpu,
        resources_per_worker=resources,
        placement_strategy=ray.placement_strategy,
    )


def connect(spec, env: dict[str, str]) -> None:
    """ray.init: the cluster at RAY_ADDRESS (or init_kwargs' address), else a local Ray; the workers' environment
    through the runtime environment, the user's own runtime_env entries kept (their env_vars win)."""
    import ray

    kwargs = dict(spec.launch.ray.init_kwargs)
    runtime_env = dict(kwargs.pop("runtime_env", None) or {})
    runtime_env["env_vars"] = {**env, **{k: str(v) for k, v in (runtime_env.get("env_vars") or {}).items()}}
    address = kwargs.pop("address", None) or os.environ.get("RAY_ADDRESS") or None
    ray.init(address=address, runtime_env=runtime_env, **kwargs)


def stop_on_signals(run_dir: Path) -> None:
    """SIGTERM and SIGINT write the stop request the workers read (installed after ray.init, whose own handler
    would end the driver at once, and its workers with it, with no checkpoint)."""

    def on_signal(signum, frame) -> None:  # noqa: ARG001
        (run_dir / STOP_REQUEST).write_text(signal.Signals(signum).name, encoding="utf-8")
        print(f"[studio] {signal.Signals(signum).name}: the Ray workers save a checkpoint and stop", flush=True)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)


def run(spec_path: str, run_dir: Path) -> int:
    from ray.train import RunConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    from engine.spec.schema import load_spec

    spec = load_spec(spec_path)
    device = os.environ.get("STUDIO_DEVICE", "cpu")
    connect(spec, worker_env(device, run_dir))
    stop_on_signals(run_dir)
    ray = spec.launch.ray
    trainer = TorchTrainer(
        train_worker,
        train_loop_config={"spec": str(Path(spec_path).resolve()), "run_dir": str(run_dir.resolve())},
        torch_config=TorchConfig(backend="nccl" if device == "cuda" else "gloo", timeout_s=spec.launch.ddp_timeout),
        scaling_config=scaling(spec, device),
        run_config=RunConfig(
            name=ray.run_name or run_dir.name,
            storage_path=str(Path(ray.storage_path).expanduser().resolve() if ray.storage_path else run_dir / "ray"),
        ),
    )
    trainer.fit()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.trainer.ray_driver")
    parser.add_argument("spec", help="run spec YAML (launch.target: ray)")
    parser.add_argument("--run-dir", required=True, help="run folder: events.jsonl, record.json, outputs")
    args = parser.parse_args(argv)
    run_dir = Path(args.run_dir).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    events = run_dir / "events.jsonl"
    (run_dir / STOP_REQUEST).unlink(missing_ok=True)
    stop_on_signals(run_dir)  # also while Ray starts: the workers then stop after their first step
    try:
        return run(args.spec, run_dir)
    except BaseException as exc:  # noqa: BLE001 - a run that did not end by itself must say why
        if isinstance(exc, SystemExit) and not exc.code:
            raise
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        print(tb, file=sys.stderr, flush=True)
        if last_event(events, TERMINAL_TYPES) is None:  # a worker's own failed event says more
            from engine.trainer.train import classify

            append_event(
                events, "failed", None, cause=classify(exc), error=f"{type(exc).__name__}: {exc}"[:4000], rank=None
            )
        return 1
    finally:
        try:
            import ray

            ray.shutdown()
        except Exception:  # noqa: BLE001 - shutting down what may never have started
            pass


if __name__ == "__main__":
    from engine.trainer.ray_driver import main as entry  # workers import train_worker from this module by name

    sys.exit(entry())
