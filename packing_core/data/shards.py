"""Corpora as shards: a file, a folder, a glob, or a ``datasets.Dataset.save_to_disk`` folder.

``find_shards`` turns what the user typed into a sorted list of files, each with its
format; ``shard_batches`` reads the chosen columns of one shard, batch by batch::

    corpus/                    find_shards(["corpus"])        -> [part-0.parquet, part-1.parquet]
      part-0.parquet           find_shards(["corpus/*.jsonl"]) -> []  -> ValueError naming the glob
      part-1.parquet
    saved/ (save_to_disk)      find_shards(["saved"])         -> [saved/data-00000-of-00001.arrow]

Every library error leaves as a ``ValueError`` naming the shard and the fix.
"""
from __future__ import annotations

import glob
import gzip
import json
import os
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

SUFFIXES = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl",
            ".jsonl.gz": "jsonl.gz", ".ndjson.gz": "jsonl.gz", ".json.gz": "jsonl.gz",
            ".parquet": "parquet", ".txt": "txt", ".arrow": "arrow"}
BATCH_ROWS = 4096
Where = Callable[[int], str]


@dataclass(frozen=True)
class Shard:
    """One file of a corpus (or a range of a Parquet file's row groups): path, format, size in bytes.

    ``row_groups`` ``(first, stop)`` makes one task of part of a big Parquet file, so a
    single file still spreads over every worker (see :func:`split_parquet`).
    """

    path: str
    fmt: str
    size: int
    row_groups: tuple[int, int] | None = None

    @property
    def name(self) -> str:
        return self.path


def _fmt_of(path: Path) -> str | None:
    name = path.name.lower()
    for suffix in sorted(SUFFIXES, key=len, reverse=True):
        if name.endswith(suffix):
            return SUFFIXES[suffix]
    return None


def _shard(path: Path) -> Shard:
    fmt = _fmt_of(path)
    if fmt is None:
        raise ValueError(f"cannot tell the format of {str(path)!r} from its name; use one of "
                         f"{', '.join(SUFFIXES)}")
    return Shard(str(path), fmt, path.stat().st_size)


def _saved_dataset(folder: Path) -> list[Shard] | None:
    """The Arrow files of a ``save_to_disk`` folder (a Dataset, or every split of a DatasetDict)."""
    if (folder / "dataset_dict.json").is_file():
        splits = json.loads((folder / "dataset_dict.json").read_text()).get("splits", [])
        return [s for split in splits for s in (_saved_dataset(folder / split) or [])]
    state = folder / "state.json"
    if not state.is_file():
        return None
    try:
        files = [f["filename"] for f in json.loads(state.read_text())["_data_files"]]
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{state} is not a datasets state.json ({e}); save the dataset again with "
                         "Dataset.save_to_disk") from None
    missing = [f for f in files if not (folder / f).is_file()]
    if missing:
        raise ValueError(f"{folder} lists {missing[0]!r} in state.json but the file is missing; copy the "
                         "whole folder that save_to_disk wrote")
    return [Shard(str(folder / f), "arrow", (folder / f).stat().st_size) for f in files]


def find_shards(inputs) -> list[Shard]:
    """The shards named by files, folders and globs, in a stable (sorted) order."""
    inputs = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    if not inputs:
        raise ValueError("no input given; pass a file, a folder or a glob such as 'data/*.parquet'")
    shards: list[Shard] = []
    for given in map(str, inputs):
        path = Path(given).expanduser()
        if any(c in given for c in "*?["):
            matches = sorted(glob.glob(str(path), recursive=True))
            files = [Path(m) for m in matches if Path(m).is_file() and _fmt_of(Path(m))]
            if not files:
                raise ValueError(f"the glob {given!r} matches no data files; check the pattern "
                                 f"(quote it so the shell leaves it alone) and the folder ({os.getcwd()})")
            shards += [_shard(f) for f in files]
        elif path.is_dir():
            saved = _saved_dataset(path)
            if saved is None:
                saved = [_shard(f) for f in sorted(path.rglob("*"))
                         if f.is_file() and not f.name.startswith(".") and _fmt_of(f)]
            if not saved:
                raise ValueError(f"the folder {given!r} holds no data files ({', '.join(SUFFIXES)})")
            shards += saved
        elif path.is_file():
            shards.append(_shard(path))
        else:
            raise ValueError(f"input not found: {given!r}; check the path and the current folder ({os.getcwd()})")
    return shards


# --- reading -------------------------------------------------------------------------

def _bad(shard: Shard, e: Exception) -> ValueError:
    return ValueError(f"shard {shard.path} is unreadable or truncated ({type(e).__name__}: {e}); "
                      "check or re-create that file")


def _arrow_reader(shard: Shard):
    source = pa.memory_map(shard.path)
    try:
        return pa.ipc.open_stream(source)     # what save_to_disk writes
    except pa.ArrowInvalid:
        return pa.ipc.open_file(source)


