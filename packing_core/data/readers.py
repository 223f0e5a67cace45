"""Streaming readers: one column of a CSV/TSV, JSONL, Parquet or text file, batch by batch.

A reader never holds the whole file: it yields ``(values, where)`` per batch, where
``values`` is a pyarrow Array of the chosen column and ``where(i)`` names the place of
value ``i`` for error messages ("row 12", "line 7")::

    data.csv  "length,text\\n3,hi\\n5,hello\\n"  column "length"
    -> (["3", "5"], where)    where(1) == "data row 2"

CSV/TSV cells arrive as strings (the caller decides whether they are lengths or text);
Parquet and JSONL keep their own types. A plain text file has one column, ``text``:
one document per line. Every library error leaves here as a ``ValueError`` that names
the file, the place and the fix.
"""
from __future__ import annotations

import io
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

FORMATS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl",
           ".json": "jsonl", ".jsonlines": "jsonl", ".parquet": "parquet", ".txt": "txt"}
BATCH_BYTES = 8 << 20       # about this much of the file per batch, in every format
MAX_BATCH_ROWS = 65_536      # Parquet: cap on rows per batch when rows are tiny
_FMT_NAMES = sorted(set(FORMATS.values()))
_ALIASES = {"ndjson": "jsonl", "json": "jsonl", "jsonlines": "jsonl", "text": "txt"}

Where = Callable[[int], str]


@dataclass(frozen=True)
class Source:
    """A file to read: a path, or an in-memory upload (any binary file-like object)."""

    name: str
    fmt: str
    path: Path | None = None
    data: BinaryIO | None = None

    @contextmanager
    def open(self) -> Iterator[BinaryIO]:
        """The file as a binary stream at byte 0 (paths are opened, uploads rewound)."""
        if self.path is not None:
            try:
                f = open(self.path, "rb")
            except OSError as e:
                raise ValueError(f"cannot open {self.name!r} ({e.strerror}); check that it is "
                                 "a readable file") from None
            with f:
                yield f
        else:
            self.data.seek(0)
            yield self.data


def as_source(source, fmt: str | None = None) -> Source:
    """Resolve a path / file-like / bytes ``source`` and its format (suffix or ``fmt=``).

    >>> as_source(io.BytesIO(b"3\\n"), fmt="txt").fmt
    'txt'
    """
    data = path = None
    if isinstance(source, (str, os.PathLike)):
        path = Path(source).expanduser()
        name = str(source)
        if not path.exists():
            raise ValueError(f"file not found: {name!r}; check the path and the current folder "
                             f"({os.getcwd()})")
        if path.is_dir():
            raise ValueError(f"{name!r} is a folder, not a file; pass one file inside it")
    elif isinstance(source, (bytes, bytearray, memoryview)):
        data, name = io.BytesIO(bytes(source)), "<bytes>"
    elif hasattr(source, "read"):
        name = str(getattr(source, "name", None) or "<upload>")
        data = source
        if not (hasattr(source, "seek") and source.seekable()):
            data = io.BytesIO(source.read())    # one-shot streams: keep a rewindable copy
    else:
        raise ValueError(f"cannot read {type(source).__name__} as a file; pass a path, "
                         "bytes, or a binary file-like object such as an upload")
    return Source(name=name, fmt=_resolve_fmt(name, fmt), path=path, data=data)


def _resolve_fmt(name: str, fmt: str | None) -> str:
    if fmt is not None:
        key = str(fmt).lower().lstrip(".")
        key = _ALIASES.get(key, key)
        if key not in _FMT_NAMES:
            raise ValueError(f"unknown fmt={fmt!r}; use one of {_FMT_NAMES}")
        return key
    suffix = Path(name).suffix.lower()
    if suffix not in FORMATS:
        raise ValueError(f"cannot tell the format of {name!r} from its suffix {suffix or '(none)'!r}; "
                         f"use one of {', '.join(FORMATS)} or pass fmt= (one of {_FMT_NAMES})")
    return FORMATS[suffix]


def _check_text_head(f: BinaryIO, src: Source) -> None:
    """Refuse binary files early with a hint: text formats must be UTF-8 without NUL bytes."""
    head = f.read(8192)
    f.seek(0)
    hints = {b"PAR1": "it looks like Parquet; name it .parquet or pass fmt='parquet'",
             b"\x1f\x8b": "it looks gzip-compressed; decompress it first",
             b"PK\x03\x04": "it looks like a zip archive (xlsx?); export it as CSV first",
             b"\xff\xfe": "it is UTF-16 encoded; re-save it as UTF-8",
             b"\xfe\xff": "it is UTF-16 encoded; re-save it as UTF-8"}
    for magic, hint in hints.items():
        if head.startswith(magic):
            raise ValueError(f"{src.name} is not a UTF-8 {src.fmt} file: {hint}")
    if b"\x00" in head:
        raise ValueError(f"{src.name} looks binary (NUL byte at byte {head.index(0)}), not a UTF-8 "
                         f"{src.fmt} file; pass a text file or the right fmt=")


