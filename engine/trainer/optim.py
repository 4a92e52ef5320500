"""Optimizers beyond the Trainer's ``optim`` names: LoRA+ (peft), Adam-mini, Muon and BAdam (their own packages).

Heavy: torch, transformers, peft, imported where used. GaLore and APOLLO are transformers' own ``optim`` values
and are set in ``engine.trainer.trainers.training_arguments`` (``optim_target_modules``, ``optim_args``); everything
here is handed to the Trainer as an optimizer factory (``Trainer.optimizer_cls_and_kwargs``), so the Trainer builds
it from the model it trains when it creates its optimizer (after DDP wrapping, before a resume loads the optimizer
state), and its learning-rate schedule applies to every group. The spec's rules (engine.spec.rules.method_problems)
have refused the combinations these cannot run in, and a missing package, before a run starts.
"""

from __future__ import annotations

import os
from typing import Any

from engine.spec.schema import RunSpec


def optimizer_factory(spec: RunSpec, targs) -> tuple[Any, dict] | None:
    """(factory, kwargs) for ``Trainer.optimizer_cls_and_kwargs``, or None when the Trainer's own ``optim`` does.

    The Trainer calls ``factory()(model, **kwargs)``: the factory is a zero-argument callable returning the builder.
    """
    opt = spec.train.optimizer
    if spec.method.finetuning == "lora" and spec.method.lora.loraplus_lr_ratio is not None:
        return (lambda: _loraplus), {"spec": spec, "targs": targs}
    builders = {"adam_mini": _adam_mini, "muon": _muon, "badam": _badam}
    if opt in builders:
        return (lambda: builders[opt]), {"spec": spec, "targs": targs}
    return None


def _decay_groups(model, targs) -> list[dict]:
    """The Trainer's two groups: weight decay on weights, none on biases and norms (trainable parameters only)."""
    from transformers import Trainer

    decay = set(Trainer.get_decay_parameter_names(None, model))
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    return [
        {"params": [p for n, p in named if n in decay], "weight_decay": targs.weight_decay},
        {"params": [p for n, p in named if n not in decay], "weight_decay": 0.0},
    ]


def _loraplus(model, *, spec: RunSpec, targs):
    """peft's LoRA+: the B matrices (and DoRA magnitudes) at learning rate x ratio, LoRA on embeddings at its own
    rate; the optimizer class and its arguments are the ones ``train.optimizer`` gives the Trainer."""
    from peft.optimizers import create_loraplus_optimizer
    from transformers import Trainer

    cls, kwargs = Trainer.get_optimizer_cls_and_kwargs(targs, model)
    kwargs = {k: v for k, v in kwargs.items() if k != "lr"}
    lora = spec.method.lora
    return create_loraplus_optimizer(
        model,
        cls,
        lr=targs.learning_rate,
        loraplus_lr_ratio=lora.loraplus_lr_ratio,
        loraplus_lr_embedding=lora.loraplus_lr_embedding,
        loraplus_weight_decay=targs.weight_decay,
        **kwargs,
    )


def _adam_mini(model, *, spec: RunSpec, targs):
    """Adam-mini (package adam-mini): one second-moment value per block of parameters; it needs the attention shape
    to find the blocks."""
    from adam_mini import Adam_mini

    cfg = model.config
    return Adam_mini(
        named_parameters=model.named_parameters(),
        lr=targs.learning_rate,
        betas=(targs.adam_beta1, targs.adam_beta2),
        eps=targs.adam_epsilon,
        weight_decay=targs.weight_decay,
        dim=getattr(cfg, "hidden_size", None),
        n_heads=getattr(cfg, "num_attention_heads", None),
        n_kv_heads=getattr(cfg, "num_key_value_heads", None),
    )


def _muon(model, *, spec: RunSpec, targs):
    """Muon (package muon) on the trainable 2-D weights inside the decoder; AdamW on the rest (embeddings, the
    output head, norms, biases), as Muon's authors and LLaMA-Factory split them."""
    import muon

    hidden, other = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        outside = any(k in name for k in ("embed_tokens", "lm_head", "wte", "output_layer"))
        (hidden if p.ndim >= 2 and not outside else other).append(p)
    groups = [{"params": hidden, "use_muon": True, "lr": targs.learning_rate, "weight_decay": targs.weight_decay}]
    if other:
        groups.append(
            {
                "params": other,
                "use_muon": False,
                "lr": targs.learning_rate,
                "betas": (targs.adam_beta1, targs.adam_beta2),
                "eps": targs.adam_epsilon,
                "weight_decay": targs.weight_decay,
            }
        )
    one = int(os.environ.get("WORLD_SIZE", "1")) == 1
    return (muon.SingleDeviceMuonWithAuxAdam if one else muon.MuonWithAuxAdam)(groups)


def _badam(model, *, spec: RunSpec, targs):
    """BAdam (package badam): Adam on one block of layers at a time (layer mode) or on a fraction of every weight
    (ratio mode), wrapped around the Trainer's AdamW as LLaMA-Factory does."""
    from transformers import Trainer

    b = spec.train.badam
    groups = _decay_groups(model, targs)
    cls, kwargs = Trainer.get_optimizer_cls_and_kwargs(targs, model)
    kwargs = {k: v for k, v in kwargs.items() if k != "fused"}  # BAdam swaps parameter groups between steps
    if b.mode == "layer":
        from badam import BlockOptimizer

        return BlockOptimizer(
            base_optimizer=cls(groups, **kwargs),
            named_parameters_list=list(model.named_parameters()),
            block_prefix_list=None,
            switch_block_every=b.switch_interval,
            start_block=b.start_block,
            switch_mode=b.switch_mode,
            verbose=b.verbose,
        )
    from badam import BlockOptimizerRatio

    return BlockOptimizerRatio(
        param_groups=groups,
        named_parameters_list=list(model.named_parameters()),
        update_ratio=b.update_ratio,
        mask_mode=b.mask_mode,
        verbose=b.verbose,
        include_embedding=False,
        **kwargs,
    )


def low_rank_settings(spec: RunSpec, model=None) -> dict:
    """GaLore / APOLLO as transformers takes them: ``optim`` (with ``_layerwise``), ``optim_target_modules`` and
    ``optim_args``. 'all' targets every linear layer of the decoder, the output head excepted (LLaMA-Factory's
    'all'); the names are read from ``model`` when given, else transformers' ``all-linear``."""
    t, lr = spec.train, spec.train.low_rank
    galore = t.optimizer.startswith("galore")
    args = {
        "rank": lr.rank,
        "update_proj_gap": lr.update_interval,
        "scale": lr.scale if lr.scale is not None else (2.0 if galore else 32.0),
        "proj_type": lr.proj_type,
    }
    if not galore:
        args.update(proj=lr.apollo_proj, scale_type=lr.apollo_scale_type)
    if lr.targets != ["all"]:
        targets: Any = list(lr.targets)
    elif model is not None:
        targets = linear_module_names(model)
    else:
        targets = "all-linear"
    return {
        "optim": t.optimizer + ("_layerwise" if lr.layerwise else ""),
        "optim_target_modules": targets,
        "optim_args": ",".join(f"{k}={v}" for k, v in args.items()),
    }


def linear_module_names(model) -> list[str]:
    """The distinct leaf names of the model's linear layers, the output head excepted (q_proj, ..., down_proj)."""
    import torch

    names = {n.split(".")[-1] for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    return sorted(names - {"lm_head", "output_layer", "embed_out"})
