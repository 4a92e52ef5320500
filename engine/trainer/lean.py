"""What a heavy process leaves unimported: the quantization packages (bitsandbytes, gptqmodel) for a job that cannot
use them.

Light: stdlib and engine.models.resolve (called before torch is imported). peft imports bitsandbytes at its own import
(``peft.helpers``) whenever it is installed, and bitsandbytes' CPU kernels then set up ``torch.compile``, which pulls
in torch's inductor. ``bench/trainer_start.py`` on the 2-core development machine, a 3-step demo LoRA run's trainer
process, 4 times each, alternating: 10.49 s of CPU with it, 8.90 without (medians; bench/results/trainer_start.md):
about 1.6 s of every run's start, for nothing. The suite starts ~200 trainers.

gptqmodel likewise: peft imports it (and optimum) whenever both are installed, at every LoRA wrap (its GPTQ layer
dispatch), and gptqmodel's import prints its banner and sets ``PYTORCH_ALLOC_CONF`` and ``CUDA_DEVICE_ORDER`` for the
whole process: only the GPTQ / AWQ exports (``engine.trainer.gptq_export``, which never calls this) and a job on a
quantized model need it.

``without_quantizers(needed)`` marks the packages missing in ``sys.modules`` unless ``needed``:
``importlib.util.find_spec`` then answers None, so peft, transformers, accelerate and TRL see it as not installed (a
configuration they all support) and never import it. Only in a process started for the one job: an entry module's
``if __name__ == "__main__"`` calls ``own_process()`` first. A process that calls an entry's ``main`` in-process (the
tests) may need bitsandbytes for its next job and is left as it is, and so is one that imported it already.
``STUDIO_LEAN_IMPORTS=off`` leaves every process as it is (for code of the user's that imports bitsandbytes itself,
say a reward file, and for ``bench/trainer_start.py``'s baseline).
"""

from __future__ import annotations

import os
import sys

BNB_OPTIMIZER_MARKS = ("8bit", "paged", "bnb")  # in train.optimizer: one that bitsandbytes implements
_OWN_PROCESS = False


def own_process() -> None:
    """Said by an entry run as ``python -m ...``: this process does this one job, then exits."""
    global _OWN_PROCESS
    _OWN_PROCESS = True


def quantized_config(config: object) -> bool:
    """A model config (config.json as a dict) that says its weights are quantized, for a vision-language model in its
    text part too; True for a config that could not be read (unknown: keep bitsandbytes)."""
    if not isinstance(config, dict):
        return True
    return any(isinstance(c, dict) and c.get("quantization_config") for c in (config, config.get("text_config")))


def model_is_quantized(name: str, revision: str | None = None, *, modelscope: bool = False) -> bool:
    """``quantized_config`` of a model folder or hub id's config.json (as ``engine.models.resolve`` finds it)."""
    from engine.models.resolve import resolve_config

    try:
        return quantized_config(resolve_config(name, revision, modelscope=modelscope).config)
    except Exception:  # noqa: BLE001 - unknown: keep bitsandbytes
        return True


def needs_bitsandbytes(spec) -> bool:
    """Whether a run (a RunSpec) may use bitsandbytes: a quantized base (QLoRA: ``method.quantization.bits``, or a
    model whose config.json carries a ``quantization_config``, as a pre-quantized "bnb-4bit" upload does), an 8-bit or
    paged optimizer (``train.extra_args`` cannot name one: the spec refuses ``optim`` there), or GRPO generating with
    vLLM. True whenever the model's config cannot be read: only a run known not to need it goes without."""
    if spec.method.quantization.bits:
        return True
    if any(mark in spec.train.optimizer for mark in BNB_OPTIMIZER_MARKS):
        return True
    if spec.method.stage == "grpo" and spec.method.grpo.generation_backend == "vllm":
        return True
    m = spec.model
    return model_is_quantized(m.name_or_path, m.revision, modelscope=getattr(m, "hub", "huggingface") == "modelscope")


QUANTIZERS = ("bitsandbytes", "gptqmodel")


def without_quantizers(needed: bool) -> bool:
    """Mark bitsandbytes and gptqmodel missing for the rest of this process unless ``needed``, already imported or not
    the job's own process (``own_process``); True if marked."""
    if needed or not _OWN_PROCESS or os.environ.get("STUDIO_LEAN_IMPORTS") == "off":
        return False
    if any(name in sys.modules for name in QUANTIZERS):
        return False
    for name in QUANTIZERS:
        sys.modules[name] = None  # type: ignore[assignment] - the documented way to make an import fail
    return True


SHM_COMM_OP = "deepspeed_shm_comm"


def without_shm_comm(backend: str, device: str) -> bool:
    """Tell DeepSpeed its shared-memory all-reduce op cannot be built, for a DeepSpeed run on the CPU; True if told.

    DeepSpeed's comm backend builds ``deepspeed_shm_comm`` as it starts on the CPU accelerator: a C++ compile into
    ``TORCH_EXTENSIONS_DIR`` on a machine's first DeepSpeed run (56 s, 101 s of CPU on the 2-core development machine),
    which needs a compiler. The op serves only ``inference_all_reduce`` (DeepSpeed's tensor-parallel inference);
    training reduces through torch.distributed (gloo) whether it is there or not. ``deepspeed.ops.__compatible_ops__``
    is the one dict DeepSpeed asks before building an op (kept in its module so that edits persist), so the op is
    marked incompatible there before the backend starts. An optimizer offloaded to the CPU still builds ``cpu_adam``,
    which it uses."""
    if backend != "deepspeed" or device != "cpu":
        return False
    import deepspeed.ops

    deepspeed.ops.__compatible_ops__[SHM_COMM_OP] = False
    return True
