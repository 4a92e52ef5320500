"""Turn a spec into the exact launch: argv, environment, generated accelerate / DeepSpeed configs, the command for
every node, and a Slurm script. Pure (no I/O beyond reading the model config for the FSDP layer class); light
(no torch). ``write_plan_files`` is the one function that writes, into a run folder. The generated configs are
``engine.runs.accelerate_configs``'s, the per-node commands and the Slurm script ``engine.runs.node_commands``'s.

Which "launch" this is: the *command line of a training run* (argv, env, configs), built when the scheduler starts
the run. Not ``engine.spec.launch_group`` (the spec's ``launch:`` section: backend, devices, machines), not
``engine.lf.launch_settings`` (LLaMA-Factory's launch options read into that section), not ``scheduler.launch``
(starting the detached wrapper of a queued run); ``launch.json`` is what ``launch_record`` writes into the run folder.

How the trainer starts:
- single (one process, one machine): ``python -m engine.trainer.train`` itself, with the environment accelerate's
  simple launcher would give it (``simple_launcher_env``): the launcher only starts one child, and its own import of
  torch cost every run ~3 s before the trainer began (more on a busy machine). The stop signal reaches the trainer
  directly, and the run's processes are the trainer and its data workers;
- everything else through ``accelerate launch``:
  - ddp: on GPUs an accelerate config (MULTI_GPU); on CPU ``--multi_gpu`` with ``ACCELERATE_USE_CPU=true``, the one
    combination that gives real DDP over gloo (STACK-NOTES: ``--cpu --num_processes 2`` and MULTI_CPU configs start ONE
    process);
  - deepspeed: accelerate config DEEPSPEED pointing at a generated ``ds_config.json`` (the seed's shape, with
    ``auto`` values that the Trainer fills), the same file also passed to the Trainer. Several machines: accelerate's
    ``standard`` multi-node launcher (torchrun on every node, the per-node commands below); its default, pdsh, would
    start every node from the main one over ssh with a hostfile. On CPU: ``DS_ACCELERATOR=cpu`` and never
    ``ACCELERATE_USE_CPU`` (with it accelerate keeps the state MULTI_CPU and the Trainer silently trains plain DDP);
    the trainer asks for gloo (``engine.trainer.train``);
  - fsdp: accelerate config FSDP in the seed's shape (GPUs only).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from engine.lf.compat import load_any_spec
from engine.machine.hardware import Hardware, auto_precision, cpu_only, detect, target_machine
from engine.machine.kernels import fp8_device_refusal, with_gptq_path
from engine.machine.messages import message as machine_message
from engine.models.resolve import looks_local, model_path
from engine.runs.accelerate_configs import accelerate_config, deepspeed_config, mixed_precision_name
from engine.runs.node_commands import SECRET_ENV, node_commands, node_environment, slurm_script
from engine.spec.grpo_group import absolute_reward_files
from engine.spec.schema import RunSpec, SpecError
from engine.watch import trackers

# Passed through to the trainer when set; everything else in its environment is explicit.
PASSTHROUGH_ENV = (
    "PATH",
    "HOME",
    "USER",
    "LANG",
    "LC_ALL",
    "TMPDIR",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "STUDIO_HOME",
    "STUDIO_OUTPUT_ROOTS",  # the trainer re-checks output.output_dir (engine.core.folders) with the same roots
    "HF_HOME",
    "HF_ENDPOINT",  # a mirror or a private hub: downloads and the trainer ask the same one
    "HF_HUB_DOWNLOAD_TIMEOUT",
    "HF_HUB_ETAG_TIMEOUT",
    "HF_HUB_OFFLINE",
    "HF_DATASETS_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "HF_HUB_DISABLE_TELEMETRY",
    "HF_HUB_CACHE",
    "HF_DATASETS_CACHE",
    "MODELSCOPE_ENDPOINT",  # ModelScope models (model.hub: modelscope) and ms_hub_url datasets: the same hub and
    "MODELSCOPE_CACHE",  # cache as the checks before launch
    "USE_MODELSCOPE_HUB",  # LF's switch: which URL of a dataset entry the trainer reads
    "TORCH_EXTENSIONS_DIR",
    "CUDA_HOME",
    "LD_LIBRARY_PATH",
    "NCCL_DEBUG",
    "NCCL_SOCKET_IFNAME",
    "NCCL_IB_DISABLE",
    "GLOO_SOCKET_IFNAME",
    "STUDIO_FORCE_CPU",
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
    "HF_TOKEN",
    "MODELSCOPE_API_TOKEN",  # ModelScope's client reads it (LF's ms_hub_token)
    "WANDB_API_KEY",
    "WANDB_MODE",
)


class LaunchError(SpecError):
    """The spec is valid but cannot run on this hardware (precision, device, GPU count)."""


@dataclass
class LaunchPlan:
    argv: list[str]
    env: dict[str, str]
    files: dict[str, str] = field(default_factory=dict)
    node_commands: list[str] = field(default_factory=list)
    slurm_script: str | None = None
    warnings: list[str] = field(default_factory=list)
    device: str = "cpu"
    precision: str = "fp32"
    gpu_ids: list[int] = field(default_factory=list)

    def public_env(self) -> dict[str, str]:
        """The environment with secrets masked, for launch.json and previews."""
        return {k: ("***" if k in SECRET_ENV else v) for k, v in self.env.items()}


def anchor_paths(valid: RunSpec) -> list[Path]:
    """The spec's local paths made absolute as this process finds them, so that a subprocess whose working folder
    is the repository (the trainer, the reward dry run) loads the same files: a local model (``models/...`` is the
    workspace's) and the python reward files (from the current folder). Returns the reward files."""
    if looks_local(valid.model.name_or_path):
        valid.model.name_or_path = str(model_path(valid.model.name_or_path).resolve())
    return absolute_reward_files(valid)


def ray_hardware(spec: RunSpec, hw: Hardware) -> Hardware:
    """The machines a Ray run's workers get, not necessarily this one: GPUs when asked for (device cuda, or GPUs in
    ``launch.ray.resources_per_worker``), CPU for device cpu; device auto without GPUs asked: this machine decides
    (a local Ray runs here)."""
    ln = spec.launch
    gpus = ln.ray.resources_per_worker.get("GPU", 0)
    if ln.device == "cpu":
        return cpu_only()
    if ln.device == "cuda" or gpus:
        return hw if hw.has_gpu else target_machine(ln.ray.num_workers, 80.0)
    return hw


def resolve_device(spec: RunSpec, hw: Hardware) -> str:
    if spec.launch.device == "cuda" and not hw.has_gpu:
        raise LaunchError([("launch.device", f"cuda requested but this machine has no usable GPU ({hw.reason})")])
    if spec.launch.device == "auto":
        return "cuda" if hw.has_gpu else "cpu"
    return spec.launch.device


def resolve_precision(spec: RunSpec, hw: Hardware, device: str) -> str:
    """The precision the trainer runs in: ``auto`` by ``engine.machine.hardware.auto_precision``; a precision set in
    the spec that this device cannot run is refused, naming the field."""
    p = spec.train.precision
    bf16_ok = device == "cpu" or all(g.bf16 is not False for g in hw.gpus)
    if p == "auto":
        return auto_precision(device, hw.gpus)
    if p == "bf16" and not bf16_ok:
        names = ", ".join(sorted({g.name for g in hw.gpus if g.bf16 is False}))
        raise LaunchError([("train.precision", f"bf16 is not supported by {names}: use fp16")])
    if p == "fp16" and device == "cpu":
        raise LaunchError(
            [("train.precision", "fp16 mixed precision needs a GPU; this run would be on CPU: use bf16 or fp32")]
        )
    return p


def check_hardware(spec: RunSpec, hw: Hardware, device: str, gpu_ids: list[int]) -> None:
    problems = []
    ln = spec.launch
    if device == "cpu":
        if ln.backend == "fsdp":
            problems.append(("launch.backend", "FSDP needs GPUs and none is available: use ddp or deepspeed on CPU"))
        if spec.model.attn_implementation == "flash_attention_2":
            problems.append(("model.attn_implementation", "flash_attention_2 needs a CUDA GPU: use sdpa"))
    else:
        have = {g.index for g in hw.gpus}
        missing = [g for g in gpu_ids if g not in have]
        if missing:
            problems.append(("launch.gpus", f"GPU id(s) {missing} do not exist (this machine has {sorted(have)})"))
        if ln.num_processes > len(gpu_ids):
            problems.append(
                (
                    "launch.num_processes",
                    f"{ln.num_processes} processes but only {len(gpu_ids)} GPU(s) available for this run",
                )
            )
    chosen = [g for g in hw.gpus if g.index in gpu_ids]
    if spec.train.fp8 and (refusal := fp8_device_refusal(device, chosen)):  # accelerate would fall back to fp16
        problems.append(("train.fp8", machine_message(refusal[0], **refusal[1])))
    if problems:
        raise LaunchError(problems)


def choose_gpus(spec: RunSpec, hw: Hardware, gpu_ids: list[int] | None) -> list[int]:
    if gpu_ids is not None:
        return list(gpu_ids)
    if spec.launch.gpus is not None:
        return list(spec.launch.gpus)
    return [g.index for g in hw.gpus][: spec.launch.num_processes]


def subprocess_env(device: str, gpus: list[int], hw: Hardware, *, processes: int = 1) -> dict[str, str]:
    """The explicit environment of a run's processes: the allow-listed part of ours (``PASSTHROUGH_ENV``) plus what
    every run needs (threads, visible GPUs). Trainers (``build_command``) and command runs (``engine.runs.scheduler``)
    both start from it, so nothing else of the studio's environment (its login, unrelated variables) reaches them."""
    env = {k: os.environ[k] for k in PASSTHROUGH_ENV if k in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    if pythonpath := with_gptq_path(env.get("PYTHONPATH", "")):  # gptqmodel kept apart (machine.kernels.gptq_folder)
        env["PYTHONPATH"] = pythonpath
    env["PYTHONUNBUFFERED"] = "1"
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # CUDA's numbering = NVML's, which the scheduler and sampler use
    env["TOKENIZERS_PARALLELISM"] = "false"
    # One compute thread per process on CPU: two OpenMP threads on a busy machine were ~160x slower (STACK-NOTES).
    threads = max(1, (hw.cpu_count // max(1, processes))) if device == "cuda" else 1
    env["OMP_NUM_THREADS"] = os.environ.get("STUDIO_OMP_THREADS", str(threads))
    env["MKL_NUM_THREADS"] = env["OMP_NUM_THREADS"]
    if device == "cuda":
        visible = ",".join(str(g) for g in gpus)
        env["CUDA_VISIBLE_DEVICES"] = visible
        if hw.vendor == "amd":
            env["HIP_VISIBLE_DEVICES"] = visible
            env["ROCR_VISIBLE_DEVICES"] = visible
    else:
        env["CUDA_VISIBLE_DEVICES"] = ""
        # DeepSpeed (imported by accelerate / transformers when installed) otherwise finds no GPU and logs "Setting
        # accelerator to CPU. If you have GPU ..., we were unable to detect it" in every CPU run's log, as a warning
        env.setdefault("DS_ACCELERATOR", "cpu")
    return env


def owner_environment(env: dict[str, str], owner: str, names: list[str] | tuple[str, ...] = ()) -> dict[str, str]:
    """``env`` as a process of ``owner``'s gets it (``engine.core.member_secrets.run_environment``): the owner's own
    secrets; for a member, none of the operator's secret variables (``SECRET_ENV`` and ``names``, e.g. a run's
    notification or judge variables) that the operator did not bind for the page (``STUDIO_PAGE_SECRETS``; a
    malformed binding binds nothing). For runs, jobs, Slurm jobs, Chat's worker and the reward dry run alike."""
    from engine.core import member_secrets, page_trust

    try:
        bound = set(page_trust.page_secrets())
    except page_trust.PageTrustError:
        bound = set()
    return member_secrets.run_environment(env, owner, [*SECRET_ENV, *names], bound)


def simple_launcher_env(device: str, precision: str) -> dict[str, str]:
    """What ``accelerate launch --num_processes 1 [--cpu] --mixed_precision P --dynamo_backend no`` adds to its
    child's environment (accelerate.utils.launch ``prepare_simple_launcher_cmd_env``), for a trainer started without
    it: the same state for accelerate inside the Trainer. Threads are already ours (``subprocess_env``)."""
    env = {
        "ACCELERATE_USE_CPU": str(device == "cpu"),
        "ACCELERATE_MIXED_PRECISION": mixed_precision_name(precision),
        "ACCELERATE_DYNAMO_BACKEND": "NO",
        "ACCELERATE_DYNAMO_MODE": "default",
        "ACCELERATE_DYNAMO_USE_FULLGRAPH": "False",
        "ACCELERATE_DYNAMO_USE_REGIONAL_COMPILATION": "False",
    }
    if device == "cpu":
        env["KMP_AFFINITY"] = "granularity=fine,compact,1,0"
        env["KMP_BLOCKTIME"] = "1"
    return env


def build_command(
    spec: RunSpec, run_dir: Path, hardware: Hardware | None = None, *, gpu_ids: list[int] | None = None
) -> LaunchPlan:
    """argv, env and config files that start this spec's trainer in ``run_dir``. Raises LaunchError when the
    spec cannot run on this hardware."""
    hw = hardware if hardware is not None else detect()
    if spec.launch.target == "ray":
        hw = ray_hardware(spec, hw)
    run_dir = Path(run_dir)
    device = resolve_device(spec, hw)
    precision = resolve_precision(spec, hw, device)
    gpus = choose_gpus(spec, hw, gpu_ids) if device == "cuda" else []
    check_hardware(spec, hw, device, gpus)
    ln = spec.launch
    spec_path = run_dir / "spec.yaml"
    ds_path = run_dir / "ds_config.json"
    acc_path = run_dir / "accelerate.yaml"
    files: dict[str, str] = {}
    env = subprocess_env(device, gpus, hw, processes=ln.num_processes)
    env["STUDIO_DEVICE"], env["STUDIO_PRECISION"] = device, precision  # the trainer uses these, not its own guess
    env["ACCELERATE_DISABLE_RICH"] = "1"
    out = Path(spec.output.output_dir).expanduser() if spec.output.output_dir else run_dir
    trackers.apply(env, trackers.tracker_env(spec.output.report_to, out, spec.output.run_name or run_dir.name))

    if ln.target == "ray":  # the driver: Ray Train's workers run the trainer (engine.trainer.ray_driver)
        env.update(simple_launcher_env(device, precision))
        # Ray's own settings: the cluster's address (RAY_ADDRESS), its token (RAY_AUTH_MODE, RAY_AUTH_TOKEN[_PATH])
        env.update({k: v for k, v in os.environ.items() if k.startswith("RAY_")})
        # the workers' lines in train.log as they come, without colour codes, and their prints as printed (Ray
        # Train's print patch logs them, and also what Python 3.11's dis.dis writes for Ray's function table)
        env.update(RAY_COLOR_PREFIX="0", RAY_DEDUP_LOGS="0", RAY_TRAIN_ENABLE_PRINT_PATCH="0")
        if device == "cuda":  # Ray gives each worker its GPUs
            for key in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
                env.pop(key, None)
        argv = [sys.executable, "-m", "engine.trainer.ray_driver", str(spec_path), "--run-dir", str(run_dir)]
        plan = LaunchPlan(argv=argv, env=env, files=files, device=device, precision=precision)
        plan.node_commands = node_commands(spec, argv)
        return plan
    launcher = [sys.executable, "-m", "accelerate.commands.launch"]
    flags: list[str] = []
    acc = accelerate_config(spec, precision, device, gpus, str(ds_path))
    if ln.backend == "deepspeed":
        files["ds_config.json"] = json.dumps(deepspeed_config(spec, precision), indent=2)
    if acc is not None:
        files["accelerate.yaml"] = yaml.safe_dump(acc, sort_keys=False)
        flags += ["--config_file", str(acc_path)]
        if device == "cpu" and ln.backend == "deepspeed":
            # DeepSpeed's CPU accelerator whatever the node has (GPUs, an XPU or NPU stack it would pick first).
            # Not ACCELERATE_USE_CPU: accelerate then leaves the state MULTI_CPU and the Trainer skips DeepSpeed.
            env["DS_ACCELERATOR"] = "cpu"
        elif device == "cpu":
            env["ACCELERATE_USE_CPU"] = "true"
    elif ln.backend == "ddp":  # CPU DDP: see the module docstring
        env["ACCELERATE_USE_CPU"] = "true"
        flags += [
            "--multi_gpu",
            "--num_processes",
            str(spec.world_size),
            "--num_machines",
            str(ln.num_machines),
            "--mixed_precision",
            mixed_precision_name(precision),
            "--dynamo_backend",
            "no",
        ]
        if ln.num_machines == 1:
            flags += ["--main_process_port", str(ln.main_process_port)]
    else:  # one process on one machine: no launcher (see the module docstring)
        launcher = [sys.executable]
        env.update(simple_launcher_env(device, precision))
    if ln.num_machines > 1:
        flags += [
            "--machine_rank",
            str(ln.machine_rank),
            "--main_process_ip",
            ln.main_process_ip,
            "--main_process_port",
            str(ln.main_process_port),
        ]
    argv = launcher + flags + ["-m", "engine.trainer.train", str(spec_path), "--run-dir", str(run_dir)]
    plan = LaunchPlan(argv=argv, env=env, files=files, device=device, precision=precision, gpu_ids=gpus)
    plan.node_commands = node_commands(spec, argv)
    if ln.num_machines > 1 or ln.target == "slurm":
        plan.slurm_script = slurm_script(spec, argv, env)
    if ln.num_machines > 1:
        plan.warnings.append(f"every machine must see {run_dir} (spec and configs) at the same path")
    return plan


def launch_record(plan: LaunchPlan) -> dict:
    """What launch.json records of a plan: argv, environment (secrets masked), configs, device, precision, GPUs,
    the command for every node. Secrets never reach a run folder."""
    return {
        "argv": plan.argv,
        "env": plan.public_env(),
        "files": sorted(plan.files),
        "device": plan.device,
        "precision": plan.precision,
        "gpu_ids": plan.gpu_ids,
        "node_commands": plan.node_commands,
        "warnings": plan.warnings,
    }


def write_config_files(plan: LaunchPlan, run_dir: Path) -> None:
    """The generated accelerate / DeepSpeed configs, into the run folder."""
    run_dir.mkdir(parents=True, exist_ok=True)
    for name, content in plan.files.items():
        (run_dir / name).write_text(content, encoding="utf-8")


def write_plan_files(plan: LaunchPlan, run_dir: Path) -> None:
    """The configs and launch.json, for a launch outside the registry (tests, benchmarks)."""
    write_config_files(plan, run_dir)
    (run_dir / "launch.json").write_text(json.dumps(launch_record(plan), indent=2), encoding="utf-8")


def preview_text(spec: RunSpec, run_dir: Path | None = None, hardware: Hardware | None = None) -> str:
    """Everything a user needs to run this spec elsewhere: command(s), environment, configs."""
    run_dir = run_dir or Path("runs/<run-id>")
    try:
        plan = build_command(spec, run_dir, hardware)
    except LaunchError as exc:
        return "Cannot launch on this machine:\n" + "\n".join(f"  {p}: {m}" for p, m in exc.problems)
    parts = [f"# device: {plan.device}, precision: {plan.precision}, GPUs: {plan.gpu_ids or 'none'}"]
    for i, cmd in enumerate(plan.node_commands):
        label = f"machine {i}" if len(plan.node_commands) > 1 else "command"
        parts.append(f"# {label}\n{cmd}")
    shown = {k: v for k, v in plan.env.items() if k.startswith(("CUDA_", "HIP_", "ROCR_")) and k not in SECRET_ENV}
    shown.update(node_environment(plan.env))  # as the Slurm script exports it
    parts.append("# environment\n" + "\n".join(f"{k}={shown[k]}" for k in sorted(shown)))
    for name, content in plan.files.items():
        parts.append(f"# {run_dir / name}\n{content}")
    if plan.slurm_script:
        parts.append(f"# slurm batch script (sbatch run.slurm)\n{plan.slurm_script}")
    parts += [f"# warning: {w}" for w in plan.warnings]
    return "\n\n".join(parts)


def cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="studio preview", description="Print the launch command(s) and configs.")
    parser.add_argument("spec", help="run spec YAML (ours or LLaMA-Factory's)")
    parser.add_argument("--accelerate-config", help="LLaMA-Factory users: their accelerate config YAML")
    parser.add_argument("--run-dir", default="runs/<run-id>", help="run folder to show in paths")
    add_target_arguments(parser)
    args = parser.parse_args(argv)
    try:
        spec = load_any_spec(args.spec, args.accelerate_config, elsewhere=True)  # a preview judges the spec
    except SpecError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(preview_text(spec, Path(args.run_dir), target_from_arguments(args)))
    return 0


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--gpus",
        type=int,
        default=None,
        metavar="N",
        help="for a machine with N GPUs instead of this one (0: CPU only), e.g. a cluster node seen from a laptop",
    )
    parser.add_argument(
        "--gpu-mem",
        "--gpu-mem-gib",  # the old name, kept: one flag for GPU memory across plan, validate and preview
        dest="gpu_mem_gib",
        type=gpu_mem_argument,
        default=80.0,
        metavar="SIZE",
        help="with --gpus: memory of each GPU, e.g. 80GiB or 80 (GiB; default 80)",
    )


def gpu_mem_argument(text: str) -> float:
    """``--gpu-mem``'s value in GiB: a size as ``studio plan`` reads it (24GiB, 80G, 40000MiB, or GiB alone)."""
    from engine.plan.planner import parse_mem

    try:
        return parse_mem(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--gpu-mem: ")) from None


def target_from_arguments(args: argparse.Namespace) -> Hardware | None:
    """The target machine of ``--gpus N`` (None: this machine, detected)."""
    return None if args.gpus is None else target_machine(args.gpus, args.gpu_mem_gib)
