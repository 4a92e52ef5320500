"""The run spec's groups for where and how a run is launched and what it writes: launch (backend, GPUs, machines,
DeepSpeed, FSDP) and output. Light: pydantic only. Assembled into ``RunSpec`` by ``engine.spec.schema``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from engine.spec.groups import _meta, _Spec


# ----------------------------------------------------------------------------------------------- launch
class DeepSpeedSpec(_Spec):
    zero_stage: Literal[0, 1, 2, 3] = Field(
        2,
        description="ZeRO stage: 1 shards optimizer states, 2 also gradients, 3 also parameters",
        json_schema_extra=_meta("ZeRO stage", label_zh="ZeRO 阶段"),
    )
    offload_optimizer: Literal["none", "cpu", "nvme"] = Field(
        "none",
        description="Where optimizer states live (needs ZeRO stage ≥ 1)",
        json_schema_extra=_meta("Offload optimizer", label_zh="优化器卸载"),
    )
    offload_param: Literal["none", "cpu", "nvme"] = Field(
        "none",
        description="Where parameters live (ZeRO-3 only; large slowdown)",
        json_schema_extra=_meta("Offload parameters", label_zh="参数卸载"),
    )
    nvme_path: str = Field(
        "",
        description="Folder for NVMe offload",
        json_schema_extra=_meta("NVMe path", advanced=True, label_zh="NVMe 路径"),
    )
    pin_memory: bool = Field(
        True,
        description="Pin offloaded CPU memory",
        json_schema_extra=_meta("Pin memory", advanced=True, label_zh="锁页内存"),
    )
    overlap_comm: bool = Field(
        True,
        description="Overlap reduction with backward",
        json_schema_extra=_meta("Overlap comm", advanced=True, label_zh="通信重叠"),
    )
    contiguous_gradients: bool = Field(
        True,
        description="Copy gradients to a contiguous buffer",
        json_schema_extra=_meta("Contiguous gradients", advanced=True, label_zh="连续梯度"),
    )
    sub_group_size: int = Field(
        1_000_000_000,
        ge=1,
        description="ZeRO-3 sub-group size (elements)",
        json_schema_extra=_meta("Sub-group size", advanced=True, label_zh="子组大小"),
    )
    reduce_bucket_size: int = Field(
        500_000_000,
        ge=1,
        description="Reduce bucket size (elements)",
        json_schema_extra=_meta("Reduce bucket size", advanced=True, label_zh="归约桶大小"),
    )
    steps_per_print: int = Field(
        10,
        ge=1,
        description="DeepSpeed's own log interval",
        json_schema_extra=_meta("Steps per print", advanced=True, label_zh="打印间隔"),
    )


class FsdpSpec(_Spec):
    sharding_strategy: Literal["FULL_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD", "NO_SHARD"] = Field(
        "FULL_SHARD", description="What FSDP shards", json_schema_extra=_meta("Sharding strategy", label_zh="分片策略")
    )
    auto_wrap_policy: Literal["TRANSFORMER_BASED_WRAP", "SIZE_BASED_WRAP", "NO_WRAP"] = Field(
        "TRANSFORMER_BASED_WRAP",
        description="How modules are wrapped",
        json_schema_extra=_meta("Auto-wrap policy", label_zh="自动包装策略"),
    )
    layer_cls_to_wrap: str = Field(
        "auto",
        min_length=1,
        description="Decoder layer class to wrap (auto: from the model's config)",
        json_schema_extra=_meta("Layer class", advanced=True, label_zh="包装层类"),
    )
    min_num_params: int = Field(
        100_000_000,
        ge=1,
        description="Size threshold for SIZE_BASED_WRAP",
        json_schema_extra=_meta("Min params per wrap", advanced=True, label_zh="最小参数量"),
    )
    offload_params: bool = Field(
        False,
        description="Offload parameters to CPU",
        json_schema_extra=_meta("Offload parameters", label_zh="参数卸载"),
    )
    state_dict_type: Literal["FULL_STATE_DICT", "SHARDED_STATE_DICT"] = Field(
        "FULL_STATE_DICT",
        description="How checkpoints are saved",
        json_schema_extra=_meta("State dict type", advanced=True, label_zh="状态字典类型"),
    )
    cpu_ram_efficient_loading: bool = Field(
        True,
        description="Load weights on rank 0 only",
        json_schema_extra=_meta("RAM-efficient loading", advanced=True, label_zh="节省内存加载"),
    )


class LaunchSpec(_Spec):
    backend: Literal["single", "ddp", "fsdp", "deepspeed"] = Field(
        "single",
        description="single process, DDP (data parallel), FSDP (sharded), or DeepSpeed ZeRO",
        json_schema_extra=_meta("Backend", label_zh="分布式后端"),
    )
    device: Literal["auto", "cuda", "cpu"] = Field(
        "auto", description="auto: GPUs when present, else CPU", json_schema_extra=_meta("Device", label_zh="设备")
    )
    gpus: list[int] | None = Field(
        None,
        description="Explicit GPU ids (empty: any free ones, as many as processes)",
        json_schema_extra=_meta("GPUs", label_zh="GPU 编号"),
    )
    num_processes: int = Field(
        1,
        ge=1,
        le=1024,
        description="Processes (one per GPU) on each machine",
        json_schema_extra=_meta("Processes per machine", label_zh="每机进程数"),
    )
    share_gpus: bool = Field(
        False,
        description="Allow this run on GPUs another run is using",
        json_schema_extra=_meta("Share GPUs", advanced=True, label_zh="共享 GPU"),
    )
    num_machines: int = Field(
        1,
        ge=1,
        le=4096,
        description="Machines (nodes) in the run",
        json_schema_extra=_meta("Machines", advanced=True, label_zh="机器数"),
    )
    machine_rank: int = Field(
        0,
        ge=0,
        description="This machine's rank (0 = main)",
        json_schema_extra=_meta("Machine rank", advanced=True, label_zh="机器序号"),
    )
    main_process_ip: str = Field(
        "",
        description="Address of the rank-0 machine (several machines)",
        json_schema_extra=_meta("Main address", advanced=True, label_zh="主节点地址"),
    )
    main_process_port: int = Field(
        29500,
        ge=1024,
        le=65535,
        description="Rendezvous port",
        json_schema_extra=_meta("Main port", advanced=True, label_zh="主节点端口"),
    )
    ddp_timeout: int = Field(
        1800,
        ge=1,
        le=2**31 - 1,
        description="Seconds the processes wait for each other in a collective before the run fails",
        json_schema_extra=_meta("Communication timeout (s)", advanced=True, label_zh="通信超时（秒）"),
    )
    deepspeed: DeepSpeedSpec = Field(default_factory=DeepSpeedSpec)
    fsdp: FsdpSpec = Field(default_factory=FsdpSpec)


# ----------------------------------------------------------------------------------------------- output
class OutputSpec(_Spec):
    run_name: str = Field(
        "",
        max_length=120,
        pattern=r"^[A-Za-z0-9._\-\u4e00-\u9fff ]*$",
        description="A name for the run (letters, digits, . _ - and spaces)",
        json_schema_extra=_meta("Run name", label_zh="运行名称"),
    )
    output_dir: str = Field(
        "",
        description="Where checkpoints and the adapter go (empty: the run's folder)",
        json_schema_extra=_meta("Output folder", advanced=True, label_zh="输出目录"),
    )
    report_to: list[Literal["tensorboard", "wandb", "none"]] = Field(
        default_factory=lambda: ["tensorboard"],
        description="Experiment trackers (tensorboard works offline)",
        json_schema_extra=_meta("Report to", advanced=True, label_zh="记录到"),
    )
