"""JSON Lines (and JSON Lines compressed with gzip): one object per line; the chosen keys as columns.

Each column keeps its JSON type: text, numbers, lists of token ids, or nested records
(chat ``messages``) as Arrow lists and structs. A column mixing a plain value with an
object, an array or a boolean is refused at the line that breaks it::

    {"text": "hi"}\\n{"text": "hello"}\\n   ->  text: ["hi", "hello"]    where(1) == "line 2"

A block is parsed by Arrow's JSON reader when it can give the same columns the line-by-line
reading gives (one object per line, no blank line, each chosen column of a plain type);
anything else (an error to name, a type to refuse) is read line by line, with Python's ``json``.
"""
from __future__ import annotations

import gzip
import io
import json
import re
from contextlib import contextmanager

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

import packing_core.data.sources._base as base
from packing_core.data.sources._lines import Named, check_text_head, chunks, decode, first_line

_NESTED = (dict, list)
_ARROW_CONVERSION = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError)


_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")
_BLANK_LINE = re.compile(rb"(?:\A|\n)[ \t\r\f\v]*(?:\n|\Z)")
MAX_FAST_OPENS = 256   # brackets opened on one line, past which it is read line by line
_PLAIN = (pa.types.is_string, pa.types.is_null, pa.types.is_int64, pa.types.is_float64, pa.types.is_boolean)


