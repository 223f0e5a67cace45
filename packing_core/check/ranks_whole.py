"""Every rank's batch put back together where its scheme says each slot came from, and checked whole.

A rank alone cannot show a label taken from another rank's chunk, nor (under the row schemes) a chunk
given to the wrong rank: each rank's slots go back to the place the scheme gives them
(:func:`packing_core.parallel.layout.unit_indices`), and the whole batch is read as one. Megatron's
``labels`` are shifted: each holds the next token of its document, -100 at its last
(``target_is_not_the_next_token``); positions count up by one inside a document
(``cp_chunks_not_the_scheme`` where they jump).
"""
from __future__ import annotations

import numpy as np

from packing_core.check.rules import Finding
from packing_core.parallel.layout import chunks_per_unit, unit_indices


def _list(a, limit: int = 6) -> str:
    a = list(map(int, a))
    return str(a[:limit])[:-1] + (", ...]" if len(a) > limit else "]")


def placed(r, cp: int, scheme: str) -> np.ndarray | None:
    """int64 [n]: where each of rank ``r``'s slots goes in the whole batch (None: its offsets do not say)."""
    B, L = r.input_ids.shape
    if scheme != "zigzag-document":
        width = L * cp
        cols = unit_indices(np.zeros(1, np.int64), np.array([width]), cp, scheme, r.rank)
        return (cols[None] + (np.arange(B) * width)[:, None]).reshape(-1)
    cu = r.cu_padded_rank
    if cu is None and r.cu_padded is not None and not (r.cu_padded < 0).any() and not (r.cu_padded % cp).any():
        cu = r.cu_padded // cp
    if cu is None or cu[0] != 0 or cu[-1] != r.input_ids.size or (np.diff(cu) < 0).any() or \
            (np.diff(cu) * cp % chunks_per_unit(cp, scheme)).any():
        return None
    return unit_indices(cu[:-1] * cp, np.diff(cu) * cp, cp, scheme, r.rank)


def whole_findings(ranks, cp: int, scheme: str) -> list[Finding]:
    """Findings of the whole batch, its ranks' slots put back (``ranks``: every rank, in rank order)."""
    maybe = [placed(r, cp, scheme) for r in ranks]
    where = [w for w in maybe if w is not None]
    if len(where) != len(maybe):
        return []
    total = sum(r.input_ids.size for r in ranks)
    where_all = np.concatenate(where)
    if len(np.unique(where_all)) != total or where_all.max(initial=-1) >= total:
        return [Finding("cp_chunks_not_the_scheme", "put back by the scheme, the ranks' slots overlap or leave gaps")]

    def whole(get, fill=0):
        out = np.full(total, fill, np.int64)
        for r, w in zip(ranks, where):
            v = get(r)
            if v is None:
                return None
            out[w] = v.reshape(-1)
        return out

    ids = whole(lambda r: r.input_ids)
    pos = whole(lambda r: r.position_ids)
    labels = whole(lambda r: r.labels, -100)
    pad = whole(lambda r: r.pad)
    real = np.ones(total, bool) if pad is None else pad == 0
    unit = total if scheme == "zigzag-document" else ranks[0].input_ids.shape[1] * cp
    last_of_row = (np.arange(total) % unit) == unit - 1
    out = []
    if pos is not None:
        follows = np.r_[False, (pos[1:] == pos[:-1] + 1) & real[:-1] & ~last_of_row[:-1]]
        jump = real & ~follows & (pos != 0)
        if jump.any():
            g = np.flatnonzero(jump)
            out.append(Finding("cp_chunks_not_the_scheme", f"put back by the scheme, positions jump at slot(s) "
                               f"{_list(g)} (position {_list(pos[g])} after {_list(pos[g - 1])}): a rank holds a "
                               "chunk from elsewhere"))
    if labels is not None and pos is not None:
        same_next = np.r_[(pos[1:] == pos[:-1] + 1) & real[1:], False] & ~last_of_row
        nxt = np.r_[ids[1:], 0]
        wrong = real & (labels != -100) & (~same_next | (labels != nxt))
        if wrong.any():
            g = np.flatnonzero(wrong)
            out.append(Finding("target_is_not_the_next_token", f"put back by the scheme, {len(g)} label(s) are not "
                               f"the next token of their document: slot(s) {_list(g)} hold {_list(labels[g])}, the "
                               f"next token{'s are' if len(g) > 1 else ' is'} "
                               f"{_list(np.where(same_next[g], nxt[g], -100))}"))
    return out
