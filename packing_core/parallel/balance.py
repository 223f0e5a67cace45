"""Causal work per context-parallel rank under each scheme, and the pads the cut adds.

A query at position p of its document reads p + 1 keys (itself and those before it, none of another
document). Ring attention computes each query's pairs on the rank that holds the query, so a rank's
work is the sum of p + 1 over its real tokens. A step waits for its slowest rank: ``slowest`` is the
sum over rows (a row is one micro-batch) of the busiest rank's work, over the sum of the mean rank's
(1.0 = even). A contiguous cut gives the last window the longest prefixes; a zigzag cut pairs chunk r
with chunk 2N-1-r, so a whole unit's work is even, and the pads at each document's end (zigzag per
document) land on rank 0::

    one document of 16 tokens, CP 2:
    contiguous       rank 0 holds p 0..7: 36 pairs      rank 1 p 8..15: 100 pairs
    zigzag           rank 0 holds p 0..3, 12..15: 68    rank 1 p 4..11: 68

>>> from packing_core.packing.strategies import make_plan
>>> [(b.scheme, b.work.tolist()) for b in cp_balance(make_plan([16], 16, "bfd"), 2)]
[('contiguous', [36.0, 100.0]), ('zigzag-row', [68.0, 68.0]), ('zigzag-document', [68.0, 68.0])]

A length histogram of any size is balanced from its counts (:func:`cp_balance_counts`): best-fit
decreasing rows (the lab's ``bfd``) as patterns of identical rows, each weighed by how many it stands for.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from packing_core._validate import InputError, as_context
from packing_core.packing.patterns import fit_decreasing_patterns
from packing_core.packing.pieces import histogram_arrays, piece_histogram
from packing_core.parallel.layout import SCHEMES, as_cp, as_scheme, chunk_owner, chunks_per_unit, pad_multiple

_CELLS = 1 << 22    # pieces x chunks worked out at once: bounds the memory of a long histogram at large CP


@dataclass(frozen=True)
class CPBalance:
    """One scheme at one CP size: each rank's causal work, the slowest rank's share, the pads the cut adds."""

    scheme: str
    cp: int
    work: np.ndarray       # float64 [cp]: causal (query, key) pairs of real tokens each rank computes, all rows
    slowest: float         # sum over rows of the busiest rank's work / sum of the mean rank's (1.0 = even)
    pads_added: int        # slots the cut adds (zigzag-document: after each document; the others: at row ends)
    real_tokens: int
    rows: int

    @property
    def pad_share(self) -> float:
        """Pads added per real token."""
        return self.pads_added / self.real_tokens if self.real_tokens else 0.0

    @property
    def shares(self) -> np.ndarray:
        """Each rank's share of the work (sums to 1)."""
        total = self.work.sum()
        return self.work / total if total else np.full(self.cp, 1 / self.cp)

    def to_dict(self) -> dict:
        return {"scheme": self.scheme, "cp": self.cp, "work": self.work.tolist(), "shares": self.shares.tolist(),
                "slowest": self.slowest, "pads_added": self.pads_added, "pad_share": self.pad_share,
                "real_tokens": self.real_tokens, "rows": self.rows}


def _tri(x):
    return x * (x + 1) / 2


