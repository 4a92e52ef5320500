"""Stage dpo on a vision-language model (LLaMA-Factory's ``qwen3vl_lora_dpo.yaml``): preference rows with images for
TRL's DPOTrainer, which takes the model's processor as its processing class and processes each batch's images on the
fly (its ``DataCollatorForVisionPreference``).

Heavy (datasets, PIL, trl inside functions): runs only inside the trainer subprocess. A row's conversation (LF's
``<image>`` placeholders where they stand) is rendered with the processor's chat template up to the generation
prompt; each answer is what the template adds after it (the answer and its end of turn), so TRL tokenises the same
text an SFT run trains on (engine.trainer.vision). The rows keep their image paths; the collator opens them, sized
into ``model.vision``'s ``image_min_pixels`` / ``image_max_pixels`` as SFT does, and hands them to TRL's collator.
TRL cuts each sequence to ``data.cutoff_len`` from its end: a pair whose prompt, image tokens expanded, already fills
the cutoff would lose its answers (and an image's tokens, which the model then refuses): such pairs are left out
before training and counted (``dropped_cut_images``), as SFT leaves out such rows.
"""

from __future__ import annotations

import math

from engine.trainer.vision import NO_PACKING, _parts, image_token, open_image


def pair(row: dict, processor) -> dict:
    """A canonical preference row as TRL's vision DPO row: the prompt, the chosen and rejected answers (strings
    rendered with the processor's chat template) and the row's image paths."""
    msgs = [{"role": "system", "content": [{"type": "text", "text": row["system"]}]}] if row.get("system") else []
    msgs += [{"role": m["role"], "content": _parts(m["content"])} for m in row["messages"]]
    prompt = processor.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    out = {"prompt": prompt}
    for key in ("chosen", "rejected"):
        answer = {"role": "assistant", "content": [{"type": "text", "text": row[key]}]}
        full = processor.apply_chat_template([*msgs, answer], tokenize=False)
        if not full.startswith(prompt):
            raise ValueError("the model's chat template does not render the answer after the prompt it rendered")
        out[key] = full[len(prompt) :]
    out["images"] = list(row.get("images") or [])
    return out


class PairCollator:
    """Opens each row's images (sized as SFT sizes them) and passes the rows to TRL's vision preference collator:
    prompt and answers tokenised, the image tokens expanded, ``pixel_values`` (and the family's other image
    tensors) for the chosen and the rejected copies of each prompt."""

    def __init__(self, processor, max_length: int, max_pixels: int, min_pixels: int):
        from trl.trainer.dpo_trainer import DataCollatorForVisionPreference

        self.inner = DataCollatorForVisionPreference(processor=processor, max_length=max_length)
        self.max_pixels, self.min_pixels = max_pixels, min_pixels

    def __call__(self, features: list[dict]) -> dict:
        rows = [
            {**f, "images": [open_image(r, self.max_pixels, self.min_pixels) for r in f["images"]]} for f in features
        ]
        return self.inner(rows)


def prompt_tokens(p: dict, processor, max_pixels: int, min_pixels: int) -> tuple[int, int]:
    """(tokens, image tokens) of a pair's prompt as TRL's collator makes them: the processor expands each image's
    tokens."""
    images = [open_image(r, max_pixels, min_pixels) for r in p["images"]]
    enc = processor(text=[p["prompt"]], images=images or None, add_special_tokens=False)
    ids = list(enc["input_ids"][0])
    image_id = processor.tokenizer.convert_tokens_to_ids(image_token(processor))
    return len(ids), ids.count(image_id)


def build_data(spec, processor, *, log=print):
    """TrainData of a vision-language dpo run: the datasets checked (every image opened) and rendered, held-out rows
    from ``data.eval_datasets`` or ``data.val_size``; the collator that processes the images batch by batch."""
    from datasets import Dataset

    from engine.data.dataset_registry import check_datasets, load_rows
    from engine.data.messages import message as data_message
    from engine.data.rows import DataError
    from engine.spec.rules import resolve_dataset_dir
    from engine.trainer.dataset import TrainData, _problem

    d, v = spec.data, spec.model.vision
    ddir = resolve_dataset_dir(spec)
    problems = check_datasets(d.datasets, ddir, "dpo") + check_datasets(d.eval_datasets, ddir, "dpo")
    if problems:
        raise DataError(problems)

    dropped = image_tokens = 0

    def rows_of(names: list[str]) -> list[dict]:
        nonlocal dropped, image_tokens
        rows = []
        for name in names:
            rows += load_rows(name, ddir, "dpo")[: d.max_samples or None]
        kept = []
        for p in (pair(r, processor) for r in rows):
            tokens, in_images = prompt_tokens(p, processor, v.image_max_pixels, v.image_min_pixels)
            if tokens < d.cutoff_len:
                kept.append(p)
                image_tokens += in_images
            else:
                dropped += 1
        return kept

    train = rows_of(d.datasets)
    held = rows_of(d.eval_datasets) if d.eval_datasets else []
    if not train:
        msg = "no trainable pairs left (every prompt, its image tokens included, reaches data.cutoff_len)"
        raise DataError([_problem(ddir, msg)])
    if not d.eval_datasets and d.val_size > 0:
        n_eval = int(d.val_size) if d.val_size >= 1 else math.ceil(len(train) * d.val_size)
        if n_eval >= len(train):
            msg = data_message(
                "data.val_size_no_train",
                val_size=f"{d.val_size:g}",
                held=n_eval,
                total=len(train),
                names=", ".join(d.datasets),
            )
            raise DataError([_problem(ddir, msg)])
        split = Dataset.from_list(train).train_test_split(test_size=n_eval, seed=spec.train.seed, shuffle=True)
        train_set, eval_set = split["train"], split["test"]
    else:
        train_set = Dataset.from_list(train)
        eval_set = Dataset.from_list(held) if held else None
    images = sum(len(r["images"]) for r in train + held)
    log(
        f"vision data: {len(train_set)} train / {len(eval_set or [])} eval preference pairs, {images} images "
        f"({image_tokens} image tokens in the prompts), {dropped} pairs left out (their prompt fills data.cutoff_len "
        f"{d.cutoff_len})"
    )
    stats = {
        "num_train": len(train_set),
        "num_eval": len(eval_set) if eval_set is not None else 0,
        "num_images": images,
        "image_tokens": image_tokens,  # in the prompts, each once (TRL feeds a prompt with both answers)
        "dropped_cut_images": dropped,
        "packing": False,
        "padding_free": False,
        "packing_reason": NO_PACKING,
    }
    collator = PairCollator(processor, d.cutoff_len, v.image_max_pixels, v.image_min_pixels)
    return TrainData(train_set, eval_set, collator, stats)
