"""Packing a stream: a buffer of N documents, rows out as they fill, a state small enough to save.

Trainers rarely see the whole corpus before they pack: they read a stream. :class:`StreamPacker`
holds at most ``buffer_size`` documents (pieces, after the over-long policy) and builds a row by
*best fit from the buffer*: the longest waiting piece that fits, then the longest that fits the
room left, and so on. A row is **full enough** when it holds at least ``min_fill x context``
tokens (by default exactly ``context``: no slot left). The packer emits a row as soon as the
buffer can make a full-enough one, or when the buffer holds ``buffer_size`` pieces (it must make
room), and at the end of the stream until the buffer is empty::

    context 8, buffer 3, stream 5 3 6 2 7
    read 5, 3      -> 5+3 is full: emit [5 3]
    read 6, 2      -> 6+2 is full: emit [6 2]
    read 7, end    -> emit [7]

>>> packer = StreamPacker(8, 3)
>>> [[length for _, _, length in row] for row in packer.rows([5, 3, 6, 2, 7])]
[[5, 3], [6, 2], [7]]

Its whole state is a :class:`StreamState`: the pieces waiting in the buffer and how many documents
were read. Saved after any row (``to_json``) and given back (``StreamPacker(state=...)``) with the
rest of the stream, it gives exactly the rows the packer would have made without stopping.

A small buffer costs rows: :func:`buffer_curve` measures utilisation against buffer size.
TRL packs a different way, with the same kind of price: bfd inside each window of 1,000 documents
(:func:`windowed_plan`).
"""
from __future__ import annotations

import bisect
import json
import math
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields

import numpy as np

from packing_core._validate import (
    MAX_JSON_BYTES,
    MAX_LENGTH,
    MAX_STREAM_BUFFER,
    MAX_TOTAL_TOKENS,
    OVERLONG_POLICIES,
    InputError,
    as_context,
    choice,
    limit_hint,
    whole_number,
)
from packing_core.packing.plan import PlacedPieces, Plan
from packing_core.packing.strategies import make_plan

__all__ = ["MAX_BUFFER", "STREAM_STATE_VERSION", "TRL_STRATEGY", "TRL_WINDOW", "BufferCurve", "StreamPacker", "StreamState",
           "buffer_curve", "windowed_plan"]

STREAM_STATE_VERSION = 1
TRL_WINDOW = 1000           # datasets' Dataset.map(batched=True) default batch_size: TRL's packing window
# TRL 1.16's pack_dataset strategy that windowed_plan models, by over-long policy (trl/data_utils.py, pack_dataset:
# "bfd", its default, calls _pack_bfd with on_seq_length_overflow="truncate"; "bfd_split" with "split")
TRL_STRATEGY = {"truncate": "bfd", "split": "bfd_split"}
MAX_BUFFER = MAX_STREAM_BUFFER   # pieces one buffer may hold (each a few Python objects: about 150 MB at most)


def _fill(value, name: str = "min_fill") -> float:
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
    if not ok or not math.isfinite(float(value)) or not 0 < float(value) <= 1:
        raise InputError(f"{name} must be a share of the context above 0 and at most 1, got {value!r}; "
                         "try 1.0 (emit a row only when it is full) or 0.95")
    return float(value)


