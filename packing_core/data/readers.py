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

Hostile files meet limits here, before they cost memory: only regular files are opened
(a FIFO would block forever), file names are shown escaped (a newline or an ANSI escape
in a name cannot forge lines or drive the terminal), a Parquet's row count and decoded
size are checked in its metadata before any page is read, a CSV's columns come from its
header line alone, no single text value may exceed ``MAX_TEXT_BYTES``, and every read
stays within a :class:`~packing_core._settings.ReadBudget` of rows, bytes and seconds.
"""
from __future__ import annotations

import csv
import errno
import io
import json
import os
import re
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from packing_core._settings import ReadBudget, read_budget
from packing_core._validate import MAX_TEXT_BYTES

FORMATS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl",
           ".json": "jsonl", ".jsonlines": "jsonl", ".parquet": "parquet", ".txt": "txt"}
BATCH_BYTES = 8 << 20       # about this much of the file per batch, in every format
MAX_BATCH_ROWS = 65_536      # Parquet: cap on rows per batch when rows are tiny
_FMT_NAMES = sorted(set(FORMATS.values()))
_ALIASES = {"ndjson": "jsonl", "json": "jsonl", "jsonlines": "jsonl", "text": "txt"}
MAX_HEADER_BYTES = 16 << 20  # a CSV header line longer than this is refused
_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISDIR, "a folder"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))

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
                raise ValueError(f"cannot open {self.name} ({e.strerror}); check that it is "
                                 "a readable file") from None
            with f:
                yield f
        else:
            self.data.seek(0)
            yield self.data


def display(name: str) -> str:
    r"""A file or column name as messages show it: control characters escaped, like ``repr``.

    >>> display("evil\n\x1b]0;title\x07.csv")
    'evil\\n\\x1b]0;title\\x07.csv'
    """
    return repr(str(name))[1:-1]


def _check_regular(path: Path, shown: str) -> None:
    """Only regular files are read: a FIFO blocks forever, a device never ends."""
    try:
        mode = path.stat().st_mode
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise ValueError(f"{shown} is a symbolic link loop (it points back to itself); "
                             "point the link at a real file") from None
        if e.errno in (errno.ENOENT, errno.ENOTDIR):
            raise ValueError(f"file not found: {shown}; check the path and the current folder "
                             f"({display(os.getcwd())})") from None
        raise ValueError(f"cannot open {shown} ({e.strerror}); check that it is a readable file") from None
    if not stat.S_ISREG(mode):
        what = next((w for test, w in _KINDS if test(mode)), "not a regular file")
        fix = "pass one file inside it" if stat.S_ISDIR(mode) else "save the data to a regular file first"
        raise ValueError(f"{shown} is {what}, not a regular file; {fix}")


def as_source(source, fmt: str | None = None) -> Source:
    """Resolve a path / file-like / bytes ``source`` and its format (suffix or ``fmt=``).

    >>> as_source(io.BytesIO(b"3\\n"), fmt="txt").fmt
    'txt'
    """
    data = path = None
    if isinstance(source, (str, os.PathLike)):
        path = Path(source).expanduser()
        name = str(source)
        _check_regular(path, display(name))
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
    return Source(name=display(name), fmt=_resolve_fmt(name, fmt), path=path, data=data)


def _resolve_fmt(name: str, fmt: str | None) -> str:
    if fmt is not None:
        key = str(fmt).lower().lstrip(".")
        key = _ALIASES.get(key, key)
        if key not in _FMT_NAMES:
            raise ValueError(f"unknown fmt={fmt!r}; use one of {_FMT_NAMES}")
        return key
    suffix = Path(name).suffix.lower()
    if suffix not in FORMATS:
        raise ValueError(f"cannot tell the format of {display(name)} from its suffix {suffix or '(none)'!r}; "
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
    """Column names of ``src``; a plain text file has one column, ``text``.

    Only the header is read: a Parquet's schema, a CSV's first line, the keys of the first
    batch of JSON Lines. Two columns of one name are refused (which one was meant?).
    """
    if src.fmt == "txt":
        return ["text"]
    with src.open() as f:
        if src.fmt == "parquet":
            names = list(_parquet(f, src).schema_arrow.names)
        elif src.fmt == "jsonl":
            _check_text_head(f, src)
            names = []
            for chunk, first in _chunks(f, src):
                keys: dict[str, None] = {}
                for i, line in enumerate(_decode(chunk, first, src).split("\n")):
                    if line.strip():
                        keys.update(dict.fromkeys(_json_object(line, first + i, src)))
                names = list(keys)
                break  # the first batch is enough to show the columns
        else:
            _check_text_head(f, src)
            names = _csv_header(f, src)
    if len(set(names)) < len(names):
        seen: set[str] = set()
        twice = next(n for n in names if n in seen or seen.add(n))
        raise ValueError(f"{src.name} has two columns named {display(twice)!r}; rename one so that "
                         "the column to read is unambiguous")
    if src.fmt in ("csv", "tsv") and len(names) == 1:
        sep = next((c for c in ";\t,|" if c in names[0]), None)
        if sep is not None:
            fix = {"\t": "name it .tsv or pass fmt='tsv'", ",": "name it .csv or pass fmt='csv'"}.get(
                sep, "re-save it with commas (.csv) or tabs (.tsv)")
            raise ValueError(f"{src.name} parsed as one column {display(names[0][:80])!r}: it seems to use "
                             f"{sep!r} as delimiter, not {_delimiter(src)!r}; {fix}")
    return names


def iter_column(src: Source, column: str, budget: ReadBudget | None = None) -> Iterator[tuple[pa.Array, Where]]:
    """Yield ``(values, where)`` for ``column``, one batch at a time, within ``budget``.

    The budget (default :func:`~packing_core._settings.read_budget`) is checked after every
    batch, so time spent by the caller on a batch (tokenising it) counts too.
    """
    budget = budget or read_budget()
    start, rows, nbytes = time.monotonic(), 0, 0
    with src.open() as f:
        if src.fmt == "parquet":
            batches = _iter_parquet(f, src, column, budget)
        elif src.fmt in ("csv", "tsv"):
            _check_text_head(f, src)
            batches = _iter_csv(f, src, column)
        else:
            _check_text_head(f, src)
            batches = (_iter_txt if src.fmt == "txt" else _iter_jsonl)(f, src, column)
        for values, where in batches:
            rows += len(values)
            nbytes = max(nbytes, f.tell()) if src.fmt != "parquet" else nbytes + _decoded_bytes(values)
            _check_budget(src, budget, rows, nbytes, time.monotonic() - start, f"by {where(len(values) - 1)}")
            yield values, where


def _check_budget(src: Source, budget: ReadBudget, rows: int, nbytes: int, seconds: float, at: str) -> None:
    over = [f"{rows:,} rows (limit {budget.rows:,}, PACKING_LAB_MAX_ROWS)" if rows > budget.rows else "",
            f"{nbytes:,} bytes (limit {budget.bytes:,}, PACKING_LAB_MAX_BYTES)" if nbytes > budget.bytes else "",
            f"{seconds:.0f} s (limit {budget.seconds:g} s, PACKING_LAB_MAX_SECONDS)" if seconds > budget.seconds else ""]
    over = [o for o in over if o]
    if over:
        raise ValueError(f"{src.name} is larger than one analysis may read: {' and '.join(over)} {at}; "
                         "analyse a sample or a shard of it")


def _decoded_bytes(values: pa.Array) -> int:
    """Bytes a batch takes once decoded (a dictionary column counts every repeat of its values)."""
    if pa.types.is_dictionary(values.type):
        sizes = pc.binary_length(values.dictionary) if _is_text(values.type.value_type) else None
        if sizes is not None:
            return int(pc.sum(sizes.take(values.indices)).as_py() or 0) + 8 * len(values)
    return int(values.nbytes)


def _is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t)


# --- Parquet -------------------------------------------------------------------------

def _parquet(f: BinaryIO, src: Source) -> pq.ParquetFile:
    try:
        return pq.ParquetFile(f)
    except (pa.ArrowException, OSError) as e:
        raise ValueError(f"{src.name} is not a readable Parquet file ({e}); "
                         "check the file or pass the right fmt=") from None


def _iter_parquet(f, src, column, budget: ReadBudget):
    offset = 0
    pf = _parquet(f, src)
    meta = pf.metadata
    if meta.num_rows > budget.rows:  # refuse from the metadata, before decoding a page
        _check_budget(src, budget, meta.num_rows, 0, 0.0, "(from its metadata)")
    index = [i for i in range(meta.num_columns) if meta.schema.column(i).path.split(".")[0] == column]
    decoded = sum(meta.row_group(g).column(i).total_uncompressed_size
                  for g in range(meta.num_row_groups) for i in index)
    _check_budget(src, budget, 0, decoded, 0.0, "(from its metadata)")
    row_bytes = max(1.0, decoded / max(1, meta.num_rows))
    if row_bytes > MAX_TEXT_BYTES:  # some value is longer than a document may be: refuse before decoding it
        raise ValueError(f"{src.name}: column {display(column)!r} holds {decoded:,} bytes in {meta.num_rows:,} rows "
                         f"(from its metadata), more than one document may hold ({MAX_TEXT_BYTES:,} bytes); "
                         "split the long values or drop them")
    rows = int(min(MAX_BATCH_ROWS, max(1, BATCH_BYTES // row_bytes)))  # long texts: fewer rows
    if _is_text(pf.schema_arrow.field(column).type):
        # kept as a dictionary: a few long values repeated a million times are counted
        # (and refused) before they are decoded
        pf = pq.ParquetFile(f, read_dictionary=[column])
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


def _csv_header(f, src: Source) -> list[str]:
    """The names in a CSV's first record, read with the csv module: no data cell is parsed."""
    head = f.read(MAX_HEADER_BYTES + 1)
    f.seek(0)
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as e:  # bad bytes on the header line are named; later ones when read
        if head.count(b"\n", 0, e.start) == 0 and e.start < MAX_HEADER_BYTES:
            raise _utf8_error(head, 1, src, e) from None
        text = head[: e.start].decode("utf-8")
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=_delimiter(src))
    csv.field_size_limit(MAX_HEADER_BYTES)
    try:
        names = next(reader, None)
    except csv.Error as e:
        raise ValueError(f"could not read the header line of {src.name} ({e}); check the quoting") from None
    if names is None or not any(n.strip() for n in names):
        raise ValueError(f"no documents found in {src.name} (the file is empty)")
    if len(head) > MAX_HEADER_BYTES and reader.line_num <= 1 and "\n" not in text and "\r" not in text:
        raise ValueError(f"the header line of {src.name} is longer than {MAX_HEADER_BYTES:,} bytes; "
                         "is it a CSV file?")
    return names


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
        for chunk, first in _chunks(f, src):  # error path only: find the line to name
            try:
                chunk.decode("utf-8")
            except UnicodeDecodeError as e:
                return _utf8_error(chunk, first, src, e)
    if "straddling" in msg:  # pyarrow's words for a value longer than one block
        return ValueError(f"{src.name}: a value in the block from data row {offset + 1} is longer than "
                          f"{BATCH_BYTES:,} bytes, more than one document may hold; split it, or check the quoting")
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

