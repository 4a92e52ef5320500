"""Training data for a run: registry check, template rendering, tokenisation with label masks, mixing, splits, cache.

Heavy: imports datasets/torch/transformers inside functions (the module itself stays importable cheaply). The
registry check (engine.data.dataset_registry) runs first and raises DataError before any model is loaded; rendering
is engine.data.templates, the same code the page's masked-sample preview uses.

Stages: sft (prompt tokens -100 unless spec.data.train_on_prompt; every assistant turn trained; tokenised and cut
at the cutoff as LLaMA-Factory does, see ``_encode_batch``; truncated samples are counted), pt (all tokens
trained; conversation rows become their joined text, each text ends with EOS; texts are cut into blocks of the
cutoff length instead of truncated, see ``engine.trainer.packed_rows.split_into_blocks``), dpo and rm (string
prompt/chosen/rejected columns for TRL's DPOTrainer / RewardTrainer, which tokenise them themselves; collator None),
kto (string prompt/completion columns and a boolean label for TRL's KTOTrainer; rows without a kto tag are left out
and counted, as LLaMA-Factory drops them).

The batches: padded, padding-free (``data.padding_free``, on by default for sft and pt without packing) or packed
(sft with ``data.packing``: several samples per row, up to the cutoff length,
``engine.trainer.packed_rows.pack_rows``), each with its collator from engine.trainer.collators, chosen here.

With spec.data.group_by_length, train and eval rows carry a ``length`` column, which the Trainer's length-grouped
sampler reads instead of measuring every row at start-up.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.data.cutoff import cut_turns
from engine.data.dataset_registry import check_datasets, load_rows, sample_rows
from engine.data.messages import message as data_message
from engine.data.rows import PREFERENCE_STAGES, DataError
from engine.data.templates import (
    Template,
    assistant_text,
    conversation_pieces,
    pretrain_text,
    prompt_text,
    resolve,
    template_warning,
    tokenizer_info,
)
from engine.trainer.collators import IGNORE, FlatteningCollator, PadCollator, packing_collator, padding_free
from engine.trainer.packed_rows import pack_rows, split_into_blocks

CACHE_VERSION = 4  # bump when tokenisation changes, so old caches are not reused


@dataclass
class TrainData:
    train_dataset: Any
    eval_dataset: Any | None
    data_collator: Any | None
    stats: dict = field(default_factory=dict)


def _encode_batch(
    batch: dict,
    *,
    tokenizer,
    template: str,
    info,
    stage: str,
    train_on_prompt: bool,
    cutoff: int,
    mask_history: bool = False,
    enable_thinking: bool = True,
    tool_format: str | None = None,
) -> dict:
    """Batched datasets.map function: canonical rows (JSON strings) -> input_ids, labels, truncated. Stage pt keeps
    whole texts (cut into blocks after mixing), so its result does not depend on ``cutoff``.

    The other stages encode as LLaMA-Factory does: every piece of ``conversation_pieces`` tokenised on its own (LF's
    per-message, per-slot encoding), the turns cut at ``cutoff`` by LF's rule (engine.data.cutoff: each turn's
    prompt and answer share what is left, ``mask_history`` takes the last turn first and trains only it), and LF's
    efficient EOS (glm4, gemma2, fewshot): answers carry no EOS; each later prompt's first label is the EOS, teaching
    the model to end the answer before it, and one EOS, trained, ends the sample."""
    rows = [json.loads(r) for r in batch["row"]]
    tmpl = resolve(template, info) if stage != "pt" else None
    efficient = isinstance(tmpl, Template) and tmpl.efficient_eos and bool(info.eos)
    samples: list[list[tuple[list[str], list[str]]]] = []
    for row in rows:
        if stage == "pt":
            samples.append([([], [pretrain_text(row, info)])])
            continue
        turns = conversation_pieces(
            template,
            info,
            row.get("system", ""),
            row["messages"],
            row.get("tools"),
            enable_thinking=enable_thinking,
            tool_format=tool_format,
            mask_history=mask_history,
        )
        if efficient and turns:
            turns[-1][1].pop()  # the final EOS: added after the cut, as LF does
        samples.append(turns)
    flat = [text for turns in samples for prompt, response in turns for text in (*prompt, *response)]
    encoded = iter(tokenizer(flat, add_special_tokens=False)["input_ids"] if flat else [])

    def ids_of(texts: list[str]) -> list[int]:
        return [i for _ in texts for i in next(encoded)]

    out: dict[str, list] = {"input_ids": [], "labels": [], "truncated": []}
    for turns in samples:
        pairs = [(ids_of(prompt), ids_of(response)) for prompt, response in turns]
        if stage == "pt":
            ids = pairs[0][1]
            out["input_ids"].append(ids)
            out["labels"].append(list(ids))
            out["truncated"].append(False)
            continue
        ids, labels = _cut_sample(pairs, tokenizer.eos_token_id, cutoff, mask_history, efficient, train_on_prompt)
        out["input_ids"].append(ids)
        out["labels"].append(labels)
        out["truncated"].append(len(ids) < sum(len(s) + len(t) for s, t in pairs) + (1 if efficient else 0))
    return out


def _cut_sample(
    pairs: list[tuple[list[int], list[int]]],
    eos_id: int | None,
    cutoff: int,
    mask_history: bool,
    efficient: bool,
    train_on_prompt: bool,
) -> tuple[list[int], list[int]]:
    """input_ids and labels of one sample's (prompt ids, answer ids) turns cut at ``cutoff``: LF's supervised
    processor (``_encode_data_example``), by engine.data.cutoff's rule."""
    ids: list[int] = []
    labels: list[int] = []
    kept = cut_turns([(len(s), len(t)) for s, t in pairs], cutoff, mask_history=mask_history, efficient_eos=efficient)
    for k, (i, n_source, n_target) in enumerate(kept):
        source, target = pairs[i][0][:n_source], pairs[i][1][:n_target]
        if train_on_prompt:
            source_labels = list(source)
        elif efficient and k != 0 and source:
            source_labels = [eos_id] + [IGNORE] * (len(source) - 1)
        else:
            source_labels = [IGNORE] * len(source)
        target_labels = [IGNORE] * len(target) if mask_history and k != 0 else list(target)
        if mask_history:  # the turns were taken last first
            ids, labels = source + target + ids, source_labels + target_labels + labels
        else:
            ids, labels = ids + source + target, labels + source_labels + target_labels
    if efficient:
        ids, labels = ids + [eos_id], labels + [eos_id]
    return ids, labels