def columns(src: Source) -> list[str]:
    """Column names of ``src``; a plain text file has one column, ``text``."""
    if src.fmt == "txt":
        return ["text"]
    with src.open() as f:
        if src.fmt == "parquet":
            return list(_parquet(f, src).schema_arrow.names)
        if src.fmt == "jsonl":
            _check_text_head(f, src)
            names: dict[str, None] = {}
            for chunk, first in _chunks(f):
                for i, line in enumerate(_decode(chunk, first, src).split("\n")):
                    if line.strip():
                        names.update(dict.fromkeys(_json_object(line, first + i, src)))
                return list(names)  # the first batch is enough to show the columns
            return []
        _check_text_head(f, src)
        names = _csv_reader(f, src, None).schema.names
    if len(names) == 1:
        sep = next((c for c in ";\t,|" if c in names[0]), None)
        if sep is not None:
            fix = {"\t": "name it .tsv or pass fmt='tsv'", ",": "name it .csv or pass fmt='csv'"}.get(
                sep, "re-save it with commas (.csv) or tabs (.tsv)")
            raise ValueError(f"{src.name} parsed as one column {names[0]!r}: it seems to use {sep!r} "
                             f"as delimiter, not {_delimiter(src)!r}; {fix}")
    return names


def iter_column(src: Source, column: str) -> Iterator[tuple[pa.Array, Where]]:
    """Yield ``(values, where)`` for ``column``, one batch at a time."""
    with src.open() as f:
        if src.fmt == "parquet":
            yield from _iter_parquet(f, src, column)
        elif src.fmt in ("csv", "tsv"):
            _check_text_head(f, src)
            yield from _iter_csv(f, src, column)
        else:
            _check_text_head(f, src)
            yield from (_iter_txt if src.fmt == "txt" else _iter_jsonl)(f, src, column)


# --- Parquet -------------------------------------------------------------------------

def _parquet(f: BinaryIO, src: Source) -> pq.ParquetFile:
    try:
        return pq.ParquetFile(f)
    except (pa.ArrowException, OSError) as e:
        raise ValueError(f"{src.name} is not a readable Parquet file ({e}); "
                         "check the file or pass the right fmt=") from None


