"""Diving: integer rows from the LP, one pattern at a time, with column generation at every step.

Rounding the LP once (``optimal.py``) leaves a row or so of gap where the LP's patterns do not
fit together: Falkenauer's triplets, where every row of the optimum holds exactly three pieces that
fill it, are the classic case. A dive (Sadykov et al., 2019, "Primal heuristics for branch and
price: the assets of diving methods") fixes one pattern at a time and re-solves the LP on the
pieces left, generating the columns that the rest now needs::

    1. solve the LP on the pieces left (column generation, ``master.generate``)
    2. prune: rows fixed + ⌈LP⌉ of the rest reach the best plan so far
    3. an integer LP solution is a plan: the rows fixed and its own
    4. else fix the pattern whose value is nearest a whole number >= 1, that many rows (or, first,
       every pattern within 0.2 of a whole number, or used more than once, together), and go to 1

A limited discrepancy search backtracks: a dive that is pruned returns to its last steps and tries
the next choice there instead (the patterns passed over stay tabu below), at most ``limit`` times
along a path, and the limit doubles until the budget (``master.Budget``) runs out. The search stops
at the target (the proven lower bound: the plan is optimal), when it has tried every path, or when
the budget runs out.

Nine pieces that fill three rows of 100 exactly (50 + 30 + 20): asked to beat 4 rows, the dive finds the 3.

>>> from packing_core.packing.master import Budget, Master, generate
>>> sizes, demand = np.array([20, 30, 50]), np.array([3, 3, 3])
>>> m = Master(sizes, demand)
>>> plan = dive(m, Budget(1.0), 100, None, target=3, best_rows=4).plan
>>> plan.rows, plan.items()[1].tolist()
(3, [3, 3, 3])
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from packing_core.packing.master import Budget, Master, generate
from packing_core.packing.patterns import Patterns

__all__ = ["Dive", "dive"]

_TOL = 1e-6
_NEAR = 0.2        # a pattern this close to a whole number of rows is fixed with the others in one step


@dataclass(frozen=True)
class Dive:
    """The best plan a dive found (None if none beat ``best_rows``), the nodes it solved, and whether it
    tried every path of its rule without reaching the target."""

    plan: Patterns | None
    nodes: int
    exhausted: bool


@dataclass(frozen=True)
class _Node:
    left: np.ndarray             # pieces of each length still to place
    fixed: tuple[tuple[int, int], ...]   # (column, rows) fixed on the way here
    rows: int                    # rows fixed
    tabu: frozenset[int]
    discrepancies: int


def _choices(x: np.ndarray, m: Master, left: np.ndarray, tabu: frozenset[int]) -> list[tuple[int, int]]:
    """(column, rows) to fix, best first: value nearest a whole number >= 1, ties to the lower column."""
    col, idx, val = m.entries()
    used = np.flatnonzero(x > _TOL)
    out: list[tuple[float, int, int]] = []
    for j in used.tolist():
        if j in tabu:
            continue
        lo, hi = np.searchsorted(col, [j, j + 1])
        most = int(np.min(left[idx[lo:hi]] // val[lo:hi]))     # rows of it the pieces left allow
        k = min(max(1, int(round(x[j]))), most)
        if k >= 1:
            out.append((abs(x[j] - k), j, k))
    out.sort()
    return [(j, k) for _, j, k in out]


def _bulk(x: np.ndarray, choices: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Patterns to fix in one step, when more than one: those within ``_NEAR`` of a whole number >= 1
    (that many rows), and every pattern used more than once (its whole rows)."""
    out = [(j, k if abs(x[j] - k) < _NEAR else int(np.floor(x[j] + _TOL))) for j, k in choices if x[j] >= 1 - _NEAR]
    out = [(j, k) for j, k in out if k >= 1]
    return out if len(out) > 1 else []


def _fix(m: Master, node: _Node, fixes: list[tuple[int, int]], tabu: frozenset[int], discrepancies: int) -> _Node:
    """The node below ``node`` with ``fixes`` (column, rows) taken out of the pieces left, as far as they fit."""
    col, idx, val = m.entries()
    left, fixed, rows = node.left.copy(), node.fixed, node.rows
    for j, k in fixes:
        lo, hi = np.searchsorted(col, [j, j + 1])
        k = min(k, int(np.min(left[idx[lo:hi]] // val[lo:hi])))
        if k >= 1:
            left[idx[lo:hi]] -= k * val[lo:hi]
            fixed, rows = fixed + ((j, k),), rows + k
    return _Node(left, fixed, rows, tabu, discrepancies)


def _integral(x: np.ndarray, m: Master) -> np.ndarray | None:
    """The LP solution as whole rows, if it is one and holds exactly the pieces left."""
    mult = np.round(x).astype(np.int64)
    if np.abs(x - mult).max(initial=0.0) > _TOL or (mult < 0).any():
        return None
    return mult if np.array_equal(m.cover(mult), m.demand) else None


def dive(m: Master, budget: Budget, context: int, cap: int | None, *, target: int, best_rows: int) -> Dive:
    """Search for a plan of fewer than ``best_rows`` rows, down to ``target`` (see the module docstring).

    The search allows 1 discrepancy, then 2, 4, 8, ... until the budget runs out or a search cuts
    no path: then it has tried every path of its rule (``exhausted``). The master's demand is the
    whole histogram on entry and is left as the search leaves it.
    """
    demand, best, nodes, limit = m.demand.copy(), None, 0, 1
    while True:
        found, n, cut = _search(m, budget, context, cap, demand, best_rows, target, limit)
        nodes += n
        if found is not None:
            best, best_rows = found, found.rows
        if best_rows <= target or budget.stopped_by or not cut:
            return Dive(best, nodes, not cut and not budget.stopped_by and best_rows > target)
        limit *= 2


def _search(m: Master, budget: Budget, context: int, cap: int | None, demand: np.ndarray, best_rows: int,
            target: int, limit: int) -> tuple[Patterns | None, int, bool]:
    """One depth-first search with at most ``limit`` discrepancies on a path: (best plan, nodes, cut a path)."""
    best: Patterns | None = None
    stack = [_Node(demand, (), 0, frozenset(), 0)]
    nodes, cut = 0, False
    while stack and not budget.stopped_by:
        node = stack.pop()
        m.set_demand(node.left)
        lp = generate(m, budget, stop_at=best_rows - node.rows, cap=cap, context=context)
        if not lp.solved:
            break
        nodes += 1
        if node.rows + lp.rows >= best_rows:
            continue                                  # pruned: this path cannot beat the best plan
        x = m.x()
        leaf = _integral(x, m)
        if leaf is not None:
            for j, k in node.fixed:
                leaf[j] += k
            best = m.patterns(leaf)
            best_rows = best.rows
            if best_rows <= target:
                break
            continue
        choices = _choices(x, m, node.left, node.tabu)
        bulk = _bulk(x, choices)
        options = ([bulk] if bulk else []) + [[c] for c in choices]     # several patterns at once first
        children, tabu = [], set(node.tabu)
        for d, fixes in enumerate(options):
            if node.discrepancies + d > limit:
                cut = True
                break
            children.append(_fix(m, node, fixes, frozenset(tabu), node.discrepancies + d))
            if len(fixes) == 1:
                tabu.add(fixes[0][0])
        stack.extend(reversed(children))             # the first choice is tried first
    return best, nodes, cut