def _tokenizer_digest(tokenizer) -> str:
    h = hashlib.sha256()
    folder = Path(str(getattr(tokenizer, "name_or_path", "") or ""))
    files = [
        folder / n
        for n in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json")
    ]
    found = [f for f in files if f.is_file()]
    for f in found:
        h.update(f.name.encode() + f.read_bytes())
    if not found:  # an in-memory tokenizer: its vocabulary and template stand in for files
        h.update(json.dumps(sorted(tokenizer.get_vocab().items())).encode())
    h.update(str(getattr(tokenizer, "chat_template", "") or "").encode())
    return h.hexdigest()


def _data_digest(name: str, dataset_dir: Path) -> str:
    from engine.data.dataset_registry import _where, read_dataset_info
    from engine.data.file_selection import folder_files
    from engine.data.rows import DatasetEntry

    raw = read_dataset_info(dataset_dir)[name]
    path, files, _ = _where(DatasetEntry.from_info(name, raw), dataset_dir)
    h = hashlib.sha256(json.dumps(raw, sort_keys=True).encode())
    for f in folder_files(path, files) if path.is_dir() else [path]:
        if f.is_file():
            h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()


def cache_dir() -> Path:
    from engine.core import workspace

    path = workspace.home() / "cache" / "tokenized"
    path.mkdir(parents=True, exist_ok=True)
    return path


