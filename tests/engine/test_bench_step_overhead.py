"""bench/step_overhead.py (issue 49): Studio's training loop forces no host-device synchronisation between logged
steps, and its token count comes to the tokens the model was fed.

The bench's counted child trains the demo model through engine.trainer.train (packed rows, per-sample attention,
logits only at trained positions) with every tensor read-back and value-dependent operator counted by caller."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# transformers' own check for packed rows (masking_utils.find_packed_sequence_indices) reads the position ids back
# once a forward, to choose its block-diagonal mask; the plain loop pays it too, and Studio cannot skip it from outside
TRANSFORMERS_MASK_CHECK = "transformers/masking_utils.py"


def test_no_sync_between_logged_steps(demo_paths, tmp_path):
    data = Path(demo_paths["data_dir"]) / "demo_alpaca.json"
    argv = [sys.executable, str(ROOT / "bench" / "step_overhead.py"), "--child", "studio", "--mode", "counted"]
    argv += ["--root", str(ROOT), "--model", demo_paths["model_dir"], "--data", str(data), "--work", str(tmp_path)]
    argv += ["--steps", "10", "--logging-steps", "5", "--rank", "8"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=str(ROOT), timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads([x for x in proc.stdout.splitlines() if x.startswith("STEP_OVERHEAD ")][-1].split(" ", 1)[1])
    assert out["steps"] == 10 and out["unlogged_steps"] == 8
    assert out["per_sample_attention"] and out["trained_logits_only"]
    unlogged = [caller for caller, _ in out["sync_callers_unlogged"]]
    assert [c for c in unlogged if TRANSFORMERS_MASK_CHECK not in c] == []
    # the counter sees what a logged step reads back: the loss and the gradient norm of the log line
    logged = " ".join(caller for caller, _ in out["sync_callers_logged"])
    assert "_maybe_log_save_evaluate" in logged
    # the count read back only at the logged steps is every token fed (packed rows: non_padding)
    assert out["tokens_seen"] == out["tokens_fed"]["non_padding"] > 0
