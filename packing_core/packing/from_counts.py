"""Plan a corpus from its length counts alone: a billion documents in well under a second.

pad, concat-cut, ffd, bfd and bucket depend only on the *multiset* of lengths, so they
can run on ``{length: documents}`` without one array entry per document. Rows that
share a remaining room behave alike, so first- and best-fit move whole groups of rows
at once::

    counts {300: 2, 200: 3}, context 512
    bfd: two rows [300 .] room 212 -> each takes one 200 -> room 12; one new row [200 200]
         3 rows, 1,200 tokens, utilisation 1200 / 1536 = 0.78

    >>> m = plan_from_counts({300: 2, 200: 3}, 512, "bfd").metrics
    >>> m.rows, m.slots, round(m.utilisation, 2)
    (3, 1536, 0.78)

next-fit and pad-longest depend on document order: :func:`sampled_plan` runs them on a
seeded sample of the documents, and says so (``basis`` names the sample).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from packing_core._validate import as_context, choice
from packing_core.data.profile import LengthProfile
from packing_core.packing.plan import PlanMetrics
from packing_core.packing.strategies import OVERLONG_POLICIES, make_plan

COUNT_STRATEGIES = ("pad", "bucket", "concat-cut", "ffd", "bfd")
ORDER_STRATEGIES = ("pad-longest", "next-fit")
SAMPLE_DOCUMENTS = 200_000


@dataclass(frozen=True)
class CountPlan:
    """A strategy's numbers on a whole corpus (``basis`` "counts") or on a sample of it.

    ``trained_tokens`` are the tokens in the loss that made it into rows, and
    ``trained_per_slot`` what one slot of compute buys in supervised training.
    """

    metrics: PlanMetrics
    basis: str                  # "counts" (exact, whole corpus) or "sample of N documents (seed S)"
    trained_tokens: int
    trained_per_slot: float
    note: str = ""

    @property
    def strategy(self) -> str:
        return self.metrics.strategy

    def to_dict(self) -> dict:
        return {**self.metrics.to_dict(), "basis": self.basis, "trained_tokens": self.trained_tokens,
                "trained_per_slot": self.trained_per_slot, "note": self.note}


def _histogram(counts) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(counts, dict):
        keys = sorted(counts, key=int)
        lengths = np.array([int(k) for k in keys], dtype=np.int64)
        n = np.array([int(counts[k]) for k in keys], dtype=np.int64)
    else:   # a LengthProfile (or anything with lengths and counts arrays)
        lengths, n = np.asarray(counts.lengths, np.int64), np.asarray(counts.counts, np.int64)
    keep = n > 0
    if (n < 0).any() or (lengths[keep] < 1).any():
        raise ValueError("length counts must be >= 0 and lengths >= 1; pass {length: documents}")
    return lengths[keep], n[keep]


def _items(lengths, n, context, overlong):
    """Item histogram (item length -> items) after the over-long policy, plus the losses."""
    over = lengths > context
    lost = truncated = split = dropped = 0
    if overlong == "split":
        full = (lengths // context) * n
        rest = lengths % context
        item_len = np.concatenate([lengths[~over], [context], rest[over & (rest > 0)]])
        item_n = np.concatenate([n[~over], [int(full[over].sum())], n[over & (rest > 0)]])
        split = int(n[over].sum())
    elif overlong == "truncate":
        item_len, item_n = np.minimum(lengths, context), n
        truncated = int(n[over].sum())
        lost = int(((lengths - context) * n)[over].sum())
    else:
        item_len, item_n = lengths[~over], n[~over]
        dropped = int(n[over].sum())
        lost = int((lengths * n)[over].sum())
    keep = item_n > 0
    item_len, item_n = item_len[keep], item_n[keep]
    order = np.argsort(item_len, kind="stable")
    item_len, item_n = item_len[order], item_n[order]
    # equal item lengths (a split remainder equal to a short document) become one entry
    uniq, inv = np.unique(item_len, return_inverse=True)
    return uniq, np.bincount(inv, weights=item_n).astype(np.int64), lost, truncated, split, dropped


def _bfd_rows(item_len: np.ndarray, item_n: np.ndarray, context: int) -> int:
    """Best-fit decreasing on a histogram: rows tracked as counts per remaining room.

    ``rooms`` is sparse (a dict of the rooms some row has), so memory follows the data,
    never the context: a context of 2**28 costs nothing more than one of 512.
    """
    rooms: dict[int, int] = {}   # rooms[c]: rows with c slots free
    n_rows = 0

    def add(c: int, k: int) -> None:
        if k:
            rooms[c] = rooms.get(c, 0) + k

    for size, need in zip(item_len[::-1].tolist(), item_n[::-1].tolist()):
        for c in sorted(c for c, k in rooms.items() if k and c >= size):   # tightest fit first
            if need == 0:
                break
            have, q = rooms[c], c // size
            full = min(have, need // q)
            part = need - full * q if full < have else 0
            rooms[c] -= full + (part > 0)
            add(c - q * size, full)
            if part:
                add(c - part * size, 1)
            need -= full * q + part
        if need:
            q = context // size
            full, part = divmod(need, q)
            add(context - q * size, full)
            if part:
                add(context - part * size, 1)
            n_rows += full + (part > 0)
    return n_rows


def _ffd_rows(item_len: np.ndarray, item_n: np.ndarray, context: int) -> int:
    """First-fit decreasing on a histogram: rows in creation order as runs of equal room."""
    room = np.zeros(0, dtype=np.int64)     # run r: run_n[r] consecutive rows with room[r] free
    run_n = np.zeros(0, dtype=np.int64)
    for size, need in zip(item_len[::-1].tolist(), item_n[::-1].tolist()):
        fits = np.flatnonzero(room >= size)
        if len(fits):
            q = room[fits] // size
            cum = np.cumsum(q * run_n[fits])
            k = int(np.searchsorted(cum, need))            # the run where this length runs out
            if k >= len(fits):
                room[fits] -= q * size
                need -= int(cum[-1])
            else:
                before = int(cum[k - 1]) if k else 0
                room[fits[:k]] -= q[:k] * size
                r, left = int(fits[k]), need - before
                full, part = divmod(left, int(q[k]))
                c = int(room[r])
                pieces = [(c - int(q[k]) * size, full), (c - part * size, int(part > 0)),
                          (c, int(run_n[r]) - full - int(part > 0))]
                pieces = [(a, b) for a, b in pieces if b > 0]
                room = np.concatenate([room[:r], [a for a, _ in pieces], room[r + 1:]]).astype(np.int64)
                run_n = np.concatenate([run_n[:r], [b for _, b in pieces], run_n[r + 1:]]).astype(np.int64)
                need = 0
        if need:
            q = context // size
            full, part = divmod(need, q)
            new = [(context - q * size, full), (context - part * size, int(part > 0))]
            new = [(a, b) for a, b in new if b > 0]
            room = np.concatenate([room, [a for a, _ in new]]).astype(np.int64)
            run_n = np.concatenate([run_n, [b for _, b in new]]).astype(np.int64)
    return int(run_n.sum())


def _bucket_widths(item_len, item_n, context, buckets):
    """Quantile buckets over the items; every row padded to its bucket's longest item."""
    cum = np.cumsum(item_n)
    total = int(cum[-1])
    # the same 'higher' quantiles make_plan uses: edge = the item at rank ceil(q * (n - 1))
    ranks = np.ceil(np.linspace(0, 1, buckets + 1)[1:] * (total - 1)).astype(np.int64)
    edges = np.unique(item_len[np.searchsorted(cum, ranks, side="right")])
    bucket = np.searchsorted(edges, item_len, side="left")
    return edges[bucket]    # each item length's row width


