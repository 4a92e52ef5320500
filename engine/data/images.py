"""Images in datasets: LLaMA-Factory's multimodal layout (``<image>`` placeholders in the messages and an ``images``
column of paths relative to the dataset folder, or URLs; ``columns.images`` in ``dataset_info.json``), checked row by
row before launch: a missing or unreadable image, an image outside the dataset's folders, one far larger than the
processor's maximum. Each problem names the file, row and column.

Light: stdlib, and PIL (images are opened for their header only, never decoded here). Never torch, transformers or
datasets. Videos and audio are refused by the entry check (``engine.data.rows``).
"""

from __future__ import annotations

import json
from pathlib import Path

from engine.data.admit import inside, roots
from engine.data.messages import message
from engine.data.rows import DataProblem

IMAGE_PLACEHOLDER = "<image>"  # LF's placeholder; the trainer swaps it for the processor's image token
LF_IMAGE_MAX_PIXELS = 768 * 768  # LF's image_max_pixels default
LF_IMAGE_MIN_PIXELS = 32 * 32  # LF's image_min_pixels default
FAR_LARGER = 16  # an image over this many times image_max_pixels is refused: it is decoded whole, then shrunk
MAX_IMAGE_PROBLEMS = 20  # then one line counting the rest


def is_url(ref: str) -> bool:
    return ref.startswith(("http://", "https://"))


def placeholders(messages: list[dict]) -> int:
    """How many ``<image>`` placeholders a canonical row's messages hold."""
    return sum(str(m.get("content", "")).count(IMAGE_PLACEHOLDER) for m in messages)


def resolve(ref: str, dataset_dir: Path) -> str:
    """An image reference as the trainer opens it: a URL as is, a relative path under the dataset folder (LF's
    ``media_dir`` default), an absolute path as is."""
    if is_url(ref):
        return ref
    path = Path(ref).expanduser()
    return str(path if path.is_absolute() else dataset_dir / path)


def image_problems(
    rows: list[tuple[int, dict]],
    file: str,
    column: str,
    dataset_dir: Path,
    max_pixels: int | None = None,
) -> list[DataProblem]:
    """Check every image of ``rows`` ((row number, canonical row) pairs, whose ``images`` are resolved here in
    place): it must be a readable image inside the dataset folder or the workspace's uploads, and at most
    ``FAR_LARGER`` times ``max_pixels`` (LF's default when None). URLs are kept, not fetched (a run fetches them)."""
    from PIL import Image, UnidentifiedImageError

    limit = (max_pixels or LF_IMAGE_MAX_PIXELS) * FAR_LARGER
    allowed = roots(dataset_dir)
    found: list[DataProblem] = []
    more = 0
    for rowno, row in rows:
        resolved = []
        for ref in row.get("images") or []:
            path = resolve(ref, dataset_dir)
            resolved.append(path)
            if is_url(path):
                continue
            msg = None
            p = Path(path)
            if not p.exists():
                msg = message("data.image_missing", image=ref)
            elif not inside(p, allowed):
                msg = message("data.image_outside", image=ref, folder=str(dataset_dir))
            elif not p.is_file():
                msg = message("data.image_not_file", image=ref)
            else:
                try:
                    with Image.open(p) as img:
                        width, height = img.size
                except (OSError, UnidentifiedImageError, ValueError, Image.DecompressionBombError) as exc:
                    msg = message("data.image_unreadable", image=ref, error=f"{type(exc).__name__}: {exc}"[:200])
                else:
                    if width * height > limit:
                        msg = message(
                            "data.image_too_large",
                            image=ref,
                            width=width,
                            height=height,
                            pixels=width * height,
                            max_pixels=max_pixels or LF_IMAGE_MAX_PIXELS,
                            factor=FAR_LARGER,
                        )
            if msg is not None:
                if len(found) < MAX_IMAGE_PROBLEMS:
                    found.append(DataProblem(file, rowno, column, msg))
                else:
                    more += 1
        row["images"] = resolved
    if more:
        found.append(DataProblem(file, None, column, message("data.image_more", more=more)))
    return found


def count_images(rows: list[dict]) -> int:
    """The images the canonical rows hold."""
    return sum(len(r.get("images") or []) for r in rows)


# Vision-language families whose image tokens follow the image's size, and the pixel bounds of the processors they
# publish (preprocessor_config.json: min_pixels / max_pixels; Qwen3-VL's size shortest_edge / longest_edge)
SIZED_FAMILIES = {"qwen2_vl": (3136, 12845056), "qwen2_5_vl": (3136, 12845056), "qwen3_vl": (65536, 16777216)}


