"""JSON Lines and plain text: whole lines in blocks of about ``BATCH_BYTES``, never a whole file.

Line endings are ``\\n``, ``\\r\\n`` or a bare ``\\r``; a line longer than ``MAX_TEXT_BYTES`` is
refused before it is held whole; a bad UTF-8 byte or a bad JSON line is named by its line::

    b"a\\rbb\\n"  -> one block b"a\\nbb\\n", first line 1    (two documents, as in the CSV reader)

``src`` is any object with a ``name`` (a :class:`~packing_core.data.sources.Source`). Used by the
JSON Lines and text readers; the limit on a line is the one per value of ``_base``, applied
here before the line is held whole, since a stream has no metadata to check first.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Protocol

import packing_core.data.sources._base as base
from packing_core._validate import MAX_TEXT_BYTES, limit_hint


class Named(Protocol):
    """What a reader needs of its source here: the name to show in messages."""

    @property
    def name(self) -> str: ...


def chunks(f, src: Named, first: int = 1) -> Iterator[tuple[bytes, int]]:
    r"""Whole lines in blocks of about ``BATCH_BYTES``, with the line number of the first.

    Line endings are ``\n``, ``\r\n`` or a bare ``\r`` (old Mac files), as in the CSV reader;
    blocks come back with ``\n`` only. A line longer than ``MAX_TEXT_BYTES`` is refused
    before it is held whole. ``first`` numbers the first line (a range of a file starts later).
    """
    rest = b""
    while block := f.read(base.BATCH_BYTES):
        if first == 1 and not rest and block.startswith(b"\xef\xbb\xbf"):
            block = block[3:]  # a UTF-8 byte-order mark is not content
        block = rest + block
        # a final "\r" waits for the next block: it may be the first half of "\r\n"
        cut = max(block.rfind(b"\n"), block.rfind(b"\r", 0, len(block) - 1)) + 1
        rest, block = block[cut:], block[:cut]
        if len(rest) > MAX_TEXT_BYTES:
            raise base.SourceError(f"{src.name}: line {first + _newlines(block)[1]} is longer than {MAX_TEXT_BYTES:,} "
                                   f"bytes, more than one document may hold; split it or check the file "
                                   f"({limit_hint('MAX_TEXT_BYTES')})")
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


def utf8_error(chunk: bytes, first: int, src: Named, e: UnicodeDecodeError) -> base.SourceError:
    line_start = chunk.rfind(b"\n", 0, e.start) + 1
    lineno = first + chunk.count(b"\n", 0, e.start)
    return base.SourceError(f"{src.name} is not UTF-8 text (line {lineno}, "
                      f"byte {e.start - line_start} of that line is 0x{chunk[e.start]:02x}); "
                      "re-save it as UTF-8")


def decode(chunk: bytes, first: int, src: Named) -> str:
    try:
        return chunk.decode("utf-8")
    except UnicodeDecodeError as e:
        raise utf8_error(chunk, first, src, e) from None


def first_line(src: base.Source) -> int:
    """The number of a source's first line: 1, or where its range of lines starts."""
    return 1 if src.lines is None else src.lines[2]


MIN_PIECE_BYTES = 1 << 20     # a file is cut into ranges of lines no smaller than this


def split(src: base.Source, pieces: int) -> list[base.Source]:
    """A file of lines (JSON Lines, text; not compressed) as up to ``pieces`` ranges of whole lines.

    One pass over the file finds a line end after each cut and counts the lines before it, so
    every range still names its lines by their numbers in the file. A file with a carriage
    return (``\r`` line ends) stays whole: there a line end is not one byte.
    """
    if src.fmt not in ("jsonl", "txt") or src.path is None or src.lines is not None or pieces < 2:
        return [src]
    pieces = min(pieces, src.size // MIN_PIECE_BYTES)
    if pieces < 2:
        return [src]
    targets = [src.size * k // pieces for k in range(1, pieces)]
    cuts, lines, seen, offset = [0], [1], 0, 0
    with open(src.path, "rb") as f:
        while block := f.read(base.BATCH_BYTES):
            if b"\r" in block:
                return [src]
            while targets and targets[0] < offset + len(block):
                at = block.find(b"\n", max(0, targets[0] - offset))
                if at < 0:
                    break
                targets.pop(0)
                if offset + at + 1 > cuts[-1] and offset + at + 1 < src.size:
                    cuts.append(offset + at + 1)
                    lines.append(1 + seen + block.count(b"\n", 0, at + 1))
            seen += block.count(b"\n")
            offset += len(block)
    bounds = [*cuts, src.size]
    return [dataclasses.replace(src, size=b - a, lines=(a, b, n), _handles=[])
            for a, b, n in zip(bounds, bounds[1:], lines)]


def check_text_head(f, src) -> None:
    """Refuse binary files early with a hint: text formats must be UTF-8 without NUL bytes."""
    head = f.read(8192)
    f.seek(0)
    hints = {b"\xff\xfe\x00\x00": "it is UTF-32 encoded; re-save it as UTF-8",     # before UTF-16: same first bytes
             b"\x00\x00\xfe\xff": "it is UTF-32 encoded; re-save it as UTF-8",
             b"PAR1": "it looks like Parquet; name it .parquet or pass fmt='parquet'",
             b"\x1f\x8b": "it looks gzip-compressed; name it .jsonl.gz or decompress it first",
             b"PK\x03\x04": "it looks like a zip archive (xlsx?); export it as CSV first",
             b"\xff\xfe": "it is UTF-16 encoded; re-save it as UTF-8",
             b"\xfe\xff": "it is UTF-16 encoded; re-save it as UTF-8"}
    for magic, hint in hints.items():
        if head.startswith(magic):
            raise base.SourceError(f"{src.name} is not a UTF-8 {src.fmt} file: {hint}")
    if b"\x00" in head:
        raise base.SourceError(f"{src.name} looks binary (NUL byte at byte {head.index(0)}), not a UTF-8 "
                               f"{src.fmt} file; pass a text file or the right fmt=")
