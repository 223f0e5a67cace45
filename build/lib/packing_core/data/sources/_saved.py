"""A ``datasets.Dataset.save_to_disk`` folder: its Arrow files, from ``state.json`` (every split of a DatasetDict).

    saved/                     saved_dataset(Path("saved")) -> [saved/data-00000-of-00001.arrow]
      state.json               {"_data_files": [{"filename": "data-00000-of-00001.arrow"}], ...}
      data-00000-of-00001.arrow

The index is read whole (bounded, plain JSON) and may name only plain file names in the folder.
"""
from __future__ import annotations

from pathlib import Path

import packing_core.data.sources._base as base
from packing_core._validate import MAX_JSON_BYTES
from packing_core.data.sources._safe_json import load_json


def shard(path: Path, fmt: str | None = None) -> base.Source:
    """One file of a corpus as a Source named "shard PATH"; only regular files, only registered formats."""
    fmt = fmt or base.fmt_of(path.name)
    if fmt is None:
        raise base.SourceError(f"cannot tell the format of {base.display(str(path))!r} from its name; use one of "
                               f"{', '.join(base.SUFFIXES)}")
    return base.open_source(path, fmt, name=f"shard {base.display(str(path))}")


def _plain_name(value, what: str, where: Path) -> str:
    """A file or folder name inside a saved dataset: no path, no '..' (a damaged index cannot send us elsewhere)."""
    if not isinstance(value, str) or not value or value in (".", "..") or "/" in value or "\\" in value:
        raise base.SourceError(f"{base.display(str(where))} lists {base.display(str(value))[:80]!r} as {what}, which "
                               "is not a plain name in that folder; save the dataset again with save_to_disk")
    return value


def _saved_json(path: Path) -> dict:
    data = load_json(base.open_source(path, base.WHOLE).read_all(MAX_JSON_BYTES, "the dataset index"), str(path))
    if not isinstance(data, dict):
        raise base.SourceError(f"{base.display(str(path))} holds a JSON {type(data).__name__}, not an object; save "
                               "the dataset again with save_to_disk")
    return data


def saved_dataset(folder: Path) -> list[base.Source] | None:
    """The Arrow files of a ``save_to_disk`` folder, or None when the folder is no saved dataset."""
    if (folder / "dataset_dict.json").exists():
        index = folder / "dataset_dict.json"
        splits = _saved_json(index).get("splits", [])
        if not isinstance(splits, list):
            raise base.SourceError(f"{base.display(str(index))}: splits is not a list of names; save the dataset again")
        out = []
        for split in splits:
            sub = folder / _plain_name(split, "a split", index)
            if (sub / "dataset_dict.json").exists():
                raise base.SourceError(f"{base.display(str(index))}: split {base.display(split)!r} is itself a "
                                       "DatasetDict; save the dataset again with save_to_disk")
            out += saved_dataset(sub) or []
        return out
    state = folder / "state.json"
    if not state.exists():
        return None
    try:
        files = [_plain_name(f["filename"], "a data file", state) for f in _saved_json(state)["_data_files"]]
    except (KeyError, TypeError) as e:
        raise base.SourceError(f"{base.display(str(state))} is not a datasets state.json (no {e}); save the dataset "
                               "again with Dataset.save_to_disk") from None
    missing = [f for f in files if not (folder / f).is_file()]
    if missing:
        raise base.SourceError(f"{base.display(str(folder))} lists {base.display(missing[0])!r} in state.json but the "
                               "file is missing; copy the whole folder that save_to_disk wrote")
    return [shard(folder / f, base.fmt_of(f) or "arrow") for f in files]