def _chunks(f, src: Source) -> Iterator[tuple[bytes, int]]:
    r"""Whole lines in blocks of about ``BATCH_BYTES``, with the line number of the first.

    Line endings are ``\n``, ``\r\n`` or a bare ``\r`` (old Mac files), as in the CSV reader;
    blocks come back with ``\n`` only. A line longer than ``MAX_TEXT_BYTES`` is refused
    before it is held whole.
    """
    rest, first = b"", 1
    while block := f.read(BATCH_BYTES):
        if first == 1 and not rest and block.startswith(b"\xef\xbb\xbf"):
            block = block[3:]  # a UTF-8 byte-order mark is not content
        block = rest + block
        # a final "\r" waits for the next block: it may be the first half of "\r\n"
        cut = max(block.rfind(b"\n"), block.rfind(b"\r", 0, len(block) - 1)) + 1
        rest, block = block[cut:], block[:cut]
        if len(rest) > MAX_TEXT_BYTES:
            raise ValueError(f"{src.name}: line {first + _newlines(block)[1]} is longer than {MAX_TEXT_BYTES:,} "
                             "bytes, more than one document may hold; split it or check the file")
        if block:
            block, count = _newlines(block)
            yield block, first
            first += count
    if rest:
        yield _newlines(rest)[0], first


