"""Vision-language training: the model's own processor and chat template, rows with images encoded into token ids,
labels (only the answers trained), and the processor's image tensors; the collator; LLaMA-Factory's switches
(``freeze_vision_tower``, ``freeze_multi_modal_projector``, ``freeze_language_model``, ``image_max_pixels`` /
``image_min_pixels``) applied to the model's parts.

Heavy (torch, transformers, PIL): runs only inside the trainer subprocess. A row's conversation is rendered with the
processor's chat template one turn at a time, so each prompt and each answer is its own segment; the processor
expands each segment's image tokens with that segment's images. Packing and padding-free rows are off for these
runs (the reason is said in ``run_started``): the processor's image tensors belong to whole samples.
"""

from __future__ import annotations

import math

from engine.data.images import IMAGE_PLACEHOLDER, is_url
from engine.trainer.pref_losses import REFERENCE_FREE

IGNORE = -100
NO_PACKING = "vision-language rows carry their images' tensors whole: packing and padding-free rows are off"
# Where a family keeps its parts (transformers 5 names, as in LLaMA-Factory's model/model_utils/visual.py).
VISION_TOWER = ("vision_tower", "visual", "vision_model", "model.vision_tower", "model.visual", "model.vision_model")
PROJECTOR = ("multi_modal_projector", "model.multi_modal_projector", "visual.merger", "model.visual.merger")
LANGUAGE_MODEL = ("language_model", "model.language_model", "lm_head")
QWEN_TOWER = ("patch_embed", "pos_embed", "blocks", "deepstack_merger_list")  # inside ``visual``, beside its merger


def is_vision_model(config) -> bool:
    """A config with a vision tower (LLaVA, Qwen2-VL, Gemma 3 ... keep it under ``vision_config``)."""
    return getattr(config, "vision_config", None) is not None


def model_class(*, vision: bool = False, reward: bool = False):
    """The one choice of the transformers auto class a model loads with (training, merge, chat): a reward model's
    sequence classifier, a vision-language model's image-text class, else a causal LM."""
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText, AutoModelForSequenceClassification

    if reward:
        return AutoModelForSequenceClassification
    return AutoModelForImageTextToText if vision else AutoModelForCausalLM


def wanted(spec, location: str) -> bool:
    """Whether the spec's model (at ``location``, engine.trainer.model's model_location) is a vision-language model,
    read from its config; such a run trains stage sft, or dpo with TRL's DPOTrainer (engine.trainer.vision_dpo)."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(
        location, revision=spec.model.revision, trust_remote_code=spec.model.trust_remote_code
    )
    if not is_vision_model(config):
        return False
    if spec.method.stage not in ("sft", "dpo"):
        raise ValueError(f"method.stage: a vision-language model trains stage sft or dpo (got {spec.method.stage})")
    if spec.method.stage == "dpo" and spec.method.dpo.loss_type in REFERENCE_FREE:
        raise ValueError(
            f"method.dpo.loss_type: {spec.method.dpo.loss_type} runs on text-only TRL trainers; a vision-language "
            "model trains dpo with DPOTrainer's losses (sigmoid, ipo, ...)"
        )
    return True


def load_processor(spec, location: str):
    """The model's processor (its tokenizer and image processor), with a pad token."""
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(
        location, revision=spec.model.revision, trust_remote_code=spec.model.trust_remote_code
    )
    tok = processor.tokenizer
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token or tok.unk_token
    return processor


def image_token(processor) -> str:
    return getattr(processor, "image_token", None) or IMAGE_PLACEHOLDER


def open_image(ref: str, max_pixels: int, min_pixels: int):
    """An image as RGB, shrunk or enlarged (aspect kept) into [min_pixels, max_pixels] as LF's plugins do."""
    from PIL import Image

    if is_url(ref):
        import io
        import urllib.request

        with urllib.request.urlopen(ref, timeout=30) as resp:  # noqa: S310 - an http(s) URL the dataset names
            img = Image.open(io.BytesIO(resp.read()))
    else:
        img = Image.open(ref)
    img = img.convert("RGB")
    w, h = img.size
    if w * h > max_pixels:
        f = math.sqrt(max_pixels / (w * h))
        img = img.resize((max(1, int(w * f)), max(1, int(h * f))))
    elif w * h < min_pixels:
        f = math.sqrt(min_pixels / (w * h))
        img = img.resize((max(1, math.ceil(w * f)), max(1, math.ceil(h * f))))
    return img


