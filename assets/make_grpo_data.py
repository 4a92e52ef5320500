"""Write the bundled arithmetic prompt set for GRPO into assets/data/grpo_arith.json (deterministic).

Run ``python assets/make_grpo_data.py [OUT_DIR]``; the output is committed. Stdlib only. Each row asks for the sum,
difference or product of two small whole numbers (alpaca: ``instruction``, ``output`` the answer, checkable by
hand); the examples ``assets/examples/grpo_math.yaml`` and ``grpo_format.yaml`` train on it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "data"
OPS = [("+", "plus", lambda a, b: a + b), ("-", "minus", lambda a, b: a - b), ("*", "times", lambda a, b: a * b)]


def rows() -> list[dict]:
    out = []
    for i in range(48):
        a, b = 2 + (i * 7) % 17, 1 + (i * 5) % 9
        sign, word, fn = OPS[i % 3]
        out.append({"instruction": f"What is {a} {sign} {b}? Answer with the number only.", "output": str(fn(a, b))})
    return out


def main(argv: list[str]) -> None:
    out = Path(argv[0]) if argv else OUT
    out.mkdir(parents=True, exist_ok=True)
    (out / "grpo_arith.json").write_text(json.dumps(rows(), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
