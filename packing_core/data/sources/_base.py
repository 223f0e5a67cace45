"""The reader protocol, the registry by suffix, and ``open_source()``: where every defence lives.

A reader knows one format and nothing about limits; the loop here applies them to every
format alike::

    open_source("data.jsonl")      regular file? (a FIFO blocks, /dev/zero never ends) -> Source
        name shown escaped         "evil\\x1b]0;t\\x07.csv", never the raw escape
    read_batches(src, ["text"])    reader.batches(...) -> (RecordBatch, where) per batch
        bytes per value            no text value past MAX_TEXT_BYTES, named by its place
        ReadBudget                 rows, bytes (read or decoded) and seconds, after every batch
        library errors             "shard a.parquet is unreadable or truncated (...)", one line

``where(i)`` names value ``i`` of the batch ("line 7", "data row 2", "row 12"). Errors that
already name the source are :class:`SourceError`; any other ``ValueError`` a library raises
(pyarrow's ``ArrowInvalid`` is one) is wrapped here, so no caller parses message text.
"""
from __future__ import annotations

import errno
import io
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Protocol, cast

from packing_core._registry import MappingView, NamesView, Registry
from packing_core._settings import ReadBudget
from packing_core._validate import InputError
from packing_core.data.sources._range import ByteRange, read_at_most

if TYPE_CHECKING:
    import pyarrow as pa

BATCH_BYTES = 8 << 20       # about this much of a file per batch, in every format
WHOLE = "file"              # open_source(..., fmt=WHOLE): a file read whole (a batch, a config), no reader
Where = Callable[[int], str]
_FILE_TYPES = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISDIR, "a folder"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))
INSTALL_DATA = "pip install 'packing-lab[data]'"   # pyarrow: what every reader of a data file stands on


def pyarrow():
    """pyarrow, imported when a data file is read (never at import); without it, one line naming the extra."""
    try:
        import pyarrow as pa
    except ImportError:
        raise InputError(f"reading a data file (Parquet, JSON Lines, CSV, Arrow) needs pyarrow: {INSTALL_DATA}; "
                         "lengths (--lengths, a .txt of numbers), profiles and batch files need nothing more") from None
    return pa




class SourceError(InputError):
    """A message that already names the source and the fix (a library's error is wrapped into one)."""


SourceError.__module__ = "packing_core.data.sources"   # how tracebacks and doctests name it


def display(name: str) -> str:
    r"""A file or column name as messages show it: control characters escaped, like ``repr``.

    >>> display("evil\n\x1b]0;title\x07.csv")
    'evil\\n\\x1b]0;title\\x07.csv'
    """
    return repr(str(name))[1:-1]


def file_type(mode: int) -> str:
    """What a non-regular file is, in words ("a FIFO (named pipe)", "a folder", ...)."""
    return next((w for test, w in _FILE_TYPES if test(mode)), "not a regular file")


def check_regular(path, name: str | None = None) -> None:
    """Refuse anything but a regular file (FIFO, device, socket, folder, link loop) before it is opened.

    >>> check_regular("/dev/zero")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    packing_core.data.sources.SourceError: /dev/zero is a character device, not a regular file; ...
    """
    shown = display(str(path) if name is None else name)
    try:
        mode = Path(path).expanduser().stat().st_mode
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise SourceError(f"{shown} is a symbolic link loop (it points back to itself); "
                              "point the link at a real file") from None
        if e.errno in (errno.ENOENT, errno.ENOTDIR):
            raise SourceError(f"file not found: {shown}; check the path and the current folder "
                              f"({display(os.getcwd())})") from None
        raise SourceError(f"cannot open {shown} ({e.strerror}); check that it is a readable file") from None
    if not stat.S_ISREG(mode):
        fix = "pass one file inside it" if stat.S_ISDIR(mode) else "save the data to a regular file first"
        raise SourceError(f"{shown} is {file_type(mode)}, not a regular file; {fix}")