def _parts(content: str) -> list[dict]:
    """LF's string content with ``<image>`` placeholders as the processors' list of parts."""
    parts: list[dict] = []
    pieces = content.split(IMAGE_PLACEHOLDER)
    for i, piece in enumerate(pieces):
        if i:
            parts.append({"type": "image"})
        if piece:
            parts.append({"type": "text", "text": piece})
    return parts


def segments(row: dict, processor, train_on_prompt: bool = False) -> list[tuple[str, bool]]:
    """(text, trained) pieces of a canonical row rendered with the processor's chat template: each prompt up to the
    generation prompt, then each answer with its end-of-turn. Raises ValueError when the template does not render
    one turn as a prefix of the next (the answers could not be told apart)."""
    msgs = [{"role": "system", "content": [{"type": "text", "text": row["system"]}]}] if row.get("system") else []
    msgs += [{"role": m["role"], "content": _parts(m["content"])} for m in row["messages"]]
    out: list[tuple[str, bool]] = []
    done = ""
    for k, m in enumerate(msgs):
        if m["role"] != "assistant":
            continue
        prompt = processor.apply_chat_template(msgs[:k], tokenize=False, add_generation_prompt=True)
        full = processor.apply_chat_template(msgs[: k + 1], tokenize=False)
        if not prompt.startswith(done) or not full.startswith(prompt):
            raise ValueError("the model's chat template does not render a conversation turn by turn")
        out += [(prompt[len(done) :], train_on_prompt), (full[len(prompt) :], True)]
        done = full
    return out


def encode_row(row: dict, processor, spec) -> dict | None:
    """input_ids, labels, attention_mask and the processor's image tensors of one row; None when the cutoff would
    cut into an image's tokens or leaves no answer token."""
    import torch

    vision = spec.model.vision
    token = image_token(processor)
    refs = list(row.get("images") or [])
    ids: list[int] = []
    labels: list[int] = []
    per_token: dict[str, list] = {}
    per_image: dict[str, list] = {}
    for text, trained in segments(row, processor, spec.data.train_on_prompt):
        n = text.count(token)
        imgs = [open_image(r, vision.image_max_pixels, vision.image_min_pixels) for r in refs[:n]]
        refs = refs[n:]
        enc = processor(text=[text], images=imgs or None, return_tensors="pt", add_special_tokens=False)
        seg = enc["input_ids"][0].tolist()
        ids += seg
        labels += seg if trained else [IGNORE] * len(seg)
        for key, value in enc.items():
            if key in ("input_ids", "attention_mask") or not isinstance(value, torch.Tensor):
                continue
            if value.dim() == 2 and value.shape[0] == 1 and value.shape[1] == len(seg):
                per_token.setdefault(key, []).append(value[0])
            else:
                per_image.setdefault(key, []).append(value)
    cutoff = spec.data.cutoff_len
    if len(ids) > cutoff:
        image_id = processor.tokenizer.convert_tokens_to_ids(token)
        if image_id in ids[cutoff:]:
            return None
        ids, labels = ids[:cutoff], labels[:cutoff]
        per_token = {k: [torch.cat(v)[:cutoff]] for k, v in per_token.items()}
    if all(label == IGNORE for label in labels):
        return None
    sample = {"input_ids": ids, "labels": labels}
    sample.update({k: torch.cat(v) for k, v in per_token.items()})
    sample.update({k: torch.cat(v) for k, v in per_image.items()})
    return sample


class VisionCollator:
    """Pads input_ids (pad id), labels (-100), attention_mask and per-token tensors (0) to the batch's longest row;
    the per-image tensors (pixel values, grids) of the batch's rows are concatenated in order."""

    def __init__(self, pad_id: int):
        self.pad_id = pad_id

    def __call__(self, features: list[dict]) -> dict:
        import torch

        width = max(len(f["input_ids"]) for f in features)
        ids = torch.full((len(features), width), self.pad_id, dtype=torch.long)
        labels = torch.full((len(features), width), IGNORE, dtype=torch.long)
        mask = torch.zeros((len(features), width), dtype=torch.long)
        batch: dict = {"input_ids": ids, "labels": labels, "attention_mask": mask}
        for i, f in enumerate(features):
            n = len(f["input_ids"])
            ids[i, :n] = torch.tensor(f["input_ids"])
            labels[i, :n] = torch.tensor(f["labels"])
            mask[i, :n] = 1
        keys = {k for f in features for k in f} - {"input_ids", "labels"}
        for key in sorted(keys):
            values = [f[key] for f in features if key in f]
            if all(v.dim() == 1 and len(v) == len(f["input_ids"]) for v, f in zip(values, features)):
                pad = torch.zeros((len(features), width), dtype=values[0].dtype)
                for i, v in enumerate(values):
                    pad[i, : len(v)] = v
                batch[key] = pad
            else:
                batch[key] = torch.cat(values)
        return batch


