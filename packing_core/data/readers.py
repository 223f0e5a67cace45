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
JSON Lines and plain text are cut into whole lines by :mod:`packing_core.data.lines`.
"""
from __future__ import annotations

import csv
import errno
import io
import json
import os
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
from packing_core.data.lines import BATCH_BYTES, chunks, decode, iter_jsonl, iter_txt, json_object, utf8_error

FORMATS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl",
           ".json": "jsonl", ".jsonlines": "jsonl", ".parquet": "parquet", ".txt": "txt"}
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


def check_regular(path, name: str | None = None) -> None:
    """Refuse anything but a regular file (FIFO, device, socket, folder, link loop) before it is opened.

    >>> check_regular("/dev/zero")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: /dev/zero is a character device, not a regular file; ...
    """
    _check_regular(Path(path).expanduser(), display(str(path) if name is None else name))


def read_bytes(path, what: str, limit: int) -> bytes:
    """The whole of a small regular file (a profile, a config, a batch), refused past ``limit`` bytes.

    Only regular files are opened (a FIFO would block, ``/dev/zero`` never ends) and never
    more than ``limit + 1`` bytes are read, whatever the file claims.
    """
    shown = display(str(path))
    check_regular(path)
    try:
        with open(Path(path).expanduser(), "rb") as f:
            data = f.read(limit + 1)
    except OSError as e:
        raise ValueError(f"cannot read {what} {shown} ({e.strerror}); check that it is a readable file") from None
    if len(data) > limit:
        raise ValueError(f"{what} {shown} is larger than {limit:,} bytes, more than the lab reads for one; "
                         "check that it is the right file")
    return data


class _NoConstant(ValueError):
    pass


def _refuse_constant(name: str):
    raise _NoConstant(name)


def load_json(data: bytes | str, name: str, *, max_items: int | None = None, duplicates: bool = False,
              max_int: int | None = None):
    """Parse JSON safely: no ``NaN``/``Infinity``, no nesting past the recursion limit, bounded size.

    ``max_items`` bounds the values (commas and colons, counted before parsing: a JSON bomb
    is refused before it costs memory); ``duplicates`` refuses an object with a key twice
    (plain ``json.loads`` keeps the last one silently); ``max_int`` refuses integers past it in
    size (a uint64 written as text must not wrap later).

    >>> load_json(b'{"a": 1, "a": 2}', "x.json", duplicates=True)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: x.json holds the key 'a' twice in one object; ...
    >>> load_json(b'{"n": Infinity}', "x.json")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: x.json holds Infinity, which is not a number JSON allows; ...
    """
    name = display(name)
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if max_items is not None:
        items = raw.count(b",") + raw.count(b":")
        if items > max_items:
            raise ValueError(f"{name} holds about {items:,} JSON values, more than the lab reads in one "
                             f"({max_items:,}); check that it is the right file, or make it smaller")

    def pairs(items):
        out = dict(items)
        if len(out) < len(items):
            seen: set = set()
            twice = next(k for k, _ in items if k in seen or seen.add(k))
            raise ValueError(f"{name} holds the key {display(twice)!r} twice in one object; JSON readers "
                             "keep only one of them silently: fix the file so each key appears once")
        return out

    def integer(text: str) -> int:
        value = int(text)
        if max_int is not None and abs(value) > max_int:
            raise ValueError(f"{name} holds the integer {value:,}, past {max_int:,} in size; "
                             "store ordinary 64-bit integers")
        return value

    try:
        text = raw.decode("utf-8")
        return json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=pairs if duplicates else None,
                          parse_int=integer)
    except UnicodeDecodeError as e:
        raise ValueError(f"{name} is not UTF-8 text (byte {e.start} is 0x{raw[e.start]:02x}); re-save it as UTF-8") \
            from None
    except _NoConstant as e:
        raise ValueError(f"{name} holds {e}, which is not a number JSON allows; write a finite number") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{name} is not JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
    except RecursionError:
        raise ValueError(f"{name} is nested too deeply to read; no file the lab reads needs more than a few "
                         "levels of nesting") from None
    except ValueError as e:
        if str(e).startswith(name):
            raise
        raise ValueError(f"{name} holds a value too large to read ({str(e)[:120]}); store ordinary numbers") \
            from None


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def check_output(path, inputs=()) -> Path:
    """Refuse an output path that would destroy something: an input, a device, a FIFO, a folder.

    ``inputs`` are the paths read (files or folders). The check compares devices and inodes
    (``os.path.samefile``), so a hard link or a symbolic link to an input is caught too;
    only a new file or an existing regular file that is no input may be replaced.
    """
    path = Path(path).expanduser()
    shown = display(str(path))
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise ValueError(f"--out {shown} is a symbolic link loop; name a new file") from None
        if e.errno == errno.ENOTDIR:
            raise ValueError(f"--out {shown}: a part of that path is a file, not a folder; name a new file") from None
        raise ValueError(f"cannot write {shown} ({e.strerror}); name a file in a folder you can write to") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        what = next((w for test, w in _KINDS if test(st.st_mode)), "not a regular file")
        raise ValueError(f"--out {shown} is {what}; the lab writes only regular files and never replaces "
                         "anything else: name a new file, e.g. profile.json")
    if st is not None:
        for given in inputs:
            given = Path(str(given)).expanduser()
            for candidate in _input_files(given):
                try:
                    if _same_file(st, os.stat(candidate)):
                        raise ValueError(f"--out {shown} is one of the inputs ({display(str(candidate))}); writing "
                                         "the profile there would destroy the data: name a new file")
                except OSError:
                    continue
    if os.path.islink(path) and st is not None:
        raise ValueError(f"--out {shown} is a symbolic link; the lab would replace the link, not its target: "
                         "name the file itself or a new file")
    parent = path.parent if str(path.parent) else Path(".")
    if parent.exists() and not parent.is_dir():
        raise ValueError(f"--out {shown}: {display(str(parent))} is a file, not a folder; name a new file")
    return path


def _input_files(given: Path):
    """The files an input names: itself, or the files under a folder / matched by a glob."""
    text = str(given)
    if any(c in text for c in "*?["):
        import glob as _glob

        yield from (Path(m) for m in _glob.iglob(text))  # one level: a link loop cannot recurse here
        return
    yield given
    if given.is_dir():
        for root, _, files in os.walk(given):   # links to folders are not followed: bounded
            yield from (Path(root) / f for f in files)


def write_atomic(path, data, inputs=()) -> Path:
    """Write ``data`` (bytes, or a function that writes to a binary file) to ``path``, all or nothing.

    The path is vetted by :func:`check_output` first.
    The bytes go to a hidden temporary file beside the target, which is then renamed over
    it; on any failure (Ctrl-C included) the temporary file is removed and the message names
    the target only, never the temporary name.
    """
    import tempfile

    path = check_output(path, inputs)
    shown = display(str(path))
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:100]}.", suffix=".part", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            data(f) if callable(data) else f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)   # mkstemp makes it private; a profile is meant to be shared
        check_output(path, inputs)   # again, just before the rename: nothing swapped in meanwhile
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise ValueError(f"could not write {shown} ({e.strerror or type(e).__name__}); nothing was written: "
                         "check the folder and the free space") from None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
    return path


MAX_TOKENIZER_FILE_BYTES = 64 << 20   # tokenizer.json of a 250k vocabulary is about 20 MB


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "vocab.txt")


def vet_tokenizer_folder(folder: Path) -> None:
    """Refuse a tokenizer folder before a library opens it: its files regular and bounded, its JSON plain.

    A FIFO named ``tokenizer.json`` would block the loader forever, ``/dev/zero`` linked as
    one would fill memory, and a ``tokenizer_config.json`` nested past Python's recursion
    limit would crash it with a traceback.
    """
    for name in (*TOKENIZER_FILES, "special_tokens_map.json", "added_tokens.json", "chat_template.jinja",
                 "chat_template.json", "merges.txt"):
        path = folder / name
        if path.exists() or path.is_symlink():
            check_regular(path)
            if path.stat().st_size > MAX_TOKENIZER_FILE_BYTES:
                raise ValueError(f"{path} is {path.stat().st_size:,} bytes, more than a tokenizer file may be "
                                 f"({MAX_TOKENIZER_FILE_BYTES:,}); check the folder")
            if name.endswith(".json") and name != "tokenizer.json":
                config = load_json(read_bytes(path, "the tokenizer file", MAX_TOKENIZER_FILE_BYTES), str(path))
                if name == "tokenizer_config.json" and not isinstance(config, dict):
                    raise ValueError(f"{path} holds a JSON {type(config).__name__}, not an object; save the "
                                     "tokenizer again with save_pretrained()")


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
            for chunk, first in chunks(f, src):
                keys: dict[str, None] = {}
                for i, line in enumerate(decode(chunk, first, src).split("\n")):
                    if line.strip():
                        keys.update(dict.fromkeys(json_object(line, first + i, src)))
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
            batches = (iter_txt if src.fmt == "txt" else iter_jsonl)(f, src, column)
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
            raise utf8_error(head, 1, src, e) from None
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
    # A native Arrow stream and no reader threads: a thread still reading a Python file object
    # when an error ends the process aborts it ("terminate called without an active exception").
    if isinstance(f, io.BytesIO):
        native = pa.BufferReader(pa.py_buffer(f.getbuffer()))
    elif isinstance(f, io.BufferedReader) and isinstance(f.name, str):
        native = pa.OSFile(f.name)
    else:
        native = f
    try:
        return native, pa_csv.open_csv(
            native, read_options=pa_csv.ReadOptions(block_size=BATCH_BYTES, use_threads=False),
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
            return utf8_error(head, 1, src, e)
        return ValueError(f"no documents found in {src.name}: it holds a header line and no data rows")
    if "UTF8" in msg or "UTF-8" in msg:
        f.seek(0)
        for chunk, first in chunks(f, src):  # error path only: find the line to name
            try:
                chunk.decode("utf-8")
            except UnicodeDecodeError as e:
                return utf8_error(chunk, first, src, e)
    if "straddling" in msg:  # pyarrow's words for a value longer than one block
        return ValueError(f"{src.name}: a value in the block from data row {offset + 1} is longer than "
                          f"{BATCH_BYTES:,} bytes, more than one document may hold; split it, or check the quoting")
    return ValueError(f"could not parse {src.name} as {src.fmt.upper()} in the block from data row "
                      f"{offset + 1} ({msg}); check the delimiter ({_delimiter(src)!r}) and the quoting")


def _iter_csv(f, src, column):
    native, reader = _csv_reader(f, src, column)
    offset = 0
    while True:
        try:
            batch = reader.read_next_batch()
        except StopIteration:
            return
        except pa.ArrowException as e:
            raise _csv_error(e, f, src, offset) from None
        if native is not f:
            f.seek(native.tell())  # f.tell() is what the budget counts as read
        yield batch.column(0), (lambda i, o=offset: f"data row {o + i + 1}")
        offset += batch.num_rows