@dataclass(frozen=True)
class Source:
    """A file to read: a path or an in-memory upload, its format, and (Parquet) a range of row groups.

    ``name`` is already escaped for messages ("shard " in front for a file of a corpus).
    """

    name: str
    fmt: str
    path: Path | None = None
    data: BinaryIO | None = field(default=None, compare=False, repr=False)
    size: int = 0
    row_groups: tuple[int, int] | None = None
    lines: tuple[int, int, int] | None = None     # (start byte, end byte, its first line's number)
    _handles: list = field(default_factory=list, compare=False, repr=False)

    @property
    def label(self) -> str:
        """The path (or upload name) as a profile records it."""
        return str(self.path) if self.path is not None else self.name.removeprefix("shard ")

    @contextmanager
    def open(self) -> Iterator[BinaryIO]:
        """The file as a binary stream at byte 0 (paths are opened, uploads rewound)."""
        f: BinaryIO
        if self.path is not None:
            try:
                f = open(self.path, "rb")
            except OSError as e:
                raise SourceError(f"cannot open {self.name} ({e.strerror}); check that it is a readable file") from None
        else:
            f = self.memory()
        if self.lines is not None:   # a range of whole lines, read as if it were the whole file
            f = cast(BinaryIO, ByteRange(f, self.lines[0], self.lines[1]))
        self._handles.append(f)
        try:
            if self.path is not None:
                with f:
                    yield f
            else:
                yield f
        finally:
            self._handles.remove(f)

    def memory(self) -> BinaryIO:
        """An upload's bytes as a stream rewound to byte 0 (a Source read from a path has none)."""
        if self.data is None:
            raise SourceError(f"{self.name} is a file on disk, not an upload held in memory")
        self.data.seek(0)
        return self.data

    def position(self) -> int:
        """Bytes read so far through the streams now open (what the budget counts as read)."""
        out = 0
        for f in self._handles:
            try:
                out = max(out, f.tell())
            except (OSError, ValueError):
                pass
        return out

    def read_all(self, limit: int, what: str = "the file") -> bytes:
        """The whole file, refused past ``limit`` bytes; never more than ``limit + 1`` bytes are read."""
        try:
            with self.open() as f:
                data = read_at_most(f, limit)
        except OSError as e:
            raise SourceError(f"cannot read {what} {self.name} ({e.strerror}); check that it is a readable file") \
                from None
        if len(data) > limit:
            raise SourceError(f"{what} {self.name} is larger than {limit:,} bytes, more than the lab reads for one; "
                              "check that it is the right file")
        return data

    def __getstate__(self):   # a worker gets the path, never an open stream
        state = dict(self.__dict__)
        state["_handles"] = []
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)


class Reader(Protocol):
    """One format: its column names, and its batches of the chosen columns (no limits: the loop applies them).

    ``title`` names the format in messages ("Parquet").
    """

    title: str

    def columns(self, src: Source) -> list[str]: ...

    def batches(self, src: Source, columns: list[str], budget: ReadBudget) -> Iterator[tuple[pa.RecordBatch, Where]]:
        ...


@dataclass(frozen=True)
class Format:
    """One registered input format: its name, its file suffixes (lower case) and its reader.

    ``reader`` may be ``"module:NAME"``: the module (and pyarrow with it) is imported when a file of
    this format is first read, so registering every format costs nothing at import.
    """

    name: str
    suffixes: tuple[str, ...]
    reader_spec: Reader | str

    @property
    def reader(self) -> Reader:
        if not isinstance(self.reader_spec, str):
            return self.reader_spec
        module, _, attr = self.reader_spec.partition(":")
        import importlib

        try:
            return getattr(importlib.import_module(module), attr)
        except ModuleNotFoundError as e:
            if e.name == "pyarrow":     # the readers stand on it: one line naming the extra
                pyarrow()
            raise


FORMATS: Registry[Format] = Registry("input format")
READERS = FORMATS.mapping_view(lambda f: f.reader, "format -> its reader, live")
SUFFIXES = MappingView(FORMATS.memo(lambda: {s: f.name for f in FORMATS.entries() for s in f.suffixes}),
                       "suffix -> format, live, e.g. '.jsonl.gz' -> 'jsonl.gz'")


def register(fmt: str, suffixes: tuple[str, ...], reader: Reader | str) -> Format:
    """Register ``reader`` (or ``"module:NAME"``, imported on first use) for ``fmt`` and its file suffixes:
    report, scan and the uploader then read it."""
    suffixes = tuple(s.lower() for s in suffixes)
    taken = [s for s in suffixes if s in SUFFIXES]
    if taken:
        raise ValueError(f"the suffixes {taken} already belong to {sorted({SUFFIXES[s] for s in taken})}")
    return FORMATS.register(fmt, Format(fmt, suffixes, reader))