def build_data(spec, processor, *, log=print):
    """TrainData of a vision-language run: every dataset row encoded (images opened, sized, processed), rows the
    cutoff would cut into an image's tokens left out and counted."""
    from engine.data.dataset_registry import check_datasets, load_rows
    from engine.data.rows import DataError
    from engine.spec.rules import resolve_dataset_dir
    from engine.trainer.dataset import TrainData, _problem

    d = spec.data
    ddir = resolve_dataset_dir(spec)  # an empty dataset_dir (the form's default) is the workspace's data folder
    problems = check_datasets(d.datasets, ddir, "sft") + check_datasets(d.eval_datasets, ddir, "sft")
    if problems:
        raise DataError(problems)
    rows = [r for name in d.datasets for r in load_rows(name, ddir, "sft")]
    if d.max_samples:
        rows = rows[: d.max_samples]
    samples, dropped = [], 0
    for row in rows:
        enc = encode_row(row, processor, spec)
        if enc is None:
            dropped += 1
        else:
            samples.append(enc)
    if not samples:
        raise DataError([_problem(ddir, "no trainable samples left (every answer was cut off at data.cutoff_len)")])
    images = sum(len(r.get("images") or []) for r in rows)
    tokens = sum(len(s["input_ids"]) for s in samples)
    image_id = processor.tokenizer.convert_tokens_to_ids(image_token(processor))
    image_tokens = sum(s["input_ids"].count(image_id) for s in samples)
    log(f"vision data: {len(samples)} samples, {images} images, {image_tokens} image tokens of {tokens}")
    stats = {
        "num_train_samples": len(samples),
        "num_images": images,
        "image_tokens": image_tokens,
        "tokens": tokens,
        "dropped_cut_images": dropped,
        "packing": False,
        "padding_free": False,
        "packing_reason": NO_PACKING,
    }
    return TrainData(samples, None, VisionCollator(processor.tokenizer.pad_token_id), stats)


def _part(model, names: tuple[str, ...]):
    for name in names:
        obj = model
        for attr in name.split("."):
            obj = getattr(obj, attr, None)
            if obj is None:
                break
        if obj is not None:
            return obj
    return None


def frozen_prefixes(spec, model) -> list[str]:
    """The parameter name prefixes of the parts the spec keeps frozen."""
    v = spec.model.vision
    names = {id(m): n for n, m in model.named_modules()}
    out = []
    for frozen, where in (
        (v.freeze_vision_tower, VISION_TOWER),
        (v.freeze_multi_modal_projector, PROJECTOR),
        (v.freeze_language_model, LANGUAGE_MODEL),
    ):
        part = _part(model, where)
        if frozen and part is not None and where is VISION_TOWER and hasattr(part, "merger"):
            # a Qwen tower holds its projector (``visual.merger``): the tower is the rest of it, as LLaMA-Factory keys
            # it (patch_embed, pos_embed, blocks, deepstack_merger_list)
            out += [f"{names[id(part)]}.{k}." for k in QWEN_TOWER if getattr(part, k, None) is not None]
        elif frozen and part is not None and id(part) in names:
            out.append(names[id(part)] + ".")
        if frozen and where is LANGUAGE_MODEL:
            head = _part(model, ("lm_head",))
            if head is not None and id(head) in names:
                out.append(names[id(head)] + ".")
    return out


def lora_targets(spec, model) -> list[str]:
    """LoRA's target modules on a vision-language model: the linear layers (named by the spec's targets, or all)
    outside the frozen parts and the output head, as full module names (peft matches them exactly)."""
    import torch

    frozen = frozen_prefixes(spec, model)
    wanted = spec.method.lora.targets
    out = []
    for name, module in model.named_modules():
        if not isinstance(module, torch.nn.Linear) or name.endswith("lm_head"):
            continue
        if any(name.startswith(p) or (name + ".").startswith(p) for p in frozen):
            continue
        if wanted != ["all"] and name.rsplit(".", 1)[-1] not in wanted:
            continue
        out.append(name)
    if not out:
        raise ValueError("model.vision: every linear layer is in a frozen part; LoRA has nothing to train")
    return out


def apply_freeze_switches(spec, model) -> None:
    """Full and freeze fine-tuning: the parts the spec keeps frozen stop learning (LoRA never targets them)."""
    prefixes = frozen_prefixes(spec, model)
    for name, param in model.named_parameters():
        if any(name.startswith(p) for p in prefixes):
            param.requires_grad_(False)
    if not any(p.requires_grad for p in model.parameters()):
        raise ValueError("model.vision: every part is frozen; nothing would learn")
