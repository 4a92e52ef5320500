"""Experiment trackers a run reports to (``output.report_to``, the names transformers' Trainer and LLaMA-Factory
take): each one's package and pip name, and where it writes, kept inside the run's output folder.

- tensorboard: event files in ``<out>/tensorboard``;
- mlflow: an MLflow file store in ``<out>/mlruns`` (``mlflow ui --backend-store-uri <out>/mlruns`` reads it);
- trackio: Trackio's local SQLite store in ``<out>/trackio`` (``TRACKIO_DIR``; ``trackio show`` reads it);
- wandb: Weights & Biases in offline mode in ``<out>/wandb`` (``wandb sync`` uploads it later); a user who exported
  (the run's environment is allow-listed, so no login reaches it);
- swanlab: SwanLab in local mode in ``<out>/swanlog``.
A value already in the run's environment is kept (``apply`` only fills gaps). The run's spec goes to each tracker
as its config (engine.trainer.tracker_config). Light: stdlib only.
"""

from __future__ import annotations

from pathlib import Path

# name -> (import name, pip name)
TRACKERS: dict[str, tuple[str, str]] = {
    "tensorboard": ("tensorboard", "tensorboard"),
    "wandb": ("wandb", "wandb"),
    "mlflow": ("mlflow", "mlflow"),
    "trackio": ("trackio", "trackio"),
    "swanlab": ("swanlab", "swanlab"),
}


def tracker_env(report_to: list[str], out: str | Path, run_name: str = "") -> dict[str, str]:
    """Environment variables that keep each tracker's files in the output folder ``out``."""
    out = Path(out)
    env: dict[str, str] = {}
    if "tensorboard" in report_to:
        env["TENSORBOARD_LOGGING_DIR"] = str(out / "tensorboard")
    if "mlflow" in report_to:
        env["MLFLOW_TRACKING_URI"] = (out / "mlruns").resolve().as_uri()
        env["MLFLOW_EXPERIMENT_NAME"] = run_name or "studio"
        # MLflow 3 keeps the file store in maintenance mode and refuses it unless told: it is the store that keeps
        # metrics, params and artifacts in one folder (a SQLite store puts artifacts under the working directory)
        env["MLFLOW_ALLOW_FILE_STORE"] = "true"
    if "trackio" in report_to:
        env["TRACKIO_DIR"] = str(out / "trackio")
    if "wandb" in report_to:
        env["WANDB_MODE"] = "offline"
        env["WANDB_DIR"] = str(out)
    if "swanlab" in report_to:
        env["SWANLAB_MODE"] = "local"
        env["SWANLAB_LOG_DIR"] = str(out / "swanlog")
    return env


def apply(env, defaults: dict[str, str]) -> None:
    """Put ``defaults`` into ``env`` (a dict or ``os.environ``) where it has no such variable yet."""
    for key, value in defaults.items():
        env.setdefault(key, value)