def build_train_data(spec, tokenizer, *, log: Callable[[str], None] = print) -> TrainData:
    """Check, load, render, tokenise, mix and split the spec's datasets (and its evaluation datasets); raise
    DataError on bad data. Hub datasets not in the Hugging Face cache are downloaded first."""
    from engine.data import hub, ms_hub
    from engine.data.dataset_registry import hub_pending
    from engine.spec.rules import resolve_dataset_dir

    d, stage = spec.data, spec.method.stage
    ddir = resolve_dataset_dir(spec)
    for entry in hub_pending([*d.datasets, *d.eval_datasets], ddir):
        from_ms = entry.source == "ms_hub"
        log(f"data: downloading dataset '{entry.name}' ({entry.hub_id}) from {'ModelScope' if from_ms else 'the hub'}")
        (ms_hub if from_ms else hub).download(entry.hub_id, entry.revision, entry.folder)
    problems = check_datasets(d.datasets, ddir, stage) + check_datasets(d.eval_datasets, ddir, stage)
    if problems:
        raise DataError(problems)
    info = tokenizer_info(tokenizer)
    warning = template_warning(d.template, info)
    if warning and stage != "pt":
        log(f"warning: {warning}")

    preference = stage in PREFERENCE_STAGES
    stats: dict[str, Any] = {"packed": bool(d.packing), "truncated": 0, "dropped": 0}
    dataset = _mixed(spec, d.datasets, ddir, tokenizer, info, stats)
    if len(dataset) == 0:
        raise DataError([_problem(ddir, "no trainable samples left (every answer was cut off at data.cutoff_len)")])

    eval_dataset = None
    if d.eval_datasets:
        eval_dataset = _mixed(spec, d.eval_datasets, ddir, tokenizer, info, {})
        if len(eval_dataset) == 0:
            names = ", ".join(d.eval_datasets)
            raise DataError([_problem(ddir, data_message("data.eval_empty", names=names, cutoff=d.cutoff_len))])
    elif d.val_size > 0:
        # LF's split_dataset: a whole number from 1 up is a row count, a fraction below 1 rounds up (datasets)
        n_eval = int(d.val_size) if d.val_size >= 1 else math.ceil(len(dataset) * d.val_size)
        if n_eval >= len(dataset):
            msg = data_message(
                "data.val_size_no_train",
                val_size=f"{d.val_size:g}",
                held=n_eval,
                total=len(dataset),
                names=", ".join(d.datasets),
            )
            raise DataError([_problem(ddir, msg)])
        split = dataset.train_test_split(test_size=n_eval, seed=spec.train.seed, shuffle=True)
        dataset, eval_dataset = split["train"], split["test"]

    stats |= {"num_train": len(dataset), "num_eval": len(eval_dataset) if eval_dataset is not None else 0}
    collator = None
    if stage == "pt":
        stats["num_samples"] = stats["num_train"] + stats["num_eval"]  # texts, before they become blocks
        dataset, tail = split_into_blocks(dataset, d.cutoff_len, concatenate=d.packing)
        stats["tail_dropped"] = tail
        if eval_dataset is not None:
            eval_dataset, eval_tail = split_into_blocks(eval_dataset, d.cutoff_len, concatenate=d.packing)
            stats["tail_dropped"] += eval_tail
        short = f"fewer tokens than one block of data.cutoff_len ({d.cutoff_len}); data.packing drops partial blocks"
        if len(dataset) == 0:  # only a concatenation can make no block
            raise DataError(
                [_problem(ddir, f"the training texts hold {short}: lower data.cutoff_len or turn packing off")]
            )
        if eval_dataset is not None and len(eval_dataset) == 0:
            raise DataError(
                [
                    _problem(
                        ddir,
                        f"the held-out texts (data.val_size {d.val_size}) hold {short}: raise data.val_size, "
                        "lower data.cutoff_len or turn packing off",
                    )
                ]
            )
        stats |= {"num_train": len(dataset), "num_eval": len(eval_dataset) if eval_dataset is not None else 0}
    if not preference:
        stats["total_tokens"], stats["trainable_tokens"] = _count_tokens(dataset)
        collator = PadCollator(_pad_id(tokenizer))
        stats["padding_free"] = padding_free(spec)
        if stats["padding_free"]:
            collator = FlatteningCollator()
        if d.packing and stage == "sft":
            collator = packing_collator(_pad_id(tokenizer))
            stats["num_samples"] = len(dataset)
            dataset = pack_rows(dataset, d.cutoff_len)
            if eval_dataset is not None:
                eval_dataset = pack_rows(eval_dataset, d.cutoff_len)
            stats |= {
                "num_train": len(dataset),
                "num_eval": len(eval_dataset) if eval_dataset is not None else 0,
                "packing_efficiency": round(stats["total_tokens"] / max(1, len(dataset) * d.cutoff_len), 4),
            }
        if d.group_by_length:
            dataset = _with_lengths(dataset)
            eval_dataset = _with_lengths(eval_dataset) if eval_dataset is not None else None
    if stage == "pt":
        how = "texts concatenated" if d.packing else "each text cut on its own"
        summary = (
            f"{stats['num_train']} train / {stats['num_eval']} eval blocks of up to {d.cutoff_len} tokens "
            f"from {stats['num_samples']} texts ({how}), {stats['tail_dropped']} tail tokens dropped"
        )
    elif stage == "kto":
        summary = (
            f"{stats['num_train']} train / {stats['num_eval']} eval answers ({stats['desirable']} desirable, "
            f"{stats['undesirable']} undesirable; {stats['untagged']} rows without a kto tag left out)"
        )
    else:
        summary = (
            f"{stats['num_train']} train / {stats['num_eval']} eval "
            + ("rows" if d.packing else "samples")
            + f", {stats['truncated']} truncated at {d.cutoff_len} tokens"
            + (
                f", {stats['num_samples']} samples packed ({stats['packing_efficiency']:.0%} full)"
                if d.packing
                else ""
            )
        )
    log(f"data: {summary}" + (", grouped by length" if d.group_by_length else ""))
    return TrainData(dataset, eval_dataset, collator, stats)


