"""The run's spec as each tracker's config: a Trainer callback, added after transformers' own tracker callbacks (which
start the tracker runs in their ``on_train_begin``), that hands the spec to every tracker in ``output.report_to``.

- mlflow: the spec flattened into params named ``spec.<group>.<field>`` and the whole spec as ``spec.json``;
- wandb / trackio / swanlab: ``config["studio_spec"]`` = the spec as a dict;
- tensorboard: the spec as YAML text under the tag ``studio_spec``.
Rank 0 only; a tracker that refuses is reported in the log, never fails the run. Heavy: transformers (trainer
subprocess only); each tracker's package is imported only when the run reports to it.
"""

from __future__ import annotations

import json

from transformers import TrainerCallback

from engine.spec.schema import dump_spec, spec_to_dict

MLFLOW_PARAM_CHARS = 6000  # MLflow's limit on a param value


def _flat(data: dict, prefix: str = "spec") -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in data.items():
        name = f"{prefix}.{key}"
        if isinstance(value, dict):
            out.update(_flat(value, name))
        else:
            out[name] = json.dumps(value, ensure_ascii=False)[:MLFLOW_PARAM_CHARS]
    return out


class SpecToTrackers(TrainerCallback):
    def __init__(self, spec, trainer) -> None:
        self.spec = spec
        self.trainer = trainer

    def on_train_begin(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
        data = spec_to_dict(self.spec)
        for target in self.spec.output.report_to:
            try:
                self._send(target, data)
            except Exception as exc:  # a tracker's config is a courtesy: never fail the run over it
                print(f"[studio] could not hand the spec to {target}: {type(exc).__name__}: {exc}", flush=True)

    def _send(self, target: str, data: dict) -> None:
        if target == "mlflow":
            import mlflow

            if mlflow.active_run() is not None:
                mlflow.log_params(_flat(data))
                mlflow.log_dict(data, "spec.json")
        elif target == "wandb":
            import wandb

            if wandb.run is not None:
                wandb.config.update({"studio_spec": data}, allow_val_change=True)
        elif target == "trackio":
            import trackio

            trackio.config.update({"studio_spec": data}, allow_val_change=True)
        elif target == "swanlab":
            import swanlab

            swanlab.config.update({"studio_spec": data})
        elif target == "tensorboard":
            for cb in self.trainer.callback_handler.callbacks:
                writer = getattr(cb, "tb_writer", None)
                if writer is not None:
                    writer.add_text("studio_spec", "```yaml\n" + dump_spec(self.spec) + "\n```")
