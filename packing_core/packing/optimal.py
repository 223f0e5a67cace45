"""The best plan there is, within a time budget: column generation, rounding, and a certificate.

Packing pieces of a length histogram into the fewest rows is a cutting-stock problem. Gilmore and
Gomory (1961) solve its linear relaxation over *patterns* (multisets of lengths that fit a row)
without listing them all::

    1. start from the patterns of best-fit decreasing (a feasible plan)
    2. solve the LP: min rows s.t. the patterns hold every piece, exactly (HiGHS, warm-started)
    3. price: the LP's duals value each length; the most valuable pattern that fits one row
       (a bounded knapsack, ``knapsack.py``) joins the LP if it is worth more than one row
    4. repeat until no pattern is worth more than a row: the LP optimum is a lower bound
    5. round: take every pattern ``floor(x)`` times; pack what remains with ffd or bfd

Every pricing step also proves a bound (Farley): the duals ``y`` scaled by the best pattern's
value ``V`` are feasible, so no plan uses fewer than ``d . y / V`` rows. The plan returned comes
with its :class:`Certificate`: the best proven bound (Martello-Toth L2 or LP, ``bounds.py``)
and the gap in rows. The budget (``time_limit``) is anytime: when it runs out the best plan so
far is returned with its gap; a histogram whose pricing tables would be too large is planned by
bfd with the L2 bound, and the certificate says so.

Ten documents of 300 tokens and ten of 200 at context 512: every row holds one of each.

>>> s = optimal_from_counts({300: 10, 200: 10}, 512)
>>> s.certificate.rows, s.certificate.bound.rows, s.certificate.gap_rows
(10, 10, 0)
"""
from __future__ import annotations

import time
from dataclasses import dataclass, fields

import numpy as np

from packing_core._validate import MAX_PRICING_CELLS, OVERLONG_POLICIES, InputError, as_context, choice
from packing_core.packing.bounds import RowBound, row_bounds
from packing_core.packing.count_rows import CountRows, _bfd_rows
from packing_core.packing.knapsack import price, pricing_work
from packing_core.packing.options import DEFAULT_TIME_LIMIT, as_max_docs_per_row, as_time_limit, cap_of
from packing_core.packing.patterns import Patterns, deal, fit_decreasing_patterns
from packing_core.packing.pieces import Pieces, histogram_arrays, piece_histogram
from packing_core.packing.place import Placement, place_bfd

__all__ = ["MAX_PRICING_CELLS", "Certificate", "OptimalSolution", "lp_bound", "optimal_from_counts", "place_optimal",
           "rows_optimal", "solve_optimal"]

_COLUMNS_PER_STEP = 12
_SMOOTH = 0.5          # weight of the best-bound duals in the pricing point
_EPS = 1e-9


@dataclass(frozen=True)
class Certificate:
    """How good a plan is: its rows, the best proven lower bound for whole documents, and the gap.

    ``gap_rows == 0`` proves the plan optimal. ``lp`` is the column-generation bound (None when it
    was not computed); ``converged``: column generation proved ⌈LP⌉ (the LP bound in rows) within the budget.
    """

    rows: int
    bound: RowBound
    lp: RowBound | None
    method: str
    seconds: float
    columns: int
    converged: bool
    note: str = ""

    @property
    def gap_rows(self) -> int:
        return self.rows - self.bound.rows

    @property
    def gap_share(self) -> float:
        """The gap as a share of the bound (0.0005 is 0.05 %)."""
        return self.gap_rows / self.bound.rows if self.bound.rows else 0.0

    def sentence(self) -> str:
        """One line for a report: "8,135,728 rows, 1 above the proven bound (LP 8,135,727), ..."."""
        if self.gap_rows == 0:
            head = f"{self.rows:,} rows: proven optimal ({self.bound.name} bound {self.bound.rows:,})"
        else:
            head = (f"{self.rows:,} rows, {self.gap_rows:,} ({self.gap_share:.3%}) above the proven lower bound "
                    f"({self.bound.name} {self.bound.rows:,})")
        return f"{head}, by {self.method} in {self.seconds:.2f} s" + (f"; {self.note}" if self.note else "")

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["bound"] = self.bound.to_dict()
        d["lp"] = None if self.lp is None else self.lp.to_dict()
        return {**d, "gap_rows": self.gap_rows, "gap_share": self.gap_share}


