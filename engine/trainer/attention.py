"""sdpa attention over rows that hold several samples (padding-free and packed batches), one sample at a time.

Heavy: torch and transformers (trainer subprocess only).

A padding-free row joins a batch's samples; a packed row holds several samples up to the cutoff. transformers
keeps them apart with a block-diagonal mask built from the position_ids (masking_utils' packed-sequence
detection), and sdpa then computes the whole row's attention, row length squared, and masks most of it away.
``per_sample_sdpa`` runs sdpa on each sample's own span instead, with sdpa's causal flag: the same numbers (every
query attends to the same keys: tests/engine/test_attention.py compares logits and gradients with the masked
path), no mask to build, and the attention work of the samples alone (the sum of their squared lengths). It is
what flash_attention_2's variable-length kernels do on a GPU. Samples are found the way transformers finds them:
a new sample starts wherever a position id is not the previous one plus one.

It is registered under ``NAME`` in transformers' attention registry (and the mask registry, so a batch with a
real padding mask still gets its mask and goes to plain sdpa). engine.machine.kernels.packed_attention_decision
chooses it: ``model.packed_attention`` (auto: per sample on the CPU, where bench/lf_defaults.py and
bench/packed_attention.py measured it; the mask on GPUs until bench/gpu_check.sh measures per-sample speed there,
with its row x row bias per layer counted by the plan), only for sdpa,
for rows that hold several samples, and for the architectures whose attention is plain causal attention (no sliding
window, no soft-capping, no sinks); the spec's rules refuse an explicit per_sample elsewhere before launch.
"""

from __future__ import annotations

NAME = "studio_sdpa_per_sample"
SPANS = "studio_sample_spans"  # the batch's key (and the attention's keyword) of the spans found on the host

_last: list = [None, None]  # (position_ids tensor, its rows' spans): every layer of one forward reuses them


def register() -> None:
    """Make ``NAME`` a valid attn_implementation (idempotent)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    if NAME not in ALL_MASK_ATTENTION_FUNCTIONS._global_mapping:
        AttentionInterface.register(NAME, per_sample_sdpa)
        AttentionMaskInterface.register(NAME, per_sample_mask)


def per_sample_mask(*args, **kwargs):
    """No mask where the attention finds the samples itself (no padding mask, no cache offset); transformers' sdpa
    mask otherwise, so a padded batch keeps its padding mask."""
    from transformers.masking_utils import sdpa_mask

    if (
        kwargs.get("attention_mask") is None
        and kwargs.get("q_length") == kwargs.get("kv_length")
        and not kwargs.get("q_offset")
        and not kwargs.get("kv_offset")
    ):
        return None
    return sdpa_mask(*args, **kwargs)


def host_spans(position_ids) -> tuple[tuple[tuple[int, int], ...], ...]:
    """Each row's samples as (start, end), from position ids on the host: a sample starts where a position id is not
    the previous one plus one (transformers' find_packed_sequence_indices)."""
    import torch

    starts = torch.ones_like(position_ids, dtype=torch.bool)
    starts[:, 1:] = position_ids[:, 1:] - position_ids[:, :-1] != 1
    width = position_ids.shape[1]
    out = []
    for row in starts.tolist():
        first = [i for i, s in enumerate(row) if s]
        out.append(tuple(zip(first, first[1:] + [width])))
    return tuple(out)


def spans(position_ids, batch: int) -> tuple[tuple[tuple[int, int], ...], ...]:
    """The ``batch`` rows' spans of a forward whose batch did not bring them (``SampleSpansCollator``): read from the
    device's position ids once per forward, not once per layer."""
    key = position_ids
    if _last[0] is key:
        return _last[1]
    if position_ids.shape[0] != batch:  # position ids are sometimes unsqueezed, not expanded
        position_ids = position_ids.expand(batch, -1)
    out = host_spans(position_ids.cpu())
    _last[0], _last[1] = key, out
    return out


class SampleSpansCollator:
    """Wraps a padding-free or packing collator: each batch also carries its rows' spans (``SPANS``), found on the
    host from the batch's position ids, which the model's forward hands to every attention layer as a keyword. The
    attention read them from the device's position ids otherwise, once a forward: on a GPU a wait for every kernel
    queued before it (bench/step_overhead.py). A batch with a padding mask goes to plain sdpa and gets none."""

    def __init__(self, inner):
        self.inner = inner

    def __call__(self, features: list[dict]) -> dict:
        batch = self.inner(features)
        if "position_ids" in batch and batch.get("attention_mask") is None:
            batch[SPANS] = host_spans(batch["position_ids"])
        return batch


def per_sample_sdpa(
    module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None, is_causal=None, **kwargs
):
    """Causal sdpa over each sample's span of each row; plain sdpa when there is a mask, a cache or no positions."""
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    for key_name in ("sliding_window", "softcap", "s_aux"):
        if kwargs.get(key_name) is not None:
            raise RuntimeError(f"{NAME}: {key_name} attention is not per-sample causal attention")
    position_ids = kwargs.get("position_ids")
    if attention_mask is not None or position_ids is None or query.shape[2] != key.shape[2] or query.shape[2] < 2:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, is_causal=is_causal, **kwargs
        )
    extra = {"enable_gqa": True} if getattr(module, "num_key_value_groups", 1) > 1 else {}
    given = kwargs.get(SPANS)
    rows = []
    for b, row in enumerate(given if given is not None else spans(position_ids, query.shape[0])):
        q, k, v = query[b : b + 1], key[b : b + 1], value[b : b + 1]
        parts = [
            torch.nn.functional.scaled_dot_product_attention(
                q[:, :, s:e], k[:, :, s:e], v[:, :, s:e], dropout_p=dropout, scale=scaling, is_causal=True, **extra
            )
            for s, e in row
        ]
        rows.append(parts[0] if len(parts) == 1 else torch.cat(parts, dim=2))
    out = rows[0] if len(rows) == 1 else torch.cat(rows, dim=0)
    return out.transpose(1, 2).contiguous(), None
