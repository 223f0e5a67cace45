"""Plain text: one document per line, one column, ``text``::

    b"hi\\nhello\\n"  ->  text: ["hi", "hello"]    where(1) == "line 2"
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

import packing_core.data.sources._base as base
from packing_core.data.sources._lines import check_text_head, chunks, decode, first_line


class TextLines:
    """A ``.txt`` file: each line a document (blank lines stay, as blanks: no document)."""

    title = "text"

    def columns(self, src: base.Source) -> list[str]:
        return ["text"]

    def batches(self, src: base.Source, columns: list[str], budget):
        with src.open() as f:
            check_text_head(f, src)
            for chunk, first in chunks(f, src, first_line(src)):
                # split and validate in C: one Python call per block, none per line
                lines = pa.array((chunk[:-1] if chunk.endswith(b"\n") else chunk).split(b"\n"), pa.binary())
                try:
                    lines = pc.utf8_rtrim(lines.cast(pa.string()), characters="\r")
                except pa.ArrowException as e:
                    decode(chunk, first, src)  # raises the error naming the line if it is bad UTF-8
                    raise base.SourceError(f"could not read {src.name} near line {first} ({e})") from None
                yield pa.RecordBatch.from_arrays([lines], ["text"]), (lambda i, o=first: f"line {o + i}")


TXT = TextLines()
