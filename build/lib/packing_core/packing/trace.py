"""A plan built one document at a time: each placement, the rule it followed, and the rows so far.

``make_plan`` places whole groups of equal lengths at once (``place.py``), which is fast but
shows nothing of how a packer decides. :func:`plan_trace` replays next-fit, ffd, bfd and
``optimal`` one piece at a time, in the order the packer takes them, with the rule of each move
in words. The rows it ends with are ``make_plan``'s, row for row (a test checks it on random
lengths for every strategy). Four documents at context 10::

    bfd takes the longest first:  7  5  3  2
    7 -> row 0                    a new row: no row yet
    5 -> row 1                    a new row: nothing fits (the most room left is 3)
    3 -> row 0  (room 3 -> 0)     the fullest row it still fits
    2 -> row 1  (room 5 -> 3)     the fullest row it still fits

>>> t = plan_trace([5, 7, 2, 3], 10, "bfd")
>>> [(s.doc, s.row) for s in t.steps]
[(1, 0), (0, 1), (3, 0), (2, 1)]
>>> t.steps[2].rule
'the fullest row it still fits: row 0 (room 3 -> 0)'
>>> t.steps[-1].fill
(10, 7)

Ties between rows with the same room go to the row that reached that room first (its last
document placed earliest): the order ``_fit_decreasing`` keeps its rows in. ``optimal`` is
replayed row by row from the solver's own plan: each row is one pattern of lengths that the
column-generation LP (or, where it proves nothing better exists, bfd) chose.

A trace is for looking at: a Python step per piece, so it takes at most
``MAX_TRACE_PIECES`` pieces.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from packing_core._validate import OVERLONG_POLICIES, InputError, as_context, as_lengths, choice
from packing_core.packing.optimal import Certificate
from packing_core.packing.pieces import Pieces, piece_count, pieces_from_lengths
from packing_core.packing.strategies import make_plan

__all__ = ["MAX_TRACE_PIECES", "TRACE_STRATEGIES", "PlanTrace", "TraceStep", "plan_trace"]

TRACE_STRATEGIES = ("next-fit", "ffd", "bfd", "optimal")
MAX_TRACE_PIECES = 200      # a step-through is watched: a few dozen documents, never a corpus

# The rule of each move, in words (the page shows them as they are).
RULE_NEXT_FIT_FITS = "next-fit keeps the order: it fits in the open row"
RULE_NEXT_FIT_NEW = "a new row: it does not fit in the open row"
RULE_FIRST_FIT = "the first row it fits"
RULE_BEST_FIT = "the fullest row it still fits"
RULE_NEW_ROW = "a new row: nothing fits"
RULE_FIRST_ROW = "a new row: no row yet"
RULE_PATTERN = "the row pattern the LP chose"
RULE_PATTERN_BFD = "bfd's row: its plan already meets the proven lower bound"


@dataclass(frozen=True)
class TraceStep:
    """One placement: piece ``[start, start + length)`` of document ``doc`` goes to ``row`` at ``offset``.

    ``rule`` says why that row, ``room`` is the free slots of that row before the move (the
    context for a new row), and ``fill`` the tokens in every row after it.
    """

    index: int
    doc: int
    start: int
    length: int
    row: int
    offset: int
    new_row: bool
    room: int
    rule: str
    fill: tuple[int, ...]

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class PlanTrace:
    """Every placement of one strategy on ``lengths``, in the order it made them."""

    strategy: str
    context: int
    lengths: tuple[int, ...]
    overlong: str
    steps: tuple[TraceStep, ...]
    note: str = ""      # optimal: the solver's certificate in one line

    @property
    def rows(self) -> int:
        return len(self.steps[-1].fill) if self.steps else 0

    def placements(self) -> np.ndarray:
        """int64 ``[steps, 5]``: doc, start, length, row, offset of every step, in step order."""
        return np.array([(s.doc, s.start, s.length, s.row, s.offset) for s in self.steps], np.int64).reshape(-1, 5)

    def to_dict(self) -> dict:
        return {"strategy": self.strategy, "context": self.context, "lengths": list(self.lengths),
                "overlong": self.overlong, "rows": self.rows, "note": self.note,
                "steps": [s.to_dict() for s in self.steps]}


def plan_trace(lengths, context: int, strategy: str, *, overlong: str = "split") -> PlanTrace:
    """Replay ``strategy`` on ``lengths`` one piece at a time (see the module docstring).

    ``strategy`` is one of ``TRACE_STRATEGIES``; ``overlong`` is ``make_plan``'s over-long policy
    (a split document's pieces are placed as separate steps).
    """
    context = as_context(context)
    choice("strategy to step through", strategy, TRACE_STRATEGIES)
    choice("overlong policy", overlong, OVERLONG_POLICIES)
    arr = as_lengths(lengths)
    pieces = piece_count(arr, context, overlong)     # counted first: a huge document is refused at once
    if pieces > MAX_TRACE_PIECES:
        raise InputError(f"{pieces:,} pieces are too many to step through (at most {MAX_TRACE_PIECES}); "
                         "watch a small set of documents, e.g. 12 to 20")
    it = pieces_from_lengths(arr, context, overlong)
    if len(it.length) == 0:
        raise InputError(f"every document is longer than the context ({context}) and overlong='drop' dropped them "
                         "all; raise the context, or use overlong='split' or 'truncate'")
    steps, note = _replay(strategy, arr, context, overlong, it)
    return PlanTrace(strategy, context, tuple(int(x) for x in arr), overlong, tuple(steps), note)


def _replay(strategy: str, lengths: np.ndarray, context: int, overlong: str, it: Pieces
            ) -> tuple[list[TraceStep], str]:
    if strategy == "optimal":
        return _replay_optimal(lengths, context, overlong)
    length = it.length
    if strategy == "next-fit":
        order = np.arange(len(length))
    else:   # longest first; equal lengths keep their order (make_plan's stable sort)
        order = np.argsort(-length, kind="stable")
    head = {"next-fit": RULE_NEXT_FIT_FITS, "ffd": RULE_FIRST_FIT, "bfd": RULE_BEST_FIT}[strategy]
    fill: list[int] = []
    reached: list[int] = []     # the step at which each row last changed: bfd's tie-break
    steps: list[TraceStep] = []
    for k, i in enumerate(order.tolist()):
        n = int(length[i])
        room = context - np.asarray(fill, np.int64)
        if strategy == "next-fit":      # only the open row is looked at
            fits = np.arange(len(fill) - 1, len(fill)) if fill and room[-1] >= n else np.zeros(0, np.int64)
        else:
            fits = np.flatnonzero(room >= n)
        new = not len(fits)
        if new:
            row, before = len(fill), context
            rule = RULE_FIRST_ROW if not fill else (
                f"{RULE_NEXT_FIT_NEW} (its room is {int(room[-1])})" if strategy == "next-fit"
                else f"{RULE_NEW_ROW} (the most room left is {int(room.max())})")
            fill.append(0)
            reached.append(k)
        else:
            if strategy == "bfd":       # the least room; on a tie, the row that reached it first
                tight = fits[room[fits] == room[fits].min()]
                row = int(tight[np.argmin(np.asarray(reached)[tight])])
            else:
                row = int(fits[0])
            before = int(room[row])
            rule = f"{head}: row {row} (room {before} -> {before - n})"
        offset = fill[row]
        fill[row] += n
        reached[row] = k
        steps.append(TraceStep(k, int(it.doc[i]), int(it.start[i]), n, row, offset, new, before, rule, tuple(fill)))
    return steps, ""


def _replay_optimal(lengths: np.ndarray, context: int, overlong: str) -> tuple[list[TraceStep], str]:
    """The solver's rows, filled one at a time: each row is a pattern of lengths the LP chose."""
    plan = make_plan(lengths, context, "optimal", overlong=overlong)
    cert = plan.certificate if isinstance(plan.certificate, Certificate) else None
    rule_head = RULE_PATTERN_BFD if cert is not None and cert.method == "bfd" else RULE_PATTERN
    doc, start, length, row, offset = (plan.piece_doc, plan.piece_start, plan.piece_len, plan.piece_row,
                                       plan.piece_offset)
    bounds = plan.row_bounds()
    patterns = [tuple(sorted(length[bounds[r]:bounds[r + 1]].tolist(), reverse=True)) for r in range(plan.n_rows)]
    alike = {p: patterns.count(p) for p in set(patterns)}
    fill: list[int] = []
    steps: list[TraceStep] = []
    for k in range(len(length)):
        r, n = int(row[k]), int(length[k])
        new = r == len(fill)
        if new:
            fill.append(0)
        before = context - fill[r]
        fill[r] += n
        p = patterns[r]
        like = alike[p]
        text = (f"{rule_head}: row {r} holds {' + '.join(map(str, p))}"
                + (f" (like {like - 1} other row{'s' if like > 2 else ''})" if like > 1 else ""))
        steps.append(TraceStep(k, int(doc[k]), int(start[k]), n, r, int(offset[k]), new, before, text, tuple(fill)))
    return steps, (cert.sentence() if cert is not None else "")
