"""The configs a launch generates for ``accelerate launch``: the accelerate config (MULTI_GPU, DEEPSPEED, FSDP, in
the seed's shape), the DeepSpeed ``ds_config.json`` (batch sizes ``auto`` for the Trainer to fill) and the FSDP layer
class to wrap (from the model's config). Pure: no I/O beyond reading the model config. ``engine.runs.launch`` calls
these and writes them into the run folder.

Light: engine.spec.schema only (never torch).
"""

from __future__ import annotations

from engine.models.resolve import resolve_model
from engine.spec.schema import RunSpec

LAYER_CLASSES = {
    "llama": "LlamaDecoderLayer",
    "mistral": "MistralDecoderLayer",
    "qwen2": "Qwen2DecoderLayer",
    "qwen3": "Qwen3DecoderLayer",
    "gemma": "GemmaDecoderLayer",
    "gemma2": "Gemma2DecoderLayer",
    "mixtral": "MixtralDecoderLayer",
    "phi3": "Phi3DecoderLayer",
}


def mixed_precision_name(precision: str) -> str:
    return {"bf16": "bf16", "fp16": "fp16"}.get(precision, "no")


def deepspeed_config(spec: RunSpec, precision: str) -> dict:
    """The seed's ds_config.json shape; batch sizes are 'auto' so the Trainer fills them from the spec."""
    ds = spec.launch.deepspeed
    zero: dict = {"stage": ds.zero_stage}
    if ds.zero_stage >= 1:
        zero["offload_optimizer"] = {"device": ds.offload_optimizer, "pin_memory": ds.pin_memory}
        if ds.offload_optimizer == "nvme":
            zero["offload_optimizer"]["nvme_path"] = ds.nvme_path
    if ds.zero_stage == 3:
        zero["offload_param"] = {"device": ds.offload_param, "pin_memory": ds.pin_memory}
        if ds.offload_param == "nvme":
            zero["offload_param"]["nvme_path"] = ds.nvme_path
        zero["sub_group_size"] = ds.sub_group_size
        zero["stage3_gather_16bit_weights_on_model_save"] = True
        for key in ("stage3_param_persistence_threshold", "stage3_prefetch_bucket_size"):
            if getattr(ds, key) is not None:
                zero[key] = getattr(ds, key)
    if ds.zero_stage >= 2:
        zero["overlap_comm"] = ds.overlap_comm
        zero["contiguous_gradients"] = ds.contiguous_gradients
    if ds.zero_stage >= 1:
        zero["reduce_bucket_size"] = ds.reduce_bucket_size
    return {
        **ds.extra_config,  # keys Studio writes are refused in it (engine.spec.launch_group.DeepSpeedSpec)
        "zero_optimization": zero,
        "bf16": {"enabled": "auto"},
        "fp16": {"enabled": "auto"},
        "train_micro_batch_size_per_gpu": "auto",
        "gradient_accumulation_steps": "auto",
        "gradient_clipping": "auto",
        "train_batch_size": "auto",
        "steps_per_print": ds.steps_per_print,
        "wall_clock_breakdown": False,
    }


def fsdp_layer_class(spec: RunSpec) -> str:
    if spec.launch.fsdp.layer_cls_to_wrap != "auto":
        return spec.launch.fsdp.layer_cls_to_wrap
    cfg = resolve_model(spec.model).config or {}
    arch = (cfg.get("architectures") or [""])[0]
    return LAYER_CLASSES.get(
        str(cfg.get("model_type", "")), arch.replace("ForCausalLM", "DecoderLayer") or "LlamaDecoderLayer"
    )


def accelerate_config(spec: RunSpec, precision: str, device: str, gpu_ids: list[int], ds_path: str) -> dict | None:
    """The accelerate config in the seed's shape, or None where flags do the job (single process, CPU DDP)."""
    ln = spec.launch
    base = {
        "compute_environment": "LOCAL_MACHINE",
        "num_machines": ln.num_machines,
        "num_processes": spec.world_size,
        "machine_rank": ln.machine_rank,
        "mixed_precision": mixed_precision_name(precision),
        "rdzv_backend": "static",
        "same_network": True,
        "main_training_function": "main",
        "use_cpu": device == "cpu",
    }
    if ln.num_machines > 1:
        base["main_process_ip"] = ln.main_process_ip
        base["main_process_port"] = ln.main_process_port
    if device == "cuda" and gpu_ids:
        base["gpu_ids"] = ",".join(str(i) for i in range(len(gpu_ids)))  # indices after CUDA_VISIBLE_DEVICES
    if ln.backend == "deepspeed":
        ds = ln.deepspeed
        base["distributed_type"] = "DEEPSPEED"
        base["deepspeed_config"] = {
            "deepspeed_config_file": ds_path,
            "zero3_init_flag": ds.zero_stage == 3,
        }
        if ln.num_machines > 1:  # one launcher per node (torchrun), as the node commands and Slurm start them
            base["deepspeed_config"]["deepspeed_multinode_launcher"] = "standard"
        base.pop("mixed_precision")  # lives in ds_config.json when a config file is given
        return base
    if ln.backend == "fsdp":
        fs = ln.fsdp
        base["distributed_type"] = "FSDP"
        base["fsdp_config"] = {
            "fsdp_sharding_strategy": fs.sharding_strategy,
            "fsdp_offload_params": fs.offload_params,
            "fsdp_auto_wrap_policy": fs.auto_wrap_policy,
            "fsdp_state_dict_type": fs.state_dict_type,
            "fsdp_cpu_ram_efficient_loading": fs.cpu_ram_efficient_loading,
            "fsdp_sync_module_states": True,
            "fsdp_use_orig_params": True,
            "fsdp_backward_prefetch": "BACKWARD_PRE",
            "fsdp_forward_prefetch": False,
        }
        if fs.auto_wrap_policy == "TRANSFORMER_BASED_WRAP":
            base["fsdp_config"]["fsdp_transformer_layer_cls_to_wrap"] = fsdp_layer_class(spec)
        elif fs.auto_wrap_policy == "SIZE_BASED_WRAP":
            base["fsdp_config"]["fsdp_min_num_params"] = fs.min_num_params
        return base
    if ln.backend == "ddp" and device == "cuda":
        base["distributed_type"] = "MULTI_GPU"
        return base
    return None
