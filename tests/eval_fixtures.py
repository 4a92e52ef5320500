"""A trained demo run with checkpoints and a small dataset with reference answers, shared by the evaluation tests
(tests/engine/test_eval.py, tests/engine/test_lf_predict.py, tests/e2e/test_e2e_eval.py)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import yaml

# single-turn rows with reference answers: English, Chinese, and two one-letter answers (accuracy)
EVAL_ROWS = [
    ("Which letter comes after A? Answer with one letter.", "B"),
    ("What is 2 plus 3?", "2 plus 3 is 5."),
    ("把这个颜色翻译成英文。\n白色", "“白色”的英文是 white。"),
    ("5 分钟等于多少秒？", "5 分钟等于 300 秒。"),
    ("How many seconds are in 35 minutes?", "35 minutes is 2100 seconds."),
    ("Pick the answer: (A) cat (B) dog. Which one barks?", "B"),
]


def write_eval_dataset(folder: Path, name: str = "eval_rows") -> Path:
    """A registered JSONL dataset of EVAL_ROWS (messages format) in ``folder``; returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{name}.jsonl", "w", encoding="utf-8") as fh:
        for q, a in EVAL_ROWS:
            msgs = [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
            fh.write(json.dumps({"messages": msgs}, ensure_ascii=False) + "\n")
    info_path = folder / "dataset_info.json"
    info = json.loads(info_path.read_text()) if info_path.exists() else {}
    info[name] = {
        "file_name": f"{name}.jsonl",
        "formatting": "sharegpt",
        "columns": {"messages": "messages"},
        "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant"},
    }
    info_path.write_text(json.dumps(info, ensure_ascii=False, indent=1))
    return folder


def train_demo_run(demo_paths: dict, steps: int = 4, save_steps: int = 2, timeout: float = 600) -> str:
    """A LoRA run on the demo (val_size 6 held out) with a checkpoint every ``save_steps``; its id once completed."""
    from engine.runs import registry as runs

    data = yaml.safe_load(Path(demo_paths["example_spec"]).read_text())
    data["train"].update(max_steps=steps, logging_steps=1, save_steps=save_steps)
    data["data"].update(max_samples=48, val_size=6)
    data["output"]["report_to"] = ["none"]
    rid = runs.submit(data, name="eval-source")
    deadline = time.time() + timeout
    while runs.get(rid).status in ("queued", "running"):
        assert time.time() < deadline, runs.log_tail(rid)
        time.sleep(0.5)
    rec = runs.get(rid)
    assert rec.status == "completed", runs.log_tail(rid)
    return rid


class EnvHome:
    """STUDIO_HOME (and one CPU slot) for a module's tests; puts the old values back and stops what is left."""

    def __init__(self, home: Path):
        self.home, self.old = home, {k: os.environ.get(k) for k in ("STUDIO_HOME", "STUDIO_CPU_SLOTS")}

    def __enter__(self):
        os.environ.update(STUDIO_HOME=str(self.home), STUDIO_CPU_SLOTS="1")
        return self.home

    def __exit__(self, *exc):
        from engine.runs import registry as runs

        for rec in runs.list_runs(refresh_status=False):
            if rec.status in ("running", "queued"):
                runs.stop(rec.id, grace_s=1)
        for k, v in self.old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def bootstrap_interval(diffs: list[float], resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """The verdict's paired bootstrap written out plainly (engine.eval.verdict is held to it): one resample at a
    time, rows floor(u * n) for numpy's default_rng(seed) uniform doubles, the means' 2.5th and 97.5th percentiles."""
    import numpy as np

    d = np.array(diffs, dtype=float)
    rng = np.random.default_rng(seed)
    means = [d[np.floor(rng.random(len(d)) * len(d)).astype(int)].mean() for _ in range(resamples)]
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def degenerate(answer: str) -> bool:
    """A degenerate answer, written out here: nothing but whitespace, or one piece repeated three times or more to
    fill the answer ('????', '5050505050', 'ha ha ha')."""
    text = answer.strip()
    words = text.split()
    if not text or (len(words) >= 3 and len(set(words)) == 1):
        return True
    n = len(text)
    return any(n % k == 0 and n // k >= 3 and text == text[:k] * (n // k) for k in range(1, n // 3 + 1))
