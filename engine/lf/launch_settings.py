"""LLaMA-Factory launch settings: an accelerate config (NO / MULTI_GPU / MULTI_CPU / DEEPSPEED / FSDP, with its
deepspeed_config and fsdp_config) and a DeepSpeed JSON into ``launch:`` of a RunSpec, and back. (The spec's
``launch:`` section itself is ``engine.spec.launch_group``; the command line a run starts with is
``engine.runs.launch``.)

Light: json and engine.spec.schema only (never torch). Keys are named ``accelerate_config.<key>`` / ``deepspeed.<key>``
when unsupported.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.lf.keys import _csv, _Import, _resolve, _truthy
from engine.lf.messages import message
from engine.spec.schema import RunSpec

_BACKEND_IN = {"NO": "single", "MULTI_GPU": "ddp", "MULTI_CPU": "ddp", "DEEPSPEED": "deepspeed", "FSDP": "fsdp"}
_BACKEND_OUT = {"single": "NO", "ddp": "MULTI_GPU", "deepspeed": "DEEPSPEED", "fsdp": "FSDP"}
_DS_ACC = {  # accelerate deepspeed_config key -> launch.deepspeed field
    "zero_stage": "zero_stage",
    "offload_optimizer_device": "offload_optimizer",
    "offload_param_device": "offload_param",
    "overlap_comm": "overlap_comm",
    "contiguous_gradients": "contiguous_gradients",
    "pin_memory": "pin_memory",
    "sub_group_size": "sub_group_size",
    "reduce_bucket_size": "reduce_bucket_size",
    "steps_per_print": "steps_per_print",
}
_FSDP_ACC = {
    "fsdp_sharding_strategy": "sharding_strategy",
    "fsdp_auto_wrap_policy": "auto_wrap_policy",
    "fsdp_transformer_layer_cls_to_wrap": "layer_cls_to_wrap",
    "fsdp_min_num_params": "min_num_params",
    "fsdp_offload_params": "offload_params",
    "fsdp_state_dict_type": "state_dict_type",
    "fsdp_cpu_ram_efficient_loading": "cpu_ram_efficient_loading",
}
_SHARDING_NUM = {1: "FULL_SHARD", 2: "SHARD_GRAD_OP", 3: "NO_SHARD", 4: "HYBRID_SHARD"}
# transformers' FSDP options (TrainingArguments.fsdp, LF passes it through) -> launch.fsdp.sharding_strategy
_FSDP_OPTIONS = {"full_shard": "FULL_SHARD", "shard_grad_op": "SHARD_GRAD_OP", "hybrid_shard": "HYBRID_SHARD"}
_FSDP_OPTIONS |= {"no_shard": "NO_SHARD"}
# Accepted only with the value our launcher uses anyway; anything else is unsupported.
_FSDP_FIXED = {
    "fsdp_backward_prefetch": "BACKWARD_PRE",
    "fsdp_forward_prefetch": False,
    "fsdp_sync_module_states": True,
    "fsdp_use_orig_params": True,
    "fsdp_version": 1,
}
_ACC_NOOP = {
    "compute_environment": "LOCAL_MACHINE",
    "debug": False,
    "downcast_bf16": "no",
    "rdzv_backend": "static",
    "same_network": True,
    "main_training_function": "main",
    "enable_cpu_affinity": False,
    "tpu_env": [],
    "tpu_use_cluster": False,
    "tpu_use_sudo": False,
}
# DeepSpeed's defaults for ZeRO keys we have no field for (LLaMA-Factory's ds_z*_config.json files set these).
_DS_DEFAULTS = {
    "stage3_max_live_parameters": 1e9,
    "stage3_max_reuse_distance": 1e9,
    "allgather_partitions": True,
    "reduce_scatter": True,
    "allgather_bucket_size": 5e8,
    "round_robin_gradients": False,
    "stage3_gather_16bit_weights_on_model_save": True,
}
# ZeRO-3 keys with a launch.deepspeed field of the same name (LF's ds_z3_fp8_config.json sets both)
_DS_ZERO3 = ("stage3_param_persistence_threshold", "stage3_prefetch_bucket_size")
# Top-level keys LF's DeepSpeed configs set that go into launch.deepspeed.extra_config as given (DeepSpeed's own
# default, zero_force_ds_cpu_optimizer true, needs nothing); the fp8 section is in LF's first ds_z3_fp8_config.json
_DS_PASSED = ("comms_config", "monitor_config", "comms_logger", "fp8", "zero_force_ds_cpu_optimizer")


def _from_ds_json(path: str | dict, imp: _Import) -> None:
    """A DeepSpeed config (a JSON file, or a dict as transformers also accepts) into launch.deepspeed."""
    try:
        ds = path if isinstance(path, dict) else json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        imp.bad("deepspeed", message("lf.ds_unreadable", path=path, error=exc))
        return
    if not isinstance(ds, dict):
        imp.bad("deepspeed", message("lf.ds_not_object", path=path))
        return
    auto = {"train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "train_batch_size"}
    extra = {}
    for key, value in ds.items():
        if key == "zero_optimization" and isinstance(value, dict):
            for zk, zv in value.items():
                if zk in ("offload_optimizer", "offload_param") and isinstance(zv, dict):
                    imp.put(f"launch.deepspeed.{zk}", zv.get("device", "none"))
                    if zv.get("nvme_path"):
                        imp.put("launch.deepspeed.nvme_path", zv["nvme_path"])
                    if "pin_memory" in zv:
                        imp.put("launch.deepspeed.pin_memory", zv["pin_memory"])
                elif zk == "stage":
                    imp.put("launch.deepspeed.zero_stage", zv)
                elif zv == "auto" or _DS_DEFAULTS.get(zk, object()) == zv:
                    continue  # filled by transformers / DeepSpeed's own default: nothing to carry
                elif zk in _DS_ACC.values() or zk in _DS_ZERO3:
                    integral = isinstance(zv, float) and zv.is_integer()  # JSON writes 1e9 as a float
                    whole = zk.endswith(("_size", "_threshold")) and integral
                    imp.put(f"launch.deepspeed.{zk}", int(zv) if whole else zv)
                else:
                    imp.bad(f"deepspeed.zero_optimization.{zk}", message("lf.ds_zero_value", value=zv))
        elif key in ("bf16", "fp16") and isinstance(value, dict):
            if value.get("enabled") not in ("auto", False):
                imp.notes.append(message("lf.ds_precision", key=key))
        elif key == "gradient_clipping":
            if value != "auto":
                imp.put("train.max_grad_norm", value)
        elif key == "steps_per_print":
            imp.put("launch.deepspeed.steps_per_print", value)
        elif key in auto or key in ("zero_allow_untested_optimizer", "wall_clock_breakdown"):
            if value != "auto" and key in auto:
                imp.notes.append(message("lf.ds_batch", key=key))
        elif key == "zero_force_ds_cpu_optimizer" and value is True:
            continue  # DeepSpeed's default
        elif key in _DS_PASSED:
            extra[key] = value
        else:
            imp.bad(f"deepspeed.{key}")
    if extra:
        imp.put("launch.deepspeed.extra_config", extra)


def _from_fsdp_args(args: dict, imp: _Import) -> None:
    """transformers' FSDP through training arguments (``fsdp: [full_shard, auto_wrap]`` with
    ``fsdp_transformer_layer_cls_to_wrap`` or ``fsdp_min_num_params``, as LF's FP8 FSDP example sets them) into
    launch.backend fsdp and launch.fsdp; as transformers does without an fsdp_config, every rank loads the weights
    (cpu_ram_efficient_loading off). Its layer keys without ``fsdp`` do nothing there and are refused."""
    value = args.get("fsdp")
    layer_keys = [k for k in ("fsdp_transformer_layer_cls_to_wrap", "fsdp_min_num_params") if args.get(k)]
    if value in (None, False, "", []):
        for key in layer_keys:
            imp.bad(key, message("lf.fsdp_key_alone"))
        return
    options = ["full_shard", "auto_wrap"] if value is True else str(value).split() if isinstance(value, str) else value
    if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
        imp.bad("fsdp", message("lf.fsdp_option", value=value))
        return
    imp.put("launch.backend", "fsdp")
    imp.put("launch.fsdp.cpu_ram_efficient_loading", False)
    imp.put("launch.fsdp.auto_wrap_policy", "NO_WRAP")
    for option in options:
        if option in _FSDP_OPTIONS:
            imp.put("launch.fsdp.sharding_strategy", _FSDP_OPTIONS[option])
        elif option == "offload":
            imp.put("launch.fsdp.offload_params", True)
        elif option == "auto_wrap":
            size = args.get("fsdp_min_num_params")
            imp.put("launch.fsdp.auto_wrap_policy", "SIZE_BASED_WRAP" if size else "TRANSFORMER_BASED_WRAP")
            if size:
                imp.put("launch.fsdp.min_num_params", size)
        else:
            imp.bad("fsdp", message("lf.fsdp_option", value=option))
    layers = _csv(args.get("fsdp_transformer_layer_cls_to_wrap") or [])
    if len(layers) == 1:
        imp.put("launch.fsdp.layer_cls_to_wrap", layers[0])
    elif layers:
        imp.bad("fsdp_transformer_layer_cls_to_wrap", message("lf.fsdp_layers", n=len(layers)))
    imp.notes.append(message("lf.fsdp_one_process"))


def _from_accelerate(acc: dict, args: dict, imp: _Import, base_dir: Path | None) -> None:
    pre = "accelerate_config."
    dtype = str(acc.get("distributed_type", "NO")).upper()
    if dtype not in _BACKEND_IN:
        imp.bad(pre + "distributed_type", message("lf.acc_distributed_type", value=dtype))
    else:
        imp.put("launch.backend", _BACKEND_IN[dtype])
    if dtype == "MULTI_CPU" or _truthy(acc.get("use_cpu")):
        imp.put("launch.device", "cpu")
    machines = acc.get("num_machines", 1)
    total = acc.get("num_processes", 1)
    if isinstance(machines, int) and isinstance(total, int) and machines >= 1 and total >= 1:
        if total % machines:  # accelerate counts processes over all machines; we count per machine
            imp.bad(pre + "num_processes", message("lf.acc_processes", total=total, machines=machines))
        imp.put("launch.num_processes", max(1, total // machines))
    else:
        imp.put("launch.num_processes", total)
    imp.put("launch.num_machines", machines)
    for key in ("machine_rank", "main_process_ip", "main_process_port"):
        if key in acc and acc[key] is not None:
            imp.put(f"launch.{key}", acc[key])
    gpu_ids = acc.get("gpu_ids", "all")
    if gpu_ids not in (None, "all"):
        try:
            imp.put("launch.gpus", [int(g) for g in _csv(gpu_ids)])
        except ValueError:
            imp.bad(pre + "gpu_ids", message("lf.acc_gpu_ids", value=gpu_ids))
    mp = str(acc.get("mixed_precision", "no")).lower()
    lf_flags = any(_truthy(args.get(k)) for k in ("bf16", "fp16", "pure_bf16"))
    if mp not in ("no", "bf16", "fp16"):
        imp.bad(pre + "mixed_precision", message("lf.acc_mixed_precision", value=mp))
    elif not lf_flags and mp != "no":
        imp.put("train.precision", mp)  # the launcher's setting applies when the training args name none
    elif lf_flags and mp != "no" and imp.data["train"]["precision"] != mp:
        imp.notes.append(message("lf.acc_precision_differs", value=mp))
    handled = {
        "distributed_type",
        "use_cpu",
        "num_machines",
        "num_processes",
        "machine_rank",
        "main_process_ip",
        "main_process_port",
        "gpu_ids",
        "mixed_precision",
        "deepspeed_config",
        "fsdp_config",
    }
    for key, value in acc.items():
        if key in handled:
            continue
        if key in _ACC_NOOP and (value == _ACC_NOOP[key] or value in (None, {}, "")):
            continue
        if key == "dynamo_config" and not value:
            continue
        imp.bad(pre + key)
    for section in ("deepspeed_config", "fsdp_config"):
        if not isinstance(acc.get(section) or {}, dict):
            imp.bad(pre + section, message("lf.acc_not_mapping"))
            acc = {**acc, section: {}}
    for key, value in (acc.get("deepspeed_config") or {}).items():
        if key in _DS_ACC:
            imp.put(f"launch.deepspeed.{_DS_ACC[key]}", value)
        elif key in ("offload_optimizer_nvme_path", "offload_param_nvme_path"):
            if value and value != "none":
                imp.put("launch.deepspeed.nvme_path", value)
        elif key == "gradient_clipping":
            imp.put("train.max_grad_norm", value)
        elif key == "gradient_accumulation_steps":
            if "gradient_accumulation_steps" not in args:
                imp.put("train.gradient_accumulation", value)
        elif key == "deepspeed_config_file":
            _from_ds_json(_resolve(value, base_dir), imp)
        elif key in ("zero3_init_flag", "zero3_save_16bit_model", "deepspeed_multinode_launcher"):
            imp.notes.append(message("lf.acc_studio_sets", key=f"{pre}deepspeed_config.{key}"))
        else:
            imp.bad(f"{pre}deepspeed_config.{key}")
    for key, value in (acc.get("fsdp_config") or {}).items():
        if key in _FSDP_ACC:
            if key == "fsdp_sharding_strategy" and isinstance(value, int):
                value = _SHARDING_NUM.get(value, value)
            if key == "fsdp_offload_params" or key == "fsdp_cpu_ram_efficient_loading":
                value = _truthy(value)
            imp.put(f"launch.fsdp.{_FSDP_ACC[key]}", value)
        elif key in _FSDP_FIXED and value == _FSDP_FIXED[key]:
            continue
        elif key in _FSDP_FIXED:
            imp.bad(f"{pre}fsdp_config.{key}", message("lf.acc_fsdp_fixed", value=value, fixed=_FSDP_FIXED[key]))
        else:
            imp.bad(f"{pre}fsdp_config.{key}")


def _accelerate_out(spec: RunSpec) -> dict:
    ln, t = spec.launch, spec.train
    acc: dict[str, Any] = {"compute_environment": "LOCAL_MACHINE", "distributed_type": _BACKEND_OUT[ln.backend]}
    if ln.backend == "ddp" and ln.device == "cpu":
        acc["distributed_type"] = "MULTI_CPU"
    acc["num_processes"] = ln.num_processes * ln.num_machines
    if ln.backend == "deepspeed":
        ds, dflt = ln.deepspeed, type(ln.deepspeed)()
        out: dict[str, Any] = {
            "zero_stage": ds.zero_stage,
            "offload_optimizer_device": ds.offload_optimizer,
            "offload_param_device": ds.offload_param,
            "overlap_comm": ds.overlap_comm,
            "contiguous_gradients": ds.contiguous_gradients,
            "gradient_clipping": t.max_grad_norm,
        }
        if ds.nvme_path:
            out.update({"offload_optimizer_nvme_path": ds.nvme_path, "offload_param_nvme_path": ds.nvme_path})
        for name in ("pin_memory", "sub_group_size", "reduce_bucket_size", "steps_per_print"):
            if getattr(ds, name) != getattr(dflt, name):  # beyond the seed's shape only when changed
                out[name] = getattr(ds, name)
        if ln.num_machines > 1:  # started on every node (accelerate's default, pdsh, starts them all over ssh)
            out["deepspeed_multinode_launcher"] = "standard"
        acc["deepspeed_config"] = out
    if ln.backend == "fsdp":
        acc["fsdp_config"] = {k: getattr(ln.fsdp, v) for k, v in _FSDP_ACC.items()}
    acc["mixed_precision"] = {"bf16": "bf16", "auto": "bf16", "fp16": "fp16", "fp32": "no"}[t.precision]
    if ln.device == "cpu":
        acc["use_cpu"] = True
    if ln.gpus:
        acc["gpu_ids"] = ",".join(str(g) for g in ln.gpus)
    if ln.num_machines > 1:
        acc.update(
            {
                "num_machines": ln.num_machines,
                "machine_rank": ln.machine_rank,
                "main_process_ip": ln.main_process_ip,
                "main_process_port": ln.main_process_port,
            }
        )
    return acc
