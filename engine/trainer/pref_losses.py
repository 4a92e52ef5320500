"""LLaMA-Factory's reference-free preference losses on TRL's implementations: ``method.dpo.loss_type: orpo`` runs
TRL's ``ORPOTrainer`` (``pref_beta`` is ORPO's beta, the odds-ratio weight beside the NLL of the chosen answer) and
``simpo`` runs TRL's ``CPOTrainer`` with ``loss_type="simpo"`` (``pref_beta``, ``simpo_gamma``, and ``pref_ftx`` as
``cpo_alpha``, the weight of the chosen answer's NLL), both in ``trl.experimental`` in TRL 1.16.

Heavy: trl (inside functions). Built by ``engine.trainer.trainers`` for stage dpo with one of these losses; the data
are the dpo rows (prompt / chosen / rejected strings) and both log TRL's ``rewards/chosen``, ``rewards/rejected``,
``rewards/margins`` and ``rewards/accuracies``, which the dashboard's preference charts draw.
"""

from __future__ import annotations

REFERENCE_FREE = ("orpo", "simpo")


def config(spec, kwargs: dict):
    d = spec.method.dpo
    if d.loss_type == "orpo":
        from trl.experimental.orpo import ORPOConfig

        return ORPOConfig(beta=d.beta, max_length=spec.data.cutoff_len, **kwargs)
    from trl.experimental.cpo import CPOConfig

    return CPOConfig(
        loss_type="simpo",
        beta=d.beta,
        simpo_gamma=d.simpo_gamma,
        cpo_alpha=d.ftx,
        max_length=spec.data.cutoff_len,
        **kwargs,
    )


def trainer_class(spec):
    if spec.method.dpo.loss_type == "orpo":
        from trl.experimental.orpo import ORPOTrainer

        return ORPOTrainer
    from trl.experimental.cpo import CPOTrainer

    return CPOTrainer
