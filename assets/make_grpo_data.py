"""Write the bundled arithmetic prompt sets for GRPO into assets/data/ (deterministic).

Run ``python assets/make_grpo_data.py [OUT_DIR]``; the output is committed. Stdlib only.

- ``grpo_arith.json``: the sum, difference or product of two small whole numbers (alpaca: ``instruction``,
  ``output`` the answer, checkable by hand); ``assets/examples/grpo_math.yaml`` and ``grpo_format.yaml`` train on it.
- ``grpo_add_format.json``: single-digit sums, the reply asked to start with "The answer is": a form a small real
  model (SmolLM2-135M-Instruct) writes some of the time, so a group's rewards differ and GRPO has a signal;
  ``assets/examples/grpo_smollm2_format.yaml`` trains on it.
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


def add_rows() -> list[dict]:
    out = []
    for i in range(64):
        a, b = 1 + (i * 7) % 9, 1 + (i * 4 + i // 9) % 9
        out.append({"instruction": f'What is {a} + {b}? Start your reply with "The answer is".', "output": str(a + b)})
    return out


def main(argv: list[str]) -> None:
    out = Path(argv[0]) if argv else OUT
    out.mkdir(parents=True, exist_ok=True)
    for name, made in (("grpo_arith.json", rows()), ("grpo_add_format.json", add_rows())):
        (out / name).write_text(json.dumps(made, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