@dataclass(frozen=True)
class StreamState:
    """Where a stream packer stands: its settings; the position in the stream (document ``position``,
    of which ``offset`` tokens were already read: a split document enters piece by piece); the rows
    emitted; and the pieces waiting in the buffer as ``(document, start, length)``, in arrival order.

    Resume with the stream from document ``position`` on: ``StreamPacker(state=s).rows(lengths[s.position:])``.
    """

    context: int
    buffer_size: int
    min_fill: float
    overlong: str
    position: int
    offset: int
    rows: int
    buffer: tuple[tuple[int, int, int], ...]

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        return {"version": STREAM_STATE_VERSION, **d, "buffer": [list(x) for x in self.buffer]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> StreamState:
        """A saved state, checked: a hand-edited one that could not come from a packer is refused in one line.

        >>> StreamState.from_json('{"version": 1, "context": 8, "buffer_size": 3, "min_fill": 1.0, '
        ...     '"overlong": "split", "position": 2, "offset": 0, "rows": 0, "buffer": [[1, 0, 9]]}')
        Traceback (most recent call last):
        packing_core._validate.InputError: stream state: buffer piece 0 is 9 tokens long, outside 1..8 (the context)
        """
        from packing_core.data.sources import load_json

        if not isinstance(text, (str, bytes, bytearray)):
            raise InputError(f"stream state must be the text StreamState.to_json() wrote, got {type(text).__name__}")
        if len(text) > MAX_JSON_BYTES:   # 100 MB of hand-made buffer: refused before it is parsed
            raise InputError(f"stream state is {len(text):,} characters, more than a state of a full buffer "
                             f"({MAX_STREAM_BUFFER:,} pieces) needs; pass the text StreamState.to_json() wrote "
                             f"({limit_hint('MAX_JSON_BYTES')})")
        try:    # no NaN, no key twice (json.loads keeps the last silently), no nesting past the recursion limit
            d = load_json(text, "stream state", max_items=4 * MAX_STREAM_BUFFER + 64, duplicates=True)
        except InputError as e:
            raise InputError(f"{e}; pass the text StreamState.to_json() wrote") from None
        if not isinstance(d, dict) or d.get("version") != STREAM_STATE_VERSION:
            raise InputError(f"stream state must be a JSON object with version {STREAM_STATE_VERSION}; "
                             "pass the text StreamState.to_json() wrote")
        want = {f.name for f in fields(cls)} | {"version"}
        if set(d) != want:
            raise InputError(f"stream state has fields {sorted(d)}, expected {sorted(want)}")
        return _checked(d)


def _checked(d: dict) -> StreamState:
    num = lambda k, lo, hi=None: whole_number(d[k], f"stream state: {k}", minimum=lo, maximum=hi)  # noqa: E731
    context = as_context(d["context"], "stream state: context")
    size = whole_number(d["buffer_size"], "stream state: buffer_size", maximum=MAX_BUFFER,
                        hint=f"a buffer of pieces is held in memory ({limit_hint('MAX_STREAM_BUFFER')})")
    # documents read and rows made: each document holds a token, so MAX_TOTAL_TOKENS bounds both (exact in an
    # int64 and a float64, whatever stores the state); a split document's offset is within its length
    position, rows = num("position", 0, MAX_TOTAL_TOKENS), num("rows", 0, MAX_TOTAL_TOKENS)
    offset = num("offset", 0, MAX_LENGTH - 1)
    overlong = choice("stream state: overlong", d["overlong"], OVERLONG_POLICIES)
    buf = d["buffer"]
    if not isinstance(buf, list) or len(buf) >= size:
        raise InputError(f"stream state: buffer must be a list of fewer than buffer_size ({size:,}) pieces (a full "
                         f"buffer has made a row), got {len(buf) if isinstance(buf, list) else type(buf).__name__}")
    pieces, seen = [], set()
    for i, x in enumerate(buf):
        if not (isinstance(x, list) and len(x) == 3):
            raise InputError(f"stream state: buffer piece {i} must be [document, start, length], got {x!r}")
        doc, start, length = (whole_number(v, f"stream state: buffer piece {i}", minimum=0) for v in x)
        if not 1 <= length <= context:
            raise InputError(f"stream state: buffer piece {i} is {length} tokens long, outside 1..{context} "
                             "(the context)")
        read = doc < position or (doc == position and start < offset)
        if not read or (doc, start) in seen or start % context:
            raise InputError(f"stream state: buffer piece {i} ({doc}, {start}) was never read at position "
                             f"{position}, or appears twice")
        seen.add((doc, start))
        pieces.append((doc, start, length))
    if pieces != sorted(pieces):
        raise InputError("stream state: buffer pieces must be in arrival order (by document, then start)")
    return StreamState(context, size, _fill(d["min_fill"], "stream state: min_fill"), overlong, position, offset,
                       rows, tuple(pieces))


class StreamPacker:
    """Best fit from a buffer of ``buffer_size`` pieces over a stream of lengths (see the module docstring).

    Work per document is a few dictionary and bisect steps (plus one best-fit row per document
    once the buffer holds a context of tokens): a Python loop per document, as a stream is.
    """

    def __init__(self, context: int = 512, buffer_size: int = 1000, *, min_fill: float = 1.0,
                 overlong: str = "split", state: StreamState | None = None):
        if state is None:
            state = _checked({"context": context, "buffer_size": buffer_size, "min_fill": min_fill,
                              "overlong": overlong, "position": 0, "offset": 0, "rows": 0, "buffer": []})
        elif not isinstance(state, StreamState):
            raise InputError(f"state must be a StreamState (StreamState.from_json(text)), got {type(state).__name__}")
        self.context, self.size, self.overlong = state.context, state.buffer_size, state.overlong
        self.full = math.ceil(state.min_fill * state.context - 1e-9)
        self.min_fill, self.position, self.offset, self.emitted = state.min_fill, state.position, state.offset, state.rows
        self.waiting: dict[int, deque] = {}        # length -> (document, start) in arrival order
        self.present: list[int] = []               # lengths waiting, ascending
        self.pieces = self.tokens = 0
        for doc, start, length in state.buffer:
            self._add(doc, start, length)

    def state(self) -> StreamState:
        """The packer's whole state now (after the last row it gave)."""
        buf = sorted((d, s, length) for length, q in self.waiting.items() for d, s in q)
        return StreamState(self.context, self.size, self.min_fill, self.overlong, self.position, self.offset,
                           self.emitted, tuple(buf))

    def _add(self, doc: int, start: int, length: int) -> None:
        if length not in self.waiting:
            self.waiting[length] = deque()
            bisect.insort(self.present, length)
        self.waiting[length].append((doc, start))
        self.pieces += 1
        self.tokens += length

    def _pieces(self, length) -> Iterator[tuple[int, int]]:
        """``(start, length)`` of the pieces of the document at the current position, from ``offset`` on."""
        length = whole_number(length, f"stream length at document {self.position}", maximum=MAX_LENGTH)
        c = self.context
        if self.overlong == "split":
            for start in range(self.offset, length, c):
                yield start, min(c, length - start)
        elif self.offset == 0 and (self.overlong == "truncate" or length <= c):
            yield 0, min(c, length)

    def _best_row(self) -> list[tuple[int, int]]:
        """``(length, copies)`` of the row best fit makes from the buffer, longest first."""
        room, take, j = self.context, [], len(self.present) - 1
        while room and j >= 0:
            j = min(j, bisect.bisect_right(self.present, room) - 1)
            if j < 0:
                break
            length = self.present[j]
            q = min(room // length, len(self.waiting[length]))
            take.append((length, q))
            room -= q * length
            j -= 1
        return take

    def _emit(self, take) -> tuple[tuple[int, int, int], ...]:
        row: list[tuple[int, int, int]] = []
        for length, q in take:
            waiting = self.waiting[length]
            row.extend((*waiting.popleft(), length) for _ in range(q))
            if not waiting:
                del self.waiting[length]
                self.present.remove(length)
        self.pieces -= len(row)
        self.tokens -= sum(length * q for length, q in take)
        self.emitted += 1
        return tuple(row)

    def rows(self, lengths: Iterable[int]) -> Iterator[tuple[tuple[int, int, int], ...]]:
        """Rows as tuples of ``(document, start, length)``, reading ``lengths`` from the current position on;
        the stream ends with them, so the buffer is emptied (:meth:`feed`, then :meth:`finish`)."""
        yield from self.feed(lengths)
        yield from self.finish()

    def feed(self, lengths: Iterable[int]) -> Iterator[tuple[tuple[int, int, int], ...]]:
        """The rows that fill while ``lengths`` are read; what is left waits in the buffer, in :meth:`state`
        (a checkpoint mid-stream), until more is fed or :meth:`finish` ends the stream.

        >>> packer = StreamPacker(8, 3)
        >>> [len(row) for row in packer.feed([5, 3, 6])], packer.state().buffer
        ([2], ((2, 0, 6),))
        """
        yield from self._drain()               # a resumed packer first finishes what it was emitting
        for length in lengths:
            for start, piece in self._pieces(length):
                self._add(self.position, start, piece)
                self.offset = start + piece if self.overlong == "split" else length
                yield from self._drain()
            self.position, self.offset = self.position + 1, 0

    def finish(self) -> Iterator[tuple[tuple[int, int, int], ...]]:
        """The stream ended: the buffer emptied into rows, best fit first."""
        while self.pieces:
            yield self._emit(self._best_row())

    def _drain(self) -> Iterator[tuple[tuple[int, int, int], ...]]:
        """Rows while the buffer is full or can make a full-enough row."""
        while self.pieces:
            if self.pieces >= self.size:
                yield self._emit(self._best_row())
                continue
            if self.tokens < self.full:
                return
            take = self._best_row()
            if sum(length * q for length, q in take) < self.full:
                return
            yield self._emit(take)


@dataclass(frozen=True)
class BufferCurve:
    """Utilisation of the stream packer against its buffer size, beside the whole-corpus plan (bfd)."""

    context: int
    buffer_sizes: tuple[int, ...]
    rows: tuple[int, ...]
    utilisation: tuple[float, ...]
    whole_rows: int                  # bfd over the whole corpus
    whole_utilisation: float

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def buffer_curve(lengths, context: int, buffer_sizes=None, *, min_fill: float = 1.0,
                 overlong: str = "split") -> BufferCurve:
    """Rows and utilisation of :class:`StreamPacker` for each buffer size (default 1, 2, 4, ... up to
    the whole set), and of bfd over the whole corpus.

    >>> c = buffer_curve([300, 200, 300, 200, 300, 200], 512, [1, 6])
    >>> c.rows, c.whole_rows
    ((6, 3), 3)
    """
    lengths = np.asarray(lengths)
    plan = make_plan(lengths, context, "bfd", overlong=overlong)
    m = plan.metrics()
    if buffer_sizes is None:
        top = max(1, len(lengths))
        buffer_sizes = sorted({min(2**k, top) for k in range(int(math.log2(top)) + 2)})
    sizes = tuple(whole_number(b, "buffer size", maximum=MAX_BUFFER, hint=limit_hint("MAX_STREAM_BUFFER"))
                  for b in buffer_sizes)
    rows = tuple(sum(1 for _ in StreamPacker(context, b, min_fill=min_fill, overlong=overlong).rows(lengths.tolist()))
                 for b in sizes)
    return BufferCurve(context, sizes, rows, tuple(m.real_tokens / (r * context) for r in rows), m.rows,
                       m.utilisation)


def windowed_plan(lengths, context: int, window: int = TRL_WINDOW, *, overlong: str = "truncate") -> Plan:
    """bfd inside each window of ``window`` documents, one window after another: how TRL packs.

    TRL 1.16's ``trl.data_utils.pack_dataset(dataset, seq_length, strategy="bfd")`` runs
    ``dataset.map(_pack_bfd, batched=True, ...)``: ``datasets.Dataset.map`` hands it batches of
    ``batch_size=1000`` rows by default, and ``_pack_bfd`` packs each batch alone. It sorts the batch
    by length, longest first, and puts each sequence into the bin with the least space that still
    fits it (``_SegmentTree.search`` over the spaces left), or opens a new bin: best-fit decreasing.
    ``strategy="bfd"``, the default, truncates sequences longer than ``seq_length``
    (``overlong="truncate"``); ``"bfd_split"`` cuts them into ``seq_length`` fragments first
    (``overlong="split"``): ``TRL_STRATEGY`` names the one each policy models (``"drop"``: none). Rows
    never mix documents of two windows, so utilisation falls below bfd over the whole corpus.

    >>> windowed_plan([300, 200, 300, 200], 512, 2).n_rows, make_plan([300, 200, 300, 200], 512, "bfd").n_rows
    (2, 2)
    >>> windowed_plan([300, 300, 200, 200], 512, 2).n_rows          # windows [300 300] [200 200]
    3
    """
    lengths = np.asarray(lengths)
    window = whole_number(window, "window", maximum=MAX_BUFFER,
                          hint=f"TRL's default is {TRL_WINDOW:,} ({limit_hint('MAX_STREAM_BUFFER')})")
    parts, base_row = [], 0
    for lo in range(0, len(lengths), window):        # one step per window
        p = make_plan(lengths[lo: lo + window], context, "bfd", overlong=overlong)
        parts.append((p.placed, lo, base_row))
        base_row += p.n_rows
    cat = lambda f: np.concatenate([f(pl, lo, r) for pl, lo, r in parts])   # noqa: E731
    placed = PlacedPieces(cat(lambda pl, lo, r: pl.doc + lo), cat(lambda pl, lo, r: pl.start),
                          cat(lambda pl, lo, r: pl.length), cat(lambda pl, lo, r: pl.row + r),
                          cat(lambda pl, lo, r: pl.offset))
    return Plan(strategy=f"bfd in windows of {window:,}", context=int(context), overlong=overlong,
                lengths=lengths.astype(np.int64), placed=placed, row_width=np.full(base_row, int(context), np.int64),
                packed=True)
