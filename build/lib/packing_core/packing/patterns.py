"""Rows as *patterns*: groups of identical rows, and the real pieces dealt into them.

A plan of millions of rows holds few distinct rows. A :class:`Patterns` value stores each
group of identical rows once: group ``g`` is ``n_rows[g]`` rows, and entry ``e`` of it puts
``copies[e]`` pieces of ``size[e]`` tokens side by side from slot ``offset[e]``::

    context 512, pieces {300: 2, 200: 3}
    group 0: 2 rows  [300 @ 0][200 @ 300]         entries (0, 300, 1, 0) (0, 200, 1, 300)
    group 1: 1 row   [200 @ 0][200 @ 200]         entry   (1, 200, 2, 0)

Column generation (``optimal.py``) returns patterns, and so does first- or best-fit decreasing
with a cap on pieces per row (:func:`fit_decreasing_patterns`); :func:`deal` then gives each real
piece its row and offset, vectorised, so the same code plans from counts and from lengths.

>>> p = fit_decreasing_patterns(np.array([200, 300]), np.array([3, 2]), 512, best=True)
>>> p.rows, p.n_rows.tolist()
(3, [2, 1])
>>> row, offset = deal(p, np.array([200, 300, 200, 300, 200]))
>>> row.tolist(), offset.tolist()
([0, 0, 1, 1, 2], [300, 0, 300, 0, 0])
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Patterns", "deal", "fit_decreasing_patterns"]


@dataclass(frozen=True)
class Patterns:
    """Groups of identical rows (see the module docstring); groups lie in row order."""

    group: np.ndarray    # int64 [entries]: the group of each entry
    size: np.ndarray     # int64 [entries]: piece length
    copies: np.ndarray   # int64 [entries]: pieces of that length, side by side
    offset: np.ndarray   # int64 [entries]: slot of the first of them
    n_rows: np.ndarray   # int64 [groups]: rows in each group

    @property
    def rows(self) -> int:
        return int(self.n_rows.sum())

    def items(self) -> tuple[np.ndarray, np.ndarray]:
        """``(piece lengths ascending, pieces of each)`` that the rows hold."""
        per = self.copies * self.n_rows[self.group]
        sizes, inv = np.unique(self.size, return_inverse=True)
        return sizes, np.bincount(inv, weights=per, minlength=len(sizes)).astype(np.int64)

    def docs_per_row(self) -> np.ndarray:
        """Pieces in one row of each group."""
        return np.bincount(self.group, weights=self.copies, minlength=len(self.n_rows)).astype(np.int64)

    @staticmethod
    def concat(*parts: Patterns) -> Patterns:
        """The rows of ``parts`` one after the other."""
        base = np.cumsum([0] + [len(p.n_rows) for p in parts])
        cat = lambda name: np.concatenate([getattr(p, name) for p in parts]).astype(np.int64)  # noqa: E731
        group = np.concatenate([p.group + b for p, b in zip(parts, base)]).astype(np.int64)
        return Patterns(group, cat("size"), cat("copies"), cat("offset"), cat("n_rows"))


def deal(patterns: Patterns, length: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(row, offset)`` of each piece of ``length``: the pieces of one length fill that length's slots
    in row order, in input order. The patterns must hold exactly the pieces' lengths."""
    p = patterns
    first = np.cumsum(p.n_rows) - p.n_rows
    per = p.copies * p.n_rows[p.group]              # slots of each entry over all its rows
    e = np.repeat(np.arange(len(per)), per)
    within = np.arange(len(e)) - np.repeat(np.cumsum(per) - per, per)
    slot_row = first[p.group[e]] + within // p.copies[e]
    slot_off = p.offset[e] + (within % p.copies[e]) * p.size[e]
    # lengths fit 16 bits at any usual context, where numpy's stable argsort is a radix sort
    key = np.uint16 if len(length) == 0 or int(length.max()) < 2**16 else np.int64
    slot_size = p.size[e]
    by_slot = np.argsort(slot_size.astype(key), kind="stable")     # slots of one length in row order
    by_item = np.argsort(length.astype(key), kind="stable")
    if len(e) != len(length) or not np.array_equal(slot_size[by_slot], length[by_item]):
        raise AssertionError("the patterns do not hold exactly these pieces")
    row = np.empty(len(length), np.int64)
    offset = np.empty(len(length), np.int64)
    row[by_item] = slot_row[by_slot]
    offset[by_item] = slot_off[by_slot]
    return row, offset


