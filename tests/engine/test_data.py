"""Training data: label masks, multi-turn, truncation count, packing equivalence, mixing, DPO, errors first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def tok(demo_paths):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(demo_paths["model_dir"])


def make_spec(demo_paths, **data):
    from engine.spec.schema import RunSpec

    return RunSpec.model_validate(
        {
            "model": {"name_or_path": demo_paths["model_dir"]},
            "method": {"stage": data.pop("stage", "sft")},
            "data": {"datasets": ["demo_sharegpt"], "dataset_dir": demo_paths["data_dir"], "cutoff_len": 256, **data},
            "train": {"seed": 7},
        }
    )


def build(spec, tok):
    from engine.trainer.dataset import build_train_data

    return build_train_data(spec, tok, log=lambda _m: None)


def test_multi_turn_masks_every_prompt_and_trains_every_answer(demo_paths, tok):
    data = build(make_spec(demo_paths, max_samples=5), tok)
    ex = data.train_dataset[0]
    trained = tok.decode([t for t in ex["labels"] if t != -100])
    row = json.loads((Path(demo_paths["data_dir"]) / "demo_sharegpt.json").read_text(encoding="utf-8"))[0]
    answers = [t["value"] for t in row["conversations"] if t["from"] == "gpt"]
    questions = [t["value"] for t in row["conversations"] if t["from"] == "human"]
    assert trained == "".join(a + "<|im_end|>\n" for a in answers)
    assert not any(q in trained for q in questions)
    assert data.stats["trainable_tokens"] < data.stats["total_tokens"]


def test_train_on_prompt_trains_everything(demo_paths, tok):
    ex = build(make_spec(demo_paths, max_samples=2, train_on_prompt=True), tok).train_dataset[0]
    assert ex["labels"] == ex["input_ids"]


def test_truncation_is_counted(demo_paths, tok):
    data = build(make_spec(demo_paths, cutoff_len=40), tok)
    assert data.stats["truncated"] > 0 and max(len(x) for x in data.train_dataset["input_ids"]) <= 40


def test_pt_trains_all_tokens_and_val_split(demo_paths, tok):
    data = build(make_spec(demo_paths, stage="pt", datasets=["demo_pretrain"], val_size=0.1), tok)
    ex = data.train_dataset[0]
    assert ex["labels"] == ex["input_ids"] and ex["input_ids"][-1] == tok.eos_token_id
    assert data.stats["num_eval"] == 20 and data.stats["num_train"] == 180


def test_mixing_concat_and_interleave(demo_paths, tok):
    concat = build(make_spec(demo_paths, datasets=["demo_sharegpt", "demo_messages"]), tok)
    assert concat.stats["num_train"] == 60 + 80
    under = build(
        make_spec(
            demo_paths, datasets=["demo_sharegpt", "demo_messages"], mix="interleave_under", mix_probs=[0.5, 0.5]
        ),
        tok,
    )
    assert 60 <= under.stats["num_train"] < 140


def test_dpo_columns_for_trl(demo_paths, tok):
    data = build(make_spec(demo_paths, stage="dpo", datasets=["demo_dpo"]), tok)
    row = data.train_dataset[0]
    assert set(data.train_dataset.column_names) == {"prompt", "chosen", "rejected"} and data.data_collator is None
    assert row["prompt"].endswith("<|im_start|>assistant\n") and row["chosen"] != row["rejected"]


def test_bad_data_raises_before_model(demo_paths, tok, tmp_path):
    from engine.data.dataset_registry import save_dataset_info
    from engine.data.rows import DataError

    (tmp_path / "bad.jsonl").write_text('{"instruction": "q", "output": "a"}\nnot json\n')
    save_dataset_info(tmp_path, {"bad": {"file_name": "bad.jsonl"}})
    spec = make_spec(demo_paths, datasets=["bad"], dataset_dir=str(tmp_path))
    with pytest.raises(DataError, match=r"bad.jsonl, line 2"):
        build(spec, tok)


def test_pad_collator_pads_labels_with_ignore(demo_paths, tok):
    data = build(make_spec(demo_paths, max_samples=4, padding_free="off"), tok)
    batch = data.data_collator([data.train_dataset[i] for i in range(4)])
    lens = [len(data.train_dataset[i]["input_ids"]) for i in range(4)]
    assert batch["input_ids"].shape == (4, max(lens)) and batch["attention_mask"].sum().item() == sum(lens)
    short = lens.index(min(lens))
    assert (batch["labels"][short, min(lens) :] == -100).all()


def _segments(row: dict) -> list[tuple[list[int], list[int]]]:
    """Split a packed row back into (input_ids, labels) per sample, at each position_ids restart."""
    starts = [i for i, p in enumerate(row["position_ids"]) if p == 0] + [len(row["input_ids"])]
    return [(row["input_ids"][a:b], row["labels"][a:b]) for a, b in zip(starts, starts[1:])]


def test_packing_fills_rows_and_keeps_every_sample(demo_paths, tok):
    plain = build(make_spec(demo_paths, max_samples=40, cutoff_len=256), tok)
    packed = build(make_spec(demo_paths, max_samples=40, cutoff_len=256, packing=True), tok)
    rows = [packed.train_dataset[i] for i in range(len(packed.train_dataset))]
    assert len(rows) < len(plain.train_dataset) and all(len(r["input_ids"]) <= 256 for r in rows)
    assert packed.stats["num_samples"] == len(plain.train_dataset) == 40 and packed.stats["num_train"] == len(rows)
    assert 0 < packed.stats["packing_efficiency"] <= 1
    want = sorted((s["input_ids"], [-100] + s["labels"][1:]) for s in plain.train_dataset)
    got = sorted(seg for r in rows for seg in _segments(r))
    assert got == want  # every sample exactly once, its first label never predicted across the boundary


def test_packed_batch_equals_samples_run_separately(demo_paths, tok):
    """No attention across packed samples: per-sample logits and loss match running each alone."""
    import torch
    from transformers import AutoModelForCausalLM

    data = build(make_spec(demo_paths, max_samples=8, cutoff_len=128, packing=True), tok)
    rows = [data.train_dataset[i] for i in range(len(data.train_dataset))][-2:]  # the last rows are the shortest
    assert len(rows[0]["input_ids"]) != len(rows[1]["input_ids"])  # so one of them is topped up with padding
    batch = data.data_collator(rows)
    assert batch["input_ids"].shape[0] == 2 and "position_ids" in batch and "attention_mask" not in batch
    assert batch["use_cache"] is False  # with a KV cache transformers ignores the packed position_ids
    samples = [(i, seg) for i, r in enumerate(rows) for seg in _segments(r)]
    assert len(samples) > len(rows)  # rows really hold several samples
    model = AutoModelForCausalLM.from_pretrained(demo_paths["model_dir"], attn_implementation="sdpa").eval()
    with torch.no_grad():
        packed = model(**{k: v for k, v in batch.items() if k != "labels"}).logits
        starts = [0, 0]
        for row, (ids, _) in samples:
            n = len(ids)
            alone = model(input_ids=torch.tensor([ids])).logits[0]
            torch.testing.assert_close(packed[row, starts[row] : starts[row] + n], alone, atol=1e-4, rtol=1e-4)
            starts[row] += n
        # and the packed loss is the mean over the same trained tokens as the separate runs
        loss = model(**batch).loss
        total = sum(
            model(input_ids=torch.tensor([ids]), labels=torch.tensor([labels])).loss
            * (sum(1 for t in labels[1:] if t != -100))
            for _, (ids, labels) in samples
        )
        count = sum(sum(1 for t in labels[1:] if t != -100) for _, (_, labels) in samples)
    torch.testing.assert_close(loss, total / count, atol=1e-4, rtol=1e-4)


def test_cache_is_reused(demo_paths, tok):
    from engine.trainer import dataset as D

    spec = make_spec(demo_paths, max_samples=7)
    build(spec, tok)
    files = set(D.cache_dir().glob("demo_sharegpt-*.arrow"))
    build(spec, tok)
    assert set(D.cache_dir().glob("demo_sharegpt-*.arrow")) == files
    build(make_spec(demo_paths, max_samples=7, cutoff_len=128), tok)
    assert len(set(D.cache_dir().glob("demo_sharegpt-*.arrow"))) == len(files) + 1


def _pt_dataset(tmp_path, texts: list[str]) -> str:
    from engine.data.dataset_registry import save_dataset_info

    (tmp_path / "long.jsonl").write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts))
    save_dataset_info(tmp_path, {"long": {"file_name": "long.jsonl", "columns": {"prompt": "text"}}})
    return str(tmp_path)


LONG_TEXTS = [
    " ".join(f"{i} plus {j} is {i + j}." for j in range(n)) for i, n in ((3, 40), (5, 2), (7, 25), (11, 1), (13, 60))
]


@pytest.mark.parametrize("packing", [False, True])
def test_pt_cuts_texts_into_blocks_without_losing_tokens(demo_paths, tok, tmp_path, packing):
    cutoff = 32
    texts = [tok(t + tok.eos_token, add_special_tokens=False)["input_ids"] for t in LONG_TEXTS]
    assert max(len(t) for t in texts) > 3 * cutoff and min(len(t) for t in texts) < cutoff
    logs: list[str] = []
    ddir = _pt_dataset(tmp_path, LONG_TEXTS)
    spec = make_spec(demo_paths, stage="pt", datasets=["long"], dataset_dir=ddir, cutoff_len=cutoff, packing=packing)
    from engine.trainer.dataset import build_train_data

    data = build_train_data(spec, tok, log=logs.append)
    rows = [data.train_dataset[i] for i in range(len(data.train_dataset))]
    assert all(r["labels"] == r["input_ids"] for r in rows) and data.stats["truncated"] == 0
    joined = [t for text in texts for t in text]
    if packing:  # one stream cut into full blocks; only the last partial block is dropped
        assert len(rows) == len(joined) // cutoff and all(len(r["input_ids"]) == cutoff for r in rows)
        assert [t for r in rows for t in r["input_ids"]] == joined[: len(rows) * cutoff]
        assert data.stats["tail_dropped"] == len(joined) % cutoff > 0
    else:  # each text on its own: ceil(n / cutoff) blocks, nothing dropped, no block mixes two texts
        assert len(rows) == sum(-(-len(t) // cutoff) for t in texts)
        assert [r["input_ids"] for r in rows] == [t[i : i + cutoff] for t in texts for i in range(0, len(t), cutoff)]
        assert data.stats["tail_dropped"] == 0
    assert data.stats["num_samples"] == len(texts) and data.stats["num_train"] == len(rows)
    assert data.stats["total_tokens"] == data.stats["trainable_tokens"] == sum(len(r["input_ids"]) for r in rows)
    assert f"{len(rows)} train / 0 eval blocks" in logs[-1]
    assert f"{data.stats['tail_dropped']} tail tokens dropped" in logs[-1]


def test_blocks_across_arrow_batches_and_slices():
    """More rows than one Arrow batch, and a shuffled split (an indices mapping): the same blocks as plain lists."""
    import random

    from datasets import Dataset

    from engine.trainer.packed_rows import split_into_blocks

    rng = random.Random(3)
    texts = [[rng.randrange(1, 500) for _ in range(rng.randrange(1, 40))] for _ in range(20_000)]
    ds = Dataset.from_dict({"input_ids": texts, "labels": texts}).train_test_split(test_size=0.5, seed=1)["train"]
    kept = ds["input_ids"]
    stream = [t for text in kept for t in text]
    whole, tail = split_into_blocks(ds, 7, concatenate=True)
    assert whole["input_ids"] == [stream[i : i + 7] for i in range(0, len(stream) - 6, 7)] and tail == len(stream) % 7
    own, tail = split_into_blocks(ds, 7, concatenate=False)
    assert own["input_ids"] == [t[i : i + 7] for t in kept for i in range(0, len(t), 7)] and tail == 0
    assert own["labels"] == own["input_ids"]


def test_pt_cache_holds_whole_texts_whatever_the_cutoff(demo_paths, tok, tmp_path):
    from engine.trainer import dataset as D

    ddir = _pt_dataset(tmp_path, LONG_TEXTS)
    build(make_spec(demo_paths, stage="pt", datasets=["long"], dataset_dir=ddir, cutoff_len=16), tok)
    files = set(D.cache_dir().glob("long-*.arrow"))
    wide = build(make_spec(demo_paths, stage="pt", datasets=["long"], dataset_dir=ddir, cutoff_len=64), tok)
    assert set(D.cache_dir().glob("long-*.arrow")) == files  # the cutoff does not change pt's tokenisation
    n = sum(len(tok(t + tok.eos_token, add_special_tokens=False)["input_ids"]) for t in LONG_TEXTS)
    assert wide.stats["total_tokens"] == n  # blocks of 64 from the cache written at 16: nothing was cut there


def test_pt_packing_too_little_text_for_one_block_names_the_fix(demo_paths, tok, tmp_path):
    from engine.data.rows import DataError

    spec = make_spec(
        demo_paths, stage="pt", datasets=["long"], dataset_dir=_pt_dataset(tmp_path, ["short text"]), packing=True
    )
    with pytest.raises(DataError, match=r"fewer tokens than one block of data.cutoff_len \(256\)"):
        build(spec, tok)


def test_group_by_length_rows_carry_their_length(demo_paths, tok):
    data = build(make_spec(demo_paths, max_samples=12, val_size=0.25, group_by_length=True), tok)
    for part in (data.train_dataset, data.eval_dataset):
        assert part["length"] == [len(x) for x in part["input_ids"]]
    batch = data.data_collator([data.train_dataset[i] for i in range(3)])
    assert set(batch) == {"input_ids", "labels", "position_ids", "use_cache"}  # padding-free by default; no length


def test_page_and_trainer_pack_alike():
    """The Datasets tab's predicted packing efficiency is what pack_rows produces (one algorithm,
    engine.data.packing)."""
    from datasets import Dataset

    from engine.data.packing import packing_efficiency
    from engine.trainer.packed_rows import pack_rows

    lengths = [7, 3, 9, 1, 4, 4, 6, 2, 8, 5, 5, 10]
    ds = Dataset.from_dict({"input_ids": [[1] * n for n in lengths], "labels": [[1] * n for n in lengths]})
    rows = pack_rows(ds, 10)
    assert all(len(r) <= 10 for r in rows["input_ids"])
    assert sum(len(r) for r in rows["input_ids"]) == sum(lengths)
    assert packing_efficiency(lengths, 10) == sum(lengths) / (len(rows) * 10)


def test_efficient_eos_teaches_the_end_of_each_answer_at_the_next_prompt(tok):
    # LF's efficient_eos (glm4): answers carry no EOS in the text; one EOS ends the sample, and the first label of
    # every later prompt is the EOS (the model learns to stop after each answer); the rest of a prompt is masked
    from engine.data.templates import tokenizer_info
    from engine.trainer.dataset import IGNORE, _encode_batch

    row = {
        "system": "",
        "messages": [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": "4"},
        ],
    }
    out = _encode_batch(
        {"row": [json.dumps(row)]},
        tokenizer=tok,
        template="glm4",
        info=tokenizer_info(tok),
        stage="sft",
        train_on_prompt=False,
        cutoff=512,
    )
    ids, labels = out["input_ids"][0], out["labels"][0]
    first_prompt = tok("[gMASK]<sop><|user|>\nHi<|assistant|>", add_special_tokens=False)["input_ids"]
    answer = tok("\nHello!", add_special_tokens=False)["input_ids"]
    start = len(first_prompt) + len(answer)  # where the second prompt begins
    assert labels[: len(first_prompt)] == [IGNORE] * len(first_prompt)
    assert labels[len(first_prompt) : start] == answer
    assert labels[start] == tok.eos_token_id and ids[start] != tok.eos_token_id
    assert labels[start + 1] == IGNORE
    assert ids[-1] == labels[-1] == tok.eos_token_id


def test_tool_calls_are_rendered_in_the_template_format_and_trained(tok):
    # a glaive-style row (function_call / observation turns and tools) in LF's qwen tool format: the call is trained
    from engine.data.templates import tokenizer_info
    from engine.trainer.dataset import IGNORE, _encode_batch

    tools = json.dumps([{"name": "get_weather", "description": "Weather", "parameters": {"type": "object"}}])
    call = json.dumps({"name": "get_weather", "arguments": {"city": "Paris"}})
    row = {
        "system": "",
        "tools": tools,
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "function", "content": call},
            {"role": "observation", "content": '{"temp": 21}'},
            {"role": "assistant", "content": "It is 21."},
        ],
    }
    kw = dict(tokenizer=tok, info=tokenizer_info(tok), stage="sft", train_on_prompt=False, cutoff=2048)
    out = _encode_batch({"row": [json.dumps(row)]}, template="qwen", **kw)
    ids, labels = out["input_ids"][0], out["labels"][0]
    text = tok.decode(ids)
    trained = tok.decode([t for t in labels if t != IGNORE])
    assert '<tools>\n{"type": "function", "function": {"name": "get_weather"' in text
    assert '<tool_response>\n{"temp": 21}\n</tool_response>' in text
    want_call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>\n'
    assert trained == want_call + "It is 21.<|im_end|>\n"
    default = _encode_batch({"row": [json.dumps(row)]}, template="default", **kw)
    trained = tok.decode([t for t in default["labels"][0] if t != IGNORE])
    assert trained.startswith('Action: get_weather\nAction Input: {"city": "Paris"}')


def test_mask_history_trains_only_the_last_answer(demo_paths, tok):
    """LF's mask_history: earlier answers are context; only the last assistant turn has labels."""
    ex = build(make_spec(demo_paths, max_samples=3, mask_history=True), tok).train_dataset[0]
    row = json.loads((Path(demo_paths["data_dir"]) / "demo_sharegpt.json").read_text(encoding="utf-8"))[0]
    answers = [t["value"] for t in row["conversations"] if t["from"] == "gpt"]
    assert len(answers) > 1, "the demo's first conversation must have several answers for this test"
    assert tok.decode([t for t in ex["labels"] if t != -100]) == answers[-1] + "<|im_end|>\n"
    assert all(a in tok.decode(ex["input_ids"]) for a in answers)  # earlier answers stay in the input


def test_val_size_whole_number_is_rows_and_eval_datasets_evaluate_apart(demo_paths, tok):
    """val_size from 1 up is a row count (LF); one that leaves nothing to train on is refused naming the dataset and
    the counts; eval_datasets give the evaluation set instead of a split."""
    from engine.data.dataset_registry import DataError

    data = build(make_spec(demo_paths, max_samples=10, val_size=3), tok)
    assert (len(data.train_dataset), len(data.eval_dataset)) == (7, 3)
    with pytest.raises(DataError, match=r"data.val_size 10 holds out 10 of the 10 samples of demo_sharegpt"):
        build(make_spec(demo_paths, max_samples=10, val_size=10), tok)
    data = build(make_spec(demo_paths, max_samples=4, eval_datasets=["demo_alpaca"]), tok)
    assert len(data.train_dataset) == 4 and data.stats["num_eval"] == len(data.eval_dataset) > 0
