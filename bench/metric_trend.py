"""A run's metric over its logged steps, first quarter against last: what bench/results/real_model_examples.md
records for the real-model GRPO and DPO examples (the mean reward, TRL's rewards/margins).

    .venv/bin/python bench/metric_trend.py RUN_DIR METRIC [METRIC ...]

Reads RUN_DIR/events.jsonl (``log`` events; TRL's figures are in their ``metrics``, the Trainer's own at the top of
the payload) and prints one markdown row per metric: logged steps, first-quarter mean, last-quarter mean, the
difference, the run's elapsed training seconds at its last log. Light: the stdlib and engine.core.events only.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.core.events import read_all  # noqa: E402


def series(events: list[dict], metric: str) -> list[tuple[int, float]]:
    """(step, value) of every log event that has the metric, in step order."""
    out = []
    for e in events:
        if e.get("type") != "log":
            continue
        payload = e.get("payload") or {}
        value = (payload.get("metrics") or {}).get(metric, payload.get(metric))
        if isinstance(value, (int, float)):
            out.append((int(e.get("step") or 0), float(value)))
    return sorted(out)


def quarters(values: list[float]) -> tuple[float, float]:
    """Mean of the first and of the last quarter of the values (at least one value each)."""
    q = max(1, len(values) // 4)
    return sum(values[:q]) / q, sum(values[-q:]) / q


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("metrics", nargs="+")
    args = parser.parse_args(argv)
    events = read_all(args.run_dir / "events.jsonl")
    logs = [e for e in events if e.get("type") == "log"]
    elapsed = (logs[-1].get("payload") or {}).get("elapsed_seconds") if logs else None
    print("| metric | logged steps | first quarter mean | last quarter mean | change | elapsed s |")
    print("|---|---|---|---|---|---|")
    for metric in args.metrics:
        points = series(events, metric)
        if not points:
            print(f"| {metric} | 0 | - | - | - | - |")
            continue
        first, last = quarters([v for _, v in points])
        print(f"| {metric} | {len(points)} | {first:.3f} | {last:.3f} | {last - first:+.3f} | {elapsed} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