class _Groups:
    """Growable arrays of row groups: a group is rows ``[lo, lo + n)`` that hold the same pieces.

    A group's pieces are its parent's plus ``q`` pieces of ``size`` at ``off`` (a tree), so a
    change to some rows of a group makes one child group, never a copy of its contents.
    """

    FIELDS = ("parent", "size", "q", "off", "lo", "n", "room", "free")
    parent: np.ndarray
    size: np.ndarray
    q: np.ndarray
    off: np.ndarray
    lo: np.ndarray
    n: np.ndarray
    room: np.ndarray
    free: np.ndarray

    def __init__(self):
        self.len = 0
        for f in self.FIELDS:
            setattr(self, f, np.zeros(64, np.int64))

    def add(self, **cols) -> np.ndarray:
        k = len(cols["n"])
        while self.len + k > len(self.n):
            for f in self.FIELDS:
                a = getattr(self, f)
                setattr(self, f, np.concatenate([a, np.zeros(len(a), np.int64)]))
        ids = np.arange(self.len, self.len + k)
        for f in self.FIELDS:
            getattr(self, f)[ids] = cols[f]
        self.len += k
        return ids

    def patterns(self) -> Patterns:
        n = self.n[: self.len]
        leaves = np.flatnonzero(n > 0)
        leaves = leaves[np.argsort(self.lo[leaves], kind="stable")]   # groups in row order
        cols: list[list[np.ndarray]] = [[], [], [], []]
        cur, which = leaves.copy(), np.arange(len(leaves))
        while len(cur):                     # walk up the tree: one round per piece length in a row
            for out, a in zip(cols, (which, self.size[cur], self.q[cur], self.off[cur])):
                out.append(a)
            up = self.parent[cur]
            keep = up >= 0
            cur, which = up[keep], which[keep]
        group, size, copies, offset = (np.concatenate(c) if c else np.zeros(0, np.int64) for c in cols)
        return Patterns(group, size, copies, offset, n[leaves].astype(np.int64))


def fit_decreasing_patterns(item_len, item_n, context: int, *, best: bool,
                            max_docs_per_row: int | None = None) -> Patterns:
    """First- (``best=False``) or best-fit decreasing over a length histogram, as patterns.

    Pieces come longest first; each goes to the first row (first fit) or the row with the least
    room (best fit; ties to the first row) that has room for it and, with ``max_docs_per_row``,
    fewer pieces than the cap. Rows that hold the same pieces move as one group, so the work
    follows the distinct lengths and groups, not the pieces. The result is the textbook per-piece
    algorithm's, row for row.

    >>> p = fit_decreasing_patterns(np.array([10]), np.array([9]), 512, best=False, max_docs_per_row=4)
    >>> p.n_rows.tolist(), p.docs_per_row().tolist()
    ([2, 1], [4, 1])
    """
    size_desc = np.asarray(item_len, np.int64)[::-1]
    need_desc = np.asarray(item_n, np.int64)[::-1]
    cap = context if max_docs_per_row is None else int(max_docs_per_row)
    g = _Groups()
    act = np.zeros(0, np.int64)          # groups that may still take an piece
    n_rows = 0
    for s, need in zip(size_desc.tolist(), need_desc.tolist()):
        before = g.len
        cand = act[g.room[act] >= s]
        if len(cand) and need:
            cand = cand[np.lexsort((g.lo[cand], g.room[cand]))] if best else cand[np.argsort(g.lo[cand])]
            q = np.minimum(g.room[cand] // s, g.free[cand])
            cum = np.cumsum(q * g.n[cand])
            k = int(np.searchsorted(cum, need))           # the group where this length runs out
            whole = cand[: min(k, len(cand))]
            g.add(parent=whole, size=s, q=q[: len(whole)], off=context - g.room[whole], lo=g.lo[whole],
                  n=g.n[whole], room=g.room[whole] - q[: len(whole)] * s, free=g.free[whole] - q[: len(whole)])
            g.n[whole] = 0
            if k < len(cand):
                b, qb = int(cand[k]), int(q[k])
                full, part = divmod(need - (int(cum[k - 1]) if k else 0), qb)
                room, free, lo = int(g.room[b]), int(g.free[b]), int(g.lo[b])
                g.add(parent=[b, b], size=s, q=[qb, part], off=context - room, lo=[lo, lo + full],
                      n=[full, int(part > 0)], room=[room - qb * s, room - part * s], free=[free - qb, free - part])
                g.lo[b] += full + (part > 0)
                g.n[b] -= full + (part > 0)
                need = 0
            else:
                need -= int(cum[-1])
        if need:
            q0 = min(context // s, cap)
            full, part = divmod(need, q0)
            g.add(parent=-1, size=s, q=[q0, part], off=0, lo=[n_rows, n_rows + full], n=[full, int(part > 0)],
                  room=[context - q0 * s, context - part * s], free=[cap - q0, cap - part])
            n_rows += full + (part > 0)
        act = np.concatenate([act, np.arange(before, g.len)])
        act = act[(g.n[act] > 0) & (g.room[act] > 0) & (g.free[act] > 0)]
    return g.patterns()
