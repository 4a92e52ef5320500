"""The catalog of the environment doctor's check names, details and fixes (``engine.machine.doctor``) and of the
reasons ``engine.machine.hardware`` gives for finding no GPU: a stable key and an
English template, made into ``engine.core.messages.Message`` by ``message``. Light: stdlib only; the Chinese is in
``studio.i18n``. Text the probe reports (versions, an exception's message) is a parameter and stays as is.
"""

from __future__ import annotations

from typing import Any

from engine.core.messages import Message, make

MESSAGES: dict[str, str] = {
    # check names
    "doctor.name_gpu": "gpu {index}",
    "doctor.name_gpus": "gpus",
    "doctor.name_torch": "torch",
    "doctor.name_torch_build": "torch build",
    "doctor.name_bf16": "bf16",
    "doctor.name_flash": "flash-attention",
    "doctor.name_ds_ops": "deepspeed ops",
    "doctor.name_versions": "stack versions",
    "doctor.name_allreduce": "all-reduce",
    "doctor.name_disk": "disk",
    # details and fixes
    "doctor.gpu": "{name}, {gib:.1f} GiB, driver {driver}, {vendor}",
    "doctor.no_gpu": "no GPU: {reason}",
    "doctor.no_gpu_fix": "training runs on CPU (slow); install the NVIDIA driver / ROCm, or check "
    "CUDA_VISIBLE_DEVICES",
    "doctor.timeout": "timed out after {seconds:.0f}s",
    "doctor.exit_code": "exit code {code}",
    "doctor.no_stack": "cannot import the training stack: {error}",
    "doctor.no_stack_fix": "reinstall: scripts/bootstrap or pip install -e .",
    "doctor.torch_blind": "torch {torch} ({build}) cannot see the GPUs",
    "doctor.torch_blind_fix": "install a torch build for your CUDA/ROCm version",
    "doctor.torch": "torch {torch} ({build}), {n} device(s)",
    "doctor.bf16_yes": "bf16 supported",
    "doctor.bf16_no": "no bf16 on this GPU",
    "doctor.bf16_fix": "use precision fp16",
    "doctor.bf16_cpu": "no CUDA device: bf16 mixed precision only on CPU",
    "doctor.flash_ok": "flash_attn importable",
    "doctor.flash_missing": "flash_attn {state}",
    "doctor.flash_fix": "pip install flash-attn, or keep attn sdpa",
    "doctor.ds_ops": "compatible: {ok}; not: {missing}",
    "doctor.ds_ops_fix": "{need} cannot build here: install a CUDA toolkit / ninja, or avoid offload",
    "doctor.ds_missing_fix": "pip install deepspeed (needed for ZeRO)",
    "doctor.versions_missing": "missing: {names}",
    "doctor.allreduce_unfinished": "test did not finish: {error}",
    "doctor.allreduce_unfinished_fix": "check NCCL (NCCL_DEBUG=INFO), firewall on 127.0.0.1, shared memory (/dev/shm)",
    "doctor.allreduce_ok": "{backend} over {n} process(es): sum correct",
    "doctor.allreduce_wrong": "{backend} over {n} process(es): wrong or missing result {results}",
    "doctor.allreduce_wrong_fix": "check NCCL_P2P_DISABLE=1 / NCCL_IB_DISABLE=1 and driver",
    "doctor.disk": "{free:.1f} GiB free in {path}",
    "doctor.disk_fix": "free space: checkpoints of a 7B model need ~15 GiB each",
    # why no GPU was found (engine.machine.hardware; the doctor shows it)
    "hardware.forced_cpu": "STUDIO_FORCE_CPU=1",
    # FP8 training (engine.machine.kernels.fp8_device_refusal)
    "fp8.cpu": "FP8 training needs an NVIDIA GPU of compute capability 8.9 or newer (Ada, Hopper): this run is on "
    "CPU; turn train.fp8 off",
    "fp8.capability": "FP8 training needs compute capability 8.9 or newer (Ada, Hopper): {name} has {capability}; "
    "turn train.fp8 off",
    "hardware.none": "GPU metrics unavailable: {nvidia}; {amd}",
    "hardware.no_nvml": "nvidia-ml-py is not installed",
    "hardware.no_nvidia_driver": "NVIDIA driver not found ({error})",
    "hardware.nvml_failed": "NVML query failed: {error}",
    "hardware.no_nvidia_gpu": "NVIDIA driver present but no GPU visible",
    "hardware.no_rocm": "no ROCm (rocm-smi not found)",
    "hardware.rocm_failed": "rocm-smi failed: {error}",
    "hardware.rocm_no_gpu": "rocm-smi found no GPU",
    # where engine.machine.hardware.available_memory read the memory a new process can use
    "hardware.mem_available": "MemAvailable in /proc/meminfo",
    "hardware.cgroup_limit": "limit of cgroup {name}",
}


def message(key: str, /, **params: Any) -> Message:
    return make(MESSAGES, key, **params)
