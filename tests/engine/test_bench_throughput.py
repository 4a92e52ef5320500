"""bench/throughput.py works end to end (--quick: engine and plain script, packing off and on, one repeat each)
and prints its table. Not a timed assertion: the figures live in bench/results/throughput.md."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.helpers import run_bench_quick

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import throughput  # noqa: E402 - bench/ is not a package


def test_rate_skips_warmup_and_measures_the_window():
    points = [(1, 100.0, 50), (2, 101.0, 150), (3, 102.0, 250), (4, 104.0, 450)]
    tok_s, tokens, seconds = throughput.rate(points, warmup=2)
    assert (tokens, seconds) == (300, 3.0) and tok_s == 100.0
    with pytest.raises(RuntimeError, match="too few logged steps"):
        throughput.rate(points[:1], warmup=2)


def test_loss_check_compares_the_same_samples_step_by_step():
    engine = throughput.per_step([(2, 101.0, 30, 1.5), (1, 100.0, 10, 2.0)])
    assert engine == {1: (10, 2.0), 2: (20, 1.5)}
    plain = throughput.per_step([(1, 100.0, 10, 2.00002), (2, 101.0, 30, 1.49995)])
    check = throughput.loss_check(engine, plain)
    assert check["same_tokens"] and check["last"] == (1.5, 1.49995)
    assert check["last_diff"] == pytest.approx(5e-5) and check["max_diff"] == pytest.approx(5e-5)
    other = throughput.per_step([(1, 100.0, 11, 2.0), (2, 101.0, 30, 1.5)])  # another sample at step 1
    assert not throughput.loss_check(engine, other)["same_tokens"]
    assert not throughput.loss_check(engine, {1: plain[1]})["same_tokens"]  # a step missing on one side


def test_write_section_replaces_only_that_model(tmp_path):
    out = tmp_path / "t.md"
    throughput.write_section(out, "demo", "## model: demo (~1M params)\n\nold demo\n")
    throughput.write_section(out, "llama-h512-l8", "## model: llama-h512-l8 (~20M params)\n\nbig\n")
    throughput.write_section(out, "demo", "## model: demo (~1M params)\n\nnew demo\n")
    text = out.read_text()
    assert "new demo" in text and "old demo" not in text and "big" in text
    assert text.index("new demo") < text.index("big")


@pytest.mark.slow
def test_quick_run_prints_the_table(studio_home, tmp_path):
    out = tmp_path / "results.md"
    proc = run_bench_quick("throughput.py", out)
    for mode in ("packing off", "packing on"):
        block = proc.stdout.split(f"### {mode}", 1)[1]
        row = re.search(r"^\| 1 \| ([\d,]+) \| ([\d,]+) \|", block, re.MULTILINE)
        assert row and all(int(x.replace(",", "")) > 0 for x in row.groups()), block[:800]
        assert re.search(r"ratio engine/plain \(medians\): \*\*\d+\.\d\dx\*\*", block)
    assert "non-padding" in proc.stdout
    assert not out.exists()  # --quick never overwrites the committed results
