"""The run spec's groups for where and how a run is launched and what it writes: launch (backend, GPUs, machines,
DeepSpeed, FSDP) and output. Light: pydantic only. Assembled into ``RunSpec`` by ``engine.spec.schema``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from engine.spec.groups import _meta, _Spec


# ----------------------------------------------------------------------------------------------- launch
class DeepSpeedSpec(_Spec):
    zero_stage: Literal[0, 1, 2, 3] = Field(
        2,
        description="ZeRO stage: 1 shards optimizer states, 2 also gradients, 3 also parameters",
        json_schema_extra=_meta("ZeRO stage"),
    )
    offload_optimizer: Literal["none", "cpu", "nvme"] = Field(
        "none",
        description="Where optimizer states live (needs ZeRO stage ≥ 1)",
        json_schema_extra=_meta("Offload optimizer"),
    )
    offload_param: Literal["none", "cpu", "nvme"] = Field(
        "none",
        description="Where parameters live (ZeRO-3 only; large slowdown)",
        json_schema_extra=_meta("Offload parameters"),
    )
    nvme_path: str = Field(
        "",
        description="Folder for NVMe offload",
        json_schema_extra=_meta("NVMe path", advanced=True),
    )
    pin_memory: bool = Field(
        True,
        description="Pin offloaded CPU memory",
        json_schema_extra=_meta("Pin memory", advanced=True),
    )
    overlap_comm: bool = Field(
        True,
        description="Overlap reduction with backward",
        json_schema_extra=_meta("Overlap comm", advanced=True),
    )
    contiguous_gradients: bool = Field(
        True,
        description="Copy gradients to a contiguous buffer",
        json_schema_extra=_meta("Contiguous gradients", advanced=True),
    )
    sub_group_size: int = Field(
        1_000_000_000,
        ge=1,
        description="ZeRO-3 sub-group size (elements)",
        json_schema_extra=_meta("Sub-group size", advanced=True),
    )
    reduce_bucket_size: int = Field(
        500_000_000,
        ge=1,
        description="Reduce bucket size (elements)",
        json_schema_extra=_meta("Reduce bucket size", advanced=True),
    )
    steps_per_print: int = Field(
        10,
        ge=1,
        description="DeepSpeed's own log interval",
        json_schema_extra=_meta("Steps per print", advanced=True),
    )
    stage3_param_persistence_threshold: int | None = Field(
        None,
        ge=0,
        description="ZeRO-3: parameters with fewer elements stay whole on every GPU (empty: DeepSpeed's default)",
        json_schema_extra=_meta("Param persistence threshold", advanced=True),
    )
    stage3_prefetch_bucket_size: int | None = Field(
        None,
        ge=0,
        description="ZeRO-3: elements of parameters fetched ahead of use (empty: DeepSpeed's default)",
        json_schema_extra=_meta("Prefetch bucket size", advanced=True),
    )
    extra_config: dict[str, Any] = Field(
        default_factory=dict,
        description="More top-level DeepSpeed config keys, written into ds_config.json as given (e.g. "
        "{comms_logger: {enabled: true}}); never one the settings above or the Trainer fill",
        json_schema_extra=_meta("Extra DeepSpeed config", advanced=True),
    )

    @field_validator("extra_config")
    @classmethod
    def _extra_config(cls, value: dict[str, Any]) -> dict[str, Any]:
        taken = sorted(set(value) & DS_STUDIO_KEYS)
        if taken:
            raise ValueError(f"{taken[0]} is written by Studio from its own settings: set it there, not here")
        return value


# The top-level keys of the ds_config.json a launch writes (engine.runs.accelerate_configs.deepspeed_config)
DS_STUDIO_KEYS = frozenset(
    {
        "zero_optimization",
        "bf16",
        "fp16",
        "train_micro_batch_size_per_gpu",
        "gradient_accumulation_steps",
        "gradient_clipping",
        "train_batch_size",
        "steps_per_print",
        "wall_clock_breakdown",
    }
)


class FsdpSpec(_Spec):
    sharding_strategy: Literal["FULL_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD", "NO_SHARD"] = Field(
        "FULL_SHARD", description="What FSDP shards", json_schema_extra=_meta("Sharding strategy")
    )
    auto_wrap_policy: Literal["TRANSFORMER_BASED_WRAP", "SIZE_BASED_WRAP", "NO_WRAP"] = Field(
        "TRANSFORMER_BASED_WRAP",
        description="How modules are wrapped",
        json_schema_extra=_meta("Auto-wrap policy"),
    )
    layer_cls_to_wrap: str = Field(
        "auto",
        min_length=1,
        description="Decoder layer class to wrap (auto: from the model's config)",
        json_schema_extra=_meta("Layer class", advanced=True),
    )
    min_num_params: int = Field(
        100_000_000,
        ge=1,
        description="Size threshold for SIZE_BASED_WRAP",
        json_schema_extra=_meta("Min params per wrap", advanced=True),
    )
    offload_params: bool = Field(
        False,
        description="Offload parameters to CPU",
        json_schema_extra=_meta("Offload parameters"),
    )
    state_dict_type: Literal["FULL_STATE_DICT", "SHARDED_STATE_DICT"] = Field(
        "FULL_STATE_DICT",
        description="How checkpoints are saved",
        json_schema_extra=_meta("State dict type", advanced=True),
    )
    cpu_ram_efficient_loading: bool = Field(
        True,
        description="Load weights on rank 0 only",
        json_schema_extra=_meta("RAM-efficient loading", advanced=True),
    )


class SlurmSpec(_Spec):
    """Where and how a ``launch.target: slurm`` run asks the cluster for its nodes (``launch.num_machines`` of them,
    one task per node). Empty values leave Slurm's (or the site's) defaults."""

    partition: str = Field(
        "",
        pattern=r"^[A-Za-z0-9_.,\-]*$",
        description="Slurm partition (empty: the studio setting, else the cluster's default)",
        json_schema_extra=_meta("Partition", advanced=True),
    )
    account: str = Field(
        "",
        pattern=r"^[A-Za-z0-9_.\-]*$",
        description="Slurm account charged for the job (empty: your default)",
        json_schema_extra=_meta("Account", advanced=True),
    )
    qos: str = Field(
        "",
        pattern=r"^[A-Za-z0-9_.\-]*$",
        description="Quality of service (empty: the default)",
        json_schema_extra=_meta("QOS", advanced=True),
    )
    gpus_per_node: int | None = Field(
        None,
        ge=0,
        le=64,
        description="GPUs per node (empty: processes per machine on GPUs, none on CPU)",
        json_schema_extra=_meta("GPUs per node", advanced=True),
    )
    cpus_per_node: int = Field(
        0,
        ge=0,
        le=4096,
        description="CPUs per node for the job (0: Slurm's default)",
        json_schema_extra=_meta("CPUs per node", advanced=True),
    )
    memory: str = Field(
        "",
        pattern=r"^(\d+[KMGT]?)?$",
        description="Memory per node, e.g. 64G (empty: the default; 0: all of it)",
        json_schema_extra=_meta("Memory per node", advanced=True),
    )
    time_limit: str = Field(
        "",
        pattern=r"^((\d+-)?\d{1,2}(:\d{2}){0,2}|\d+|\d+-\d+)?$",
        description="Time limit: minutes, HH:MM:SS or D-HH:MM:SS (empty: the partition's)",
        json_schema_extra=_meta("Time limit", advanced=True),
    )
    constraint: str = Field(
        "",
        pattern=r"^[A-Za-z0-9_.&|,*\[\]()\-]*$",
        description="Node features required, e.g. a100 (sbatch --constraint)",
        json_schema_extra=_meta("Constraint", advanced=True),
    )
    extra_sbatch: list[str] = Field(
        default_factory=list,
        description="More sbatch options, one per line, e.g. --exclusive or #SBATCH --mail-type=END",
        json_schema_extra=_meta("Extra sbatch lines", advanced=True),
    )


class RaySpec(_Spec):
    """A ``launch.target: ray`` run: the trainer's workers under Ray Train on a Ray cluster (``RAY_ADDRESS``, or a
    local Ray started for the run), in LLaMA-Factory's names (``ray_num_workers``, ``resources_per_worker``, ...)."""

    num_workers: int = Field(
        1,
        ge=1,
        le=4096,
        description="Ray workers, one training process each (LLaMA-Factory's ray_num_workers)",
        json_schema_extra=_meta("Ray workers"),
    )
    resources_per_worker: dict[str, float] = Field(
        default_factory=dict,
        description="Ray resources each worker asks for, e.g. {GPU: 1, CPU: 4} (empty: one GPU on cuda, one CPU on "
        "cpu)",
        json_schema_extra=_meta("Resources per worker", advanced=True),
    )
    placement_strategy: Literal["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"] = Field(
        "PACK",
        description="How Ray places the workers on its nodes: PACK (few nodes), SPREAD (many), STRICT_* (must)",
        json_schema_extra=_meta("Placement strategy", advanced=True),
    )
    init_kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description="More arguments of ray.init, e.g. {runtime_env: {env_vars: {A: b}}} (LLaMA-Factory's "
        "ray_init_kwargs); the cluster's address comes from RAY_ADDRESS",
        json_schema_extra=_meta("ray.init arguments", advanced=True),
    )
    storage_path: str = Field(
        "",
        description="Where Ray Train keeps its results (empty: the run folder's ray/; several nodes: a folder they "
        "all see)",
        json_schema_extra=_meta("Ray storage path", advanced=True),
    )
    run_name: str = Field(
        "",
        max_length=120,
        pattern=r"^[A-Za-z0-9._\-]*$",
        description="The Ray Train run's name under the storage path (empty: the run's id)",
        json_schema_extra=_meta("Ray run name", advanced=True),
    )

    @field_validator("resources_per_worker", mode="before")
    @classmethod
    def _resources(cls, value: Any) -> Any:
        """Each resource a name and a number of 0 or more, said of the field (a bad amount's error would otherwise
        be placed under the resource's name, which is no field of the schema)."""
        if not isinstance(value, dict):
            return value  # the type's own message
        for key, amount in value.items():
            number = isinstance(amount, (int, float)) and not isinstance(amount, bool)
            if not isinstance(key, str) or not key.strip() or not number or not amount >= 0:
                raise ValueError(f"resource {key!r}: a name and an amount of 0 or more")
        return value


