"""How good a plan is, in words: the three lower bounds, the distance to the proven optimum,
and what a cap per row and a stream cost. The report, the JSON and the Dataset explorer print
these sentences as they come; none of them is written twice.

A lower bound answers one question. ⌈tokens / context⌉ (L1) is reachable only by cutting
documents at row edges; plans that keep documents whole are measured against Martello and
Toth's L2, or the column-generation LP bound once ``optimal`` has computed it
(``packing.bounds``; the lab's worked example is ``packing_lab.advice.bounds_example``).
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from packing_core._validate import as_lengths, whole_number
from packing_core.packing.bounds import Bounds, RowBound, bound_for, bounds_from_lengths
from packing_core.packing.from_counts import CapPrice
from packing_core.packing.options import DEFAULT_TIME_LIMIT
from packing_core.packing.registry import get_strategy
from packing_core.packing.stream import TRL_STRATEGY, TRL_WINDOW, BufferCurve, buffer_curve, windowed_plan

__all__ = ["CAP_LADDER", "STREAM_SAMPLE", "OptimalGap", "StreamPrice", "bound_sentence",
           "cap_sentence", "describe_bounds", "optimal_gap", "plan_bound", "stream_price", "table_gap"]

STREAM_SAMPLE = 5_000         # documents the stream curve plans: a Python loop per document and buffer size
CAP_LADDER = (1, 2, 4, 8, 16, 32, 64)


def _share(x: float) -> str:
    """A share as a percentage, three significant digits: 0.0108 -> '1.08%', 0.00094 -> '0.094%', 2 -> '200%'."""
    v = 100 * x
    return f"{v:,.0f}%" if v >= 1000 else f"{v:.3g}%"


def _rows(n: int) -> str:
    return "1 row" if n == 1 else f"{n:,} rows"


def describe_bounds(bounds: Bounds) -> str:
    """The three bounds of one set of documents, each with what it covers.

    >>> from packing_core.packing import bounds_from_counts
    >>> print(describe_bounds(bounds_from_counts({300: 10}, 512)))  # doctest: +NORMALIZE_WHITESPACE
    lower bounds on rows: L1 6 (tokens / context: a bound for every plan, reachable only by cutting documents),
    L2 10 (whole documents), LP not computed
    """
    lp = "LP not computed" if bounds.lp is None else (
        f"LP {bounds.lp.rows:,} (whole documents, column generation"
        f"{'' if bounds.lp.proven else ', stopped early: a valid bound, perhaps below the LP optimum'})")
    return (f"lower bounds on rows: L1 {bounds.l1.rows:,} (tokens / context: a bound for every plan, reachable only "
            f"by cutting documents), L2 {bounds.l2.rows:,} (whole documents), {lp}")




def plan_bound(plan) -> RowBound:
    """The proven lower bound a ``Plan``'s kind can reach, from its own documents (and its LP, if optimal made it).

    >>> from packing_core import make_plan
    >>> plan_bound(make_plan([300] * 10, 512, "bfd")).rows, plan_bound(make_plan([300] * 10, 512, "concat-cut")).rows
    (10, 6)
    """
    lp = getattr(plan.certificate, "lp", None)
    b = bounds_from_lengths(plan.lengths, plan.context, overlong=plan.overlong, lp=lp)
    return bound_for(get_strategy(plan.strategy), b)


def bound_sentence(strategy: str, rows: int, bound: RowBound) -> str:
    """One plan against the bound its kind can reach.

    >>> from packing_core.packing import bounds_from_counts
    >>> bound_sentence("bfd", 10, bounds_from_counts({300: 10}, 512).l2)
    'bfd uses 10 rows: proven optimal (L2 bound 10)'
    """
    gap = rows - bound.rows
    if gap <= 0:
        return f"{strategy} uses {rows:,} rows: proven optimal ({bound.name} bound {bound.rows:,})"
    return (f"{strategy} uses {rows:,} rows, {gap:,} ({_share(gap / bound.rows)}) above the proven lower bound "
            f"({bound.name} {bound.rows:,})")


@dataclass(frozen=True)
class OptimalGap:
    """How far a heuristic (bfd) is from the proven optimum, and how much of it ``optimal`` closed.

    ``bound`` is the certificate's: the best proven lower bound for whole documents (L2 or LP).
    ``seconds`` is the time optimal took; the sentence and ``to_dict()`` name its budget instead
    (``time_limit``), so that they are a function of the input.
    """

    strategy: str
    rows: int
    bound: RowBound
    optimal_rows: int
    seconds: float
    method: str
    note: str = ""
    time_limit: float = DEFAULT_TIME_LIMIT

    @property
    def gap_rows(self) -> int:
        return self.rows - self.bound.rows

    @property
    def gap_share(self) -> float:
        return self.gap_rows / self.bound.rows if self.bound.rows else 0.0

    @property
    def left_rows(self) -> int:
        """Rows between ``optimal``'s plan and the bound: 0 proves it optimal."""
        return self.optimal_rows - self.bound.rows

    @property
    def sentence(self) -> str:
        s, b = self.strategy, self.bound
        if self.gap_rows <= 0:
            return f"{s} is already optimal: its {self.rows:,} rows meet the proven lower bound ({b.name} {b.rows:,})."
        head = f"{s} is {_rows(self.gap_rows)} ({_share(self.gap_share)}) above the proven "
        within = f"within its {self.time_limit:g} s budget"
        if self.left_rows <= 0:
            text = head + f"optimum ({b.rows:,} rows, the {b.name} bound); optimal reaches it {within}."
        elif self.optimal_rows >= self.rows:
            text = head + f"lower bound ({b.name} {b.rows:,}); optimal found no better plan {within}."
        else:
            text = head + f"lower bound ({b.name} {b.rows:,}); optimal closes all but {_rows(self.left_rows)} {within}."
        return text[:-1] + f" ({self.note})." if self.note and self.left_rows > 0 else text

    def to_dict(self) -> dict:
        """Every field but ``seconds``: the same input gives the same dict."""
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "seconds"}
        return {**d, "bound": self.bound.to_dict(), "gap_rows": self.gap_rows, "gap_share": self.gap_share,
                "left_rows": self.left_rows, "sentence": self.sentence}


