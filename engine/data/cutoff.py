"""LLaMA-Factory's cut of a supervised sample at ``data.cutoff_len``, on token counts: the one rule the trainer's
encoder (engine.trainer.dataset) and the plan's counts (engine.plan.counts) apply.

Light: stdlib only. A sample is its turns, each a (prompt tokens, answer tokens) pair. As LF 0.9.5's supervised
processor does (``SupervisedDatasetProcessor._encode_data_example``): the turns are taken in order (``mask_history``:
the last first, so the answer that is trained keeps its place), each gets what is left of the cutoff, split between
its prompt and its answer by ``infer_seqlen``, and each keeps its start; a turn that finds nothing left is left out.
An efficient-EOS template (glm4, gemma2, fewshot) reserves one token for the EOS written after the last turn.
"""

from __future__ import annotations


def infer_seqlen(source_len: int, target_len: int, cutoff_len: int) -> tuple[int, int]:
    """(prompt tokens kept, answer tokens kept) of one turn given ``cutoff_len`` tokens: LF's ``infer_seqlen``. A short
    answer (under half) is kept whole and the prompt cut; else a short prompt is kept whole and the answer cut; else
    both are cut in proportion to their lengths."""
    if target_len * 2 < cutoff_len:
        max_target = cutoff_len
    elif source_len * 2 < cutoff_len:
        max_target = cutoff_len - source_len
    else:
        max_target = int(cutoff_len * (target_len / (source_len + target_len)))
    new_target = min(max_target, target_len)
    new_source = min(max(cutoff_len - new_target, 0), source_len)
    return new_source, new_target


def cut_turns(
    turns: list[tuple[int, int]], cutoff_len: int, *, mask_history: bool = False, efficient_eos: bool = False
) -> list[tuple[int, int, int]]:
    """The turns a sample keeps, in LF's processing order (``mask_history``: last turn first): (turn index, prompt
    tokens kept, answer tokens kept). The position in this list is LF's ``turn_idx``, which decides the labels (only
    turn_idx 0 is trained under ``mask_history``; an efficient-EOS template labels the EOS at the start of every
    other kept prompt)."""
    order = range(len(turns) - 1, -1, -1) if mask_history else range(len(turns))
    total = 1 if efficient_eos else 0
    kept: list[tuple[int, int, int]] = []
    for i in order:
        if total >= cutoff_len:
            break
        source, target = infer_seqlen(turns[i][0], turns[i][1], cutoff_len - total)
        total += source + target
        kept.append((i, source, target))
    return kept


def kept_counts(
    turns: list[tuple[int, int]],
    cutoff_len: int,
    *,
    mask_history: bool = False,
    efficient_eos: bool = False,
    train_on_prompt: bool = False,
) -> tuple[int, int, bool]:
    """(tokens kept, trained tokens kept, truncated) of a sample whose turns are (prompt, answer) token counts, with
    the labels LF gives them. With ``efficient_eos`` the counts leave out the final EOS, which is added (and
    trained) here."""
    eos = 1 if efficient_eos else 0
    tokens, trained = eos, eos
    for k, (_, source, target) in enumerate(
        cut_turns(turns, cutoff_len, mask_history=mask_history, efficient_eos=efficient_eos)
    ):
        tokens += source + target
        if train_on_prompt:
            trained += source
        elif efficient_eos and k != 0 and source:
            trained += 1  # the EOS that ends the answer before, taught at this prompt's first token
        if not (mask_history and k != 0):
            trained += target
    return tokens, trained, tokens < sum(s + t for s, t in turns) + eos
