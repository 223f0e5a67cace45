"""Arrow IPC: the stream format (what ``datasets.save_to_disk`` writes) or the file format.

A path is memory-mapped, so a batch costs only the columns chosen; ``where(i)`` is "row N".
"""
from __future__ import annotations

import pyarrow as pa

import packing_core.data.sources._base as base


def _reader(src: base.Source):
    if src.path is not None:
        source = pa.memory_map(str(src.path))
    else:
        source = pa.BufferReader(pa.py_buffer(src.memory().read()))
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


class ArrowIPC:
    """An ``.arrow`` file, stream or file format."""

    title = "Arrow IPC"

    def columns(self, src: base.Source) -> list[str]:
        return list(_reader(src).schema.names)

    def batches(self, src: base.Source, columns: list[str], budget):
        offset = 0
        for batch in _batches(_reader(src)):
            names = batch.schema.names
            yield batch.select([c for c in columns if c in names]), (lambda i, o=offset: f"row {o + i + 1}")
            offset += batch.num_rows


ARROW = ArrowIPC()
