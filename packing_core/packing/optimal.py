"""The best plan there is, within a budget: column generation, rounding, a dive, and a certificate.

Packing pieces of a length histogram into the fewest rows is a cutting-stock problem. Gilmore and
Gomory (1961) solve its linear relaxation over *patterns* (multisets of lengths that fit a row)
without listing them all (``master.py``)::

    1. start from the patterns of best-fit decreasing (a feasible plan)
    2. column generation: the LP over the patterns found so far; its duals price the most valuable
       new pattern (a bounded knapsack, ``knapsack.py``); repeat until none is worth more than a row
    3. round: take every pattern ``floor(x)`` times, a few more, re-solve on what is left; pack the rest by ffd or bfd
    4. dive (``dive.py``) while a gap is left: fix patterns one at a time, with column generation on
       the pieces left, backtracking a little; it closes the gaps rounding leaves (Falkenauer's triplets)

The plan returned comes with its :class:`Certificate`: the best proven lower bound (Martello-Toth
L2 or LP, ``bounds.py``), the gap in rows, and what stopped the search: the plan meets the bound
(``optimal (proven)``), the work budget, the clock, or a dive that tried every path it allows. The
budget is *work*, not time (``master.Budget``): a time limit of ``T`` buys a fixed amount of it, so
the plan is a function of the histogram and ``T``, whatever the machine's load; the clock is a
safety net, checked before every step (one LP re-solve and one pricing step, predicted from the pace
so far) and inside HiGHS. The first plan (best-fit decreasing) and the bounds are always made, so a
limit shorter than they take (0.3 s for 3,000 lengths at 4,096) ends just after them. A histogram
whose pricing tables would be too large is planned by bfd with the L2 bound, and the certificate says so.

Ten documents of 300 tokens and ten of 200 at context 512: every row holds one of each.

>>> s = optimal_from_counts({300: 10, 200: 10}, 512)
>>> s.certificate.rows, s.certificate.bound.rows, s.certificate.status
(10, 10, 'optimal (proven)')
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from packing_core._validate import MAX_PRICING_CELLS, OVERLONG_POLICIES, as_context, choice
from packing_core.packing.bounds import RowBound, row_bounds
from packing_core.packing.count_rows import CountRows, _bfd_rows
from packing_core.packing.dive import dive
from packing_core.packing.knapsack import pricing_work
from packing_core.packing.master import FIRST_PLAN_CELLS, Budget, LPResult, Master, generate
from packing_core.packing.options import DEFAULT_TIME_LIMIT, as_max_docs_per_row, as_time_limit, cap_of
from packing_core.packing.patterns import Patterns, deal, fit_decreasing_patterns
from packing_core.packing.pieces import Pieces, histogram_arrays, piece_histogram
from packing_core.packing.place import Placement, place_bfd

__all__ = ["MAX_PRICING_CELLS", "Certificate", "OptimalSolution", "lp_bound", "optimal_from_counts",
           "place_optimal", "rows_optimal", "solve_optimal"]

_ROUND_DEPTH = 3
_ROOT_SHARE, _ROUND_SHARE = 0.8, 0.95    # of the budget: column generation stops at the first, rounding at the second

@dataclass(frozen=True)
class Certificate:
    """How good a plan is: its rows, the best proven lower bound for whole documents, the gap, what stopped it.

    ``gap_rows == 0`` proves the plan optimal. ``lp`` is the column-generation bound (None when it
    was not computed); ``converged``: column generation proved ⌈LP⌉ (the LP bound in rows).
    ``stopped_by``: ``""`` (the plan meets the bound), ``"work"`` (the work budget ``time_limit``
    buys), ``"time"`` (the clock, before the work: the plan depends on the machine's speed),
    ``"search"`` (every dive the search allows was tried) or ``"skipped"`` (bfd's plan, see ``note``).
    ``work`` is the budget spent (``master.Budget``); ``seconds`` the time it took, which only
    ``to_dict(timings=True)`` reports: everything else is a function of the input.
    """

    rows: int
    bound: RowBound
    lp: RowBound | None
    method: str
    seconds: float
    columns: int
    converged: bool
    note: str = ""
    time_limit: float = DEFAULT_TIME_LIMIT
    work: int = 0
    stopped_by: str = ""

    @property
    def gap_rows(self) -> int:
        return self.rows - self.bound.rows

    @property
    def gap_share(self) -> float:
        """The gap as a share of the bound (0.0005 is 0.05 %)."""
        return self.gap_rows / self.bound.rows if self.bound.rows else 0.0

    @property
    def status(self) -> str:
        """What the search did, in a few words: ``optimal (proven)`` or ``gap N rows after ...: the best plan found``."""
        if self.gap_rows <= 0:
            return "optimal (proven)"
        gap = f"gap {self.gap_rows:,} row{'' if self.gap_rows == 1 else 's'}"
        after = {"work": f"after its {self.time_limit:g} s budget",
                 "time": f"after the {self.time_limit:g} s time limit, before its work budget (this plan depends "
                         "on the machine's speed)",
                 "search": f"after every dive its search allows, inside its {self.time_limit:g} s budget",
                 "skipped": "(column generation skipped)"}.get(self.stopped_by, f"within its {self.time_limit:g} s budget")
        return f"{gap} {after}: the best plan found"

    def sentence(self) -> str:
        """One line for a report: "168 rows: gap 1 row after its 5 s budget: the best plan found (LP bound 167), ..."."""
        head = f"{self.rows:,} rows: {self.status} ({self.bound.name} bound {self.bound.rows:,})"
        return f"{head}, by {self.method}" + (f"; {self.note}" if self.note else "")

    def to_dict(self, timings: bool = False) -> dict:
        """Every field but ``seconds`` (with ``timings``, that too): the same input gives the same dict."""
        d = {f.name: getattr(self, f.name) for f in fields(self) if timings or f.name != "seconds"}
        d["bound"] = self.bound.to_dict()
        d["lp"] = None if self.lp is None else self.lp.to_dict()
        return {**d, "gap_rows": self.gap_rows, "gap_share": self.gap_share, "status": self.status}


@dataclass(frozen=True)
class OptimalSolution:
    """The plan as patterns (None when bfd planned it: the fallback) and its certificate."""

    patterns: Patterns | None
    certificate: Certificate


def lp_row_bound(lp: LPResult, l1: RowBound) -> RowBound:
    """The LP bound as a :class:`RowBound`: the LP optimum when column generation converged, else the
    best proven lower bound on it, the duals' (Farley) or L1's value, whichever is higher, named.

    >>> from packing_core.packing.bounds import l1_bound
    >>> lp = LPResult(lower=24.98, z=25.4, exact=False, rows_proven=True, steps=3, solved=True)
    >>> b = lp_row_bound(lp, l1_bound(np.array([100]), np.array([128]), 512))
    >>> b.rows, b.value, b.proven, b.what.split(",")[1].strip()
    (25, 25.0, False, 'tokens / context (L1)')
    """
    lower = max(lp.lower, l1.value)          # every pattern holds at most a row of tokens: LP >= tokens / context
    rows = int(np.ceil(lower - 1e-6))
    if lp.exact:
        return RowBound("LP", rows, max(lp.z, lower), True,
                        "the LP optimum (Gilmore-Gomory column generation: no pattern is worth more than a row)")
    by = ("tokens / context (L1), above the duals' bound (Farley)" if l1.value > lp.lower
          else "the duals' bound (Farley)")
    proven = "; ⌈LP⌉ is proven" if lp.rows_proven else ""
    return RowBound("LP", rows, lower, True, f"a lower bound on the LP optimum, {by}: the LP optimum lies between "
                    f"{lower:.6g} and {lp.z:.6g}{proven}", proven=False)


def _seed(m: Master, p: Patterns) -> None:
    """Add the patterns ``p`` (a feasible plan) to the master's columns."""
    order = np.lexsort((p.size, p.group))
    m.add(p.group[order], np.searchsorted(m.sizes, p.size[order]), p.copies[order])


def _round(m: Master, budget: Budget, context: int, cap, depth: int = 0) -> Patterns:
    """Integer rows from the LP: round, then the fewest rows for the pieces left.

    Every pattern is taken ``floor(x)`` times, then one more copy of each pattern with a fractional
    part, largest first, while the pieces it holds are still left. The pieces left get their own
    LP (a master over their lengths alone, seeded with their bfd plan, by column generation) and
    are rounded the same way, up to ``_ROUND_DEPTH`` times; ffd or bfd packs what remains, whichever
    needs fewer rows.
    """
    x = m.x()
    col, idx, val = m.entries()
    starts = np.searchsorted(col, np.arange(len(x) + 1))
    mult = np.floor(x + 1e-7).astype(np.int64)
    left = m.demand - m.cover(mult)
    while (left < 0).any():        # solver tolerance may overshoot a length by one copy: give it back
        j = int(col[(idx == np.argmin(left)) & (mult[col] > 0)][0])
        mult[j] -= 1
        left = m.demand - m.cover(mult)
    frac = x - mult
    for j in np.argsort(-frac, kind="stable")[: int((frac > 1e-6).sum())].tolist():
        i, v = idx[starts[j]: starts[j + 1]], val[starts[j]: starts[j + 1]]
        if (left[i] >= v).all():
            mult[j] += 1
            left[i] -= v
    done = m.patterns(mult)
    if not left.any():
        return done
    keep = np.flatnonzero(left > 0)
    sizes, n = m.sizes[keep], left[keep]
    tails = [fit_decreasing_patterns(sizes, n, context, best=b, max_docs_per_row=cap) for b in (True, False)]
    if depth < _ROUND_DEPTH and budget.allows(0):
        sub = Master(sizes, n)
        _seed(sub, tails[0])
        if generate(sub, budget, stop_at=tails[0].rows, cap=cap, context=context).solved:
            tails.append(_round(sub, budget, context, cap, depth + 1))
    return Patterns.concat(done, min(tails, key=lambda p: p.rows))


def solve_optimal(item_len, item_n, context: int, *, max_docs_per_row: int | None = None,
                  time_limit: float = DEFAULT_TIME_LIMIT) -> OptimalSolution:
    """The fewest rows for a piece histogram (lengths ascending, each <= ``context``): see the module."""
    budget = Budget(time_limit)
    sizes, demand, cap = np.asarray(item_len, np.int64), np.asarray(item_n, np.int64), max_docs_per_row
    bounds = row_bounds(sizes, demand, context, max_docs_per_row=cap)

    def done(patterns, rows, lp, method, columns=0, converged=False, note="", stopped_by=""):
        bound = lp if lp is not None and lp.rows > bounds.l2.rows else bounds.l2
        stopped_by = "" if rows <= bound.rows else stopped_by
        return OptimalSolution(patterns, Certificate(rows, bound, lp, method, budget.elapsed(), columns, converged,
                                                     note, budget.seconds, budget.work, stopped_by))

    cells = pricing_work(sizes, np.minimum(demand, context // sizes), context, cap)
    skipped = (f"column generation skipped: one pricing step would fill {cells:,} table cells "
               f"(at most {MAX_PRICING_CELLS:,}); the bound is Martello-Toth L2")
    if cells > MAX_PRICING_CELLS and cap is None:
        return done(None, _bfd_rows(sizes, demand, context), None, "bfd", note=skipped, stopped_by="skipped")
    best = fit_decreasing_patterns(sizes, demand, context, best=True, max_docs_per_row=cap)
    budget.spend(len(sizes) * FIRST_PLAN_CELLS)
    if best.rows <= bounds.l2.rows or cells > MAX_PRICING_CELLS:
        return done(best, best.rows, None, "bfd", note="" if best.rows <= bounds.l2.rows else skipped,
                    stopped_by="skipped")
    master = Master(sizes, demand)
    _seed(master, best)
    with budget.share(_ROOT_SHARE):
        root = generate(master, budget, stop_at=best.rows, cap=cap, context=context)
    if not root.solved:
        return done(best, best.rows, None, "bfd", master.columns, stopped_by=budget.stopped_by or budget.last_stop)
    lp = lp_row_bound(root, bounds.l1)
    target = max(bounds.l2.rows, lp.rows)
    method = "bfd"
    if best.rows > target:
        with budget.share(_ROUND_SHARE):
            rounded = _round(master, budget, context, cap)
        if rounded.rows < best.rows:
            best, method = rounded, "column generation and rounding"
    stopped_by = budget.stopped_by
    if best.rows > target and not stopped_by:
        found = dive(master, budget, context, cap, target=target, best_rows=best.rows)
        if found.plan is not None:
            best, method = found.plan, "column generation and a dive"
        stopped_by = budget.stopped_by or ("search" if found.exhausted else "work")
    return done(best, best.rows, lp, method, master.columns, root.rows_proven, stopped_by=stopped_by or "work")


def optimal_from_counts(counts, context: int, *, overlong: str = "split", max_docs_per_row: int | None = None,
                        time_limit: float = DEFAULT_TIME_LIMIT) -> OptimalSolution:
    """:func:`solve_optimal` on ``{length: documents}`` or a ``LengthProfile``, after the over-long policy."""
    context = as_context(context)
    choice("overlong policy", overlong, OVERLONG_POLICIES)
    cap, limit = as_max_docs_per_row(max_docs_per_row, context), as_time_limit(time_limit)
    lengths, n = histogram_arrays(counts)
    item_len, item_n, _ = piece_histogram(lengths, n, context, overlong)
    return solve_optimal(item_len, item_n, context, max_docs_per_row=cap, time_limit=limit)


def lp_bound(counts, context: int, **kwargs) -> RowBound | None:
    """The LP bound of a histogram (None when the histogram is too large to price within the limits)."""
    return optimal_from_counts(counts, context, **kwargs).certificate.lp


def _histogram(length: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct lengths ascending and their counts (a bincount when the lengths are small)."""
    if len(length) and int(length.max()) <= 2**20:
        n = np.bincount(length)
        sizes = np.flatnonzero(n)
        return sizes, n[sizes]
    return np.unique(length, return_counts=True)


def place_optimal(it: Pieces, context: int, opts, rng) -> Placement:
    """Real pieces dealt into the rows of the optimal patterns (bfd's own placement in the fallback)."""
    sizes, n = _histogram(it.length)
    sol = solve_optimal(sizes, n, context, max_docs_per_row=cap_of(opts),
                        time_limit=getattr(opts, "time_limit", DEFAULT_TIME_LIMIT))
    if sol.patterns is None:
        p = place_bfd(it, context, opts, rng)
    else:
        row, offset = deal(sol.patterns, it.length)
        p = Placement(it.doc, it.start, it.length, row, offset, np.full(sol.patterns.rows, context, np.int64))
    return Placement(p.doc, p.start, p.length, p.row, p.offset, p.row_width, sol.certificate)


def rows_optimal(item_len, item_n, context: int, opts) -> CountRows:
    sol = solve_optimal(item_len, item_n, context, max_docs_per_row=cap_of(opts),
                        time_limit=getattr(opts, "time_limit", DEFAULT_TIME_LIMIT))
    r = sol.certificate.rows
    return CountRows(r, r * context, r * context * context, sol.certificate)
