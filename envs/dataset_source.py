"""Reading a dataset named by the user: a local file, a local dataset directory or a hub name.

One reader for the math task's `task.dataset` and the benchmarks' `--data`, so the same source
reads the same way in training and in evaluation. A source is, in this order:

1. an existing file: CSV, JSON, JSON lines, parquet or arrow (`envs.data_files.read_rows`);
2. an existing directory: one written by `datasets`' `save_to_disk` (a Dataset, or a
   DatasetDict from which `split` is taken), else a folder of data files that
   `datasets.load_dataset(directory, split=split)` reads;
3. anything else is a hub dataset name (`org/name`, optionally `org/name:config`), loaded with
   `datasets.load_dataset(name, config, split=split)`. With `HF_HUB_OFFLINE` or
   `HF_DATASETS_OFFLINE` set it is read from the local cache only, and a dataset that is not
   there fails at once with one line saying how to fetch it (nothing waits on a network).

A name that looks like a path (a known extension, or starting with `/`, `./`, `../`, `~`) but
does not exist is a missing file, never a hub lookup. Every failure is a `DatasetSourceError`
(a ValueError) with a one-line message.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from envs.data_files import FORMATS, DataFileError, read_rows

_TRUTHY = {"1", "true", "yes", "on"}
_PATH_PREFIXES = ("/", "./", "../", "~")


class DatasetSourceError(ValueError):
    """A dataset that cannot be found or read (one-line message naming it and the fix)."""


def offline_reason() -> str | None:
    """Which environment variable declares the hub offline (None when neither does)."""
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        if os.environ.get(var, "").strip().lower() in _TRUTHY:
            return f"{var} is set"
    return None


def looks_like_path(source: str) -> bool:
    """Whether `source` names a local path rather than a hub dataset (see the module docstring)."""
    return source.startswith(_PATH_PREFIXES) or Path(source).suffix.lower() in FORMATS


def read_dataset(
    source: str | Path, split: str = "train", split_option: str | None = None
) -> list[dict[str, Any]]:
    """Rows of the dataset `source` (file, dataset directory or hub name) as plain dicts.

    `split` picks the split of a DatasetDict directory or a hub dataset (a single file has one);
    `split_option` is the setting that chooses it, named when the split is missing. Raises
    DatasetSourceError naming the source and the fix.
    """
    text = str(source)
    path = Path(text).expanduser()
    if path.is_dir():
        return _read_directory(path, split, split_option)
    if not path.is_file() and not looks_like_path(text):
        return _read_hub(text, split)
    if not path.exists() and not path.suffix:
        raise DatasetSourceError(f"{text}: no such file or directory")
    try:  # an existing file, or a missing one with an extension: read_rows names the problem
        return read_rows(path)
    except DataFileError as exc:
        raise DatasetSourceError(str(exc)) from None


def _pick_split(data: Any, split: str, origin: str, split_option: str | None) -> Any:
    """`data[split]` of a DatasetDict (one-line error naming the splits), or `data` itself."""
    import datasets

    if isinstance(data, datasets.DatasetDict):
        if split not in data:
            fix = f"set {split_option} to one of" if split_option else "its splits are"
            raise DatasetSourceError(f"{origin} has no split {split!r}; {fix}: {', '.join(data)}")
        return data[split]
    return data


def _read_directory(path: Path, split: str, split_option: str | None) -> list[dict[str, Any]]:
    """A `save_to_disk` directory (Dataset or DatasetDict), else a folder of data files."""
    import datasets

    saved = any((path / name).is_file() for name in ("dataset_info.json", "state.json", "dataset_dict.json"))
    try:
        if saved:
            data = _pick_split(datasets.load_from_disk(str(path)), split, str(path), split_option)
        else:
            data = datasets.load_dataset(str(path), split=split)
    except DatasetSourceError:
        raise
    except Exception as exc:  # unreadable files, a missing split in a data-file folder
        raise DatasetSourceError(f"{path}: cannot read as a dataset: {_first_line(exc)}") from None
    return data.to_list()


def _read_hub(name: str, split: str) -> list[dict[str, Any]]:
    """A hub dataset `org/name[:config]`; offline, from the local cache or a one-line error."""
    dataset_id, _, config = name.partition(":")
    reason = offline_reason()
    fix = (
        f"download it once with network access (python -c \"import datasets; datasets.load_dataset('{dataset_id}'"
        f'{f", {config!r}" if config else ""})"), or pass a local file or directory'
    )
    if reason is not None and not hub_cache_has(dataset_id):
        raise DatasetSourceError(f"dataset {name!r} is not in the local datasets cache and {reason}: {fix}")
    try:
        import datasets

        data = datasets.load_dataset(dataset_id, config or None, split=split)
    except Exception as exc:  # network, auth, cache miss in offline mode, unknown split
        raise DatasetSourceError(
            f"cannot load dataset {name!r} (split {split!r}): {_first_line(exc)}; {fix}"
        ) from None
    return data.to_list()


def hub_cache_has(dataset_id: str) -> bool:
    """Whether the local Hugging Face caches hold anything for `dataset_id` (cheap directory check)."""
    home = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface"))
    hub = Path(os.environ.get("HF_HUB_CACHE", home / "hub")) / ("datasets--" + dataset_id.replace("/", "--"))
    if hub.is_dir():
        return True
    ds_cache = Path(os.environ.get("HF_DATASETS_CACHE", home / "datasets"))
    wanted = dataset_id.replace("/", "___").lower()
    return ds_cache.is_dir() and any(p.name.lower() == wanted for p in ds_cache.iterdir())


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__
