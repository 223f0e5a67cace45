"""CSV and TSV: the header from the first line alone; cells arrive as strings.

The caller decides whether strings are lengths or text, so a bad length is named by its
row instead of failing pyarrow's type inference. Quoted cells may hold newlines (texts
often do). ``where(i)`` is "data row N" (the header is line 1)::

    b"length,text\\n3,hi\\n5,hello\\n"  column "length"  ->  ["3", "5"]   where(1) == "data row 2"
"""
from __future__ import annotations

import csv
import io

import pyarrow as pa
import pyarrow.csv as pa_csv

import packing_core.data.sources._base as base
from packing_core._validate import MAX_HEADER_BYTES, limit_hint
from packing_core.data.sources._lines import check_text_head, chunks, utf8_error


class Delimited:
    """A delimited text file: ``,`` (CSV) or a tab (TSV)."""

    text_cells = True   # every cell arrives as a string: the caller tells lengths from text

    def __init__(self, delimiter: str, title: str):
        self.delimiter, self.title = delimiter, title

    def columns(self, src: base.Source) -> list[str]:
        with src.open() as f:
            check_text_head(f, src)
            names = self._header(f, src)
        if len(names) == 1:
            sep = next((c for c in ";\t,|" if c in names[0]), None)
            if sep is not None:
                fix = {"\t": "name it .tsv or pass fmt='tsv'", ",": "name it .csv or pass fmt='csv'"}.get(
                    sep, "re-save it with commas (.csv) or tabs (.tsv)")
                raise base.SourceError(f"{src.name} parsed as one column {base.display(names[0][:80])!r}: it seems to "
                                       f"use {sep!r} as delimiter, not {self.delimiter!r}; {fix}")
        return names

    def _header(self, f, src) -> list[str]:
        """The names in the first record, read with the csv module: no data cell is parsed."""
        head = base.read_at_most(f, MAX_HEADER_BYTES)
        f.seek(0)
        if head.startswith(b"\xef\xbb\xbf"):
            head = head[3:]
        try:
            text = head.decode("utf-8")
        except UnicodeDecodeError as e:  # bad bytes on the header line are named; later ones when read
            if head.count(b"\n", 0, e.start) == 0 and e.start < MAX_HEADER_BYTES:
                raise utf8_error(head, 1, src, e) from None
            text = head[: e.start].decode("utf-8")
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=self.delimiter)
        csv.field_size_limit(MAX_HEADER_BYTES)
        try:
            names = next(reader, None)
        except csv.Error as e:
            raise base.SourceError(f"could not read the header line of {src.name} ({e}); check the quoting") from None
        if names is None or not any(n.strip() for n in names):
            raise base.SourceError(f"no documents found in {src.name} (the file is empty)")
        if len(head) > MAX_HEADER_BYTES and reader.line_num <= 1 and "\n" not in text and "\r" not in text:
            raise base.SourceError(f"the header line of {src.name} is longer than {MAX_HEADER_BYTES:,} bytes; "
                                   f"is it a CSV file? ({limit_hint('MAX_HEADER_BYTES')})")
        return names

    def batches(self, src: base.Source, columns: list[str], budget):
        with src.open() as f:
            check_text_head(f, src)
            # A native Arrow stream and no reader threads: a thread still reading a Python file object
            # when an error ends the process aborts it ("terminate called without an active exception").
            if isinstance(f, io.BytesIO):
                native = pa.BufferReader(pa.py_buffer(f.getbuffer()))
            elif src.path is not None:
                native = pa.OSFile(str(src.path))
            else:
                native = f
            try:
                reader = pa_csv.open_csv(
                    native, read_options=pa_csv.ReadOptions(block_size=base.BATCH_BYTES, use_threads=False),
                    parse_options=pa_csv.ParseOptions(delimiter=self.delimiter, newlines_in_values=True),
                    convert_options=pa_csv.ConvertOptions(include_columns=columns,
                                                          column_types={c: pa.string() for c in columns}))
            except pa.ArrowException as e:
                raise self._error(e, f, src, 0) from None
            offset = 0
            while True:
                try:
                    batch = reader.read_next_batch()
                except StopIteration:
                    return
                except pa.ArrowException as e:
                    raise self._error(e, f, src, offset) from None
                if native is not f:
                    f.seek(native.tell())  # f.tell() is what the budget counts as read
                yield batch, (lambda i, o=offset: f"data row {o + i + 1}")
                offset += batch.num_rows

    def _error(self, e: Exception, f, src: base.Source, offset: int) -> base.SourceError:
        msg = str(e)
        if "Empty CSV file" in msg:
            f.seek(0)
            head = f.read(base.BATCH_BYTES)
            if not head.strip():
                return base.SourceError(f"no documents found in {src.name} (the file is empty)")
            try:
                head.decode("utf-8")
            except UnicodeDecodeError as bad:
                return utf8_error(head, 1, src, bad)
            return base.SourceError(f"no documents found in {src.name}: it holds a header line and no data rows")
        if "UTF8" in msg or "UTF-8" in msg:
            f.seek(0)
            for chunk, first in chunks(f, src):  # error path only: find the line to name
                try:
                    chunk.decode("utf-8")
                except UnicodeDecodeError as bad:
                    return utf8_error(chunk, first, src, bad)
        if "straddling" in msg:  # pyarrow's words for a value longer than one block
            return base.SourceError(f"{src.name}: a value in the block from data row {offset + 1} is longer than "
                                    f"{base.BATCH_BYTES:,} bytes, more than one document may hold; split it, or check "
                                    "the quoting")
        return base.SourceError(f"could not parse {src.name} as {src.fmt.upper()} in the block from data row "
                                f"{offset + 1} ({base.display(msg)}); check the delimiter ({self.delimiter!r}) and the "
                                "quoting")


CSV = Delimited(",", "CSV")
TSV = Delimited("\t", "TSV")