def unregister(fmt: str) -> None:
    if fmt in FORMATS:
        FORMATS.unregister(fmt)


def input_suffixes() -> tuple[str, ...]:
    """Every suffix a reader is registered for, in registration order."""
    return tuple(SUFFIXES)


INPUT_SUFFIXES = NamesView(input_suffixes, "Every registered suffix, live: what the uploaders and the CLI help offer.")


def fmt_of(name: str) -> str | None:
    """The format of a file name by its longest registered suffix ("a.jsonl.gz" -> "jsonl.gz"), or None.

    >>> fmt_of("Data.JSONL.GZ"), fmt_of("notes.docx")
    ('jsonl.gz', None)
    """
    lower = str(name).lower()
    return next((SUFFIXES[s] for s in sorted(SUFFIXES, key=len, reverse=True) if lower.endswith(s)), None)


def _resolve_fmt(name: str, fmt: str | None) -> str:
    if fmt is not None:
        key = str(fmt).lower().lstrip(".")
        if key == WHOLE or key in FORMATS:
            return key
        by_suffix = SUFFIXES.get("." + key) or {"text": "txt"}.get(key)
        if by_suffix is None:
            raise SourceError(f"unknown fmt={display(fmt)!r}; use one of {sorted(FORMATS)}")
        return by_suffix
    found = fmt_of(name)
    if found is None:
        suffix = Path(name).suffix.lower()
        raise SourceError(f"cannot tell the format of {display(name)} from its suffix {display(suffix or '(none)')!r}; "
                          f"use one of {', '.join(SUFFIXES)} or pass fmt= (one of {sorted(FORMATS)})")
    return found


def open_source(source, fmt: str | None = None, *, name: str | None = None) -> Source:
    """A path, bytes or binary file-like object (an upload) as a :class:`Source` of a known format.

    Paths must be regular files (checked before anything opens them); the name is escaped.
    ``fmt`` overrides the suffix (``WHOLE``: a file read whole with ``read_all``); ``name`` is
    how messages name it (default: the path, or the upload's own name). A Source passes through.

    >>> open_source(io.BytesIO(b"3\\n"), fmt="txt").fmt
    'txt'
    """
    if isinstance(source, Source):
        return source if fmt is None or source.fmt == fmt else replace(source, fmt=_resolve_fmt(source.name, fmt))
    data = path = None
    size = 0
    if isinstance(source, (str, os.PathLike)):
        path = Path(source).expanduser()
        raw = str(source)
        check_regular(path, raw)
        size = path.stat().st_size
    elif isinstance(source, (bytes, bytearray, memoryview)):
        data, raw = io.BytesIO(bytes(source)), "<bytes>"
    elif hasattr(source, "read"):
        raw = str(getattr(source, "name", None) or "<upload>")
        data = source
        if not (hasattr(source, "seek") and source.seekable()):
            data = io.BytesIO(source.read())    # one-shot streams: keep a rewindable copy
    else:
        raise SourceError(f"cannot read {type(source).__name__} as a file; pass a path, "
                          "bytes, or a binary file-like object such as an upload")
    if data is not None:
        size = data.seek(0, io.SEEK_END)
        data.seek(0)
    return Source(name=display(raw) if name is None else name, fmt=_resolve_fmt(raw, fmt), path=path, data=data,
                  size=size)








def check_budget(src_name: str, budget: ReadBudget, rows: int, nbytes: int, seconds: float, at: str) -> None:
    """Refuse a read past ``budget``, naming each limit passed, its setting and the place."""
    over = [f"{rows:,} rows (limit {budget.rows:,}, PACKING_LAB_MAX_ROWS)" if rows > budget.rows else "",
            f"{nbytes:,} bytes (limit {budget.bytes:,}, PACKING_LAB_MAX_BYTES)" if nbytes > budget.bytes else "",
            f"{seconds:.0f} s (limit {budget.seconds:g} s, PACKING_LAB_MAX_SECONDS)" if seconds > budget.seconds else ""]
    over = [o for o in over if o]
    if over:
        raise SourceError(f"{src_name} is larger than one analysis may read: {' and '.join(over)}{' ' + at if at else ''}; "
                          "analyse a sample or a shard of it, or raise the setting named")