def json_object(line: str, lineno: int, src: Named) -> dict:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        hint = " (for one big JSON array, convert it: jq -c '.[]' in.json > out.jsonl)" if (
            lineno == 1 and line.lstrip().startswith("[")) else ""
        raise base.SourceError(f"{src.name}: line {lineno} is not valid JSON ({e.msg} at column "
                         f'{e.colno}); JSON Lines needs one complete object per line, e.g. '
                         '{"text": "..."}' + hint) from None
    except RecursionError:
        raise base.SourceError(f"{src.name}: line {lineno} is nested too deeply to read; "
                         "flatten each line to one object with a text or length field") from None
    except ValueError as e:  # e.g. an integer too large for Python's digit limit
        raise base.SourceError(f"{src.name}: line {lineno} holds a value too large to read ({e}); "
                         "store lengths as ordinary integers") from None
    if "\\u" in line and _SURROGATE.search(line):
        try:
            json.dumps(obj, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise base.SourceError(f"{src.name}: line {lineno} holds a lone surrogate escape (such as \\ud800), "
                             "which is not valid Unicode; fix or drop that line") from None
    if not isinstance(obj, dict):
        raise base.SourceError(f"{src.name}: line {lineno} is a JSON {type(obj).__name__}, not an object; "
                         'JSON Lines needs one object per line, e.g. {"text": "..."} '
                         "(for one big JSON array, convert it: jq -c '.[]' in.json > out.jsonl)")
    return obj




def _what(value) -> str:
    names: dict[type, str] = {dict: "an object", list: "an array"}
    return names.get(type(value), f"a boolean ({value})")


def _token_ids(value) -> bool:
    return isinstance(value, list) and all(type(v) is int for v in value)


def _column(values: list, linenos: list[int], src: Named, column: str) -> pa.Array:
    """JSON values of one key as an Arrow array (None = missing)."""
    kinds = {type(v) for v in values} - {type(None)}
    if kinds <= {str}:  # via UTF-8 bytes: far faster than converting Python str objects
        return pa.array([None if v is None else v.encode() for v in values], pa.binary()).cast(pa.string())
    if kinds <= {int, float}:
        big = next((k for k, v in enumerate(values) if isinstance(v, int) and abs(v) >= 2**62), None)
        if big is None:
            return pa.array(values)
        raise base.SourceError(f"{src.name}: line {linenos[big]}: {base.display(column)!r} holds {values[big]}, too "
                               "large for a length; fix that line")
    scalar, odd = kinds & {str, int, float}, kinds & {dict, list, bool}
    if bool in kinds or (scalar and odd):
        # a text or length column: an object, an array or a boolean in it is no document
        i = next(k for k, v in enumerate(values) if isinstance(v, (*_NESTED, bool)))
        raise base.SourceError(f"{src.name}: line {linenos[i]}: {base.display(column)!r} holds "
                               f"{_what(values[i])}; pick a column that holds plain text or an integer length")
    if scalar:   # text and numbers mixed
        kind = next(type(v) for v in values if v is not None)
        i = next(k for k, v in enumerate(values) if v is not None and (type(v) is str) != (kind is str))
        raise base.SourceError(f"{src.name}: line {linenos[i]}: {base.display(column)!r} holds {values[i]!r} but "
                               "earlier lines hold another type; a column must hold only integers or only text")
    if all(v is None or _token_ids(v) for v in values):
        try:
            return pa.array(values, pa.list_(pa.int64()))
        except _ARROW_CONVERSION:   # an id past int64 (a uint64 2**64 - 1): named with its value
            past = next(((k, t) for k, v in enumerate(values) if v for t in v if not -2**63 <= t < 2**63), None)
            if past is not None:
                raise base.SourceError(f"{src.name}: line {linenos[past[0]]}: {base.display(column)!r} holds the token "
                                       f"id {past[1]:,}, past the int64 range token ids are stored in; fix that line"
                                       ) from None
    try:   # nested records (chat messages): Arrow infers one structure for the batch
        return pa.array(values)
    except _ARROW_CONVERSION as e:
        first = next(k for k, v in enumerate(values) if v is not None)
        try:
            kind = pa.array(values[first:first + 1]).type
        except _ARROW_CONVERSION:   # the first value alone is unreadable (a number past int64 inside it)
            raise base.SourceError(f"{src.name}: line {linenos[first]}: {base.display(column)!r} holds a value Arrow "
                                   f"cannot store ({base.display(str(e)[:120])}); fix that line") from None
        bad = next((k for k, v in enumerate(values) if v is not None and not _fits(v, kind)), first)
        raise base.SourceError(f"{src.name}: line {linenos[bad]}: {base.display(column)!r} holds a value of another "
                               f"shape than line {linenos[first]} ({base.display(str(e)[:120])}); every record must hold "
                               "the same structure, e.g. text in every content") from None


def _fits(value, kind: pa.DataType) -> bool:
    try:
        pa.array([value], kind)
        return True
    except _ARROW_CONVERSION:
        return False


def _depth(t: pa.DataType) -> int:
    return 1 + max((_depth(t.field(i).type) for i in range(t.num_fields)), default=0)


def _accepted(col: pa.Array) -> bool:
    """A column the line-by-line reading would give alike: text, integers below 2**62, token-id lists,
    or chat messages (lists of records of plain values). Floats, booleans and the rest go line by line."""
    t = col.type
    if pa.types.is_string(t) or pa.types.is_null(t):
        return True
    if pa.types.is_int64(t):
        low, high = pc.min_max(col).values()
        return low.as_py() is None or max(abs(low.as_py()), abs(high.as_py())) < 2**62
    if pa.types.is_list(t) and pa.types.is_int64(t.value_type):
        return True
    if pa.types.is_list(t) and pa.types.is_struct(t.value_type):
        fields = [t.value_type.field(i).type for i in range(t.value_type.num_fields)]
        return bool(fields) and all(any(test(f) for test in _PLAIN) for f in fields)
    return False


def _arrow_table(chunk: bytes) -> pa.Table | None:
    """A block of whole lines parsed by Arrow, or None to read it line by line (Python's json is no
    stricter than Arrow's reader: what Arrow parses, each line parses alone too)."""
    body = chunk[:-1] if chunk.endswith(b"\n") else chunk
    if not body or _BLANK_LINE.search(body) or (b"\\u" in body and _SURROGATE_BYTES.search(body)):
        return None    # blank lines shift the line numbers; surrogate escapes are judged line by line
    try:
        body.decode("utf-8")   # Arrow's reader does not check: a bad byte is named line by line
    except UnicodeDecodeError:
        return None
    raw = np.frombuffer(body, np.uint8)
    line = np.cumsum(raw == 10)
    opens = np.bincount(line, weights=(raw == 123) | (raw == 91))    # "{" and "["
    if opens.max(initial=0) > MAX_FAST_OPENS:
        return None    # Arrow's parser recurses: nesting 30,000 deep crashes the process (measured)
    try:
        table = pa_json.read_json(io.BytesIO(body), read_options=pa_json.ReadOptions(
            use_threads=False, block_size=len(body) + 1))
    except (pa.ArrowException, OverflowError):
        return None
    if table.num_rows != body.count(b"\n") + 1 or any(_depth(f.type) > 16 for f in table.schema):
        return None    # two objects on a line, or nesting the line-by-line reading may refuse
    return table


def _arrow_batch(table: pa.Table, columns: list[str]) -> pa.RecordBatch | None:
    """The chosen columns, when each is what the line-by-line reading would give; else None."""
    arrays = [table.column(c).combine_chunks() if c in table.column_names else pa.nulls(table.num_rows, pa.string())
              for c in columns]
    if not all(_accepted(a) for a in arrays):
        return None
    return pa.RecordBatch.from_arrays([a.cast(pa.string()) if pa.types.is_null(a.type) else a for a in arrays],
                                      columns)


class JsonLines:
    """A ``.jsonl`` file (``compressed``: a ``.jsonl.gz`` file, read through gzip)."""

    def __init__(self, compressed: bool = False):
        self.compressed = compressed
        self.title = "gzip-compressed JSON Lines" if compressed else "JSON Lines"

    @contextmanager
    def _stream(self, src: base.Source):
        with src.open() as raw:
            if not self.compressed:
                check_text_head(raw, src)
                yield raw
                return
            with gzip.GzipFile(fileobj=raw, mode="rb") as f:
                check_text_head(f, src)
                yield f

    def columns(self, src: base.Source) -> list[str]:
        """The keys of the first batch of lines (about ``BATCH_BYTES``)."""
        with self._stream(src) as f:
            for chunk, first in chunks(f, src, first_line(src)):
                table = _arrow_table(chunk)
                if table is not None:
                    return list(table.column_names)
                keys: dict[str, None] = {}
                for i, line in enumerate(decode(chunk, first, src).split("\n")):
                    if line.strip():
                        keys.update(dict.fromkeys(json_object(line, first + i, src)))
                return list(keys)
        return []

    def batches(self, src: base.Source, columns: list[str], budget):
        with self._stream(src) as f:
            for chunk, first in chunks(f, src, first_line(src)):
                table = _arrow_table(chunk)
                fast = None if table is None else _arrow_batch(table, columns)
                if fast is not None:
                    yield fast, (lambda i, o=first: f"line {o + i}")
                    continue
                data: dict[str, list] = {c: [] for c in columns}
                linenos: list[int] = []
                for i, line in enumerate(decode(chunk, first, src).split("\n")):
                    if not line.strip():
                        continue  # blank lines (a trailing newline, say) hold no record
                    record = json_object(line, first + i, src)
                    for c in columns:
                        data[c].append(record.get(c))
                    linenos.append(first + i)
                if linenos:
                    arrays = [_column(data[c], linenos, src, c) for c in columns]
                    yield pa.RecordBatch.from_arrays(arrays, columns), (lambda i, n=linenos: f"line {n[i]}")


JSONL = JsonLines()
JSONL_GZ = JsonLines(compressed=True)