def optimal_gap(rows: int, certificate, strategy: str = "bfd") -> OptimalGap:
    """``strategy``'s rows against the certificate ``optimal`` returned for the same documents.

    >>> from packing_core.packing import optimal_from_counts
    >>> cert = optimal_from_counts({300: 10, 200: 10, 250: 2}, 512).certificate
    >>> optimal_gap(12, cert).sentence
    'bfd is 1 row (9.09%) above the proven optimum (11 rows, the L2 bound); optimal reaches it within its 5 s budget.'
    """
    return OptimalGap(strategy, int(rows), certificate.bound, int(certificate.rows), float(certificate.seconds),
                      certificate.method, certificate.note,
                      float(getattr(certificate, "time_limit", DEFAULT_TIME_LIMIT)))


def table_gap(rows, strategy: str = "bfd") -> OptimalGap | None:
    """The gap of ``strategy`` in a strategy table (``StrategyRow`` rows, or a profile's ``CountPlan``) that
    also holds ``optimal`` with its certificate, on the same documents; else None."""
    by = {r.strategy: r for r in rows}
    opt = by.get("optimal")
    if strategy not in by or opt is None or getattr(opt, "certificate", None) is None:
        return None
    if getattr(by[strategy], "basis", "counts") != getattr(opt, "basis", "counts"):
        return None
    return optimal_gap(getattr(by[strategy], "rows", None) or by[strategy].metrics.rows, opt.certificate, strategy)


def cap_sentence(price: CapPrice) -> str:
    """What a cap on documents per row costs one strategy, in rows.

    >>> from packing_core.packing.from_counts import cap_price
    >>> cap_sentence(cap_price([10] * 9, 512, "bfd", 4))
    'A cap of 4 documents per row costs bfd 2 rows (200%): 3 rows instead of 1.'
    """
    if price.extra_rows == 0:
        return (f"A cap of {price.max_docs_per_row:,} documents per row costs {price.strategy} nothing on these "
                f"documents: {price.rows:,} rows either way.")
    return (f"A cap of {price.max_docs_per_row:,} documents per row costs {price.strategy} {_rows(price.extra_rows)} "
            f"({_share(price.extra_share)}): {price.rows:,} rows instead of {price.rows_uncapped:,}.")