def ray_installed() -> bool:
    """Whether the driver can import Ray here (the ``ray`` extra, ``pip install "ray[train]"``), unimported."""
    import importlib.util

    return importlib.util.find_spec("ray") is not None


def ray_errors(spec) -> list[tuple[str, Any]]:
    """``launch.target: ray``'s rules, for ``engine.spec.rules.cross_field_errors``: Ray places the workers (one
    process each, data parallel: backend ddp, or single for one worker), so the local launch's process and machine
    counts stay at 1."""
    from engine.spec.messages import message

    ln = spec.launch
    if ln.target != "ray":
        return []
    errors = []
    if not ray_installed():
        errors.append(("launch.target", message("ray_missing")))
    if ln.backend != "ddp" and not (ln.backend == "single" and ln.ray.num_workers == 1):
        errors.append(("launch.backend", message("ray_backend", backend=ln.backend)))
    if ln.num_processes != 1:
        errors.append(("launch.num_processes", message("ray_counts", field="num_processes")))
    if ln.num_machines != 1:
        errors.append(("launch.num_machines", message("ray_counts", field="num_machines")))
    gpus = ln.ray.resources_per_worker.get("GPU", 0)
    if ln.device == "cpu" and gpus:
        errors.append(("launch.ray.resources_per_worker", message("ray_gpus_on_cpu", gpus=f"{gpus:g}")))
    return errors


