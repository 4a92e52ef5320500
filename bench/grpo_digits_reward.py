"""A user's reward file for bench/grpo_throughput.py's Studio side (``kind: python``): the share of a completion's
characters that are digits. A graded reward: the demo model's first completions almost never earn the example's
math or number-only rewards (all zero, so every advantage is zero and nothing trains), but they differ in how many
digits they hold, so this one gives the run a gradient and the reward comparison something to compare.
bench/plain_grpo.py writes the same function itself."""


def digits(prompts, completions, **kwargs):
    return [sum(ch.isdigit() for ch in c) / max(1, len(c)) for c in completions]
