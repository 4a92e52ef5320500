"""Dataset file selection: which files of a local dataset folder or a hub dataset's snapshot a dataset entry reads,
as ``datasets.load_dataset`` picks them for a subset (a dataset card's config or a sub-folder), a split (saved
DatasetDict split folders, split keywords in file and folder names) and a folder (``data_dir``); and the files a
folder is read from (``folder_files``). engine.data.files reads the files chosen here.

Light: stdlib, plus yaml for a dataset card's ``configs:`` (imported only when a README.md has a YAML header).
Never torch, transformers or datasets.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from engine.data.messages import message

DATA_SUFFIXES = (".json", ".jsonl", ".csv", ".parquet", ".txt")  # the files a dataset folder is read from


_SPLIT_WORDS = {  # datasets' split keywords in file and folder names (datasets.data_files)
    "train": ("train", "training"),
    "validation": ("validation", "valid", "val", "dev"),
    "test": ("test", "testing", "eval", "evaluation"),
}


def _split_of(rel: Path) -> str | None:
    """The split a data file belongs to by its path, as datasets groups a folder's files: a path part (file stem
    or folder) that is a split keyword, or starts / ends with one before a separator; None when no part says."""
    parts = [*rel.parts[:-1], rel.name.split(".")[0]]
    for split, words in _SPLIT_WORDS.items():
        for part in parts:
            for word in words:
                if re.fullmatch(rf"(.*[-_. ])?{word}([-_. ].*)?", part.lower()):
                    return split
    return None


def _readme_configs(root: Path) -> dict[str, dict[str, list[str]]]:
    """The ``configs:`` of a dataset card (README.md's YAML header): config name -> split -> file patterns."""
    readme = root / "README.md"
    if not readme.is_file():
        return {}
    text = readme.read_text(encoding="utf-8", errors="replace")
    if not text.startswith("---"):
        return {}
    import yaml

    try:
        header = yaml.safe_load(text.split("---", 2)[1]) or {}
    except (yaml.YAMLError, IndexError):
        return {}
    out: dict[str, dict[str, list[str]]] = {}
    for cfg in header.get("configs") or [] if isinstance(header, dict) else []:
        if not isinstance(cfg, dict) or "config_name" not in cfg:
            continue
        files = cfg.get("data_files") or []
        if isinstance(files, str):
            files = [{"split": "train", "path": files}]
        splits: dict[str, list[str]] = {}
        for item in files if isinstance(files, list) else []:
            if isinstance(item, dict) and "path" in item:
                paths = item["path"] if isinstance(item["path"], list) else [item["path"]]
                splits.setdefault(str(item.get("split", "train")), []).extend(map(str, paths))
        out[str(cfg["config_name"])] = splits
    return out


def select_files(
    root: Path, *, subset: str | None = None, split: str = "train", folder: str | None = None
) -> tuple[list[Path], Any]:
    """(the data files of one split, problem or None) in a local dataset folder or a hub dataset's snapshot, as
    ``datasets.load_dataset(root, name=subset, split=split, data_dir=folder)`` chooses them: ``folder`` is a
    sub-folder; ``subset`` a config of the dataset card (README.md ``configs:``) or a sub-folder of that name; a
    saved DatasetDict's split folder; otherwise the files whose names say ``split`` (train-0000.parquet,
    test.json, validation/...), or every file for ``train`` when no name says a split."""
    base = root / folder if folder else root
    if not base.is_dir():
        return [], message("data.folder_missing", folder=folder, path=root)
    if (base / "dataset_dict.json").is_file():  # save_to_disk of a DatasetDict: one folder per split
        have = sorted(p.name for p in base.iterdir() if (p / "state.json").is_file())
        if split not in have:
            return [], message("data.split_missing", split=split, have=", ".join(have) or "none")
        return [base / split], None
    if (base / "state.json").is_file():
        return [base], None
    files = sorted(
        p
        for p in base.rglob("*")
        if p.is_file()
        and p.suffix.lower() in DATA_SUFFIXES
        and not any(part.startswith(".") for part in p.relative_to(base).parts)
    )
    if subset:
        configs = _readme_configs(base)
        if subset in configs:
            patterns = configs[subset].get(split)
            if patterns is None:
                return [], message("data.split_missing", split=split, have=", ".join(configs[subset]) or "none")
            chosen = [f for f in files if any(f.relative_to(base).match(pat) for pat in patterns)]
            return chosen, None if chosen else message("data.split_missing", split=split, have="none")
        if (base / subset).is_dir():
            base, files = base / subset, [f for f in files if f.is_relative_to(base / subset)]
        else:
            known = sorted(
                set(configs) | {p.name for p in base.iterdir() if p.is_dir() and not p.name.startswith(".")}
            )
            return [], message("data.subset_missing", subset=subset, known=", ".join(known) or "none")
    by_split = {f: _split_of(f.relative_to(base)) for f in files}
    if any(by_split.values()):
        chosen = [f for f, s in by_split.items() if s == split]
        if not chosen:
            have = ", ".join(sorted({s for s in by_split.values() if s}))
            return [], message("data.split_missing", split=split, have=have)
        return chosen, None
    if split != "train":
        return [], message("data.split_missing", split=split, have="train")
    return files, None


def folder_files(path: Path, files: list[Path] | None = None) -> list[Path]:
    """The data files a folder is read from: ``files`` as ``select_files`` chose them (one saved split folder stands
    for its files), a save_to_disk dataset's files (a DatasetDict's train split), or the folder's data files."""
    if files is not None and not (len(files) == 1 and files[0].is_dir()):
        return files
    if files:
        path = files[0]
    if (path / "dataset_dict.json").is_file():
        path = path / "train"
    if (path / "state.json").is_file():
        state = json.loads((path / "state.json").read_text(encoding="utf-8"))
        return [path / f["filename"] for f in state.get("_data_files", [])]
    return sorted(p for p in path.iterdir() if p.suffix.lower() in DATA_SUFFIXES)
