"""A run on several machines: the command each node runs (``--machine_rank`` per node), the environment a node needs
from the launch's (only what the trainer reads: threads, NCCL, accelerate, DeepSpeed, the studio's own), and the
Slurm batch script that starts one task per node (``sbatch run.slurm``; ``engine.runs.slurm`` submits and follows
it). Pure text from the spec and the launch's argv / environment, built by ``engine.runs.launch.build_command``.

Light: stdlib and engine.spec.schema only.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from engine.core import workspace
from engine.spec.schema import RunSpec

# passed to the process, never written to a run folder
SECRET_ENV = ("HF_TOKEN", "WANDB_API_KEY", "MODELSCOPE_API_TOKEN", "RAY_AUTH_TOKEN")


def node_commands(spec: RunSpec, argv: list[str]) -> list[str]:
    """The exact command for every machine; they differ only in --machine_rank."""
    if spec.launch.num_machines == 1:
        return [shlex.join(argv)]
    out = []
    for rank in range(spec.launch.num_machines):
        a = list(argv)
        i = a.index("--machine_rank")
        a[i + 1] = str(rank)
        out.append(shlex.join(a))
    return out


NODE_ENV_PREFIXES = ("OMP_", "MKL_", "NCCL_", "TENSORBOARD", "PYTHON", "ACCELERATE", "DS_", "TOKENIZERS", "STUDIO_")


def node_environment(env: dict[str, str]) -> dict[str, str]:
    """What every machine of a run must set, the same for the per-node commands (``studio preview``) and the Slurm
    script's exports: threads, communication, the launcher's and DeepSpeed's settings, the interpreter's path and
    Studio's own (``STUDIO_DEVICE`` / ``STUDIO_PRECISION`` the trainer uses instead of guessing, ``STUDIO_HOME``
    always, so no node falls back to its own ``~/.studio``). Secrets are left out."""

    out = {k: v for k, v in env.items() if k.startswith(NODE_ENV_PREFIXES) and k not in SECRET_ENV}
    out.setdefault("STUDIO_HOME", str(workspace.home()))
    return out


def slurm_script(
    spec: RunSpec, argv: list[str], env: dict[str, str], *, run_dir: Path | None = None, partition: str = ""
) -> str:
    """An sbatch script running the launch on ``launch.num_machines`` nodes, one task per node: rank from
    SLURM_NODEID, main address from the first node of the allocation, the ``launch.slurm`` options. With ``run_dir``
    the job's output goes to its train.log. The run folder (spec, configs), the model, the data and this code must be
    on a filesystem every node sees, at the same paths.

    SIGTERM (``scancel --signal=TERM``, the time limit) reaches every process of the step: the launcher ignores it
    (``trap "" TERM``, inherited) and waits, the trainer (its own handler) saves a checkpoint and stops; otherwise
    the launcher would die at once and Slurm would kill the trainer with it, mid-save. With ``run_dir`` every node's
    task also starts the metrics sampler in its background (``python -m engine.runs.metrics``: the GPU / RAM / CPU
    samples a local run's runner writes), which ignores that SIGTERM too and ends with the task."""
    ln, sl = spec.launch, spec.launch.slurm
    words = [shlex.quote(x) for x in argv]
    if "--machine_rank" in argv:
        words[argv.index("--machine_rank") + 1] = '"$SLURM_NODEID"'
    if "--main_process_ip" in argv:
        words[argv.index("--main_process_ip") + 1] = '"$MAIN_ADDR"'
    sampler = ""
    if run_dir is not None:  # system metrics of every node (engine.runs.metrics.node_main), as a local run's runner
        sampler = (
            f"{shlex.quote(sys.executable)} -m engine.runs.metrics {shlex.quote(str(run_dir))} --root-pid $$ "
            f'--node "$SLURM_NODEID" >>{shlex.quote(str(run_dir / "train.log"))} 2>&1 & '
        )
    cmd = ('trap "" TERM; ' + sampler + " ".join(words)).replace("'", "'\\''")
    exports = "\n".join(f"export {k}={shlex.quote(v)}" for k, v in sorted(node_environment(env).items()))
    on_gpu = env.get("STUDIO_DEVICE", ln.device) == "cuda"  # the device build_command resolved for the nodes
    gpus = sl.gpus_per_node if sl.gpus_per_node is not None else (ln.num_processes if on_gpu else 0)
    options = [
        f"--job-name={shlex.quote(spec.output.run_name or 'studio-run')}",
        f"--nodes={ln.num_machines}",
        "--ntasks-per-node=1",
    ]
    options += [f"--gpus-per-node={gpus}"] if gpus else []
    options += [f"--cpus-per-task={sl.cpus_per_node}"] if sl.cpus_per_node else []
    for flag_name, value in (
        ("mem", sl.memory),
        ("time", sl.time_limit),
        ("partition", sl.partition or partition),
        ("account", sl.account),
        ("qos", sl.qos),
        ("constraint", sl.constraint),
    ):
        if value:
            options.append(f"--{flag_name}={value}")
    if run_dir is not None:
        options += [f"--output={run_dir / 'train.log'}", "--open-mode=append"]
    options.append(f"--chdir={Path(__file__).resolve().parents[2]}")  # the trainer runs from the code's folder
    options += [line.strip().removeprefix("#SBATCH").strip() for line in sl.extra_sbatch if line.strip()]
    head = "\n".join(f"#SBATCH {o}" for o in options)
    return f"""#!/bin/bash
{head}
set -euo pipefail
{exports}
MAIN_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export MAIN_ADDR
srun --kill-on-bad-exit=1 bash -c '{cmd}'
"""