@dataclass(frozen=True)
class StreamPrice:
    """Utilisation of a stream packer against its buffer size, TRL's window, and bfd over the whole set.

    The curve and the window are planned on ``documents`` of the corpus's ``corpus_documents``, the
    first ones in ``order`` (a stream is read in order); ``whole_utilisation`` is bfd over every document.
    ``overlong`` is the policy for documents longer than the context: it decides which of TRL's
    strategies the window models (``packing.TRL_STRATEGY``), and the sentence names it.
    """

    curve: BufferCurve
    window: int
    window_rows: int
    window_utilisation: float
    documents: int
    corpus_documents: int
    order: str
    whole_utilisation: float
    overlong: str = "split"

    @property
    def trl(self) -> str:
        """What the window is in TRL's words: its ``pack_dataset`` strategy for this over-long policy."""
        window = f"bfd inside each batch of {self.window:,} documents"
        name = TRL_STRATEGY.get(self.overlong)
        if name == "bfd":
            return f"TRL's `bfd`, its default ({window}, documents longer than the context truncated),"
        if name is not None:
            return f"TRL's `{name}` ({window}, documents longer than the context cut into pieces),"
        return f"TRL's window ({window}) with documents longer than the context dropped, which no TRL strategy does,"

    @property
    def basis(self) -> str:
        if self.documents >= self.corpus_documents:
            return f"all {self.documents:,} documents, in {self.order}"
        return f"the first {self.documents:,} of {self.corpus_documents:,} documents, in {self.order}"

    def utilisation_at(self, size: int) -> float:
        """The curve's utilisation at the largest buffer size measured that is at most ``size``."""
        sizes = np.asarray(self.curve.buffer_sizes)
        return self.curve.utilisation[max(0, int(np.searchsorted(sizes, size, side="right")) - 1)]

    @property
    def sentence(self) -> str:
        c = self.curve
        points = [b for b in (1, 8, 128) if b < c.buffer_sizes[-1]]
        parts = [f"{'a buffer of ' if i == 0 else ''}{b:,} document{'s' if b > 1 else ''} "
                 f"{self.utilisation_at(b):.1%}" for i, b in enumerate(points)]
        return (f"On {self.basis}: the stream packer fills " + ", ".join(parts)
                + f"{',' if parts else ''} and with the whole set in its buffer {c.utilisation[-1]:.1%} of its slots "
                f"(bfd over the same documents: {c.whole_utilisation:.1%}; over the whole corpus: "
                f"{self.whole_utilisation:.1%}). {self.trl} fills "
                f"{self.window_utilisation:.1%}.")

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        return {**d, "curve": self.curve.to_dict(), "basis": self.basis, "sentence": self.sentence}


def stream_price(lengths, context: int, *, overlong: str = "split", sample: int = STREAM_SAMPLE,
                 window: int = TRL_WINDOW, order: str = "the dataset's order",
                 whole_utilisation: float | None = None) -> StreamPrice:
    """:func:`packing.buffer_curve` (buffer sizes 1, 2, 4, ... up to the sample) and
    :func:`packing.windowed_plan` (TRL's window) on the first ``sample`` documents of ``lengths``.

    The stream packer is a Python loop per document and buffer size, so the curve plans a sample
    (``STREAM_SAMPLE``: about a second on the 2-core VM, 14 buffer sizes); the sentence says which.

    >>> p = stream_price([300, 200] * 50, 512, sample=40, window=10)
    >>> p.documents, p.curve.buffer_sizes[0], round(p.curve.utilisation[0], 3), p.window_rows
    (40, 1, 0.488, 20)
    """
    lengths = as_lengths(lengths)
    sample = whole_number(sample, "stream sample", hint=f"try {STREAM_SAMPLE:,}")
    part = lengths[:sample]
    curve = buffer_curve(part, context, overlong=overlong)
    w = windowed_plan(part, context, window, overlong=overlong).metrics()
    if whole_utilisation is None:
        whole_utilisation = curve.whole_utilisation if len(part) == len(lengths) else buffer_curve(
            lengths, context, (1,), overlong=overlong).whole_utilisation
    return StreamPrice(curve, int(window), w.rows, w.utilisation, len(part), len(lengths), order,
                       float(whole_utilisation), overlong)


