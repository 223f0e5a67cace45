"""Plain text: one document per line, one column, ``text``::

    b"hi\\nhello\\n"  ->  text: ["hi", "hello"]    where(1) == "line 2"

``TextLines.batches`` gives Arrow batches, as every reader does; :func:`plain_lines` gives the same
lines as Python strings, within the same limits, where pyarrow is not installed (a trainer's
environment scanning a text file).
"""
from __future__ import annotations

import time

import packing_core.data.sources._base as base
from packing_core._settings import ReadBudget, read_budget
from packing_core.data.sources._lines import check_text_head, chunks, decode, first_line


class TextLines:
    """A ``.txt`` file: each line a document (blank lines stay, as blanks: no document)."""

    title = "text"

    def columns(self, src: base.Source) -> list[str]:
        return ["text"]

    def batches(self, src: base.Source, columns: list[str], budget):
        import pyarrow as pa
        import pyarrow.compute as pc

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


def plain_lines(src: base.Source, budget: ReadBudget | None = None):
    """``(lines, where)`` per block of a ``.txt`` file, as Python strings: :meth:`TextLines.batches` without
    pyarrow. The same defences hold: UTF-8 text only, no line past ``MAX_TEXT_BYTES`` (``chunks``), and
    the ``ReadBudget`` after every block.

    >>> import io
    >>> [(lines, where(1)) for lines, where in plain_lines(base.open_source(io.BytesIO(b"hi\\r\\nyo\\n"), fmt="txt"))]
    [(['hi', 'yo'], 'line 2')]
    """
    budget = budget or read_budget()
    start, rows, nbytes = time.monotonic(), 0, 0
    with src.open() as f:
        check_text_head(f, src)
        for chunk, first in chunks(f, src, first_line(src)):
            text = decode(chunk, first, src)
            lines = [line.rstrip("\r") for line in (text[:-1] if text.endswith("\n") else text).split("\n")]
            rows, nbytes = rows + len(lines), nbytes + len(chunk)
            where = (lambda i, o=first: f"line {o + i}")
            base.check_budget(src.name, budget, rows, max(nbytes, src.position()), time.monotonic() - start,
                              f"by {where(len(lines) - 1)}")
            yield lines, where
