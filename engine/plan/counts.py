"""What a run will train on, counted before launch: the samples, their tokens after the template and the cutoff,
the rows the trainer gets (packing, pt blocks, the held-out split) and the number of optimizer steps.

Light: stdlib and engine's light modules. The tokens come from the same path the Datasets tab's length histogram
uses (``engine.data.masked_samples.piece_lengths``: the template's pieces, each tokenised on its own with the model's
``tokenizer.json`` through the ``tokenizers`` library, as engine.trainer.dataset encodes them), then the trainer's
rules in numbers: truncation at ``data.cutoff_len`` (sft: LLaMA-Factory's, engine.data.cutoff), samples with nothing
left to train dropped, stage pt cut into blocks (``engine.data.packing.pt_blocks``), sft packing by the trainer's own
best-fit (``engine.data.packing.best_fit_bins``) and the Trainer's step count. Counts of a dataset are cached per
file state, so the plan panel recounts only when the data, the tokenizer or the rendering changes.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from engine.data.packing import best_fit_bins, pt_blocks
from engine.plan.messages import message

PREFERENCE = ("dpo", "kto", "rm")
MAX_COUNTED_ROWS = 20_000  # rows tokenised per dataset at most; a larger one is counted on an even sample and scaled
_CACHE: dict[tuple, list] = {}
_CACHE_SIZE = 16


@dataclass
class DataCounts:
    samples: int  # training samples after the template, cutoff and dropping (before packing / blocks)
    tokens: int  # their tokens after the template and the cutoff, one epoch
    trained_tokens: int  # of which carry a label (the answer, or everything with train_on_prompt / pt)
    train_rows: int  # rows the Trainer iterates per epoch (packed rows, pt blocks, samples otherwise)
    eval_rows: int
    row_tokens: list[int] = field(default_factory=list, repr=False)  # tokens of each training row (one epoch)
    truncated: int = 0
    dropped: int = 0
    exact: bool = True  # False: counted on a sample of the rows, or a mix / split approximated
    notes: list = field(default_factory=list)

    def to_dict(self) -> dict:
        out = asdict(self)
        out.pop("row_tokens")
        return out


def tokenizer_dir(spec) -> Path | None:
    """The model folder holding ``tokenizer.json`` (a local model), else None."""
    from engine.models.resolve import looks_local, model_path

    try:
        folder = model_path(spec.model.name_or_path)
    except (OSError, ValueError):
        return None
    if getattr(spec.model, "hub", "huggingface") == "modelscope" and not looks_local(spec.model.name_or_path):
        from engine.models import ms_models  # a ModelScope id: its snapshot in ModelScope's cache, when there

        folder = ms_models.cached_folder(spec.model.name_or_path, spec.model.revision) or folder
    return folder if (folder / "tokenizer.json").is_file() else None


def _sample_lengths(spec, name: str, ddir: Path, tok: Path | None) -> tuple[list[list[tuple[int, bool]]], bool]:
    """(per sample: (tokens, trained) of each piece, exact) of one dataset, as the trainer's _mixed reads it.
    ``tok`` None: the tokens estimated from the characters (``engine.data.masked_samples.approx_tokens``)."""
    from engine.data import dataset_registry as registry
    from engine.data.masked_samples import approx_tokens, piece_lengths
    from engine.data.templates import assistant_text, prompt_text, tokenizer_info

    d, stage = spec.data, spec.method.stage
    entry, _ = registry._resolve(name, ddir)
    stamp: tuple = ()
    if entry is not None:
        path, _files, _problem = registry._where(entry, ddir)
        toks = (tok / "tokenizer.json", tok / "tokenizer_config.json") if tok is not None else ()
        for p in (ddir / "dataset_info.json", path, *toks):
            try:
                st = Path(p).stat()
                stamp += (str(p), st.st_mtime_ns, st.st_size)
            except (OSError, TypeError):
                stamp += (str(p),)
    rendering = (d.template, stage, d.enable_thinking, d.tool_format, d.mask_history, d.max_samples, spec.train.seed)
    key = (name, str(ddir), str(tok), stamp, rendering)
    if stamp and key in _CACHE:
        return _CACHE[key]
    rows = registry.load_rows(name, ddir, stage)
    if entry is not None and entry.num_samples:
        rows = registry.sample_rows(rows, entry.num_samples, spec.train.seed)
    rows = rows[: d.max_samples or None]
    if stage == "kto":
        rows = [r for r in rows if r.get("kto_tag") is not None]
    exact = len(rows) <= MAX_COUNTED_ROWS
    picked = rows if exact else rows[:: math.ceil(len(rows) / MAX_COUNTED_ROWS)]
    spec_like = spec if stage not in PREFERENCE else d.template
    pieces = piece_lengths(spec_like, str(tok) if tok is not None else None, picked, stage)
    if stage in ("dpo", "rm"):  # the trainer sees prompt + chosen and prompt + rejected
        if tok is None:
            info, n_tokens = tokenizer_info(None), approx_tokens
        else:
            from tokenizers import Tokenizer

            raw = Tokenizer.from_file(str(tok / "tokenizer.json"))
            info = tokenizer_info(str(tok))

            def n_tokens(text: str) -> int:
                return len(raw.encode(text, add_special_tokens=False).ids)

        tool = None if d.tool_format == "template" else d.tool_format
        for row, got in zip(picked, pieces):
            prompt = prompt_text(d.template, info, row.get("system", ""), row["messages"], row.get("tools"), tool)
            rejected = assistant_text(d.template, info, row.get("rejected", ""))
            got += [(n_tokens(t), tr) for t, tr in ((prompt, False), (rejected, True)) if t]
    if not exact:  # scale the sample up to the dataset's size
        pieces = [pieces[i % len(pieces)] for i in range(len(rows))] if pieces else []
    out = (pieces, exact)
    if stamp:
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = out
    return out


def _cut(spec, pieces: list[tuple[int, bool]]) -> tuple[int, int, bool]:
    """(tokens kept, trained tokens kept, truncated) of one sample at the cutoff, as _encode_batch cuts it: sft by
    LLaMA-Factory's rule (engine.data.cutoff) on its (prompt, answer) pieces, the preference stages keeping the
    start (the end with ``mask_history``)."""
    from engine.data.cutoff import kept_counts
    from engine.data.template_table import NAMED

    d = spec.data
    total = sum(n for n, _ in pieces)
    if spec.method.stage == "pt":
        return total, total, False
    if spec.method.stage == "sft":
        turns = [(pieces[i][0], pieces[i + 1][0]) for i in range(0, len(pieces) - 1, 2)]
        efficient = d.template in NAMED and NAMED[d.template].efficient_eos
        if efficient and turns:  # the final EOS, which the cut adds back after the last turn
            turns[-1] = (turns[-1][0], max(0, turns[-1][1] - 1))
        return kept_counts(
            turns,
            d.cutoff_len,
            mask_history=d.mask_history,
            efficient_eos=efficient,
            train_on_prompt=d.train_on_prompt,
        )
    keep = min(total, d.cutoff_len)
    start = total - keep if d.mask_history else 0
    trained, pos = 0, 0
    for n, tr in pieces:
        lo, hi = max(pos, start), min(pos + n, start + keep)
        if tr and hi > lo:
            trained += hi - lo
        pos += n
    return keep, trained, total > keep


def count(spec) -> DataCounts | None:
    """The run's data in numbers. When the model's tokenizer is not a local file (a hub model not downloaded yet),
    the tokens are estimated from the characters (not exact, said in a note); None, with no error, when even that
    cannot be done (template ``auto`` needs the model's own chat template)."""
    from engine.data.templates import TemplateError
    from engine.spec.rules import resolve_dataset_dir

    tok = tokenizer_dir(spec)
    if tok is None and spec.data.template == "auto":
        return None
    try:
        return _count(spec, tok, resolve_dataset_dir(spec))
    except TemplateError:
        if tok is None:
            return None
        raise


def _count(spec, tok: Path | None, ddir: Path) -> DataCounts:
    d, stage = spec.data, spec.method.stage
    exact = tok is not None
    parts: list[list[tuple[int, int]]] = []
    truncated = dropped = 0
    notes: list = [] if tok is not None else [message("estimate.approx_tokens", path=spec.model.name_or_path)]
    for name in d.datasets:
        pieces, whole = _sample_lengths(spec, name, ddir, tok)
        exact &= whole
        kept = []
        for p in pieces:
            n, trained, cut = _cut(spec, p)
            truncated += cut
            if stage not in PREFERENCE and trained == 0:
                dropped += 1
                continue
            kept.append((n, trained))
        parts.append(kept)
    if len(parts) > 1 and d.mix != "concat":
        # interleave: datasets.interleave_datasets stops at the first (under) or last (over) exhausted dataset
        exact = False
        if not d.mix_probs:
            n = (min if d.mix == "interleave_under" else max)(len(p) for p in parts)
            parts = [[p[i % len(p)] for i in range(n)] if p else [] for p in parts]
    samples = [s for p in parts for s in p]
    n_eval = 0
    eval_rows = 0
    if d.eval_datasets:
        for name in d.eval_datasets:
            pieces, _ = _sample_lengths(spec, name, ddir, tok)
            eval_rows += len(pieces)
    elif d.val_size > 0 and samples:
        n_eval = int(d.val_size) if d.val_size >= 1 else math.ceil(len(samples) * d.val_size)
        n_eval = min(n_eval, len(samples) - 1)
        if n_eval:
            exact = False  # the split is random: the held-out rows' share is taken evenly
            notes.append(message("estimate.split", held=n_eval))
    keep = len(samples) - n_eval
    share = keep / len(samples) if samples else 0.0
    tokens = round(sum(n for n, _ in samples) * share)
    trained = round(sum(t for _, t in samples) * share)
    lengths = [n for n, _ in samples]
    if stage == "pt":
        cut = pt_blocks(lengths, d.cutoff_len, d.packing)
        rows_n = round(cut["blocks"] * share)
        tokens = round((cut["tokens"] - cut["tail"]) * share)
        trained = tokens
        full, last = divmod(tokens, d.cutoff_len)
        row_tokens = [d.cutoff_len] * full + ([last] if last else [])
        if not d.packing:
            row_tokens = [min(d.cutoff_len, n - i) for n in lengths for i in range(0, n, d.cutoff_len)]
            row_tokens = row_tokens[: rows_n or None]
        eval_rows += round(cut["blocks"] * (1 - share))
    elif d.packing and stage == "sft":
        bins = best_fit_bins(lengths, d.cutoff_len)
        row_tokens = [sum(lengths[i] for i in b) for b in bins]
        rows_n = round(len(bins) * share)
        row_tokens = row_tokens[: rows_n or None]
        eval_rows += len(bins) - rows_n
    else:
        rows_n = keep
        row_tokens = lengths[:keep] if n_eval else lengths
        eval_rows += n_eval
    return DataCounts(
        samples=keep,
        tokens=int(tokens),
        trained_tokens=int(trained),
        train_rows=int(rows_n),
        eval_rows=int(eval_rows),
        row_tokens=row_tokens,
        truncated=truncated,
        dropped=dropped,
        exact=exact,
        notes=notes,
    )


def _epoch(spec, train_rows: int) -> tuple[int, int, int]:
    """(rows per process, micro-batches per process, optimizer steps) of one epoch, as transformers' Trainer counts
    them: the sampler gives each process ceil(rows / processes) rows, in ceil(rows / per-device batch) micro-batches,
    grouped by the accumulation; an epoch's last group may be short but is a step of its own (at least one)."""
    t = spec.train
    per_rank = -(-train_rows // max(1, spec.world_size))
    batches = -(-per_rank // t.per_device_batch_size)
    return per_rank, batches, max(-(-batches // t.gradient_accumulation), 1)


def optimizer_steps(spec, train_rows: int) -> int:
    """Optimizer steps as transformers' Trainer counts them: train.max_steps when set; else the epoch's steps
    (``_epoch``) times the epochs, rounded up."""
    t = spec.train
    if t.max_steps > 0:
        return t.max_steps
    return math.ceil(t.num_epochs * _epoch(spec, train_rows)[2])


def seen(spec, train_rows: int, steps: int) -> tuple[int, int]:
    """(rows, micro-batches) one process trains on in ``steps`` optimizer steps. A step takes per-device batch x
    accumulation rows, except that a step never spans two epochs: a dataset smaller than one step gives each step
    the whole epoch (the demo's 9 packed rows at 4 x 8: 9 rows a step, not 32)."""
    per_rank, batches, per_epoch = _epoch(spec, train_rows)
    t = spec.train
    full, rest = divmod(steps, per_epoch)
    rows = full * per_rank + min(rest * t.gradient_accumulation * t.per_device_batch_size, per_rank)
    return rows, full * batches + min(rest * t.gradient_accumulation, batches)