def fitted_size(width: int, height: int, max_pixels: int, min_pixels: int) -> tuple[int, int]:
    """An image's size once shrunk or enlarged (aspect kept) into [min_pixels, max_pixels], as LLaMA-Factory's
    plugins and the trainer (engine.trainer.vision.open_image) do."""
    import math

    if width * height > max_pixels:
        f = math.sqrt(max_pixels / (width * height))
        return max(1, int(width * f)), max(1, int(height * f))
    if width * height < min_pixels:
        f = math.sqrt(min_pixels / (width * height))
        return max(1, math.ceil(width * f)), max(1, math.ceil(height * f))
    return width, height


def sized_grid(config: dict, width: int, height: int, max_pixels: int, min_pixels: int) -> tuple[int, int]:
    """(patches through the tower, tokens in the language model) for one image of a Qwen-VL family: fitted into
    the pixel bounds, then the processor's smart_resize (each side the nearest multiple of patch x merge pixels, kept
    within the processor's own bounds)."""
    import math

    vision = config.get("vision_config") or {}
    patch, merge = int(vision.get("patch_size", 14)), int(vision.get("spatial_merge_size", 2))
    factor = patch * merge
    low, high = SIZED_FAMILIES[config["model_type"]]
    w, h = fitted_size(width, height, max_pixels, min_pixels)
    h_bar, w_bar = max(factor, round(h / factor) * factor), max(factor, round(w / factor) * factor)
    if h_bar * w_bar > high:
        beta = math.sqrt(h * w / high)
        h_bar = max(factor, math.floor(h / beta / factor) * factor)
        w_bar = max(factor, math.floor(w / beta / factor) * factor)
    elif h_bar * w_bar < low:
        beta = math.sqrt(low / (h * w))
        h_bar, w_bar = math.ceil(h * beta / factor) * factor, math.ceil(w * beta / factor) * factor
    patches = (h_bar // patch) * (w_bar // patch)
    return patches, patches // (merge * merge)


def image_size(ref: str) -> tuple[int, int] | None:
    """(width, height) from the image file's header (not decoded); None for a URL or an unreadable file."""
    if is_url(ref):
        return None
    from PIL import Image

    try:
        with Image.open(ref) as img:
            return img.size
    except (OSError, ValueError):
        return None


def model_config(model_dir: str | Path) -> dict | None:
    try:
        return json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def row_image_tokens(model_dir: str | Path, refs: list[str], max_pixels: int = LF_IMAGE_MAX_PIXELS,
                     min_pixels: int = LF_IMAGE_MIN_PIXELS) -> int | None:  # fmt: skip
    """The tokens a row's images become with this model: a fixed count each (LLaVA, Gemma 3), or for a Qwen-VL
    family each image by its own size; None when the model's count is not known or an image cannot be sized."""
    per = tokens_per_image(model_dir)
    if per is not None:
        return per * len(refs)
    config = model_config(model_dir)
    if not config or config.get("model_type") not in SIZED_FAMILIES:
        return None
    total = 0
    for ref in refs:
        size = image_size(ref)
        if size is None:
            return None
        total += sized_grid(config, size[0], size[1], max_pixels, min_pixels)[1]
    return total


def tokens_per_image(model_dir: str | Path) -> int | None:
    """How many tokens the model's processor puts in for one image, read from its config.json, for the families
    whose count is fixed (LLaVA: ``image_seq_length``, else the tower's patches; Gemma 3: ``mm_tokens_per_image``);
    None for others (Qwen2-VL's grows with the image) or no readable config."""
    config = model_config(model_dir)
    return None if config is None else fixed_tokens(config)


def fixed_tokens(config: dict) -> int | None:
    """``tokens_per_image`` from a config.json already read (the planner's too)."""
    kind = config.get("model_type")
    if kind == "llava":
        if isinstance(config.get("image_seq_length"), int):
            return config["image_seq_length"]
        vision = config.get("vision_config") or {}
        size, patch = vision.get("image_size"), vision.get("patch_size")
        if isinstance(size, int) and isinstance(patch, int) and patch:
            extra = 0 if config.get("vision_feature_select_strategy", "default") == "default" else 1
            return (size // patch) ** 2 + extra
    if kind == "gemma3" and isinstance(config.get("mm_tokens_per_image"), int):
        return config["mm_tokens_per_image"]
    return None