@dataclass(frozen=True)
class OptimalSolution:
    """The plan as patterns (None when bfd planned it: the fallback) and its certificate."""

    patterns: Patterns | None
    certificate: Certificate


INSTALL_OPTIMAL = "pip install 'packing-lab[optimal]'"


def _highspy():
    """The HiGHS LP solver, imported when ``optimal`` runs; without it, one line naming the extra."""
    try:
        import highspy
    except ImportError:
        raise InputError(f"the optimal strategy (and its LP bound) needs the HiGHS solver: {INSTALL_OPTIMAL}; "
                         "every other strategy runs without it") from None
    return highspy


class _Master:
    """The restricted master LP in HiGHS: one equality row per length (``= pieces``), one column per pattern.

    Columns are kept sparse, as entries (column, length index, copies): a pattern holds a few
    lengths out of thousands.
    """

    def __init__(self, demand: np.ndarray):
        highspy = _highspy()
        self.h = highspy.Highs()
        self.h.setOptionValue("output_flag", False)
        self.h.setOptionValue("threads", 1)
        n = len(demand)
        d = demand.astype(np.float64)
        self.h.addRows(n, d, d, 0, np.zeros(n, np.int32), np.zeros(0, np.int32), np.zeros(0))
        self._entries: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.solved: tuple[np.ndarray, int] | None = None    # the last optimal x, over the first k columns
        self._seen: set[bytes] = set()

    def add_dense(self, patterns: np.ndarray) -> int:
        col, idx = np.nonzero(patterns)
        return self.add(col, idx, patterns[col, idx])

    def add(self, col: np.ndarray, idx: np.ndarray, val: np.ndarray) -> int:
        """Add the columns given as entries sorted by column; those already there are skipped."""
        bounds = np.flatnonzero(np.diff(col)) + 1
        keep_col: list[np.ndarray] = []
        keep: list[tuple[np.ndarray, np.ndarray]] = []
        for i, v in zip(np.split(idx, bounds), np.split(val, bounds)):
            key = i.tobytes() + b"|" + v.tobytes()
            if len(i) and key not in self._seen:
                self._seen.add(key)
                keep_col.append(np.full(len(i), len(keep), np.int64))
                keep.append((i, v))
        if not keep:
            return 0
        k, base = len(keep), self.h.getNumCol()
        c = np.concatenate(keep_col)
        i = np.concatenate([a for a, _ in keep]).astype(np.int64)
        v = np.concatenate([b for _, b in keep]).astype(np.int64)
        starts = np.searchsorted(c, np.arange(k)).astype(np.int32)
        self.h.addCols(k, np.ones(k), np.zeros(k), np.full(k, _highspy().kHighsInf), len(i), starts,
                       i.astype(np.int32), v.astype(np.float64))
        self._entries.append((c + base, i, v))
        return k

    def entries(self, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(column, length index, copies) of the first ``k`` columns."""
        if len(self._entries) > 1:
            c, i, v = (np.concatenate(a) for a in zip(*self._entries))
            self._entries = [(c, i, v)]
        c, i, v = self._entries[0]
        first = c < k
        return c[first], i[first], v[first]

    def solve(self, seconds: float) -> bool:
        """Re-solve from the last basis; on success keep the solution for rounding."""
        # HiGHS counts its time limit over every run of this model: add the runs so far
        self.h.setOptionValue("time_limit", self.h.getRunTime() + max(seconds, 0.001))
        self.h.run()
        if self.h.getModelStatus() != _highspy().HighsModelStatus.kOptimal:
            return False
        self.solved = (np.asarray(self.h.getSolution().col_value, np.float64), self.h.getNumCol())
        return True

    def resolve(self, demand: np.ndarray, deadline: float) -> bool:
        """Solve again with ``demand`` pieces of each length (warm from the last basis)."""
        d = demand.astype(np.float64)
        self.h.changeRowsBounds(len(d), np.arange(len(d), dtype=np.int32), d, d)  # type: ignore[attr-defined]
        return self.solve(deadline - time.perf_counter())

    def duals(self) -> np.ndarray:
        return np.asarray(self.h.getSolution().row_dual, np.float64)


def _as_patterns(col, idx, val, mult: np.ndarray, sizes: np.ndarray) -> Patterns:
    """Columns (as entries) used ``mult`` times each, as Patterns; longest pieces first in a row."""
    used = mult[col] > 0
    col, idx, val = col[used], idx[used], val[used]
    cols, group = np.unique(col, return_inverse=True)
    order = np.lexsort((-idx, group))
    group, idx, copies = group[order], idx[order], val[order]
    width = copies * sizes[idx]
    offset = np.cumsum(width) - width
    starts = np.searchsorted(group, np.arange(len(cols)))
    offset = offset - np.repeat(offset[starts], np.diff(np.append(starts, len(group))))
    return Patterns(group.astype(np.int64), sizes[idx], copies, offset, mult[cols].astype(np.int64))


def _round(m: _Master, sizes, demand, context, cap, deadline: float, depth: int = 0, target: int = 0) -> Patterns:
    """Integer rows from the LP: round, re-solve what is left, repeat; then ffd or bfd on the last pieces.

    Each pass takes every pattern ``floor(x)`` times, then one more copy of each pattern with a
    fractional part, largest first, while the pieces it holds are still left. The LP is solved
    again on the pieces left (same patterns, warm), up to a few passes. What remains is packed by ffd,
    bfd, or (once, with the time left) column generation on those pieces alone: the fewest rows.
    """
    assert m.solved is not None, "_round runs after a solved LP"
    x, k = m.solved
    col, idx, val = m.entries(k)
    starts = np.searchsorted(col, np.arange(k + 1))
    total = np.zeros(k, np.int64)
    left = demand.copy()
    cover = lambda mult: np.bincount(idx, weights=val * mult[col], minlength=len(demand)).astype(np.int64)  # noqa: E731
    for _ in range(4):
        mult = np.floor(x + 1e-7).astype(np.int64)
        rest = left - cover(mult)
        while (rest < 0).any():        # solver tolerance may overshoot a length by one copy: give it back
            j = int(col[(idx == np.argmin(rest)) & (mult[col] > 0)][0])
            mult[j] -= 1
            rest = left - cover(mult)
        frac = x - mult
        for j in np.argsort(-frac)[: int((frac > 1e-6).sum())].tolist():   # the basic columns: at most one per length
            i, v = idx[starts[j]: starts[j + 1]], val[starts[j]: starts[j + 1]]
            if (rest[i] >= v).all():
                mult[j] += 1
                rest[i] -= v
        total += mult
        left = rest
        if not left.any() or time.perf_counter() > deadline or not m.resolve(left, deadline):
            break
        x = m.solved[0][:k] if m.solved is not None else x
    done = _as_patterns(col, idx, val, total, sizes)
    if not left.any():
        return done
    rest_len, rest_n = sizes[left > 0], left[left > 0]
    tail = [fit_decreasing_patterns(rest_len, rest_n, context, best=b, max_docs_per_row=cap) for b in (False, True)]
    seconds = deadline - time.perf_counter()
    if depth == 0 and seconds > 0.05 and done.rows + min(p.rows for p in tail) > target:
        again = _solve(rest_len, rest_n, context, cap, seconds, depth + 1).patterns
        tail.append(again if again is not None else tail[0])
    return Patterns.concat(done, min(tail, key=lambda p: p.rows))


def _generate(m: _Master, sizes, demand, context, cap, deadline: float, stop_at: int) -> tuple[float, bool, int]:
    """Column generation until the LP bound in rows is proven, it reaches ``stop_at``, or the deadline.

    Duals are smoothed (Wentges): pricing runs at a point between the best-bound duals so far
    and the LP's own, which damps their oscillation; a pattern joins only if it is worth more
    than a row at the LP's duals, and when none is, pricing runs again at those duals (so the
    stopping test is exact). Returns ``(lower bound, LP bound in rows proven, steps)``.
    """
    lower, center, steps, step = 0.0, None, 0, 0.0
    while time.perf_counter() + step < deadline:      # never start a step that would end past the deadline
        started = time.perf_counter()
        if not m.solve(deadline - started):
            break
        y, z = m.duals(), m.h.getInfo().objective_function_value
        steps += 1
        sep = y if center is None else _SMOOTH * center + (1 - _SMOOTH) * y
        while True:
            priced = price(sizes, sep, demand, context, cap, keep=_COLUMNS_PER_STEP, above=1 + _EPS)
            bound = float(demand @ sep) / max(priced.value, 1.0)     # sep / V is dual feasible (Farley)
            if bound > lower:
                lower, center = bound, sep
            fresh = priced.patterns[priced.patterns @ y > 1 + _EPS]
            if len(fresh) or sep is y:
                break
            sep = y                     # smoothing found nothing: price at the LP's own duals
        if np.ceil(lower - 1e-6) >= min(np.ceil(z - 1e-6), stop_at) or not len(fresh):
            return lower, bool(np.ceil(lower - 1e-6) >= np.ceil(z - 1e-6)), steps
        if not m.add_dense(fresh):
            break
        step = time.perf_counter() - started
    return lower, False, steps


def solve_optimal(item_len, item_n, context: int, *, max_docs_per_row: int | None = None,
                  time_limit: float = DEFAULT_TIME_LIMIT) -> OptimalSolution:
    """Column generation on an piece histogram (lengths ascending, each <= ``context``): see the module."""
    return _solve(item_len, item_n, context, max_docs_per_row, time_limit, depth=0)


def _solve(item_len, item_n, context: int, max_docs_per_row, time_limit: float, depth: int) -> OptimalSolution:
    t0 = time.perf_counter()
    sizes, demand, cap = np.asarray(item_len, np.int64), np.asarray(item_n, np.int64), max_docs_per_row
    bounds = row_bounds(sizes, demand, context, max_docs_per_row=cap)
    elapsed = lambda: time.perf_counter() - t0   # noqa: E731

    def done(patterns, rows, lp, method, columns=0, converged=False, note=""):
        bound = lp if lp is not None and lp.rows > bounds.l2.rows else bounds.l2
        return OptimalSolution(patterns, Certificate(rows, bound, lp, method, elapsed(), columns, converged, note))

    cells = pricing_work(sizes, np.minimum(demand, context // sizes), context, cap)
    if cells > MAX_PRICING_CELLS and cap is None:
        return done(None, _bfd_rows(sizes, demand, context), None, "bfd",
                    note=f"column generation skipped: one pricing step would fill {cells:,} table cells "
                         f"(at most {MAX_PRICING_CELLS:,}); the bound is Martello-Toth L2")
    best = fit_decreasing_patterns(sizes, demand, context, best=True, max_docs_per_row=cap)
    if best.rows <= bounds.l2.rows or cells > MAX_PRICING_CELLS:
        note = "" if best.rows <= bounds.l2.rows else (f"column generation skipped: one pricing step would fill "
                                                       f"{cells:,} table cells; the bound is L2")
        return done(best, best.rows, None, "bfd", note=note)
    master = _Master(demand)
    order = np.lexsort((best.size, best.group))
    master.add(best.group[order], np.searchsorted(sizes, best.size[order]), best.copies[order])
    # a tenth of the budget stays for rounding and packing what the rounding leaves
    lower, converged, steps = _generate(master, sizes, demand, context, cap, t0 + 0.9 * time_limit, best.rows)
    method = "bfd"
    lp = None
    if steps:
        rows_lp = int(np.ceil(lower - 1e-6))
        what = "the column-generation (Gilmore-Gomory) LP bound" + (
            "" if converged else ", a lower estimate from the duals of a column generation stopped early")
        lp = RowBound("LP", rows_lp, lower, True, what, converged)
        if master.solved is not None:
            target = int(np.ceil(lower - 1e-6))
            rounded = _round(master, sizes, demand, context, cap, t0 + 0.95 * time_limit, depth, target)
            if rounded.rows < best.rows:
                best, method = rounded, "column generation and rounding"
    proven = converged or max(bounds.l2.rows, lp.rows if lp else 0) >= best.rows   # the plan meets a proven bound
    note = "" if proven else f"stopped by the time limit ({time_limit:g} s)"
    return done(best, best.rows, lp, method, master.h.getNumCol(), converged, note)


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
