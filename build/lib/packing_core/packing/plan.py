"""Plan: where every piece of every document sits, and what that costs.

A ``Plan`` knows only lengths. It never holds a token id, so a comparison of
every strategy over 200,000 documents stays cheap.

Eight documents at context 512, concatenated and cut into full rows::

    lengths   120  90 300  40  55  30 210  65      (910 real tokens)
    row 0     [doc0 120][doc1 90][doc2 300][doc3 2]         512 slots
    row 1     [doc3 38][doc4 55][doc5 30][doc6 210][doc7 65][pad 114]
    utilisation = 910 / (2 * 512) = 0.889

The same documents padded one per row use 8 * 512 = 4,096 slots (0.222).
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np

from packing_core._validate import InputError, exact_sum_of_squares, whole_number


def cu_seqlens_from_lengths(lengths, dtype=np.int64) -> np.ndarray:
    """Boundary offsets of pieces laid end to end: a 0, then the running total.

    >>> cu_seqlens_from_lengths([120, 90, 300]).tolist()
    [0, 120, 210, 510]
    """
    lengths = np.asarray(lengths)
    cu = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=cu[1:])
    return cu.astype(dtype, copy=False)

def static_cu_seqlens(plan, max_docs_per_row: int, dtype=np.int32) -> np.ndarray:
    """Piece offsets over the valid tokens of every row, padded to a static shape for compiled kernels.

    A varlen kernel captured once (``torch.compile``, CUDA graphs) wants the same shapes every step:
    ``rows x max_docs_per_row + 1`` offsets, whatever the batch holds. The real offsets come first
    (``cu_seqlens`` of the pieces in row order); the rest repeat the final offset, so each extra
    entry is a zero-length document that attends to nothing::

        rows [5 3] [4], cap 3    ->  [0 5 8 12 12 12 12]    (3 real pieces, 3 of length 0)

    >>> from packing_core.packing.strategies import make_plan
    >>> static_cu_seqlens(make_plan([5, 3, 4], 8, "bfd", max_docs_per_row=3), 3).tolist()
    [0, 5, 8, 12, 12, 12, 12]
    """
    cap = whole_number(max_docs_per_row, "max_docs_per_row", maximum=plan.context)
    per_row = np.diff(plan.row_bounds())
    if len(per_row) and int(per_row.max()) > cap:
        r = int(np.argmax(per_row))
        raise InputError(f"row {r} holds {int(per_row[r])} pieces, above max_docs_per_row={cap}; plan with "
                         f"make_plan(..., max_docs_per_row={cap}) so every row fits the static shape")
    cu = cu_seqlens_from_lengths(plan.piece_len)
    out = np.full(plan.n_rows * cap + 1, cu[-1], dtype=np.int64)
    out[: len(cu)] = cu
    return out.astype(dtype)


@dataclass(frozen=True)
class PlanMetrics:
    """The numbers of one plan. Attention and linear costs are in FLOP-proportional units."""

    strategy: str
    context: int
    documents: int
    rows: int
    slots: int                   # allocated positions: sum of row widths
    real_tokens: int             # tokens placed in rows
    pad_tokens: int              # slots - real_tokens
    utilisation: float           # real_tokens / slots
    tokens_lost: int             # tokens_truncated + tokens of dropped documents
    tokens_truncated: int
    docs_truncated: int
    docs_dropped: int
    docs_split: int              # documents placed in more than one piece
    attention_cost_padded: int   # sum(row_width**2): full square per row (padded, or packed without a mask)
    attention_cost_packed: int   # sum(piece_len**2): what a kernel that skips masked blocks computes
    linear_cost: int             # = slots: every slot goes through the MLPs
    lower_bound_rows: int        # L1 = ceil(real_tokens / context): reachable only by cutting documents (bounds.py)
    rows_over_lower_bound: float  # rows / lower_bound_rows (whole documents: see bounds.bound_for)

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def plan_metrics(strategy: str, context: int, lengths: np.ndarray, kept: np.ndarray, pieces: np.ndarray, *,
                 rows: int, slots: int, cost_padded: int, cost_packed: int, counts=None) -> PlanMetrics:
    """The one ``PlanMetrics`` builder, for a plan's documents and for a histogram's lengths alike.

    Entry ``i`` is one document (``counts=None``) or ``counts[i]`` documents of ``lengths[i]``
    tokens; ``kept[i]`` tokens of each reached a row, in ``pieces[i]`` pieces.

    >>> m = plan_metrics("pad", 4, np.array([6, 3]), np.array([4, 3]), np.array([1, 1]),
    ...                  rows=2, slots=8, cost_padded=32, cost_packed=25)
    >>> m.real_tokens, m.tokens_truncated, m.docs_truncated, round(m.utilisation, 3)
    (7, 2, 1, 0.875)
    """
    def total(x, where=None) -> int:
        if counts is not None:
            x = x * counts
        return int(x.sum() if where is None else x[where].sum())

    def count(where) -> int:
        return int(where.sum() if counts is None else counts[where].sum())

    real, all_tokens = total(kept), total(lengths)
    dropped = kept == 0
    truncated = ~dropped & (kept < lengths)
    lower = -(-real // context) if real else 0
    return PlanMetrics(
        strategy=strategy, context=context, documents=len(lengths) if counts is None else int(counts.sum()),
        rows=rows, slots=slots, real_tokens=real, pad_tokens=slots - real,
        utilisation=real / slots if slots else 0.0, tokens_lost=all_tokens - real,
        tokens_truncated=total(lengths - kept, truncated),
        docs_truncated=count(truncated), docs_dropped=count(dropped),
        docs_split=count(pieces > 1), attention_cost_padded=cost_padded,
        attention_cost_packed=cost_packed, linear_cost=slots, lower_bound_rows=lower,
        rows_over_lower_bound=rows / lower if lower else 1.0)


@dataclass(frozen=True, eq=False)
class PlacedPieces:
    """Piece arrays in the order a strategy placed them (not sorted).

    ``Plan.placed.length`` and ``Plan.piece_len`` hold the same pieces: the first in
    placement order, the second sorted by row and offset (what layouts and pictures need).
    """

    doc: np.ndarray     # int64: which document
    start: np.ndarray   # int64: first token of the piece inside its document
    length: np.ndarray  # int64: tokens in the piece
    row: np.ndarray     # int64: which row
    offset: np.ndarray  # int64: first slot of the piece inside its row


@dataclass(frozen=True, eq=False)
class Plan:
    """Rows of document pieces.

    Piece ``k`` is tokens ``[piece_start[k], piece_start[k] + piece_len[k])`` of
    document ``piece_doc[k]``, placed at ``[piece_offset[k], ...)`` of row ``piece_row[k]``.
    The ``piece_*`` arrays are sorted by row, then offset (sorted on first access, so
    a plan used only for its metrics never pays for the sort). ``row_width[r]`` is the
    allocated width of row ``r``: the context for packing and plain padding, the
    batch's longest sample for dynamic padding and bucketing.
    """

    strategy: str
    context: int
    overlong: str
    lengths: np.ndarray       # int64 [documents]: the input lengths
    placed: PlacedPieces      # the pieces in placement order (metrics read these, unsorted)
    row_width: np.ndarray     # int64 [rows]
    packed: bool              # rows may hold several documents: needs a block-diagonal mask
    certificate: object = None  # optimal: its Certificate (rows, proven lower bound, gap in rows)
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    def _sorted(self, name: str) -> np.ndarray:
        if "order" not in self._cache:
            p = self.placed
            key = p.row * (self.context + 1) + p.offset
            # (row, offset) pairs are unique, so one plain sort of the combined key is exact
            self._cache["order"] = None if (np.diff(key) > 0).all() else np.argsort(key)
        order, arr = self._cache["order"], getattr(self.placed, name)
        if order is None:
            return arr
        if name not in self._cache:
            self._cache[name] = arr[order]
        return self._cache[name]

    piece_doc = property(lambda self: self._sorted("doc"), doc="int64 [pieces]: document of each piece")
    piece_start = property(lambda self: self._sorted("start"), doc="int64 [pieces]: start inside the document")
    piece_len = property(lambda self: self._sorted("length"), doc="int64 [pieces]: tokens in the piece")
    piece_row = property(lambda self: self._sorted("row"), doc="int64 [pieces]: row of the piece")
    piece_offset = property(lambda self: self._sorted("offset"), doc="int64 [pieces]: offset inside the row")

    @property
    def n_rows(self) -> int:
        return int(len(self.row_width))

    @property
    def kept(self) -> np.ndarray:
        """Tokens of each document that made it into a row."""
        if "kept" not in self._cache:
            self._cache["kept"] = np.bincount(
                self.placed.doc, weights=self.placed.length, minlength=len(self.lengths)
            ).astype(np.int64)
        return self._cache["kept"]

    @property
    def dropped(self) -> np.ndarray:
        """Boolean per document: left out entirely."""
        return self.kept == 0

    @property
    def split(self) -> np.ndarray:
        """Boolean per document: placed in more than one piece."""
        counts = np.bincount(self.placed.doc, minlength=len(self.lengths))
        return counts > 1

    def row_bounds(self) -> np.ndarray:
        """Index of each row's first piece, plus the total: pieces of row r are [b[r], b[r+1])."""
        if "row_bounds" not in self._cache:
            self._cache["row_bounds"] = np.searchsorted(
                self.piece_row, np.arange(self.n_rows + 1), side="left"
            )
        return self._cache["row_bounds"]

    def row_piece_offsets(self) -> tuple[np.ndarray, ...]:
        """Per row, int64 ``[pieces_in_row + 1]``: its pieces' offsets inside the row, from 0 to its tokens.

        The ``cu_seqlens`` of each row read on its own. Not the running sum over the whole
        batch: a row is cut at the context, and a split document's continuation starts the next
        row at 0. A varlen kernel takes one array over the batch (the rows laid end to end).

        >>> from packing_core.packing.strategies import make_plan
        >>> plan = make_plan([120, 90, 300, 40, 55, 30, 210, 65], 512, "concat-cut")
        >>> [o.tolist() for o in plan.row_piece_offsets()]
        [[0, 120, 210, 510, 512], [0, 38, 93, 123, 333, 398]]
        """
        if "row_piece_offsets" not in self._cache:
            b = self.row_bounds()
            ends = np.cumsum(self.piece_len)                       # running total over every row
            before = np.r_[0, ends][b[:-1]]                        # tokens in the rows before each row
            within = ends - np.repeat(before, np.diff(b))          # each piece's end inside its row
            parts = np.split(within, b[1:-1]) if self.n_rows else []
            self._cache["row_piece_offsets"] = tuple(np.r_[0, part].astype(np.int64) for part in parts)
        return self._cache["row_piece_offsets"]

    def row_pieces(self, row: int) -> slice:
        """Slice of the piece arrays that lie in ``row``."""
        if not 0 <= row < self.n_rows:
            raise InputError(f"row {row} does not exist: this plan has rows 0..{self.n_rows - 1}")
        b = self.row_bounds()
        return slice(int(b[row]), int(b[row + 1]))

    def metrics(self) -> PlanMetrics:
        if "metrics" not in self._cache:
            self._cache["metrics"] = plan_metrics(
                self.strategy, self.context, self.lengths, self.kept,
                np.bincount(self.placed.doc, minlength=len(self.lengths)), rows=self.n_rows,
                slots=int(self.row_width.sum()), cost_padded=exact_sum_of_squares(self.row_width),
                cost_packed=exact_sum_of_squares(self.placed.length))
        return self._cache["metrics"]

    @property
    def boundaries(self) -> np.ndarray:
        """Document boundary offsets of the concatenated kept stream: ``np.cumsum`` with a 0 first."""
        return cu_seqlens_from_lengths(self.kept[self.kept > 0])