def _iter_parquet(f, src, column):
    offset = 0
    pf = _parquet(f, src)
    meta = pf.metadata
    row_bytes = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    row_bytes = max(1.0, row_bytes / max(1, meta.num_rows))
    rows = int(min(MAX_BATCH_ROWS, max(1, BATCH_BYTES // row_bytes)))  # long texts: fewer rows
    try:
        for batch in pf.iter_batches(batch_size=rows, columns=[column]):
            yield batch.column(0), (lambda i, o=offset: f"row {o + i + 1}")
            offset += batch.num_rows
    except (pa.ArrowException, OSError) as e:
        raise ValueError(f"could not read {src.name} as Parquet near row {offset + 1} ({e}); "
                         "the file may be truncated or corrupt") from None


# --- CSV / TSV -----------------------------------------------------------------------

def _delimiter(src: Source) -> str:
    return "\t" if src.fmt == "tsv" else ","


def _csv_reader(f, src: Source, column: str | None):
    # Quoted cells may hold newlines (texts often do); cells stay strings so that a bad
    # length can be named by its row instead of failing pyarrow's type inference.
    convert = pa_csv.ConvertOptions() if column is None else pa_csv.ConvertOptions(
        include_columns=[column], column_types={column: pa.string()})
    try:
        return pa_csv.open_csv(
            f, read_options=pa_csv.ReadOptions(block_size=BATCH_BYTES),
            parse_options=pa_csv.ParseOptions(delimiter=_delimiter(src), newlines_in_values=True),
            convert_options=convert)
    except pa.ArrowException as e:
        raise _csv_error(e, f, src, 0) from None


def _csv_error(e: Exception, f, src: Source, offset: int) -> ValueError:
    msg = str(e)
    if "Empty CSV file" in msg:
        f.seek(0)
        head = f.read(BATCH_BYTES)
        if not head.strip():
            return ValueError(f"no documents found in {src.name} (the file is empty)")
        try:
            head.decode("utf-8")
        except UnicodeDecodeError as e:
            return _utf8_error(head, 1, src, e)
        return ValueError(f"no documents found in {src.name}: it holds a header line and no data rows")
    if "UTF8" in msg or "UTF-8" in msg:
        f.seek(0)
        for chunk, first in _chunks(f):  # error path only: find the line to name
            try:
                chunk.decode("utf-8")
            except UnicodeDecodeError as e:
                return _utf8_error(chunk, first, src, e)
    return ValueError(f"could not parse {src.name} as {src.fmt.upper()} in the block from data row "
                      f"{offset + 1} ({msg}); check the delimiter ({_delimiter(src)!r}) and the quoting")


def _iter_csv(f, src, column):
    reader = _csv_reader(f, src, column)
    offset = 0
    while True:
        try:
            batch = reader.read_next_batch()
        except StopIteration:
            return
        except pa.ArrowException as e:
            raise _csv_error(e, f, src, offset) from None
        yield batch.column(0), (lambda i, o=offset: f"data row {o + i + 1}")
        offset += batch.num_rows


# --- JSON Lines and plain text -------------------------------------------------------

def _chunks(f) -> Iterator[tuple[bytes, int]]:
    """Whole lines in blocks of about ``BATCH_BYTES``, with the line number of the first."""
    rest, first = b"", 1
    while block := f.read(BATCH_BYTES):
        if first == 1 and not rest and block.startswith(b"\xef\xbb\xbf"):
            block = block[3:]  # a UTF-8 byte-order mark is not content
        block = rest + block
        cut = block.rfind(b"\n") + 1
        rest, block = block[cut:], block[:cut]
        if block:
            yield block, first
            first += block.count(b"\n")
    if rest:
        yield rest, first


def _utf8_error(chunk: bytes, first: int, src: Source, e: UnicodeDecodeError) -> ValueError:
    line_start = chunk.rfind(b"\n", 0, e.start) + 1
    lineno = first + chunk.count(b"\n", 0, e.start)
    return ValueError(f"{src.name} is not UTF-8 text (line {lineno}, "
                      f"byte {e.start - line_start} of that line is 0x{chunk[e.start]:02x}); "
                      "re-save it as UTF-8")


def _decode(chunk: bytes, first: int, src: Source) -> str:
    try:
        return chunk.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _utf8_error(chunk, first, src, e) from None


def _iter_txt(f, src, column):
    for chunk, first in _chunks(f):
        # Split and validate in C: one Python call per block, none per line.
        lines = pa.array(chunk.split(b"\n"), pa.binary())
        try:
            lines = pc.utf8_rtrim(lines.cast(pa.string()), characters="\r")
        except pa.ArrowException as e:
            _decode(chunk, first, src)  # raises a ValueError naming the line if it is bad UTF-8
            raise ValueError(f"could not read {src.name} near line {first} ({e})") from None
        yield lines, (lambda i, o=first: f"line {o + i}")


def _json_object(line: str, lineno: int, src: Source) -> dict:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        hint = " (for one big JSON array, convert it: jq -c '.[]' in.json > out.jsonl)" if (
            lineno == 1 and line.lstrip().startswith("[")) else ""
        raise ValueError(f"{src.name}: line {lineno} is not valid JSON ({e.msg} at column "
                         f'{e.colno}); JSON Lines needs one complete object per line, e.g. '
                         '{"text": "..."}' + hint) from None
    except RecursionError:
        raise ValueError(f"{src.name}: line {lineno} is nested too deeply to read; "
                         "flatten each line to one object with a text or length field") from None
    except ValueError as e:  # e.g. an integer too large for Python's digit limit
        raise ValueError(f"{src.name}: line {lineno} holds a value too large to read ({e}); "
                         "store lengths as ordinary integers") from None
    if not isinstance(obj, dict):
        raise ValueError(f"{src.name}: line {lineno} is a JSON {type(obj).__name__}, not an object; "
                         'JSON Lines needs one object per line, e.g. {"text": "..."} '
                         "(for one big JSON array, convert it: jq -c '.[]' in.json > out.jsonl)")
    return obj


def _iter_jsonl(f, src, column):
    for chunk, first in _chunks(f):
        values, linenos = [], []
        for i, line in enumerate(_decode(chunk, first, src).split("\n")):
            if not line.strip():
                continue  # blank lines (a trailing newline, say) hold no record
            value = _json_object(line, first + i, src).get(column)
            if isinstance(value, (dict, list, bool)):
                what = {dict: "an object", list: "an array"}.get(type(value), f"a boolean ({value})")
                raise ValueError(f"{src.name}: line {first + i}: {column!r} holds {what}; "
                                 "pick a column that holds plain text or an integer length")
            values.append(value)
            linenos.append(first + i)
        if values:
            yield _json_array(values, linenos, src, column), (lambda i, n=linenos: f"line {n[i]}")


def _json_array(values: list, linenos: list[int], src: Source, column: str) -> pa.Array:
    """JSON values of one column as an Arrow array: all text, or all numbers (None = missing)."""
    kinds = {type(v) for v in values} - {type(None)}
    if kinds <= {str}:  # via UTF-8 bytes: far faster than converting Python str objects
        encoded = [None if v is None else v.encode() for v in values]
        return pa.array(encoded, pa.binary()).cast(pa.string())
    if kinds <= {int, float}:
        big = next((k for k, v in enumerate(values) if isinstance(v, int) and abs(v) >= 2**62), None)
        if big is None:
            return pa.array(values)
        raise ValueError(f"{src.name}: line {linenos[big]}: {column!r} holds {values[big]}, too large "
                         "for a length; fix that line")
    first = next(type(v) for v in values if v is not None)
    i = next(k for k, v in enumerate(values) if v is not None and (type(v) is str) != (first is str))
    raise ValueError(f"{src.name}: line {linenos[i]}: {column!r} holds {values[i]!r} but earlier lines "
                     "hold another type; a column must hold only integers or only text")