def _mixed(spec, names: list[str], ddir: Path, tokenizer, info, stats: dict):
    """The named datasets loaded (LF's num_samples, then max_samples), rendered and tokenised (cached per dataset),
    mixed by data.mix; for sft / pt samples with nothing to train are dropped (counted in ``stats``)."""
    from datasets import Dataset, concatenate_datasets, interleave_datasets

    from engine.data.dataset_registry import _resolve

    d, stage, seed = spec.data, spec.method.stage, spec.train.seed
    tool_format = None if d.tool_format == "template" else d.tool_format
    parts = []
    preference = stage in PREFERENCE_STAGES
    tok_digest = _tokenizer_digest(tokenizer) if not preference else ""
    for name in names:
        entry, _ = _resolve(name, ddir)
        rows = load_rows(name, ddir, stage)
        if entry is not None and entry.num_samples:
            rows = sample_rows(rows, entry.num_samples, seed)
        rows = rows[: d.max_samples or None]
        if stage == "kto":
            tagged = [r for r in rows if r.get("kto_tag") is not None]
            stats["untagged"] = stats.get("untagged", 0) + len(rows) - len(tagged)
            parts.append(Dataset.from_list([_kto_row(r, d.template, info, tool_format) for r in tagged]))
            continue
        if preference:
            parts.append(Dataset.from_list([_dpo_row(r, d.template, info, tool_format) for r in rows]))
            continue
        key = hashlib.sha256(
            json.dumps(
                [
                    CACHE_VERSION,
                    _data_digest(name, ddir),
                    tok_digest,
                    d.template,
                    stage,
                    d.cutoff_len if stage != "pt" else None,  # pt keeps whole texts: blocks are cut later
                    d.train_on_prompt,
                    d.max_samples,
                    seed if entry is not None and entry.num_samples else None,
                    d.mask_history,
                    d.enable_thinking,
                    tool_format,
                ]
            ).encode()
        ).hexdigest()[:24]
        raw = Dataset.from_dict({"row": [json.dumps(r, ensure_ascii=False) for r in rows]})
        encoded = raw.map(
            _encode_batch,
            batched=True,
            batch_size=256,
            remove_columns=["row"],
            num_proc=_workers(d.preprocessing_workers, len(rows)),
            cache_file_name=str(cache_dir() / f"{name}-{key}.arrow"),
            load_from_cache_file=True,
            fn_kwargs={
                "tokenizer": tokenizer,
                "template": d.template,
                "info": info,
                "stage": stage,
                "train_on_prompt": d.train_on_prompt,
                "cutoff": d.cutoff_len,
                "mask_history": d.mask_history,
                "enable_thinking": d.enable_thinking,
                "tool_format": tool_format,
            },
            desc=f"tokenising {name}",
        )
        parts.append(encoded)

    if len(parts) == 1:
        dataset = parts[0]
    elif d.mix == "concat":
        dataset = concatenate_datasets(parts)
    else:
        dataset = interleave_datasets(
            parts,
            probabilities=d.mix_probs if len(d.mix_probs or []) == len(parts) else None,
            seed=seed,
            stopping_strategy=("first_exhausted" if d.mix == "interleave_under" else "all_exhausted"),
        )
    if stage == "kto":
        labels = dataset["label"]
        stats["desirable"] = stats.get("desirable", 0) + int(sum(labels))
        stats["undesirable"] = stats.get("undesirable", 0) + len(labels) - int(sum(labels))
        stats.setdefault("untagged", 0)
    if not preference:
        stats["truncated"] = stats.get("truncated", 0) + int(sum(dataset["truncated"]))
        before = len(dataset)
        # A sample whose answer was cut away entirely has nothing to learn from and would give a NaN loss.
        dataset = dataset.filter(lambda ex: any(x != IGNORE for x in ex["labels"]), desc="dropping empty samples")
        stats["dropped"] = stats.get("dropped", 0) + before - len(dataset)
        dataset = dataset.select_columns(["input_ids", "labels"])
    return dataset


