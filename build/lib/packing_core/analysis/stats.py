"""Length statistics and histograms: what a dataset's lengths look like against a context.

>>> s = length_stats([120, 90, 300], 256)
>>> s.count, s.mean, s.max, s.over_context
(3, 170.0, 300, 1)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from packing_core._validate import MAX_DOCUMENTS, InputError, as_context, as_lengths, whole_number


@dataclass(frozen=True)
class LengthStats:
    """Summary of a length distribution against a context."""

    count: int
    tokens: int
    mean: float
    p50: float
    p95: float
    max: int
    context: int
    over_context: int      # documents longer than the context
    share_over: float      # over_context / count
    tokens_over: int       # tokens beyond the context in those documents (lost if truncated)


def _counts(x: np.ndarray, counts) -> np.ndarray:
    """Documents per entry of ``x``: one each, or the counts of a profile (distinct lengths)."""
    if counts is None:
        return np.ones(len(x), np.int64)
    n = np.asarray(counts, dtype=np.int64)
    if n.shape != x.shape or (n < 0).any() or n.sum() < 1:
        raise InputError(f"counts must be one whole number >= 0 per length, summing to at least 1; "
                         f"got {n.shape[0] if n.ndim else n} counts for {len(x)} lengths")
    return n


def _weighted_percentile(x: np.ndarray, n: np.ndarray, q: float) -> float:
    """The q-th percentile of ``x`` repeated ``n`` times, as ``np.percentile`` (linear) would give it."""
    order = np.argsort(x, kind="stable")
    xs, cum = x[order], np.cumsum(n[order])
    rank = q / 100 * (int(cum[-1]) - 1)                 # numpy's linear method: between two ranks
    lo, hi = int(np.floor(rank)), int(np.ceil(rank))
    a, b = xs[np.searchsorted(cum, lo, side="right")], xs[np.searchsorted(cum, hi, side="right")]
    return float(a + (b - a) * (rank - lo))


def length_stats(lengths, context: int, counts=None) -> LengthStats:
    """``length_stats([120, 90, 300], 256)`` -> count 3, mean 170.0, p50 120, max 300, over 1.

    With ``counts`` (a profile's documents per distinct length) the same numbers come from
    the counts, without one entry per document:

    >>> length_stats([120, 300], 256, counts=[2, 1]) == length_stats([120, 120, 300], 256)
    True
    """
    x = as_lengths(lengths)
    context = as_context(context)
    n = _counts(x, counts)
    over = x > context
    docs = int(n.sum())
    if counts is None:
        p50, p95 = np.percentile(x, [50, 95])
    else:
        p50, p95 = (_weighted_percentile(x, n, q) for q in (50, 95))
    tokens = int((x * n).sum())
    return LengthStats(
        count=docs, tokens=tokens, mean=tokens / docs, p50=float(p50),
        p95=float(p95), max=int(x[n > 0].max()), context=int(context), over_context=int(n[over].sum()),
        share_over=float(n[over].sum() / docs), tokens_over=int(((x[over] - context) * n[over]).sum()),
    )


@dataclass(frozen=True)
class Histogram:
    """Counts of lengths in equal-width bins; the last bin also holds everything beyond it."""

    edges: np.ndarray   # float64 [bins + 1]
    counts: np.ndarray  # int64 [bins]
    context: int
    clipped: int        # documents counted in the last bin although longer than its edge


def length_histogram(lengths, context: int, bins: int = 60, counts=None) -> Histogram:
    """About ``bins`` bins up to ``max(1.25 x context, p99)`` (a long tail would squash the picture).

    One edge sits at ``context + 0.5``, so a bin holds either documents that fit or documents
    longer than the context, never both. Built from ``np.histogram``: 200,000 lengths become
    a few dozen numbers, not 200,000 points. Whatever the data, there are at most
    ``2 x bins`` bins: below the context and beyond it, each side has equal widths.

    >>> h = length_histogram([5, 10**9], 512)   # one huge document: still a few bins
    >>> len(h.counts) <= 120, int(h.counts.sum())
    (True, 2)

    ``counts`` weighs each length by its documents (a profile's counts).
    """
    x = as_lengths(lengths)
    n = _counts(x, counts)
    if counts is not None:
        x, n = x[n > 0], n[n > 0]
    bins = whole_number(bins, "bins", maximum=1000, hint="try 60")
    context = as_context(context)
    longest = int(x.max())
    if longest <= context:      # everything fits: bins of at least one token up to the longest
        top = longest
        width = max(1.0, top / bins)
        edges = 0.5 + width * np.arange(int(np.ceil(top / width)) + 1)
    else:
        p99 = float(np.percentile(x, 99)) if counts is None else _weighted_percentile(x, n, 99)
        top = min(longest, max(1.25 * context, p99))
        below = min(context, max(1, round(bins * context / top)))   # bins up to the context
        width = context / below
        beyond = max(1, min(bins, int(np.ceil((top - context) / width))))  # a far tail: wider bins
        edges = np.concatenate([0.5 + width * np.arange(below + 1),
                                np.linspace(context + 0.5, max(top, context + 1) + 0.5, beyond + 1)[1:]])
    hist, edges = np.histogram(np.clip(x, edges[0], edges[-1]), bins=edges, weights=None if counts is None else n)
    return Histogram(edges=edges, counts=hist.astype(np.int64), context=int(context),
                     clipped=int(n[x > edges[-1]].sum()))


def sample_lengths(lengths, n: int, seed: int = 0) -> np.ndarray:
    """``n`` lengths drawn at random (with replacement) from a dataset: a small batch to look at."""
    x = as_lengths(lengths)
    n = whole_number(n, "n", maximum=MAX_DOCUMENTS, hint="try 32")
    return np.random.default_rng(seed).choice(x, size=int(n), replace=True)


def outlier_lengths(batch_size: int = 32, outlier: int = 500, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """TEACHING 3: one batch of short samples (~60 tokens), without and with one long outlier.

    ``pad-longest`` pads every row to the batch's longest, so the outlier stretches all rows.
    """
    if batch_size < 2:
        raise InputError(f"batch_size must be at least 2 to show an outlier, got {batch_size}")
    rng = np.random.default_rng(seed)
    short = np.clip(np.rint(rng.lognormal(np.log(60), 0.3, batch_size)), 8, outlier // 2).astype(np.int64)
    with_outlier = short.copy()
    with_outlier[int(rng.integers(batch_size))] = outlier
    return short, with_outlier

