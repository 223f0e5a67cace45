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
import os
import re
import stat
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from packing_core._validate import MAX_JSON_BYTES, MAX_TEXT_BYTES
from packing_core.data.lines import BATCH_BYTES, chunks, decode, json_object
from packing_core.data.readers import check_regular, display, load_json, read_bytes

SUFFIXES = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl",
            ".jsonl.gz": "jsonl.gz", ".ndjson.gz": "jsonl.gz", ".json.gz": "jsonl.gz",
            ".parquet": "parquet", ".txt": "txt", ".arrow": "arrow"}
BATCH_ROWS = 4096
MAX_SHARDS = 100_000       # files one scan may take (a glob or a folder that finds more is refused)
MAX_DEPTH = 64             # folder levels a folder or a ``**`` glob descends
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
        """How messages name the shard ("shard data/a.jsonl: line 3 ...")."""
        return f"shard {display(self.path)}"


def _fmt_of(path: Path) -> str | None:
    name = path.name.lower()
    for suffix in sorted(SUFFIXES, key=len, reverse=True):
        if name.endswith(suffix):
            return SUFFIXES[suffix]
    return None


def _shard(path: Path) -> Shard:
    fmt = _fmt_of(path)
    if fmt is None:
        raise ValueError(f"cannot tell the format of {display(str(path))!r} from its name; use one of "
                         f"{', '.join(SUFFIXES)}")
    check_regular(path)   # a FIFO would block a worker forever, a device never ends
    return Shard(str(path), fmt, path.stat().st_size)


def _plain_name(value, what: str, where: Path) -> str:
    """A file or folder name inside a saved dataset: no path, no '..' (a damaged index cannot send us elsewhere)."""
    if not isinstance(value, str) or not value or value in (".", "..") or "/" in value or "\\" in value:
        raise ValueError(f"{display(str(where))} lists {display(str(value))[:80]!r} as {what}, which is not a plain name "
                         "in that folder; save the dataset again with save_to_disk")
    return value


def _saved_json(path: Path) -> dict:
    data = load_json(read_bytes(path, "the dataset index", MAX_JSON_BYTES), str(path))
    if not isinstance(data, dict):
        raise ValueError(f"{display(str(path))} holds a JSON {type(data).__name__}, not an object; save the dataset "
                         "again with save_to_disk")
    return data


def _saved_dataset(folder: Path) -> list[Shard] | None:
    """The Arrow files of a ``save_to_disk`` folder (a Dataset, or every split of a DatasetDict)."""
    if (folder / "dataset_dict.json").exists():
        index = folder / "dataset_dict.json"
        splits = _saved_json(index).get("splits", [])
        if not isinstance(splits, list):
            raise ValueError(f"{display(str(index))}: splits is not a list of names; save the dataset again")
        out = []
        for split in splits:
            sub = folder / _plain_name(split, "a split", index)
            if (sub / "dataset_dict.json").exists():
                raise ValueError(f"{display(str(index))}: split {split!r} is itself a DatasetDict; save the dataset "
                                 "again with save_to_disk")
            out += _saved_dataset(sub) or []
        return out
    state = folder / "state.json"
    if not state.exists():
        return None
    try:
        files = [_plain_name(f["filename"], "a data file", state) for f in _saved_json(state)["_data_files"]]
    except (KeyError, TypeError) as e:
        raise ValueError(f"{display(str(state))} is not a datasets state.json (no {e}); save the dataset again with "
                         "Dataset.save_to_disk") from None
    missing = [f for f in files if not (folder / f).is_file()]
    if missing:
        raise ValueError(f"{display(str(folder))} lists {missing[0]!r} in state.json but the file is missing; copy "
                         "the whole folder that save_to_disk wrote")
    return [_shard(folder / f) if _fmt_of(folder / f) else Shard(str(folder / f), "arrow", (folder / f).stat().st_size)
            for f in files]


def _walk(folder: Path, hidden: bool = False) -> Iterator[Path]:
    """Every file under ``folder`` in sorted order; each real folder is entered once.

    Links to folders are followed, but a folder reached again (through a link to itself or
    to a parent) is skipped, and at most ``MAX_DEPTH`` levels are descended: a self-linking
    folder cannot make a file count twice, or a walk go on for ever.
    """
    seen: set[tuple[int, int]] = set()

    def visit(d: Path, depth: int) -> Iterator[Path]:
        try:
            st = os.stat(d)
        except OSError:
            return
        key = (st.st_dev, st.st_ino)
        if key in seen or depth > MAX_DEPTH:
            return
        seen.add(key)
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError:
            return
        for e in entries:
            if not hidden and e.name.startswith("."):
                continue
            try:
                is_dir = e.is_dir()
            except OSError:
                continue
            if is_dir:
                yield from visit(Path(e.path), depth + 1)
            else:
                yield Path(e.path)

    yield from visit(folder, 0)