def _workers(wanted: int, rows: int) -> int | None:
    """Tokenising processes: at most ``data.preprocessing_workers``, the CPUs there are, and one per 1000 rows (a
    process costs about a second to start: LF's usual 16 on a small set or a 2-core machine only slows it down)."""
    n = min(wanted, os.cpu_count() or 1, rows // 1000)
    return n if n > 1 else None


def _count_tokens(dataset) -> tuple[int, int]:
    """(tokens, trained tokens) of input_ids/labels rows, counted on the Arrow buffers."""
    import pyarrow.compute as pc

    table = dataset.select_columns(["input_ids", "labels"]).with_format("arrow")[:]
    total = pc.sum(pc.list_value_length(table.column("input_ids"))).as_py() or 0
    trained = pc.sum(pc.not_equal(pc.list_flatten(table.column("labels")), IGNORE)).as_py() or 0
    return int(total), int(trained)


def _with_lengths(dataset):
    """The ``length`` column (tokens per row) the Trainer's length-grouped sampler reads."""
    import pyarrow.compute as pc

    lengths = pc.list_value_length(dataset.select_columns(["input_ids"]).with_format("arrow")[:].column(0))
    return dataset.add_column("length", lengths.to_pylist())


def _pad_id(tokenizer) -> int:
    pad = tokenizer.pad_token_id
    return int(pad if pad is not None else tokenizer.eos_token_id or 0)


def _dpo_row(row: dict, template: str, info, tool_format: str | None = None) -> dict:
    return {
        "prompt": prompt_text(template, info, row.get("system", ""), row["messages"], tool_format=tool_format),
        "chosen": assistant_text(template, info, row["chosen"]),
        "rejected": assistant_text(template, info, row["rejected"]),
    }


def _kto_row(row: dict, template: str, info, tool_format: str | None = None) -> dict:
    """An unpaired kto row: the conversation up to its last answer as the prompt, that answer as the completion
    (LLaMA-Factory's kto_tag reading), and whether it is desirable."""
    *history, answer = row["messages"]
    return {
        "prompt": prompt_text(template, info, row.get("system", ""), history, tool_format=tool_format),
        "completion": assistant_text(template, info, answer["content"]),
        "label": bool(row["kto_tag"]),
    }


def _problem(ddir: Path, message: str):
    from engine.data.rows import DataProblem

    return DataProblem(str(ddir / "dataset_info.json"), None, None, message)
