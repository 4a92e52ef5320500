"""Load the tokenizer and model a spec asks for, quantised if asked, with the fine-tuning method applied.

Stage rm loads the base as a sequence-classification model with one label (transformers adds a freshly initialised
``score`` head over the last token's hidden state: the reward); the head is always trained: LoRA keeps it whole
beside the adapters (peft's task type SEQ_CLS puts it in ``modules_to_save``), freeze trains it with the last layers.

Heavy: imports torch, transformers, peft (and bitsandbytes through transformers) — trainer/worker processes only.
"""

from __future__ import annotations

import re

import torch
from transformers import (
    AutoConfig,
    AutoTokenizer,
    BitsAndBytesConfig,
)

from engine.models import ms_models
from engine.models.resolve import looks_local, model_path
from engine.spec.schema import RunSpec

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def resolve_weights_dtype(spec: RunSpec, device: str, precision: str) -> torch.dtype:
    """dtype of the base weights. auto: fp32 on CPU and for full/freeze (AMP keeps fp32 master weights);
    the compute dtype for LoRA-family methods on GPU (the frozen base needs no fp32 copy)."""
    if spec.model.dtype != "auto":
        return DTYPES[spec.model.dtype]
    if device == "cpu" or not spec.method.adapter or precision == "fp32":
        return torch.float32
    return torch.bfloat16 if precision == "bf16" else torch.float16


def model_location(spec: RunSpec) -> str:
    """What from_pretrained gets: a local folder as a full path (``models/...`` is the workspace's), else the id."""
    name = spec.model.name_or_path
    if looks_local(name):
        return str(model_path(name))
    if getattr(spec.model, "hub", "huggingface") == "modelscope":  # downloaded by the run's first phase
        folder = ms_models.complete_folder(name, spec.model.revision)
        if folder is None:
            raise FileNotFoundError(f"{name} is not complete in ModelScope's cache ({ms_models.cache_root()})")
        return str(folder)
    return name


def load_tokenizer(spec: RunSpec):
    tok = AutoTokenizer.from_pretrained(
        model_location(spec), revision=spec.model.revision, trust_remote_code=spec.model.trust_remote_code
    )
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token or tok.unk_token
    return tok


