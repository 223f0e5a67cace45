"""The reading loop every data format goes through: ``read_batches`` applies the limits to each batch.

    read_batches(src, ["text"])    reader.batches(...) -> (RecordBatch, where) per batch
        bytes per value            no text value past MAX_TEXT_BYTES, named by its place
        ReadBudget                 rows, bytes (read or decoded) and seconds, after every batch
        library errors             "shard a.parquet is unreadable or truncated (...)", one line

The readers and this loop stand on pyarrow, imported when a file is first read (``_base.pyarrow``).
"""
from __future__ import annotations

import time
import zlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from packing_core._settings import ReadBudget, read_budget
from packing_core._validate import MAX_TEXT_BYTES, limit_hint
from packing_core.data.sources._base import FORMATS, Reader, Source, SourceError, Where, check_budget, display, pyarrow

if TYPE_CHECKING:
    import pyarrow as pa


MAX_NESTED_BATCH_BYTES = 64 * MAX_TEXT_BYTES   # a batch of nested values (chats) stays bounded as a whole


_LIBRARY_ERRORS = (OSError, EOFError, zlib.error, UnicodeDecodeError)   # with pyarrow's own: library_errors()


def library_errors() -> tuple[type[Exception], ...]:
    """The exceptions a reader's library raises on a bad file: pyarrow's own, and the I/O ones."""
    return (pyarrow().ArrowException, *_LIBRARY_ERRORS)


def reader_of(src: Source) -> Reader:
    if src.fmt not in FORMATS:
        raise SourceError(f"{src.name} is read whole (fmt={src.fmt!r}), not by a reader; pass a data format")
    return FORMATS.get(src.fmt).reader


def unreadable(src: Source, e: Exception) -> SourceError:
    first = (str(e).strip().splitlines() or [""])[0][:300]
    title = getattr(FORMATS.get(src.fmt).reader, "title", src.fmt) if src.fmt in FORMATS else src.fmt
    return SourceError(f"{src.name} is unreadable or truncated, not a readable {title} file "
                       f"({type(e).__name__}: {display(first)}); check or re-create that file")


def columns(src: Source) -> list[str]:
    """Column names of ``src``, from its header alone; two columns of one name are refused."""
    try:
        names = list(reader_of(src).columns(src))
    except SourceError:
        raise
    except library_errors() as e:
        raise unreadable(src, e) from None
    if len(set(names)) < len(names):
        twice = next(n for i, n in enumerate(names) if n in names[:i])
        raise SourceError(f"{src.name} has two columns named {display(twice)!r}; rename one so that "
                          "the column to read is unambiguous")
    return names


def too_long(src: Source, at: str, nbytes: int, column: str | None = None) -> SourceError:
    """The one message for a value past ``MAX_TEXT_BYTES`` (a line, a cell, a Parquet value)."""
    what = f"{display(column)!r} holds" if column is not None else "it holds"
    return SourceError(f"{src.name}: {at}: {what} {nbytes:,} bytes, more than one document may hold "
                       f"({MAX_TEXT_BYTES:,}); split the long value or drop it ({limit_hint('MAX_TEXT_BYTES')})")


def is_text(t: pa.DataType) -> bool:
    pa = pyarrow()
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t)


def decoded_bytes(values: pa.Array) -> int:
    import pyarrow.compute as pc

    pa = pyarrow()
    """Bytes a column takes once decoded (a dictionary column counts every repeat of its values)."""
    if pa.types.is_dictionary(values.type) and is_text(values.type.value_type):
        sizes = pc.binary_length(values.dictionary)
        return int(pc.sum(sizes.take(values.indices)).as_py() or 0) + 8 * len(values)
    return int(values.nbytes)


def check_values(src: Source, batch: pa.RecordBatch, where: Where) -> None:
    import pyarrow.compute as pc

    pa = pyarrow()
    """No text value past ``MAX_TEXT_BYTES`` goes on to become a Python string (checked in Arrow)."""
    for name, col in zip(batch.schema.names, batch.columns):
        t = col.type
        if pa.types.is_dictionary(t) and is_text(t.value_type):
            sizes = pc.binary_length(col.dictionary).take(col.indices)
        elif is_text(t):
            sizes = pc.binary_length(col)
        else:
            if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_null(t)) \
                    and col.nbytes > MAX_NESTED_BATCH_BYTES:
                raise SourceError(f"{src.name}: {where(0)}: a batch of {len(col):,} records holds {col.nbytes:,} bytes "
                                  f"of {display(name)!r}; some record is far longer than a document may be: split or "
                                  "drop it")
            continue
        top = pc.max(sizes).as_py() if len(sizes) else None
        if top is not None and top > MAX_TEXT_BYTES:
            raise too_long(src, where(int(pc.index(sizes, top).as_py())), top, name)


def read_batches(src: Source, columns: list[str], budget: ReadBudget | None = None
                 ) -> Iterator[tuple[pa.RecordBatch, Where]]:
    """Yield ``(batch, where)`` of ``columns`` within ``budget`` (default: the environment's settings).

    The budget is checked after every batch, so the time the caller spends on a batch
    (tokenising it) counts too; bytes are the larger of those read from the file and those
    decoded. Every text value is held to ``MAX_TEXT_BYTES``.
    """
    budget = budget or read_budget()
    reader = reader_of(src)
    start, rows, decoded = time.monotonic(), 0, 0
    batches = reader.batches(src, list(columns), budget)
    while True:
        try:
            batch, where = next(batches)
        except StopIteration:
            return
        except SourceError:
            raise
        except library_errors() as e:
            raise unreadable(src, e) from None
        missing = [c for c in columns if c not in batch.schema.names]
        if missing:
            raise SourceError(f"{src.name} has no column {display(missing[0])!r} (columns: {batch.schema.names}); "
                              "every shard must hold the same columns")
        if batch.num_rows == 0:
            continue
        check_values(src, batch, where)
        rows += batch.num_rows
        decoded += sum(decoded_bytes(c) for c in batch.columns)
        check_budget(src.name, budget, rows, max(decoded, src.position()), time.monotonic() - start,
                     f"by {where(batch.num_rows - 1)}")
        yield batch, where