def plan_from_counts(counts, context: int, strategy: str, *, overlong: str = "split", buckets: int = 8,
                     batch_size: int = 32, loss_tokens=None) -> CountPlan:
    """One count-only strategy on ``{length: documents}`` or a ``LengthProfile``.

    The rows, slots and costs equal ``make_plan`` on the expanded lengths for pad,
    concat-cut, ffd and bfd. ``bucket`` pads every row to its bucket's longest
    document: an upper bound on the shuffled plan, whose batches are often narrower.
    ``docs_split`` counts only documents over the context (concat-cut also splits up
    to one document per row edge, depending on order).

    ``loss_tokens`` (``{length: trained tokens}``, or taken from a profile) gives the
    trained tokens; over-long documents lose their *last* tokens to truncation or
    dropping, and the answer comes last, so those are counted as lost from the loss.
    """
    context = as_context(context)
    choice("strategy", strategy, COUNT_STRATEGIES)
    choice("overlong policy", overlong, OVERLONG_POLICIES)
    lengths, n = _histogram(counts)
    if not len(lengths):
        raise ValueError("the length counts hold no documents; scan a non-empty corpus")
    item_len, item_n, lost, truncated, split, dropped = _items(lengths, n, context, overlong)
    if not len(item_len):
        raise ValueError(f"every document is longer than the context ({context}) and overlong='drop' dropped "
                         "them all; raise the context, or use overlong='split' or 'truncate'")
    real = int((item_len * item_n).sum())
    items = int(item_n.sum())
    if strategy == "pad":
        n_rows, widths_sq, slots = items, items * context * context, items * context
    elif strategy == "bucket":
        w = _bucket_widths(item_len, item_n, context, min(int(buckets), max(1, items // int(batch_size))))
        n_rows, slots, widths_sq = items, int((w * item_n).sum()), int((w * w * item_n).sum())
    else:
        if strategy == "concat-cut":
            n_rows = -(-real // context)
        else:
            n_rows = (_bfd_rows if strategy == "bfd" else _ffd_rows)(item_len, item_n, context)
        slots, widths_sq = n_rows * context, n_rows * context * context
    lower = -(-real // context)
    total = int((lengths * n).sum())
    m = PlanMetrics(
        strategy=strategy, context=context, documents=int(n.sum()), rows=n_rows, slots=slots,
        real_tokens=real, pad_tokens=slots - real, utilisation=real / slots, tokens_lost=total - real,
        tokens_truncated=lost if overlong == "truncate" else 0, docs_truncated=truncated, docs_dropped=dropped,
        docs_split=split, attention_cost_padded=widths_sq, attention_cost_packed=_packed_cost(item_len, item_n),
        linear_cost=slots, lower_bound_rows=lower, rows_over_lower_bound=n_rows / lower)
    trained = _trained(counts, lengths, n, context, overlong, loss_tokens, real)
    return CountPlan(m, "counts", trained, trained / slots)


def _packed_cost(item_len, item_n) -> int:
    # exact for every strategy but concat-cut, whose pieces depend on where the row edges fall
    return int((item_len * item_len * item_n).sum())


def _trained(counts, lengths, n, context, overlong, loss_tokens, real) -> int:
    if loss_tokens is None:
        loss_tokens = getattr(counts, "loss_tokens", None)
        if loss_tokens is None:
            return real                        # plain text: every placed token is trained
        loss = np.asarray(loss_tokens, np.int64)[np.asarray(counts.counts) > 0]
    else:
        loss = np.array([int(loss_tokens.get(int(k), loss_tokens.get(str(int(k)), 0))) for k in lengths], np.int64)
    over = lengths > context
    if overlong == "drop":
        return int(loss[~over].sum())
    if overlong == "truncate":   # the cut takes the last tokens: the answer's first
        return int(loss[~over].sum() + np.maximum(0, loss[over] - (lengths[over] - context) * n[over]).sum())
    return int(loss.sum())


def sampled_plan(counts, context: int, strategy: str, *, n: int = SAMPLE_DOCUMENTS, seed: int = 0,
                 overlong: str = "split", batch_size: int = 32) -> CountPlan:
    """An order-dependent strategy (next-fit, pad-longest) on a seeded random sample of the documents.

    >>> p = sampled_plan({100: 3000, 400: 1000}, 512, "next-fit", n=1000)
    >>> p.basis, p.metrics.documents
    ('sample of 1,000 documents (seed 0)', 1000)
    """
    choice("strategy", strategy, ORDER_STRATEGIES)
    lengths, counts_ = _histogram(counts)
    profile = LengthProfile(lengths, counts_)
    sample = profile.sample(n, seed)
    m = make_plan(sample, context, strategy, overlong=overlong, batch_size=batch_size, seed=seed).metrics()
    share = 1.0
    loss = getattr(counts, "loss_tokens", None)
    if loss is not None and counts.tokens:
        share = counts.trained_tokens / counts.tokens
    trained = int(round(m.real_tokens * share))
    whole = len(sample) == profile.documents
    basis = (f"all {len(sample):,} documents in a random order (seed {seed})" if whole
             else f"sample of {len(sample):,} documents (seed {seed})")
    return CountPlan(m, basis, trained, trained / m.slots,
                     note="depends on document order: measured on a seeded random order")


def compare_counts(counts, context: int, strategies=COUNT_STRATEGIES + ORDER_STRATEGIES, **kwargs) -> list[CountPlan]:
    """Every strategy on a profile: count-only ones exactly, order-dependent ones on a sample."""
    sample_args = {k: kwargs[k] for k in ("n", "seed", "overlong", "batch_size") if k in kwargs}
    count_args = {k: kwargs[k] for k in ("overlong", "buckets", "batch_size", "loss_tokens") if k in kwargs}
    return [plan_from_counts(counts, context, s, **count_args) if s in COUNT_STRATEGIES
            else sampled_plan(counts, context, s, **sample_args) for s in strategies]
