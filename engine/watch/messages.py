"""The catalog of the health rules' words (``engine.watch.health``): an alert's reason, its figures as parameters,
and a stopped run's end; a stable key and an English template, made into ``engine.core.messages.Message`` by
``message`` so the page shows them in its language (``studio.i18n.watch``). Light: stdlib.
"""

from __future__ import annotations

from typing import Any

from engine.core.messages import Message, make

MESSAGES: dict[str, str] = {
    # an alert's reason, its figures as parameters, and a stopped run's end
    "watch.health_loss_nan": "loss {loss}",
    "watch.health_loss_spike": "loss spike: {loss} > {factor} × recent median {median}",
    "watch.health_grad_not_finite": "gradient norm {grad_norm}",
    "watch.health_grad_norm": "gradient norm {grad_norm} above its limit {limit}",
    "watch.health_lr_zero": "learning rate 0 at step {step} with {remaining} steps left",
    "watch.health_throughput": "throughput collapse: {tps} tokens/s < {fraction} × recent median {median}",
    "watch.health_overfit": "overfitting: no better eval loss for {n} evaluations (best {best}, now {now}) while the "
    "training loss fell ({train_from} → {train_to})",
    "watch.health_reward_flat": "no learning signal: every group's completions scored alike for {n} logged steps "
    "(reward spread 0, mean reward {reward}); see what the model writes and what each reward gives it with "
    "`studio rewards try SPEC --source model`",
    "watch.health_disk": "disk nearly full: {free_mib} MiB free, the next checkpoint needs about {need_mib} MiB "
    "(checkpoint {checkpoint_mib} MiB)",
    "watch.health_stall": "no progress for {idle_s} s (limit {limit_s} s)",
    "watch.health_gpu_idle": "GPU {gpu} idle for {minutes} min (utilisation at most {max_pct}%)",
    "watch.health_gpu_memory": "GPU {gpu} memory {used_mib} of {total_mib} MiB ({pct}%)",
    "watch.health_stop_saved": "stopped by health rule: {what} at step {step}; {checkpoint} saved",
    "watch.health_stop_kept": "stopped by health rule: {what} at step {step}; {checkpoint} kept",
    "watch.health_stop_none": "stopped by health rule: {what} at step {step}; no checkpoint kept",
}


def message(key: str, /, **params: Any) -> Message:
    return make(MESSAGES, key, **params)
