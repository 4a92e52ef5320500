"""The collators: a run's tokenised rows -> the batches the model sees (sft and pt; TRL's dpo, kto and rm trainers
batch their own rows).

Heavy: torch inside the collators' calls (the module itself stays importable cheaply). ``engine.trainer.dataset``
picks one for the run's data: padded (``PadCollator``), padding-free (``FlatteningCollator``) or packed
(``PackingCollator``); ``engine.trainer.train`` wraps it in ``TrainedLogitsCollator`` when the run computes
logits only at trained positions.

Padding-free batches (``data.padding_free``, on by default for sft and pt without packing) join each batch's
samples into one row with per-sample position_ids: the same samples per step and the same loss as padded batches,
with no compute on pad tokens.

Packed rows (sft, from ``engine.trainer.packed_rows.pack_rows``) are stacked without an attention mask; transformers
builds a block-diagonal mask per row from the position_ids for sdpa/flash attention, so no token attends across
samples (tests/engine/test_data.py proves equal per-sample logits and loss).
"""

from __future__ import annotations

from engine.data.rows import PREFERENCE_STAGES

IGNORE = -100  # the label of a position the loss skips


class PadCollator:
    """Pads input_ids (pad id), labels (-100) and builds attention_mask, to the longest sample of the batch."""

    def __init__(self, pad_id: int, pad_to_multiple_of: int | None = None):
        self.pad_id, self.multiple = pad_id, pad_to_multiple_of

    def __call__(self, features: list[dict]) -> dict:
        import torch

        width = max(len(f["input_ids"]) for f in features)
        if self.multiple:
            width = -(-width // self.multiple) * self.multiple
        ids = torch.full((len(features), width), self.pad_id, dtype=torch.long)
        labels = torch.full((len(features), width), IGNORE, dtype=torch.long)
        mask = torch.zeros((len(features), width), dtype=torch.long)
        for i, f in enumerate(features):
            n = len(f["input_ids"])
            ids[i, :n] = torch.tensor(f["input_ids"])
            labels[i, :n] = torch.tensor(f["labels"])
            mask[i, :n] = 1
        return {"input_ids": ids, "labels": labels, "attention_mask": mask}


class PackingCollator:
    """Batches of packed rows: one batch row per packed row, position_ids restarting per sample, no attention mask.

    Rows from ``pack_rows`` carry their own position_ids and boundary labels; a plain sample gets them here. Rows
    are not joined into one long sequence: attention costs the square of a row's length, so B rows of L tokens
    cost B*L^2, not (B*L)^2. A shorter row is topped up with pad tokens forming a block of their own (labels -100,
    position_ids from 0), so no real token attends to them. There is no attention_mask: transformers derives the
    block-diagonal mask of every row from position_ids. It does so only without a KV cache; a Llama forward creates
    one whenever use_cache is on (the config default), and then samples silently attend across each other. So
    every batch carries ``use_cache=False`` into the model's forward.
    """

    def __init__(self, pad_id: int = 0):
        self.pad_id = pad_id

    def __call__(self, features: list[dict]) -> dict:
        import torch

        width = max(len(f["input_ids"]) for f in features)
        ids = torch.full((len(features), width), self.pad_id, dtype=torch.long)
        labels = torch.full((len(features), width), IGNORE, dtype=torch.long)
        pos = torch.zeros((len(features), width), dtype=torch.long)
        for i, f in enumerate(features):
            n = len(f["input_ids"])
            ids[i, :n] = torch.tensor(f["input_ids"])
            if "position_ids" in f:
                labels[i, :n] = torch.tensor(f["labels"])
                pos[i, :n] = torch.tensor(f["position_ids"])
            else:
                labels[i, 1:n] = torch.tensor(f["labels"][1:])
                pos[i, :n] = torch.arange(n)
            pos[i, n:] = torch.arange(width - n)
        return {"input_ids": ids, "labels": labels, "position_ids": pos, "use_cache": False}


def packing_collator(pad_id: int = 0) -> PackingCollator:
    return PackingCollator(pad_id)


def padding_free(spec) -> bool:
    """Whether this run's batches are padding-free (``data.padding_free``; auto: sft and pt without packing; dpo only
    on flash_attention_2, through TRL, not this collator; never kto or rm)."""
    d = spec.data
    if spec.method.stage in PREFERENCE_STAGES or d.packing:
        return False
    return d.padding_free in ("auto", "on")


class FlatteningCollator:
    """Padding-free batches (what transformers' DataCollatorWithFlattening does): the batch's samples joined into one
    row, position_ids restarting at every sample, the first label of every sample -100, no attention mask and no pad
    token. transformers builds the block-diagonal mask from the position_ids (sdpa / eager: masking_utils'
    packed-sequence detection; flash_attention_2: variable-length kernels), so no token attends across samples and
    each step sees the same samples and the same loss as a padded batch (tests/engine/test_train.py checks 20 steps
    agree) without computing on pad tokens. ``use_cache=False`` for the reason PackingCollator gives."""

    def __call__(self, features: list[dict]) -> dict:
        import torch

        ids: list[int] = []
        labels: list[int] = []
        pos: list[int] = []
        for f in features:
            n = len(f["input_ids"])
            ids += list(f["input_ids"])
            labels += [IGNORE] + list(f["labels"][1:n])
            pos += range(n)
        return {
            "input_ids": torch.tensor([ids], dtype=torch.long),
            "labels": torch.tensor([labels], dtype=torch.long),
            "position_ids": torch.tensor([pos], dtype=torch.long),
            "use_cache": False,
        }


class TrainedLogitsCollator:
    """Wraps an sft collator so the model computes logits only where the loss is taken: ``logits_to_keep`` holds,
    per row, the positions whose next token is trained (transformers gathers the hidden states at them before the
    output layer, [rows, K, hidden]) and ``shift_labels`` those targets, which the causal-LM loss uses as they are.
    A row with fewer trained positions than the most of the batch repeats position 0 with the target -100, which
    the loss skips. The loss is the same sum over the same targets divided by the same count (the Trainer counts
    ``shift_labels`` for num_items_in_batch), but prompt and pad positions cost neither the output projection nor
    the softmax: on a 128k vocabulary that is the largest activation of the step. The positions are found here, on
    the host: a boolean mask handed to the model was indexed on the device, whose nonzero waits for every kernel
    queued before it, once a step (bench/step_overhead.py)."""

    def __init__(self, inner):
        self.inner = inner

    def __call__(self, features: list[dict]) -> dict:
        import torch

        batch = self.inner(features)
        labels = batch["labels"]
        shifted = torch.cat([labels[:, 1:], torch.full_like(labels[:, :1], IGNORE)], dim=1)
        rows = [torch.nonzero(row != IGNORE).flatten() for row in shifted]
        width = max(1, max(len(r) for r in rows))
        positions = torch.zeros((len(rows), width), dtype=torch.long)
        targets = torch.full((len(rows), width), IGNORE, dtype=torch.long)
        for i, row in enumerate(rows):
            positions[i, : len(row)] = row
            targets[i, : len(row)] = shifted[i, row]
        batch["logits_to_keep"] = positions
        batch["shift_labels"] = targets
        return batch


def trained_logits_supported(model) -> tuple[bool, str]:
    """Whether the model's forward slices its hidden states with a boolean ``logits_to_keep`` before the output layer
    (transformers' slice_logits_to_keep: nearly every causal LM of transformers 5; not remote code written for older
    versions). Looks through a PEFT wrapper."""
    import sys

    base = model
    for attr in ("get_base_model",):
        if hasattr(base, attr):
            base = getattr(base, attr)()
    module = sys.modules.get(type(base).__module__)
    if module is None or "slice_logits_to_keep" not in vars(module):
        return False, f"{type(base).__name__}'s forward does not take a position mask in logits_to_keep"
    return True, "logits only at trained positions"