def _glob_regex(pattern: str) -> re.Pattern:
    r"""A compiled regex for a relative glob: ``**`` spans folders, ``*`` and ``?`` stay inside one name.

    >>> bool(_glob_regex("**/*.jsonl").match("a/b/c.jsonl")), bool(_glob_regex("*.jsonl").match("a/c.jsonl"))
    (True, False)
    """
    out = []
    parts = pattern.split("/")
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if part == "**":
            out.append(".*" if last else "(?:[^/]+/)*")
            continue
        seg, k = "", 0
        while k < len(part):
            c = part[k]
            if c == "*":
                seg += "[^/]*"
            elif c == "?":
                seg += "[^/]"
            elif c == "[" and (j := part.find("]", k + 2)) != -1:
                inner = part[k + 1:j]
                seg += "[" + ("^" + inner[1:] if inner.startswith("!") else inner).replace("\\", "\\\\") + "]"
                k = j
            else:
                seg += re.escape(c)
            k += 1
        out.append(seg + ("" if last else "/"))
    return re.compile("".join(out) + r"\Z", re.S)


def _glob(given: str) -> list[Path]:
    """Files matching a glob, each counted once; ``**`` walks with :func:`_walk` (loops cut, depth bounded)."""
    path = str(Path(given).expanduser())
    if "**" not in path:
        return [Path(m) for m in sorted(glob.glob(path))]   # one level per part: bounded even through links
    parts = path.split("/")
    first = next(i for i, part in enumerate(parts) if any(c in part for c in "*?["))
    base = Path("/".join(parts[:first]) or ("/" if path.startswith("/") else "."))
    regex = _glob_regex("/".join(parts[first:]))
    out = []
    for f in _walk(base):
        rel = os.path.relpath(f, base)
        if regex.match(rel):
            out.append(f if path.startswith("/") or parts[:first] else Path(rel))
            if len(out) > MAX_SHARDS:
                break
    return out


def _regular_once(paths) -> list[Path]:
    """Regular data files only (FIFOs and devices are skipped), one entry per real file (same inode: once)."""
    seen: set[tuple[int, int]] = set()
    out = []
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            continue
        key = (st.st_dev, st.st_ino)
        if not stat.S_ISREG(st.st_mode) or key in seen or not _fmt_of(p):
            continue
        seen.add(key)
        out.append(p)
        if len(out) > MAX_SHARDS:
            raise ValueError(f"more than {MAX_SHARDS:,} data files found; scan a smaller folder or a narrower glob")
    return out


def find_shards(inputs) -> list[Shard]:
    """The shards named by files, folders and globs, in a stable (sorted) order.

    Within one folder or glob each real file counts once (a hard link, or a folder reached
    again through a link, adds nothing); a file named twice on the command line counts twice.
    """
    inputs = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    if not inputs:
        raise ValueError("no input given; pass a file, a folder or a glob such as 'data/*.parquet'")
    shards: list[Shard] = []
    for given in map(str, inputs):
        path = Path(given).expanduser()
        if any(c in given for c in "*?["):
            files = _regular_once(_glob(given))
            if not files:
                raise ValueError(f"the glob {display(given)!r} matches no data files; check the pattern "
                                 f"(quote it so the shell leaves it alone) and the folder ({display(os.getcwd())})")
            shards += [_shard(f) for f in files]
        elif path.is_dir():
            saved = _saved_dataset(path)
            if saved is None:
                saved = [_shard(f) for f in _regular_once(_walk(path))]
            if not saved:
                raise ValueError(f"the folder {display(given)!r} holds no data files ({', '.join(SUFFIXES)})")
            shards += saved
        elif path.exists() or path.is_symlink():
            shards.append(_shard(path))
        else:
            raise ValueError(f"input not found: {display(given)!r}; check the path and the current folder "
                             f"({display(os.getcwd())})")
        if len(shards) > MAX_SHARDS:
            raise ValueError(f"more than {MAX_SHARDS:,} data files given; scan a smaller folder or a narrower glob")
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


def _open_binary(shard: Shard):
    return gzip.open(shard.path, "rb") if shard.fmt == "jsonl.gz" else open(shard.path, "rb")