def _chunk_work(start, length, unit_len, cp, scheme) -> np.ndarray:
    """float64 [pieces, chunks]: pairs of each piece's queries in each chunk of its unit."""
    C = chunks_per_unit(cp, scheme)
    c = (unit_len // C).astype(np.float64)
    k = np.arange(C, dtype=np.float64)[None]
    lo = np.maximum(k * c[:, None] - start[:, None], 0)
    hi = np.minimum((k + 1) * c[:, None] - start[:, None], length[:, None])
    return np.where(hi > lo, _tri(hi) - _tri(lo), 0.0)


def _balance(unit, weight, start, length, width, cp, scheme, tp, sequence_parallel, rows) -> CPBalance:
    """Pieces at ``start`` (within their row ``unit``; rows of ``width``), each row standing for ``weight`` rows."""
    m = pad_multiple(cp, scheme, tp=tp, sequence_parallel=sequence_parallel)
    owner = chunk_owner(cp, scheme)
    per_row = np.zeros((len(weight), cp))
    step = max(1, _CELLS // chunks_per_unit(cp, scheme))
    if scheme == "zigzag-document":
        d = pad_multiple(cp, scheme, tp=tp, sequence_parallel=sequence_parallel)
        padded = -(-length // d) * d
        pads = int(((padded - length) * weight[unit]).sum())
    else:
        width_pad = -(-width // m) * m
        pads = int((width_pad - width) * weight.sum())
    for a in range(0, len(length), step):
        s = slice(a, a + step)
        if scheme == "zigzag-document":
            w = _chunk_work(np.zeros(len(length[s])), length[s], padded[s], cp, scheme)
        else:
            w = _chunk_work(start[s], length[s], np.full(len(length[s]), width_pad), cp, scheme)
        by_rank = np.zeros((w.shape[0], cp))
        np.add.at(by_rank.T, owner, w.T)
        np.add.at(per_row, unit[s], by_rank)
    total = (per_row * weight[:, None]).sum(0)
    mean = per_row.mean(1)
    slowest = float((per_row.max(1) * weight).sum() / (mean * weight).sum()) if (mean * weight).sum() else 1.0
    return CPBalance(scheme, cp, total, slowest, pads, int((length * weight[unit]).sum()), rows)


def _schemes(schemes) -> tuple[str, ...]:
    schemes = (schemes,) if isinstance(schemes, str) else tuple(schemes)
    if not schemes:
        raise InputError(f"give at least one scheme: {', '.join(SCHEMES)}")
    return tuple(as_scheme(s) for s in schemes)


def cp_balance(plan, cp: int, schemes=SCHEMES, *, tp: int = 1, sequence_parallel: bool = False
               ) -> tuple[CPBalance, ...]:
    """Each scheme's balance for the rows of ``plan`` (a :class:`~packing_core.packing.plan.Plan`), in order."""
    cp = as_cp(cp)
    unit = plan.piece_row.astype(np.int64)
    start = plan.piece_offset.astype(np.float64)
    length = plan.piece_len.astype(np.int64)
    weight = np.ones(plan.n_rows)
    return tuple(_balance(unit, weight, start, length, int(plan.context), cp, s, tp, sequence_parallel, plan.n_rows)
                 for s in _schemes(schemes))


def cp_balance_counts(counts, context: int, cp: int, schemes=SCHEMES, *, tp: int = 1,
                      sequence_parallel: bool = False) -> tuple[CPBalance, ...]:
    """Each scheme's balance for ``{length: documents}`` (or a LengthProfile) packed by best-fit decreasing.

    Documents longer than ``context`` are split into context-long pieces first, as the lab's plans split them.
    """
    cp, context = as_cp(cp), as_context(context)
    lengths, n = histogram_arrays(counts)
    if not len(lengths):
        raise InputError("the length counts hold no documents; give at least one length")
    item_len, item_n, _ = piece_histogram(lengths, n, context, "split")
    p = fit_decreasing_patterns(item_len, item_n, context, best=True)
    unit = np.repeat(p.group, p.copies)
    size = np.repeat(p.size, p.copies)
    first = np.cumsum(p.copies) - p.copies
    start = (np.repeat(p.offset, p.copies) + (np.arange(len(size)) - np.repeat(first, p.copies)) * size)
    return tuple(_balance(unit, p.n_rows.astype(np.float64), start.astype(np.float64), size, context, cp, s, tp,
                          sequence_parallel, p.rows) for s in _schemes(schemes))


def format_cp_balance(balances, label: str = "") -> str:
    """A table: one line per scheme and CP size."""
    lines = [label] if label else []
    lines.append(f"{'scheme':<16} {'CP':>4} {'slowest rank / mean':>20} {'rank 0 share':>13} {'last rank share':>16} "
                 f"{'pads added':>12} {'pads / real':>12}")
    for b in balances:
        sh = b.shares
        lines.append(f"{b.scheme:<16} {b.cp:>4} {b.slowest:>20.3f} {sh[0]:>13.1%} {sh[-1]:>16.1%} "
                     f"{b.pads_added:>12,} {b.pad_share:>12.2%}")
    return "\n".join(lines)
