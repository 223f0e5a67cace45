"""Plan a corpus from its length counts alone: a billion documents in well under a second.

A strategy whose result depends only on the *multiset* of lengths has a ``from_counts``
function in the registry (``count_rows.py``), so it runs on ``{length: documents}`` without
one array entry per document. The over-long policy and the metrics are the array
planner's own (``pieces.py``, ``plan.plan_metrics``)::

    counts {300: 2, 200: 3}, context 512
    bfd: two rows [300 .] room 212 -> each takes one 200 -> room 12; one new row [200 200]
         3 rows, 1,200 tokens, utilisation 1200 / 1536 = 0.78

    >>> m = plan_from_counts({300: 2, 200: 3}, 512, "bfd").metrics
    >>> m.rows, m.slots, round(m.utilisation, 2)
    (3, 1536, 0.78)

A strategy without one (next-fit, pad-longest) depends on document order:
:func:`sampled_plan` runs it on a seeded sample of the documents, and says so
(``basis`` names the sample).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from packing_core._validate import (
    MAX_SPLIT_PIECES,
    OVERLONG_POLICIES,
    InputError,
    as_batch_size,
    as_context,
    choice,
    whole_number,
    whole_number_text,
)
from packing_core.data.profile import LengthProfile
from packing_core.packing.bounds import Bounds, bounds_from_lengths, row_bounds
from packing_core.packing.options import DEFAULT_TIME_LIMIT, PlanOptions, as_max_docs_per_row, as_time_limit
from packing_core.packing.pieces import histogram_arrays, kept_tokens, piece_histogram
from packing_core.packing.plan import PlanMetrics, plan_metrics
from packing_core.packing.registry import COUNT_STRATEGIES, ORDER_STRATEGIES, STRATEGIES, get_strategy
from packing_core.packing.strategies import make_plan

__all__ = ["COUNT_STRATEGIES", "ORDER_STRATEGIES", "SAMPLE_DOCUMENTS", "CapPrice", "CountPlan", "cap_price",
           "cap_prices", "compare_counts", "ordered_plan", "plan_from_counts", "sampled_plan"]

SAMPLE_DOCUMENTS = 200_000
IN_ORDER = "in the order given"   # the basis of a plan on a list of lengths in its order (report --lengths)


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
    certificate: object = None   # optimal: its Certificate (proven lower bound, gap in rows)
    bounds: Bounds | None = None  # L1, L2 and (when optimal ran beside it) LP of the documents it planned

    @property
    def strategy(self) -> str:
        return self.metrics.strategy

    @property
    def whole(self) -> bool:
        """Whether the plan holds every document: from the counts, or on the lengths in the order given."""
        return self.basis == "counts" or self.basis.endswith(IN_ORDER)

    @property
    def in_order(self) -> bool:
        return self.basis.endswith(IN_ORDER)

    def to_dict(self) -> dict:
        return {**self.metrics.to_dict(), "basis": self.basis, "trained_tokens": self.trained_tokens,
                "trained_per_slot": self.trained_per_slot, "note": self.note,
                "certificate": None if self.certificate is None else self.certificate.to_dict(),  # type: ignore[attr-defined]
                "bounds": None if self.bounds is None else self.bounds.to_dict()}


def plan_from_counts(counts, context: int, strategy: str, *, overlong: str = "split", buckets: int = 8,
                     batch_size: int = 32, loss_tokens=None, max_docs_per_row: int | None = None,
                     time_limit: float = DEFAULT_TIME_LIMIT) -> CountPlan:
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
    opts = PlanOptions(batch_size=as_batch_size(batch_size), buckets=whole_number(buckets, "buckets", hint="try 8"),
                       max_docs_per_row=as_max_docs_per_row(max_docs_per_row, context),
                       time_limit=as_time_limit(time_limit))
    lengths, n = histogram_arrays(counts)
    if not len(lengths):
        raise InputError("the length counts hold no documents; scan a non-empty corpus")
    piece_len, piece_n, (pieces, last) = piece_histogram(lengths, n, context, overlong)
    if not len(piece_len):
        raise InputError(f"every document is longer than the context ({context}) and overlong='drop' dropped "
                         "them all; raise the context, or use overlong='split' or 'truncate'")
    rows_of = get_strategy(strategy).from_counts
    assert rows_of is not None, "COUNT_STRATEGIES plan from counts"
    r = rows_of(piece_len, piece_n, context, opts)
    m = plan_metrics(strategy, context, lengths, kept_tokens(pieces, last, context), pieces, counts=n,
                     rows=r.rows, slots=r.slots, cost_padded=r.cost_padded,
                     cost_packed=_packed_cost(piece_len, piece_n))
    trained = _trained(counts, lengths, n, context, overlong, loss_tokens, m.real_tokens)
    lp = getattr(r.certificate, "lp", None)
    return CountPlan(m, "counts", trained, trained / r.slots, certificate=r.certificate,
                     bounds=row_bounds(piece_len, piece_n, context, max_docs_per_row=opts.max_docs_per_row, lp=lp))


def _packed_cost(piece_len, piece_n) -> int:
    # exact for every strategy but concat-cut, whose pieces depend on where the row edges fall
    return int((piece_len * piece_len * piece_n).sum())


def _trained(counts, lengths, n, context, overlong, loss_tokens, real) -> int:
    if loss_tokens is None:
        loss_tokens = getattr(counts, "loss_tokens", None)
        if loss_tokens is None:
            return real                        # plain text: every placed token is trained
        loss = np.asarray(loss_tokens, np.int64)[np.asarray(counts.counts) > 0]
    else:
        loss = _checked_loss(loss_tokens, lengths, n)
    over = lengths > context
    if overlong == "drop":
        return int(loss[~over].sum())
    if overlong == "truncate":   # the cut takes the last tokens: the answer's first
        return int(loss[~over].sum() + np.maximum(0, loss[over] - (lengths[over] - context) * n[over]).sum())
    return int(loss.sum())


def _checked_loss(loss_tokens, lengths: np.ndarray, n: np.ndarray) -> np.ndarray:
    """``{length: trained tokens}`` as an array beside ``lengths``: whole numbers from 0 to the tokens of that length."""
    if not isinstance(loss_tokens, dict):
        raise InputError(f"loss_tokens are {{length: trained tokens}}, got {type(loss_tokens).__name__}")
    given = {whole_number_text(k): v for k, v in loss_tokens.items()}
    if None in given:
        raise InputError(f"loss_tokens hold a length that is not a whole number ({next(iter(loss_tokens))!r}); "
                         "give {length: trained tokens}")
    out = []
    for length, docs in zip(lengths.tolist(), n.tolist()):
        out.append(whole_number(given.get(length, 0), f"trained tokens of length {length:,}", minimum=0,
                                maximum=length * docs, hint=f"{docs:,} documents of {length:,} tokens hold "
                                                            f"{length * docs:,} tokens, the most the loss can train"))
    return np.array(out, np.int64).reshape(-1)


def sampled_plan(counts, context: int, strategy: str, *, n: int = SAMPLE_DOCUMENTS, seed: int = 0,
                 overlong: str = "split", batch_size: int = 32, max_docs_per_row: int | None = None) -> CountPlan:
    """A strategy without a ``from_counts`` (next-fit, pad-longest) on a seeded random sample of the documents.

    >>> p = sampled_plan({100: 3000, 400: 1000}, 512, "next-fit", n=1000)
    >>> p.basis, p.metrics.documents
    ('sample of 1,000 documents (seed 0)', 1000)
    """
    choice("strategy", strategy, ORDER_STRATEGIES)
    lengths, counts_ = histogram_arrays(counts)
    profile = LengthProfile(lengths, counts_)
    sample = profile.sample(n, seed)
    if overlong == "split":   # a sample of long documents splits into pieces too: keep the prefix a plan may hold
        extra = np.cumsum(-(-sample // as_context(context)) - 1)
        sample = sample[: max(1, int(np.searchsorted(extra, MAX_SPLIT_PIECES, side="right")))]
    m = make_plan(sample, context, strategy, overlong=overlong, batch_size=batch_size, seed=seed,
                  max_docs_per_row=max_docs_per_row).metrics()
    bounds = bounds_from_lengths(sample, context, overlong=overlong, max_docs_per_row=max_docs_per_row)
    share = 1.0
    loss = getattr(counts, "loss_tokens", None)
    if loss is not None and counts.tokens:
        share = counts.trained_tokens / counts.tokens
    trained = int(round(m.real_tokens * share))
    whole = len(sample) == profile.documents
    basis = (f"all {len(sample):,} documents in a random order (seed {seed})" if whole
             else f"sample of {len(sample):,} documents (seed {seed})")
    return CountPlan(m, basis, trained, trained / m.slots,
                     note="depends on document order: measured on a seeded random order", bounds=bounds)


def ordered_plan(lengths, context: int, strategy: str, *, overlong: str = "split", batch_size: int = 32, seed: int = 0,
                 max_docs_per_row: int | None = None, time_limit: float = DEFAULT_TIME_LIMIT) -> CountPlan:
    """A strategy on every document in the order given (``report --lengths``), planned on the array: no sample.

    Where the order is known, ``compare_counts`` plans every strategy this way: the order decides
    which document concat-cut splits and what next-fit and pad-longest do, and the plan is exact.

    >>> p = ordered_plan([300, 300, 100], 512, "next-fit")
    >>> p.basis, p.metrics.rows
    ('all 3 documents in the order given', 2)
    """
    choice("strategy", strategy, tuple(STRATEGIES))
    lengths = np.asarray(lengths, dtype=np.int64)
    plan = make_plan(lengths, context, strategy, overlong=overlong, batch_size=batch_size, seed=seed,
                     max_docs_per_row=max_docs_per_row, time_limit=time_limit)
    m = plan.metrics()
    bounds = bounds_from_lengths(lengths, context, overlong=overlong, max_docs_per_row=max_docs_per_row)
    certificate = plan.certificate
    lp = getattr(certificate, "lp", None)
    if lp is not None:
        bounds = replace(bounds, lp=lp)
    return CountPlan(m, f"all {len(lengths):,} documents {IN_ORDER}", m.real_tokens,
                     m.real_tokens / m.slots, note="planned on the lengths in the order given", bounds=bounds,
                     certificate=certificate)


def compare_counts(counts, context: int, strategies=None, *, order=None, **kwargs) -> list[CountPlan]:
    """Every strategy on a profile: count-only ones exactly, order-dependent ones on a sample, or on
    ``order`` (the documents' lengths in their order, as ``report --lengths`` gives them) when given.

    ``strategies`` defaults to the count-only ones, then the order-dependent ones. The LP bound
    that ``optimal`` proves holds for every plan of the same documents: each plan from the
    counts carries it in its ``bounds`` (a sampled plan keeps its sample's own bounds).
    """
    strategies = COUNT_STRATEGIES + ORDER_STRATEGIES if strategies is None else strategies
    sample_args = {k: kwargs[k] for k in ("n", "seed", "overlong", "batch_size", "max_docs_per_row") if k in kwargs}
    count_args = {k: kwargs[k] for k in ("overlong", "buckets", "batch_size", "loss_tokens", "max_docs_per_row",
                                         "time_limit") if k in kwargs}
    if order is not None:       # the order is known: every plan on the array, exactly
        order_args: dict = {k: v for k, v in sample_args.items() if k != "n"}
        order_args["time_limit"] = count_args.get("time_limit", DEFAULT_TIME_LIMIT)
        ordered = [ordered_plan(order, context, s, **order_args) for s in strategies]
        lp = next((p.bounds.lp for p in ordered if p.bounds and p.bounds.lp), None)
        return [replace(p, bounds=replace(p.bounds, lp=lp)) if lp is not None and p.bounds else p for p in ordered]
    plans = [plan_from_counts(counts, context, s, **count_args) if s in COUNT_STRATEGIES
             else sampled_plan(counts, context, s, **sample_args) for s in strategies]
    lp = next((p.bounds.lp for p in plans if p.basis == "counts" and p.bounds and p.bounds.lp), None)
    if lp is None:
        return plans
    return [replace(p, bounds=replace(p.bounds, lp=lp)) if p.basis == "counts" and p.bounds else p for p in plans]


@dataclass(frozen=True)
class CapPrice:
    """What a cap on documents per row costs one strategy: rows with and without it."""

    strategy: str
    max_docs_per_row: int
    rows: int
    rows_uncapped: int

    @property
    def extra_rows(self) -> int:
        return self.rows - self.rows_uncapped

    @property
    def extra_share(self) -> float:
        """Extra rows as a share of the uncapped plan (0.02 is 2 % more rows)."""
        return self.extra_rows / self.rows_uncapped if self.rows_uncapped else 0.0

    def to_dict(self) -> dict:
        return {"strategy": self.strategy, "max_docs_per_row": self.max_docs_per_row, "rows": self.rows,
                "rows_uncapped": self.rows_uncapped, "extra_rows": self.extra_rows, "extra_share": self.extra_share}


def _rows_with_cap(data, context: int, strategy: str, **kwargs):
    """``cap -> rows`` of ``strategy`` on lengths (``make_plan``) or on counts (``plan_from_counts``)."""
    if isinstance(data, dict) or hasattr(data, "counts"):
        return lambda cap: plan_from_counts(data, context, strategy, max_docs_per_row=cap, **kwargs).metrics.rows
    return lambda cap: make_plan(data, context, strategy, max_docs_per_row=cap, **kwargs).n_rows


def cap_price(data, context: int, strategy: str, max_docs_per_row: int, **kwargs) -> CapPrice:
    """Rows of ``strategy`` with ``max_docs_per_row`` and without: lengths (a list or array) are planned
    by ``make_plan``, ``{length: documents}`` or a ``LengthProfile`` from counts.

    >>> c = cap_price([10] * 9, 512, "bfd", 4)
    >>> c.rows, c.rows_uncapped, c.extra_rows
    (3, 1, 2)
    """
    return cap_prices(data, context, strategy, (max_docs_per_row,), **kwargs)[0]


def cap_prices(data, context: int, strategy: str, caps, **kwargs) -> tuple[CapPrice, ...]:
    """:func:`cap_price` for several caps, the plan without a cap made once.

    >>> [c.rows for c in cap_prices([10] * 9, 512, "bfd", (1, 3, 9))]
    [9, 3, 1]
    """
    rows = _rows_with_cap(data, context, strategy, **kwargs)
    capped = [(int(cap), rows(cap)) for cap in caps]      # each cap checked (and refused) before the free plan
    free = rows(None)
    return tuple(CapPrice(strategy, cap, r, free) for cap, r in capped)
