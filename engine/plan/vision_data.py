"""The images one sample of the run's data holds, as the planner counts them: read from the datasets' first rows
(the same bounded read as the Datasets tab's), each image sized from its file's header as the trainer sizes it.

A sample's images cost the tower its patches and the language model its tokens; the plan counts the sample whose
images are the most (its images, patches and tokens each the largest met), so a dataset with two images per row
plans twice the image activations of one with a single image, and small Qwen images plan fewer tokens than
``image_max_pixels`` allows. Rows that cannot be read before launch (a hub dataset not downloaded yet, a URL image)
are planned as one image of the largest size per sample, and the plan says so.

Light: stdlib, PIL (image headers) through engine.data.images, the dataset registry. Results are kept per file
state, so the plan panel reads the data again only when it changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

PLAN_IMAGE_ROWS = 200  # the rows of each dataset whose images are sized (the Datasets tab's bounded head read)
_CACHE: dict[tuple, SampleImages] = {}
_CACHE_SIZE = 16


@dataclass(frozen=True)
class SampleImages:
    images: int  # the most images one sample holds
    patches: int  # the most patches one sample's images are in the tower
    tokens: int  # the most tokens one sample's images are in the sequence
    rows: int  # rows read; 0: none could be, so one image of the largest size per sample is planned

    @property
    def read(self) -> bool:
        return self.rows > 0


def largest_image(config: dict[str, Any], max_pixels: int) -> SampleImages:
    """One image of the largest size per sample: what is planned when the data cannot be read."""
    from engine.plan.vision_shape import image_grid

    patches, tokens = image_grid(config, max_pixels)
    return SampleImages(1, patches, tokens, 0)


def _image_grid(config: dict, ref: str, max_pixels: int, min_pixels: int) -> tuple[int, int]:
    """(patches, tokens) of one image: a Qwen image by its own size (the largest allowed when it cannot be sized
    here, e.g. a URL), the fixed count of the other families."""
    from engine.data.images import image_size, sized_grid
    from engine.plan.vision_shape import QWEN_FAMILIES, family, image_grid

    if family(config) in QWEN_FAMILIES:
        size = image_size(ref)
        if size is not None:
            return sized_grid(config, size[0], size[1], max_pixels, min_pixels)
    return image_grid(config, max_pixels)


def _stamp(name: str, ddir: Path) -> tuple:
    """The dataset's file state (dataset_info.json and the file or folder its rows come from)."""
    from engine.data import dataset_registry as registry

    stamp: tuple = ()
    entry, _ = registry._resolve(name, ddir)
    paths: list[Any] = [ddir / "dataset_info.json"]
    if entry is not None:
        paths.append(registry._where(entry, ddir)[0])
    for p in paths:
        try:
            st = Path(p).stat()
            stamp += (str(p), st.st_mtime_ns, st.st_size)
        except (OSError, TypeError):
            stamp += (str(p),)
    return stamp


def sample_images(spec, config: dict[str, Any]) -> SampleImages:
    """The images of the run's heaviest sample (see the module's note), from the first ``PLAN_IMAGE_ROWS`` rows of
    each training dataset."""
    from engine.data import dataset_registry as registry
    from engine.spec.rules import resolve_dataset_dir

    v = spec.model.vision
    ddir = resolve_dataset_dir(spec)
    stage = "dpo" if spec.method.stage in ("dpo", "rm") else spec.method.stage
    best = (0, 0, 0)
    rows_read, unread = 0, False
    for name in spec.data.datasets:
        key = (name, str(ddir), stage, config.get("model_type"), v.image_max_pixels, v.image_min_pixels)
        key += _stamp(name, ddir)
        got = _CACHE.get(key)
        if got is None:
            try:
                rows, _problems = registry.head_rows(name, ddir, PLAN_IMAGE_ROWS, stage)
            except (OSError, ValueError, KeyError, TypeError):
                rows = []
            found = (0, 0, 0)
            for row in rows:
                refs = list(row.get("images") or [])
                grids = [_image_grid(config, ref, v.image_max_pixels, v.image_min_pixels) for ref in refs]
                sample = (len(refs), sum(p for p, _ in grids), sum(t for _, t in grids))
                found = tuple(max(a, b) for a, b in zip(found, sample))
            got = SampleImages(*found, len(rows))
            if len(_CACHE) >= _CACHE_SIZE:
                _CACHE.pop(next(iter(_CACHE)))
            _CACHE[key] = got
        if not got.read:  # a dataset not readable before launch: its samples are planned at the largest
            unread = True
            got = largest_image(config, v.image_max_pixels)
        rows_read += got.rows
        best = (max(best[0], got.images), max(best[1], got.patches), max(best[2], got.tokens))
    return SampleImages(*best, 0 if unread else rows_read)