def apply_rope_scaling(config, rope_type: str, factor: float) -> None:
    """RoPE scaling on the (text) config, keeping what the model's rope parameters already hold: transformers 5
    keeps ``rope_theta`` (and Qwen-VL's ``mrope_section``) inside ``rope_parameters``, and assigning the legacy
    ``rope_scaling`` replaces that dict, so the rotary embedding is built with no base (a TypeError at load)."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    params = getattr(text, "rope_parameters", None)
    if isinstance(params, dict):
        text.rope_parameters = {**params, "rope_type": rope_type, "factor": factor}
    else:  # an older config class: the legacy field
        text.rope_scaling = {"rope_type": rope_type, "factor": factor}


def load_model(
    spec: RunSpec, *, device: str, precision: str, attn_implementation: str | None = None, vision: bool = False
):
    """The model with the spec's method applied (PEFT adapters, frozen layers) and ready to train.
    ``attn_implementation`` overrides the spec's (engine.trainer.attention's per-sample sdpa). ``vision``: a
    vision-language model, loaded with its image-text class, ``model.vision``'s switches applied
    (engine.trainer.vision)."""
    dtype = resolve_weights_dtype(spec, device, precision)
    kwargs: dict = {
        "revision": spec.model.revision,
        "trust_remote_code": spec.model.trust_remote_code,
        "dtype": dtype,
        "attn_implementation": attn_implementation or spec.model.attn_implementation,
    }
    if spec.model.rope_scaling is not None:
        config = AutoConfig.from_pretrained(
            model_location(spec), revision=spec.model.revision, trust_remote_code=spec.model.trust_remote_code
        )
        apply_rope_scaling(config, spec.model.rope_scaling.type, spec.model.rope_scaling.factor)
        kwargs["config"] = config
    q = spec.method.quantization
    if q.bits:
        compute = (
            DTYPES.get(q.compute_dtype)
            if q.compute_dtype != "auto"
            else (torch.float32 if precision == "fp32" else torch.bfloat16 if precision == "bf16" else torch.float16)
        )
        if q.bits == 4:
            kwargs["quantization_config"] = BitsAndBytesConfig(
                load_in_4bit=True,
                bnb_4bit_quant_type=q.quant_type,
                bnb_4bit_use_double_quant=q.double_quant,
                bnb_4bit_compute_dtype=compute,
                bnb_4bit_quant_storage=compute if _shards_params(spec) else torch.uint8,
            )
        else:
            kwargs["quantization_config"] = BitsAndBytesConfig(load_in_8bit=True)
        if device == "cuda":
            import os

            kwargs["device_map"] = {"": int(os.environ.get("LOCAL_RANK", 0))}
    if spec.method.stage == "rm":
        if "config" in kwargs:  # an explicit config takes no config keywords beside it
            kwargs["config"].num_labels = 1
        else:
            kwargs["num_labels"] = 1
    from engine.trainer.vision import model_class

    auto = model_class(vision=vision, reward=spec.method.stage == "rm")
    model = auto.from_pretrained(model_location(spec), **kwargs)
    model.config.use_cache = False
    targets = None
    if vision:
        from engine.trainer import vision as vision_lib

        vision_lib.apply_freeze_switches(spec, model)  # full / freeze; LoRA and OFT also skip the frozen parts
        if spec.method.finetuning in ("lora", "oft"):
            targets = vision_lib.lora_targets(spec, model)
    if q.bits:
        _avoid_cpu_bf16_repack(model)
        from peft import prepare_model_for_kbit_training

        model = prepare_model_for_kbit_training(
            model, use_gradient_checkpointing=spec.train.gradient_checkpointing == "on"
        )
    if spec.method.finetuning == "lora":
        model = apply_lora(spec, model, targets)
    elif spec.method.finetuning == "oft":
        model = apply_oft(spec, model, targets)
    elif spec.method.finetuning == "freeze":
        apply_freeze(spec, model)
        if vision:
            vision_lib.apply_freeze_switches(spec, model)
    if spec.method.stage == "rm":
        head = [n for n, p in model.named_parameters() if ".score." in f".{n}" and p.requires_grad]
        if not head:
            raise ValueError(f"stage rm: the score head of {type(model).__name__} is not trained; nothing would learn")
    if spec.train.gradient_checkpointing == "on" and spec.method.finetuning != "full":
        # Frozen embeddings give inputs without grad; checkpointed blocks then see no grad path.
        model.enable_input_require_grads()
    return model


def apply_lora(spec: RunSpec, model, targets: list[str] | None = None):
    """``targets``: full module names (a vision-language model's, outside its frozen parts), else the spec's."""
    from peft import LoraConfig, get_peft_model

    lora = spec.method.lora
    targets = targets or ("all-linear" if lora.targets == ["all"] else list(lora.targets))
    config = LoraConfig(
        r=lora.rank,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=targets,
        use_rslora=lora.use_rslora,
        use_dora=lora.use_dora,
        init_lora_weights=pissa_init_name(lora.pissa_iter) if lora.pissa_init else True,
        bias="none",
        # SEQ_CLS: peft keeps the new score head trainable and saves it with the adapter (modules_to_save)
        task_type=task_type(spec),
    )
    return get_peft_model(model, config)


def pissa_init_name(iterations: int) -> str:
    """peft's ``init_lora_weights`` for PiSSA: exact SVD ("pissa") or fast SVD with N iterations ("pissa_niter_N"),
    as LLaMA-Factory maps its pissa_iter (-1: exact)."""
    return "pissa" if iterations == -1 else f"pissa_niter_{iterations}"


PISSA_INIT = "pissa_init"  # <output>/pissa_init: the PiSSA adapter before training, for the conversion to LoRA


def save_pissa_init(model, out) -> None:
    """The PiSSA adapter as initialised (before any step), which ``save_pissa_as_lora`` subtracts."""
    model.save_pretrained(str(out / PISSA_INIT))


def save_pissa_as_lora(trainer, target, out) -> None:
    """Save the trained PiSSA adapter converted to a plain LoRA adapter on the original base (peft's
    ``path_initial_model_for_weight_conversion``: the update A B - A0 B0 as a LoRA of twice the rank), so it merges
    onto, and loads with, the model the run started from. peft rewrites the init folder's config to plain LoRA."""
    if trainer.is_world_process_zero():
        trainer.model.save_pretrained(str(target), path_initial_model_for_weight_conversion=str(out / PISSA_INIT))
    if trainer.args.world_size > 1:
        trainer.accelerator.wait_for_everyone()


def task_type(spec: RunSpec) -> str:
    """peft's task type: SEQ_CLS for a reward model (peft keeps the new score head trainable and saves it with the
    adapter, modules_to_save), else CAUSAL_LM."""
    return "SEQ_CLS" if spec.method.stage == "rm" else "CAUSAL_LM"


def apply_oft(spec: RunSpec, model, targets: list[str] | None = None):
    """Orthogonal fine-tuning (peft's OFT): each targeted linear layer's input is rotated by a trained block-diagonal
    orthogonal matrix; r blocks per layer, or blocks of ``block_size`` (exactly one of them is non-zero)."""
    from peft import OFTConfig, get_peft_model

    oft = spec.method.oft
    config = OFTConfig(
        r=oft.rank,
        oft_block_size=oft.block_size,
        target_modules=targets or ("all-linear" if oft.targets == ["all"] else list(oft.targets)),
        module_dropout=oft.dropout,
        bias="none",
        task_type=task_type(spec),
    )
    return get_peft_model(model, config)


def apply_freeze(spec: RunSpec, model) -> None:
    """Train only the last N decoder layers (optionally only named modules in them) and extra modules; with
    use_llama_pro, the N blocks block expansion inserted (every layers / N-th, from the stride's end: LF's indices)."""
    fz = spec.method.freeze
    num_layers = model.config.get_text_config().num_hidden_layers  # a vision-language model's: its decoder's
    if fz.use_llama_pro:
        stride = num_layers // fz.trainable_layers
        trainable = set(range(stride - 1, num_layers, stride))
    else:
        trainable = set(range(max(0, num_layers - fz.trainable_layers), num_layers))
    layer_re = re.compile(r"\.layers\.(\d+)\.")
    for name, param in model.named_parameters():
        match = layer_re.search(name)
        train = False
        if match and int(match.group(1)) in trainable:
            train = not fz.trainable_modules or any(f".{m}." in f".{name}" for m in fz.trainable_modules)
        if any(f".{m}." in f".{name}" for m in fz.extra_modules):
            train = True
        if spec.method.stage == "rm" and name.startswith("score."):
            train = True  # the reward head is new: it always learns
        param.requires_grad_(train)
    if not any(p.requires_grad for p in model.parameters()):
        raise ValueError("method.freeze: no parameter is trainable with these settings")


def _shards_params(spec: RunSpec) -> bool:
    """FSDP and ZeRO-3 shard parameters as float tensors: 4-bit weights must then be stored in the compute dtype."""
    ln = spec.launch
    return ln.backend == "fsdp" or (ln.backend == "deepspeed" and ln.deepspeed.zero_stage == 3)


def _avoid_cpu_bf16_repack(model) -> None:
    """bitsandbytes on CPUs with AVX512-BF16 repacks 4-bit weights in eval-mode forwards into a layout without a
    backward kernel, and LoRA layers then silently stop learning (STACK-NOTES). Opt out of that path."""
    try:
        import bitsandbytes as bnb
    except ImportError:
        return
    for module in model.modules():
        if isinstance(module, bnb.nn.Linear4bit) and hasattr(module, "support_avx512bf16_for_cpu"):
            module.support_avx512bf16_for_cpu = False


def count_parameters(model) -> tuple[int, int]:
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    return trainable, total