def _newlines(block: bytes) -> tuple[bytes, int]:
    if b"\r" in block:
        block = block.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return block, block.count(b"\n")


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
    for chunk, first in _chunks(f, src):
        # Split and validate in C: one Python call per block, none per line.
        lines = pa.array((chunk[:-1] if chunk.endswith(b"\n") else chunk).split(b"\n"), pa.binary())
        try:
            lines = pc.utf8_rtrim(lines.cast(pa.string()), characters="\r")
        except pa.ArrowException as e:
            _decode(chunk, first, src)  # raises a ValueError naming the line if it is bad UTF-8
            raise ValueError(f"could not read {src.name} near line {first} ({e})") from None
        yield lines, (lambda i, o=first: f"line {o + i}")


_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


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
    if "\\u" in line and _SURROGATE.search(line):
        try:
            json.dumps(obj, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"{src.name}: line {lineno} holds a lone surrogate escape (such as \\ud800), "
                             "which is not valid Unicode; fix or drop that line") from None
    if not isinstance(obj, dict):
        raise ValueError(f"{src.name}: line {lineno} is a JSON {type(obj).__name__}, not an object; "
                         'JSON Lines needs one object per line, e.g. {"text": "..."} '
                         "(for one big JSON array, convert it: jq -c '.[]' in.json > out.jsonl)")
    return obj


def _iter_jsonl(f, src, column):
    for chunk, first in _chunks(f, src):
        values, linenos = [], []
        for i, line in enumerate(_decode(chunk, first, src).split("\n")):
            if not line.strip():
                continue  # blank lines (a trailing newline, say) hold no record
            value = _json_object(line, first + i, src).get(column)
            if isinstance(value, list) and all(type(v) is int for v in value):
                value = len(value)  # pre-tokenised: a list of token ids counts as its length
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