def _jsonl_lines(shard: Shard) -> Iterator[tuple[int, str]]:
    opener = gzip.open if shard.fmt == "jsonl.gz" else open
    with opener(shard.path, "rt", encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if line.strip():
                yield i, line


def split_parquet(shard: Shard, pieces: int) -> list[Shard]:
    """A Parquet shard as up to ``pieces`` ranges of its row groups (other shards stay whole)."""
    groups = pq.ParquetFile(shard.path).metadata.num_row_groups if shard.fmt == "parquet" and pieces > 1 else 0
    if groups < 2:
        return [shard]
    k = min(pieces, groups)
    bounds = sorted({round(i * groups / k) for i in range(k + 1)})
    return [Shard(shard.path, shard.fmt, shard.size * (b - a) // groups, (a, b)) for a, b in zip(bounds, bounds[1:])]


def shard_columns(shard: Shard) -> list[str]:
    """Column names of a shard (for JSON Lines: the keys of its first record)."""
    try:
        if shard.fmt == "txt":
            return ["text"]
        if shard.fmt == "parquet":
            return list(pq.ParquetFile(shard.path).schema_arrow.names)
        if shard.fmt == "arrow":
            return list(_arrow_reader(shard).schema.names)
        if shard.fmt in ("csv", "tsv"):
            with open(shard.path, "rb") as f:
                opts = pa_csv.ParseOptions(delimiter="\t" if shard.fmt == "tsv" else ",")
                return list(pa_csv.open_csv(f, parse_options=opts).schema.names)
        for lineno, line in _jsonl_lines(shard):
            record = json.loads(line)
            if not isinstance(record, dict):
                raise ValueError(f"shard {shard.path} line {lineno} is not a JSON object")
            return list(record)
        return []
    except ValueError as e:
        if str(e).startswith("shard "):
            raise
        raise _bad(shard, e) from None
    except (pa.ArrowException, OSError, EOFError, zlib.error) as e:
        raise _bad(shard, e) from None


def shard_batches(shard: Shard, columns: list[str]) -> Iterator[tuple[dict[str, list], Where]]:
    """Yield ``({column: values}, where)`` for the chosen columns, ``BATCH_ROWS`` records at a time.

    ``where(i)`` names record ``i`` of the batch ("shard a.jsonl line 12") for error messages.
    """
    try:
        if shard.fmt == "parquet":
            pf = pq.ParquetFile(shard.path)
            groups, offset = None, 0
            if shard.row_groups is not None:
                groups = list(range(*shard.row_groups))
                offset = sum(pf.metadata.row_group(g).num_rows for g in range(shard.row_groups[0]))
            batches = pf.iter_batches(batch_size=BATCH_ROWS, columns=columns, row_groups=groups)
            yield from _arrow_batches(shard, batches, columns, offset=offset)
        elif shard.fmt == "arrow":
            yield from _arrow_batches(shard, _arrow_reader(shard), columns)
        elif shard.fmt in ("csv", "tsv"):
            with open(shard.path, "rb") as f:
                reader = pa_csv.open_csv(
                    f, parse_options=pa_csv.ParseOptions(delimiter="\t" if shard.fmt == "tsv" else ",",
                                                         newlines_in_values=True),
                    convert_options=pa_csv.ConvertOptions(include_columns=columns,
                                                          column_types={c: pa.string() for c in columns}))
                yield from _arrow_batches(shard, reader, columns, first_row=2)
        elif shard.fmt == "txt":
            yield from _txt_batches(shard)
        else:
            yield from _jsonl_batches(shard, columns)
    except (pa.ArrowException, OSError, EOFError, zlib.error, UnicodeDecodeError) as e:
        raise _bad(shard, e) from None


def _arrow_batches(shard, batches, columns, first_row=1, offset=0):
    for batch in batches:
        missing = [c for c in columns if c not in batch.schema.names]
        if missing:
            raise ValueError(f"shard {shard.path} has no column {missing[0]!r} (columns: {batch.schema.names}); "
                             "every shard must hold the same columns")
        data = {c: batch.column(batch.schema.get_field_index(c)).to_pylist() for c in columns}
        label = "data row" if first_row == 2 else "row"
        yield data, (lambda i, o=offset, lab=label: f"shard {shard.path} {lab} {o + i + 1}")
        offset += batch.num_rows


def _txt_batches(shard):
    lines, numbers = [], []
    for i, line in _txt_lines(shard):
        lines.append(line)
        numbers.append(i)
        if len(lines) == BATCH_ROWS:
            yield {"text": lines}, (lambda k, n=numbers: f"shard {shard.path} line {n[k]}")
            lines, numbers = [], []
    if lines:
        yield {"text": lines}, (lambda k, n=numbers: f"shard {shard.path} line {n[k]}")


def _txt_lines(shard):
    with open(shard.path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            line = line.rstrip("\r\n")
            if line.strip():
                yield i, line


def _jsonl_batches(shard, columns):
    data: dict[str, list] = {c: [] for c in columns}
    numbers: list[int] = []
    for lineno, line in _jsonl_lines(shard):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"shard {shard.path} line {lineno} is not valid JSON ({e.msg} at column {e.colno}); "
                             "JSON Lines needs one complete object per line") from None
        if not isinstance(record, dict):
            raise ValueError(f"shard {shard.path} line {lineno} is a JSON {type(record).__name__}, not an object")
        for c in columns:
            data[c].append(record.get(c))
        numbers.append(lineno)
        if len(numbers) == BATCH_ROWS:
            yield data, (lambda k, n=numbers: f"shard {shard.path} line {n[k]}")
            data, numbers = {c: [] for c in columns}, []
    if numbers:
        yield data, (lambda k, n=numbers: f"shard {shard.path} line {n[k]}")