def _lines(shard: Shard) -> Iterator[tuple[int, str]]:
    """Non-blank lines with their numbers, in blocks: a line past ``MAX_TEXT_BYTES`` is refused unread."""
    with _open_binary(shard) as f:
        for chunk, first in chunks(f, shard):
            for i, line in enumerate(decode(chunk, first, shard).split("\n")):
                if line.strip():
                    yield first + i, line


def _jsonl_lines(shard: Shard) -> Iterator[tuple[int, str]]:
    yield from _lines(shard)


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
            return list(json_object(line, lineno, shard))
        return []
    except (pa.ArrowException, OSError, EOFError, zlib.error) as e:   # library errors (ArrowInvalid is a
        raise _bad(shard, e) from None                               # ValueError: caught first); ours pass


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
            rows = _parquet_batch_rows(shard, pf.metadata, columns, groups)
            batches = pf.iter_batches(batch_size=rows, columns=columns, row_groups=groups)
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


def _parquet_batch_rows(shard: Shard, meta, columns: list[str], groups) -> int:
    """Rows per batch so that a batch decodes to about ``BATCH_BYTES``; refuses values past ``MAX_TEXT_BYTES``.

    From the metadata alone, before a page is decoded: a 16 KB file can hold one 500 MB
    text, and a worker must refuse it, as ``report`` does, not decode it.
    """
    index = [i for i in range(meta.num_columns) if meta.schema.column(i).path.split(".")[0] in columns]
    groups = range(meta.num_row_groups) if groups is None else groups
    widest = 1.0
    for g in groups:
        group = meta.row_group(g)
        decoded = sum(group.column(i).total_uncompressed_size for i in index)
        per_row = decoded / max(1, group.num_rows)
        if per_row > MAX_TEXT_BYTES:
            raise ValueError(f"shard {shard.path} row group {g} holds {decoded:,} bytes of {', '.join(columns)} in "
                             f"{group.num_rows:,} rows (from its metadata), more than one document may hold "
                             f"({MAX_TEXT_BYTES:,} bytes); split the long values or drop them")
        widest = max(widest, per_row)
    return int(min(BATCH_ROWS, max(1, BATCH_BYTES // widest)))


def _check_values(shard: Shard, batch, columns: list[str], where: Where) -> None:
    """No text value past ``MAX_TEXT_BYTES`` goes on to become a Python string (checked in Arrow)."""
    for c in columns:
        col = batch.column(batch.schema.get_field_index(c))
        if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)
                or pa.types.is_binary(col.type) or pa.types.is_large_binary(col.type)):
            if col.nbytes > 64 * MAX_TEXT_BYTES:   # nested (messages): the batch as a whole stays bounded
                raise ValueError(f"{where(0)}: a batch of {len(col):,} records holds {col.nbytes:,} bytes of {c!r}; "
                                 "some record is far longer than a document may be: split or drop it")
            continue
        sizes = pc.binary_length(col)
        top = pc.max(sizes).as_py()
        if top is not None and top > MAX_TEXT_BYTES:
            i = int(pc.index(sizes, top).as_py())
            raise ValueError(f"{where(i)}: {c!r} holds {top:,} bytes, more than one document may hold "
                             f"({MAX_TEXT_BYTES:,}); split the long value or drop it")


def _arrow_batches(shard, batches, columns, first_row=1, offset=0):
    for batch in batches:
        missing = [c for c in columns if c not in batch.schema.names]
        if missing:
            raise ValueError(f"shard {shard.path} has no column {missing[0]!r} (columns: {batch.schema.names}); "
                             "every shard must hold the same columns")
        label = "data row" if first_row == 2 else "row"
        _check_values(shard, batch, columns, lambda i, o=offset, lab=label: f"shard {shard.path} {lab} {o + i + 1}")
        data = {c: batch.column(batch.schema.get_field_index(c)).to_pylist() for c in columns}
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
    yield from _lines(shard)


def _jsonl_batches(shard, columns):
    data: dict[str, list] = {c: [] for c in columns}
    numbers: list[int] = []
    for lineno, line in _jsonl_lines(shard):
        record = json_object(line, lineno, shard)   # bad JSON, deep nesting, lone surrogates: one line each
        for c in columns:
            data[c].append(record.get(c))
        numbers.append(lineno)
        if len(numbers) == BATCH_ROWS:
            yield data, (lambda k, n=numbers: f"shard {shard.path} line {n[k]}")
            data, numbers = {c: [] for c in columns}, []
    if numbers:
        yield data, (lambda k, n=numbers: f"shard {shard.path} line {n[k]}")
