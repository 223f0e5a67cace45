"""JSON Lines and plain text: whole lines in blocks of about ``BATCH_BYTES``, never a whole file.

Line endings are ``\\n``, ``\\r\\n`` or a bare ``\\r``; a line longer than ``MAX_TEXT_BYTES`` is
refused before it is held whole; a bad UTF-8 byte or a bad JSON line is named by its line::

    b"a\\rbb\\n"  -> one block b"a\\nbb\\n", first line 1    (two documents, as in the CSV reader)

``src`` is any object with a ``name`` (a :class:`~packing_core.data.readers.Source`).
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Protocol

import pyarrow as pa
import pyarrow.compute as pc

from packing_core._validate import MAX_TEXT_BYTES

BATCH_BYTES = 8 << 20       # about this much of the file per batch, in every format


class Named(Protocol):
    """What a reader needs of its source here: the name to show in messages."""

    name: str


def chunks(f, src: Named) -> Iterator[tuple[bytes, int]]:
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


def utf8_error(chunk: bytes, first: int, src: Named, e: UnicodeDecodeError) -> ValueError:
    line_start = chunk.rfind(b"\n", 0, e.start) + 1
    lineno = first + chunk.count(b"\n", 0, e.start)
    return ValueError(f"{src.name} is not UTF-8 text (line {lineno}, "
                      f"byte {e.start - line_start} of that line is 0x{chunk[e.start]:02x}); "
                      "re-save it as UTF-8")


def decode(chunk: bytes, first: int, src: Named) -> str:
    try:
        return chunk.decode("utf-8")
    except UnicodeDecodeError as e:
        raise utf8_error(chunk, first, src, e) from None


def iter_txt(f, src, column):
    for chunk, first in chunks(f, src):
        # Split and validate in C: one Python call per block, none per line.
        lines = pa.array((chunk[:-1] if chunk.endswith(b"\n") else chunk).split(b"\n"), pa.binary())
        try:
            lines = pc.utf8_rtrim(lines.cast(pa.string()), characters="\r")
        except pa.ArrowException as e:
            decode(chunk, first, src)  # raises a ValueError naming the line if it is bad UTF-8
            raise ValueError(f"could not read {src.name} near line {first} ({e})") from None
        yield lines, (lambda i, o=first: f"line {o + i}")


_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


def json_object(line: str, lineno: int, src: Named) -> dict:
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


def iter_jsonl(f, src, column):
    for chunk, first in chunks(f, src):
        values, linenos = [], []
        for i, line in enumerate(decode(chunk, first, src).split("\n")):
            if not line.strip():
                continue  # blank lines (a trailing newline, say) hold no record
            value = json_object(line, first + i, src).get(column)
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


def _json_array(values: list, linenos: list[int], src: Named, column: str) -> pa.Array:
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
