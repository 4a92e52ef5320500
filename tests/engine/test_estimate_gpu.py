"""The GPU time estimate (engine.plan.estimate, engine.plan.grpo_time): the rows a step trains on against what
transformers' own Trainer feeds a model, and the fitted GPU terms against the seconds real runs took on a lent H200
(bench/results/gpu_efficiency.md, written by bench/gpu_efficiency.py on that machine)."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from engine.plan import counts as counts_mod
from engine.plan import estimate as est_mod
from tests.helpers import demo_spec

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("rows", "batch", "accum", "steps"),
    [(9, 4, 8, 5), (9, 4, 1, 7), (200, 3, 4, 20), (10, 4, 2, 3), (40, 4, 2, 12)],
)
def test_rows_and_passes_a_run_sees_are_the_trainers(demo_paths, tmp_path, rows, batch, accum, steps):
    """A dataset smaller than one step (9 rows at 4 x 8): transformers' Trainer gives each step the whole epoch, not
    4 x 8 rows. Counted here by the model's own forward calls under the real Trainer."""
    import torch
    from transformers import Trainer, TrainingArguments

    class Counter(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(1))
            self.rows = self.passes = 0

        def forward(self, x):
            if self.training:
                self.rows += len(x)
                self.passes += 1
            return {"loss": (self.w * x).sum()}

    model = Counter()
    args = TrainingArguments(
        output_dir=str(tmp_path), per_device_train_batch_size=batch, gradient_accumulation_steps=accum,
        max_steps=steps, use_cpu=True, report_to=[], save_strategy="no", logging_strategy="no", disable_tqdm=True,
    )  # fmt: skip
    data = [{"x": torch.tensor([float(i)])} for i in range(rows)]
    Trainer(model=model, args=args, train_dataset=data).train()
    spec = demo_spec(demo_paths, train={"max_steps": steps, "per_device_batch_size": batch,
                                        "gradient_accumulation": accum})  # fmt: skip
    assert counts_mod.seen(spec, rows, steps) == (model.rows, model.passes)


def _measured() -> tuple[dict, float]:
    """The H200 rows of bench/results/gpu_efficiency.md: {label: (short steps, long steps, short s, long s)} and the
    GRPO run's measured seconds."""
    text = (ROOT / "bench" / "results" / "gpu_efficiency.md").read_text(encoding="utf-8")
    assert "H200" in text.splitlines()[0]
    pairs = {
        m[1]: (int(m[2]), int(m[3]), float(m[4]), float(m[5]))
        for m in re.finditer(r"^\| ([^|]+?) \| (\d+) vs (\d+) \| ([\d.]+) \| ([\d.]+) \|", text, re.M)
    }
    grpo = re.search(r"^\| grpo [^|]+ \| [\d.]+ \| [\d.]+ \| ([\d.]+) \|", text, re.M)
    return pairs, float(grpo[1])


def test_gpu_terms_reproduce_the_h200_runs(demo_paths, tmp_path):
    """The estimate on the H200, for the bench's own specs (its models' config.json, the demo tokenizer, its data),
    against the seconds per step the real runs took (the long run less the short: warm-up and the end cancel) and
    the GRPO run's whole training loop. The constants were fitted on these runs: this pins them to the record."""
    sys.path.insert(0, str(ROOT / "bench"))
    import gpu_efficiency as bench
    import plan_calibration as cal

    pairs, grpo_seconds = _measured()
    assert set(pairs) == {label for label, *_ in bench.PAIRS.values()}
    models = {}
    for size, config in (("0.5b", cal.CONFIG), ("8b", bench.SHAPE_8B)):
        models[size] = tmp_path / size
        models[size].mkdir()
        (models[size] / "config.json").write_text(json.dumps(config))
        for f in [
            *Path(demo_paths["model_dir"]).glob("tokenizer*"),
            Path(demo_paths["model_dir"]) / "chat_template.jinja",
        ]:
            shutil.copy(f, models[size] / f.name)
    data = bench.bench_data(tmp_path, Path(demo_paths["data_dir"]))
    for label, size, method, (short, long) in bench.PAIRS.values():
        specs = {st: bench.spec_for(models[size], data, method, st) for st in (short, long)}
        counts = counts_mod.count(specs[short])
        assert counts.train_rows >= long * 4  # no step wraps an epoch
        est = {st: est_mod.estimate(s, gpu="NVIDIA H200", counts=counts).seconds for st, s in specs.items()}
        a, b, ms, ml = pairs[label]
        assert (a, b) == (short, long)
        per_step, measured = (est[long] - est[short]) / (long - short), (ml - ms) / (long - short)
        assert per_step == pytest.approx(measured, rel=0.05), label
    spec = bench.spec_for(models["0.5b"], demo_paths["data_dir"], bench.GRPO, bench.GRPO_STEPS, bench.GRPO_BATCH,
                          "grpo_arith")  # fmt: skip
    got = est_mod.estimate(spec, gpu="NVIDIA H200")
    assert got.seconds == pytest.approx(grpo_seconds, rel=0.1)
    assert got.generation_seconds > 0.8 * got.seconds  # a small model's GRPO waits on generate()