class LaunchSpec(_Spec):
    target: Literal["local", "slurm", "ray"] = Field(
        "local",
        description="local: this machine's queue; slurm: a batch job on the cluster (settings: sbatch, shared "
        "folder); ray: Ray Train's workers on a Ray cluster (RAY_ADDRESS, else a local Ray)",
        json_schema_extra=_meta("Launch target"),
    )
    backend: Literal["single", "ddp", "fsdp", "deepspeed"] = Field(
        "single",
        description="single process, DDP (data parallel), FSDP (sharded), or DeepSpeed ZeRO",
        json_schema_extra=_meta("Backend"),
    )
    device: Literal["auto", "cuda", "cpu"] = Field(
        "auto", description="auto: GPUs when present, else CPU", json_schema_extra=_meta("Device")
    )
    gpus: list[int] | None = Field(
        None,
        description="Explicit GPU ids (empty: any free ones, as many as processes)",
        json_schema_extra=_meta("GPUs"),
    )
    num_processes: int = Field(
        1,
        ge=1,
        le=1024,
        description="Processes (one per GPU) on each machine",
        json_schema_extra=_meta("Processes per machine"),
    )
    share_gpus: bool = Field(
        False,
        description="Allow this run on GPUs another run is using",
        json_schema_extra=_meta("Share GPUs", advanced=True),
    )
    num_machines: int = Field(
        1,
        ge=1,
        le=4096,
        description="Machines (nodes) in the run",
        json_schema_extra=_meta("Machines", advanced=True),
    )
    machine_rank: int = Field(
        0,
        ge=0,
        description="This machine's rank (0 = main)",
        json_schema_extra=_meta("Machine rank", advanced=True),
    )
    main_process_ip: str = Field(
        "",
        description="Address of the rank-0 machine (several machines)",
        json_schema_extra=_meta("Main address", advanced=True),
    )
    main_process_port: int = Field(
        29500,
        ge=1024,
        le=65535,
        description="Rendezvous port",
        json_schema_extra=_meta("Main port", advanced=True),
    )
    ddp_timeout: int = Field(
        1800,
        ge=1,
        le=2**31 - 1,
        description="Seconds the processes wait for each other in a collective before the run fails",
        json_schema_extra=_meta("Communication timeout (s)", advanced=True),
    )
    deepspeed: DeepSpeedSpec = Field(default_factory=DeepSpeedSpec)
    fsdp: FsdpSpec = Field(default_factory=FsdpSpec)
    slurm: SlurmSpec = Field(default_factory=SlurmSpec)
    ray: RaySpec = Field(default_factory=RaySpec)


