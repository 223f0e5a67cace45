"""Arrow IPC: the stream format (what ``datasets.save_to_disk`` writes) or the file format.

A path is memory-mapped, so a batch costs only the columns chosen; ``where(i)`` is "row N".

A compressed file (``lz4`` or ``zstd`` buffers, ``IpcWriteOptions(compression=...)``) is the
exception: reading a record batch decompresses all of it at once, so a 2 MB file can become
1.6 GB before any limit sees a value. Each compressed message says how large every buffer
becomes (the first 8 bytes of a compressed buffer hold its uncompressed length, in the Arrow
columnar format's "Compression" section), so those sizes are summed from the messages alone,
before anything is decompressed, and held to ``MAX_ARROW_BATCH_BYTES`` per batch,
``MAX_TEXT_BYTES`` per row and the read budget's bytes for the file.
"""
from __future__ import annotations

import struct

import pyarrow as pa

import packing_core.data.sources._base as base
from packing_core._validate import MAX_ARROW_BATCH_BYTES, MAX_TEXT_BYTES, limit_hint

_FILE_MAGIC = b"ARROW1"


def _source(src: base.Source):
    if src.path is not None:
        return pa.memory_map(str(src.path))
    return pa.BufferReader(pa.py_buffer(src.memory().read()))


def _reader(src: base.Source):
    source = _source(src)
    try:
        return pa.ipc.open_stream(source)
    except pa.ArrowInvalid:
        source.seek(0)
        return pa.ipc.open_file(source)


def _batches(reader):
    if isinstance(reader, pa.ipc.RecordBatchFileReader):
        yield from (reader.get_batch(i) for i in range(reader.num_record_batches))
    else:
        yield from reader


def _field(buf, table: int, i: int) -> int | None:
    """Where field ``i`` of the flatbuffer table at ``table`` lies, or None when it is absent."""
    vtable = table - struct.unpack_from("<i", buf, table)[0]
    at = 4 + 2 * i
    if at >= struct.unpack_from("<H", buf, vtable)[0]:
        return None
    rel = struct.unpack_from("<H", buf, vtable + at)[0]
    return table + rel if rel else None


def _follow(buf, at: int) -> int:
    return at + struct.unpack_from("<I", buf, at)[0]


def decoded_size(message) -> tuple[int, int, bool]:
    """``(rows, bytes once decompressed, compressed?)`` of one record or dictionary batch message, from its metadata.

    The metadata is a flatbuffer ``Message`` (``format/Message.fbs``): its header, a ``RecordBatch``
    (or a ``DictionaryBatch`` holding one), lists each buffer as (offset, length) in the body and
    says whether the body is compressed; a compressed buffer starts with its uncompressed length
    as an int64 (-1: stored as is).
    """
    buf = memoryview(message.metadata)
    msg = _follow(buf, 0)
    kind_at, header_at = _field(buf, msg, 1), _field(buf, msg, 2)
    if kind_at is None or header_at is None:
        return 0, 0, False
    batch = _follow(buf, header_at)
    if buf[kind_at] == 2:                      # DictionaryBatch: its data is a RecordBatch
        data_at = _field(buf, batch, 1)
        if data_at is None:
            return 0, 0, False
        batch = _follow(buf, data_at)
    rows_at, buffers_at = _field(buf, batch, 0), _field(buf, batch, 2)
    rows = struct.unpack_from("<q", buf, rows_at)[0] if rows_at is not None else 0
    if buffers_at is None:
        return rows, 0, False
    vector = _follow(buf, buffers_at)
    compressed = _field(buf, batch, 3) is not None
    body = memoryview(message.body) if message.body is not None else memoryview(b"")
    total = 0
    for k in range(struct.unpack_from("<I", buf, vector)[0]):
        offset, length = struct.unpack_from("<qq", buf, vector + 4 + 16 * k)
        if compressed and length >= 8 and offset + 8 <= len(body):
            stored = struct.unpack_from("<q", body, offset)[0]
            total += length - 8 if stored == -1 else max(0, stored)
        else:
            total += length
    return rows, total, compressed


def _check_compressed(src: base.Source, budget) -> None:
    """Refuse a compressed file whose batches would decompress past the limits, before one is decompressed."""
    source = _source(src)
    if source.read(len(_FILE_MAGIC)) != _FILE_MAGIC:
        source.seek(0)
    else:
        source.seek(8)                          # the file format: its messages follow the 8-byte magic
    messages = pa.ipc.MessageReader.open_stream(source)
    total = offset = 0
    for message in messages:
        if message.type not in ("record batch", "dictionary batch"):
            continue
        rows, size, compressed = decoded_size(message)
        if not compressed:
            offset += rows
            continue
        if size > MAX_ARROW_BATCH_BYTES:
            raise base.SourceError(f"{src.name}: the compressed batch at row {offset + 1} decompresses to {size:,} "
                                   f"bytes, more than one batch may ({MAX_ARROW_BATCH_BYTES:,}); save it with smaller "
                                   f"batches (max_chunksize) or uncompressed ({limit_hint('MAX_ARROW_BATCH_BYTES')})")
        if rows and size / rows > MAX_TEXT_BYTES:
            raise base.SourceError(f"{src.name}: the compressed batch at row {offset + 1} holds {size:,} bytes in "
                                   f"{rows:,} rows (from its metadata), more than one document may hold "
                                   f"({MAX_TEXT_BYTES:,} bytes); split the long values or drop them "
                                   f"({limit_hint('MAX_TEXT_BYTES')})")
        total += size
        offset += rows
        base.check_budget(src.name, budget, 0, total, 0.0, "(decompressed, from its metadata)")


class ArrowIPC:
    """An ``.arrow`` file, stream or file format."""

    title = "Arrow IPC"

    def columns(self, src: base.Source) -> list[str]:
        return list(_reader(src).schema.names)

    def batches(self, src: base.Source, columns: list[str], budget):
        _check_compressed(src, budget)
        offset = 0
        for batch in _batches(_reader(src)):
            names = batch.schema.names
            yield batch.select([c for c in columns if c in names]), (lambda i, o=offset: f"row {o + i + 1}")
            offset += batch.num_rows


ARROW = ArrowIPC()
