"""Column generation's two halves: a budget of work, and the master LP with its pricing loop.

**The budget.** ``optimal`` stops on *work*, counted in knapsack table cells (``knapsack.py``)
and simplex iterations, not on the clock: the same histogram and time limit give the same plan
on any machine, at any load. A time limit of ``T`` seconds buys ``T x WORK_PER_SECOND`` units,
about what this work costs in half of ``T`` on the lab's 2-core reference machine. The clock is
a safety net only: no step starts that is predicted (from the work's pace so far) to end past
90 % of ``T``, and HiGHS stops an LP solve there; the last tenth is left for rounding and packing
the last pieces. A plan stopped by the clock depends on the machine's speed, and its certificate
says so.

**The master LP** (HiGHS) has one equality row per piece length (``= pieces``) and one column per
pattern, kept sparse as entries (column, length index, copies). A column of one piece per length
keeps it feasible for any demand, so the same LP serves the whole histogram and every residual
histogram a dive leaves (``dive.py``).

**Pricing** (Gilmore and Gomory, 1961): the LP's duals value each length; the most valuable
pattern that fits one row joins the LP if it is worth more than one row. Every pricing step also
proves a bound (Farley): the duals ``y`` scaled by the best pattern's value ``V`` are dual feasible,
so no plan uses fewer than ``d . y / V`` rows.

>>> b = Budget(1.0)
>>> b.work_limit == WORK_PER_SECOND, b.allows(WORK_PER_SECOND + 1), b.stopped_by
(True, False, 'work')
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from packing_core._validate import InputError
from packing_core.packing.knapsack import price, pricing_work
from packing_core.packing.patterns import Patterns

__all__ = ["FIRST_PLAN_CELLS", "INSTALL_OPTIMAL", "Budget", "LPResult", "Master", "WORK_PER_SECOND", "generate"]

# Work is counted in knapsack cells, about 0.6 ns each on one core of the reference machine (the lab's
# 2-core VM): a pricing step counts its cells and PIECE_CELLS per piece (a numpy call), an LP solve
# ITERATION_CELLS per simplex iteration and COLUMN_CELLS per column, and each STEP_CELLS more (the Python
# around it). A time limit of T seconds buys T x WORK_PER_SECOND: about T / 2 of one core's work there.
WORK_PER_SECOND = 800_000_000
PIECE_CELLS = 2_500
ITERATION_CELLS = 40_000
COLUMN_CELLS = 1_000
STEP_CELLS = 400_000
FIRST_PLAN_CELLS = 50_000     # the first plan (best-fit decreasing) and the bounds, per distinct length
_CLOCK_SHARE = 0.9
_COLUMNS_PER_STEP = 12
_SMOOTH = 0.5          # weight of the best-bound duals in the pricing point
_EPS = 1e-9


class Budget:
    """Work left to spend, and the clock as a safety net (see the module docstring).

    ``stopped_by`` is ``""`` while work is left, then ``"work"`` (the deterministic stop) or
    ``"time"`` (the clock: the plan depends on the machine's speed). Inside ``with budget.share(f):``
    a phase may spend only up to the share ``f`` of both; reaching it ends the phase, not the search.
    """

    def __init__(self, seconds: float):
        self.seconds = float(seconds)
        self.t0 = time.perf_counter()
        self.work_limit = int(self.seconds * WORK_PER_SECOND)
        self.work = 0
        self.stopped_by = ""
        self.last_stop = ""     # what ended the last phase or step refused: "work" or "time"
        self._share = 1.0

    @contextmanager
    def share(self, fraction: float) -> Iterator[Budget]:
        """Let a phase spend up to ``fraction`` of the work and of the clock (counted from the start)."""
        self._share = fraction
        try:
            yield self
        finally:
            self._share = 1.0

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def time_left(self) -> float:
        """Seconds until the clock's stop: 90 % of the limit, the last tenth left for rounding and the tail."""
        return _CLOCK_SHARE * self._share * self.seconds - self.elapsed()

    def spend(self, units: int) -> None:
        self.work += int(units)

    def allows(self, units: int) -> bool:
        """May a step of about ``units`` work start? Checks the work first, then the clock's prediction."""
        if self.stopped_by:
            return False
        why = ""
        if self.work + units > self._share * self.work_limit:
            why = "work"
        elif units * (self.elapsed() / self.work if self.work else 1.0 / WORK_PER_SECOND) > self.time_left():
            why = "time"
        if why:
            self.last_stop = why
            if self.whole:
                self.stopped_by = why
        return not why

    @property
    def whole(self) -> bool:
        """True outside a phase's share: a stop now ends the search."""
        return self._share >= 1.0


INSTALL_OPTIMAL = "pip install 'packing-lab[optimal]'"


def _highspy():
    """The HiGHS LP solver, imported when ``optimal`` runs; without it, one line naming the extra."""
    try:
        import highspy
    except ImportError:
        raise InputError(f"the optimal strategy (and its LP bound) needs the HiGHS solver: {INSTALL_OPTIMAL}; "
                         "every other strategy runs without it") from None
    return highspy


class Master:
    """The master LP over patterns of ``sizes`` (see the module docstring)."""

    def __init__(self, sizes: np.ndarray, demand: np.ndarray):
        self.hs = highspy = _highspy()
        self.sizes = np.asarray(sizes, np.int64)
        self.h = highspy.Highs()
        self.h.setOptionValue("output_flag", False)
        self.h.setOptionValue("threads", 1)
        self.h.setOptionValue("presolve", "off")     # a warm re-solve: presolve only costs time
        n = len(demand)
        self.demand = np.asarray(demand, np.int64).copy()
        d = self.demand.astype(np.float64)
        self.h.addRows(n, d, d, 0, np.zeros(n, np.int32), np.zeros(0, np.int32), np.zeros(0))
        self._entries: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._seen: set[bytes] = set()
        self._x = np.zeros(0)
        self._new_demand = False
        self.add(np.arange(n), np.arange(n), np.ones(n, np.int64))    # one piece a row: feasible for any demand

    @property
    def columns(self) -> int:
        return self.h.getNumCol()

    def add_dense(self, patterns: np.ndarray) -> int:
        col, idx = np.nonzero(patterns)
        return self.add(col, idx, patterns[col, idx])

    def add(self, col: np.ndarray, idx: np.ndarray, val: np.ndarray) -> int:
        """Add the columns given as entries sorted by column; those already there are skipped."""
        cuts = np.flatnonzero(np.diff(col)) + 1
        keep_col: list[np.ndarray] = []
        keep: list[tuple[np.ndarray, np.ndarray]] = []
        for i, v in zip(np.split(idx, cuts), np.split(val, cuts)):
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
        self.h.addCols(k, np.ones(k), np.zeros(k), np.full(k, self.hs.kHighsInf), len(i), starts,
                       i.astype(np.int32), v.astype(np.float64))
        self._entries.append((c + base, i, v))
        return k

    def entries(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(column, length index, copies) of every column, sorted by column."""
        if len(self._entries) > 1:
            c, i, v = (np.concatenate(a) for a in zip(*self._entries))
            self._entries = [(c, i, v)]
        return self._entries[0]

    def set_demand(self, demand: np.ndarray) -> None:
        """Pieces of each length the rows must hold (the whole histogram, or what a dive leaves).

        A pattern that holds more pieces of a length than are left is closed (its column bounded
        to 0): no plan of the pieces left can use it, and the LP would otherwise use it fractionally.
        """
        self.demand = np.asarray(demand, np.int64).copy()
        d = self.demand.astype(np.float64)
        self.h.changeRowsBounds(len(d), np.arange(len(d), dtype=np.int32), d, d)  # type: ignore[attr-defined]
        col, idx, val = self.entries()
        k = self.h.getNumCol()
        closed = np.bincount(col[val > self.demand[idx]], minlength=k) > 0
        upper = np.where(closed, 0.0, self.hs.kHighsInf)
        self.h.changeColsBounds(k, np.arange(k, dtype=np.int32), np.zeros(k), upper)  # type: ignore[attr-defined]
        self._new_demand = True

    def solve(self, budget: Budget) -> bool:
        """Re-solve from the last basis, within the clock; the iterations count as work.

        New columns keep the last basis primal feasible (primal simplex goes on from it); a new
        demand keeps it dual feasible (dual simplex).
        """
        # HiGHS counts its time limit over every run of this model: add the runs so far
        self.h.setOptionValue("time_limit", self.h.getRunTime() + max(budget.time_left(), 0.001))
        self.h.setOptionValue("simplex_strategy", 1 if self._new_demand else 4)
        self.h.run()
        self._new_demand = False
        iterations = self.h.getInfo().simplex_iteration_count
        budget.spend(STEP_CELLS + iterations * ITERATION_CELLS + self.h.getNumCol() * COLUMN_CELLS)
        status = self.h.getModelStatus()
        if status == self.hs.HighsModelStatus.kTimeLimit:
            budget.last_stop = "time"
            if budget.whole:
                budget.stopped_by = budget.stopped_by or "time"
        if status != self.hs.HighsModelStatus.kOptimal:
            return False
        self._x = np.asarray(self.h.getSolution().col_value, np.float64)
        return True

    def patterns(self, mult: np.ndarray) -> Patterns:
        """The columns used ``mult`` times each, as Patterns; longest pieces first in a row."""
        col, idx, val = self.entries()
        used = mult[col] > 0
        col, idx, val = col[used], idx[used], val[used]
        cols, group = np.unique(col, return_inverse=True)
        order = np.lexsort((-idx, group))
        group, idx, copies = group[order], idx[order], val[order]
        width = copies * self.sizes[idx]
        offset = np.cumsum(width) - width
        starts = np.searchsorted(group, np.arange(len(cols)))
        offset = offset - np.repeat(offset[starts], np.diff(np.append(starts, len(group))))
        return Patterns(group.astype(np.int64), self.sizes[idx], copies, offset, mult[cols].astype(np.int64))

    def cover(self, mult: np.ndarray) -> np.ndarray:
        """Pieces of each length that the columns used ``mult`` times hold."""
        col, idx, val = self.entries()
        return np.bincount(idx, weights=val * mult[col], minlength=len(self.sizes)).astype(np.int64)

    def x(self) -> np.ndarray:
        """The last optimal LP solution, over every column (those added since at 0)."""
        return np.pad(self._x, (0, self.h.getNumCol() - len(self._x)))

    def objective(self) -> float:
        return float(self.h.getInfo().objective_function_value)

    def duals(self) -> np.ndarray:
        return np.asarray(self.h.getSolution().row_dual, np.float64)


@dataclass(frozen=True)
class LPResult:
    """What column generation proved about the master's demand.

    ``lower``: a proven lower bound on the LP optimum (Farley's, from the duals); ``z``: the last
    restricted LP's optimum, an upper bound on it; ``exact``: no pattern prices out, so ``z`` is
    the LP optimum; ``rows_proven``: ``ceil(lower) >= ceil(z)``, so ⌈LP⌉ is known, if not the LP itself.
    ``solved`` is False when no LP was solved at all (the budget ran out first).
    """

    lower: float
    z: float
    exact: bool
    rows_proven: bool
    steps: int
    solved: bool

    @property
    def rows(self) -> int:
        """The LP bound in rows: ⌈lower⌉ (a whole-row tolerance of 1e-6 for the solver's rounding)."""
        return int(np.ceil(self.lower - 1e-6))


def generate(m: Master, budget: Budget, stop_at: int | None = None, cap: int | None = None,
             context: int = 0) -> LPResult:
    """Column generation on the master's demand until ⌈LP⌉ is proven, the bound reaches ``stop_at``
    rows, or the budget stops it.

    Duals are smoothed (Wentges): pricing runs at a point between the best-bound duals so far and
    the LP's own, which damps their oscillation; a pattern joins only if it is worth more than a row
    at the LP's duals, and when none is, pricing runs again at those duals (so the stopping test is
    exact).
    """
    demand = m.demand
    lower, z, center, steps, solved = 0.0, float("inf"), None, 0, False
    cells = STEP_CELLS + pricing_work(m.sizes, np.minimum(demand, context // m.sizes), context, cap, PIECE_CELLS)
    step = 2 * cells
    while budget.allows(step):
        before = budget.work
        if not m.solve(budget):
            break
        solved = True
        y, z = m.duals(), m.objective()
        steps += 1
        sep = y if center is None else _SMOOTH * center + (1 - _SMOOTH) * y
        while True:
            priced = price(m.sizes, sep, demand, context, cap, keep=_COLUMNS_PER_STEP, above=1 + _EPS)
            budget.spend(cells)
            bound = float(demand @ sep) / max(priced.value, 1.0)     # sep / V is dual feasible (Farley)
            if bound > lower:
                lower, center = bound, sep
            fresh = priced.patterns[priced.patterns @ y > 1 + _EPS]
            if len(fresh) or sep is y:
                break
            sep = y                     # smoothing found nothing: price at the LP's own duals
        exact = not len(fresh)
        proven = exact or int(np.ceil(lower - 1e-6)) >= int(np.ceil(z - 1e-6))
        if proven or (stop_at is not None and int(np.ceil(lower - 1e-6)) >= stop_at):
            return LPResult(lower, z, exact, proven, steps, True)
        if not m.add_dense(fresh):
            break
        step = budget.work - before
    return LPResult(lower, z, False, False, steps, solved)
