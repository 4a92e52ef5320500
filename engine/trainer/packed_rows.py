"""Packing: tokenised samples -> rows of at most the cutoff length, the rows a packed run trains on.

Heavy: datasets, numpy and pyarrow inside functions (the module itself stays importable cheaply). The numbers are
engine.data.packing's (light, shared with the Datasets tab: ``best_fit_bins`` for sft's rows, ``pt_blocks`` counts
pt's blocks as they are cut here); this module builds the rows.

Stage sft (``pack_rows``): several samples per row, best-fit decreasing; rows keep position_ids that restart per
sample and the first label of every sample is -100 (never predicted from the previous sample's last token);
engine.trainer.collators.PackingCollator batches them. Stage pt (``split_into_blocks``): texts cut into blocks of the
cutoff length, either each text on its own or, with data.packing, LLaMA-Factory's packing: texts concatenated and
cut into full blocks, attention spanning the texts of a block (EOS separates them).
"""

from __future__ import annotations

from engine.trainer.collators import IGNORE


def split_into_blocks(dataset, block: int, *, concatenate: bool):
    """Stage pt: tokenised texts -> rows of at most ``block`` tokens, labels equal to input_ids. Returns
    (dataset, tail tokens dropped).

    concatenate (data.packing on, LLaMA-Factory's pt packing): the texts, each ending with EOS, are joined end to
    end and cut into full blocks: floor(total / block) rows, attention spanning the texts within a row; the last
    total % block tokens (the tail) are dropped. Otherwise each text is cut on its own: a text of n tokens gives
    ceil(n / block) rows, the last one shorter (padded in its batch); no token is dropped and no row mixes texts.
    Works on the Arrow buffers batch by batch, never on Python lists, so a large corpus costs its token array only.
    """
    import numpy as np
    import pyarrow as pa
    from datasets import Dataset

    pieces: list = []
    carry = None
    value_type = dataset.features["input_ids"].feature.pa_type
    for batch in dataset.select_columns(["input_ids"]).with_format("arrow").iter(batch_size=8192):
        col = batch.column("input_ids").combine_chunks()
        values = col.flatten().to_numpy()
        if concatenate:
            values = values if carry is None else np.concatenate([carry, values])
            n = len(values) // block * block
            offsets = np.arange(0, n + 1, block)
            values, carry = values[:n], values[n:]
        else:
            bounds = col.offsets.to_numpy().astype(np.int64)
            bounds -= bounds[0]  # a batch may be a slice: its offsets need not start at 0
            lengths = np.diff(bounds)
            counts = -(-lengths // block)  # blocks per text
            first = np.repeat(np.cumsum(counts) - counts, counts)  # index of each block's text's first block
            offsets = np.append(
                np.repeat(bounds[:-1], counts) + block * (np.arange(counts.sum()) - first), len(values)
            )
        pieces.append(pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(values, value_type)))
    blocks = pa.chunked_array(pieces, type=pa.list_(value_type))
    return Dataset.from_dict({"input_ids": blocks, "labels": blocks}), int(len(carry)) if carry is not None else 0


def pack_rows(dataset, capacity: int):
    """Samples -> rows of at most ``capacity`` tokens (best-fit decreasing, deterministic). Each row holds
    input_ids, labels (first label of every sample -100) and position_ids restarting at every sample."""
    from datasets import Dataset

    from engine.data.packing import best_fit_bins

    ids_col, labels_col = dataset["input_ids"], dataset["labels"]
    bins = best_fit_bins([len(ids) for ids in ids_col], capacity)
    rows: dict[str, list] = {"input_ids": [], "labels": [], "position_ids": []}
    for members in bins:
        ids, labels, pos = [], [], []
        for i in members:
            ids += ids_col[i]
            labels += [IGNORE] + list(labels_col[i][1:])
            pos += range(len(ids_col[i]))
        rows["input_ids"].append(ids)
        rows["labels"].append(labels)
        rows["position_ids"].append(pos)
    return Dataset.from_dict(rows)