# ----------------------------------------------------------------------------------------------- output
class OutputSpec(_Spec):
    run_name: str = Field(
        "",
        max_length=120,
        pattern=r"^[A-Za-z0-9._\-\u4e00-\u9fff ]*$",
        description="A name for the run (letters, digits, . _ - and spaces)",
        json_schema_extra=_meta("Run name"),
    )
    output_dir: str = Field(
        "",
        description="Where checkpoints and the adapter go (empty: the run's folder)",
        json_schema_extra=_meta("Output folder", advanced=True),
    )
    overwrite: bool = Field(
        False,
        description="Replace the output folder of an earlier run that has ended (LLaMA-Factory's "
        "overwrite_output_dir): only a folder that run created and nothing else wrote in; that run keeps its record, "
        "run folder and logs, marked as overwritten by this one",
        json_schema_extra=_meta("Overwrite an earlier run's output", advanced=True),
    )
    report_to: list[Literal["tensorboard", "wandb", "none", "mlflow", "trackio", "swanlab"]] = Field(
        default_factory=lambda: ["tensorboard"],
        description="Experiment trackers, kept in the run's folder (tensorboard; mlflow's file store; trackio's local "
        "store; wandb offline; swanlab local)",
        json_schema_extra=_meta("Report to", advanced=True),
    )
    layout: Literal["studio", "llamafactory"] = Field(
        "studio",
        description="Where the final weights go in the output folder: studio (its adapter/ or model/ folder) or "
        "llamafactory (the output folder itself, as LLaMA-Factory saves them; what a LLaMA-Factory YAML's output_dir "
        "means)",
        json_schema_extra=_meta("Output layout", advanced=True),
    )
