"""Length statistics and histograms: what a dataset's lengths look like against a context.

>>> s = length_stats([120, 90, 300], 256)
>>> s.count, s.mean, s.max, s.over_context
(3, 170.0, 300, 1)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from packing_core._validate import MAX_DOCUMENTS, as_context, as_lengths, whole_number


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


def length_stats(lengths, context: int) -> LengthStats:
    """``length_stats([120, 90, 300], 256)`` -> count 3, mean 170.0, p50 120, max 300, over 1."""
    x = as_lengths(lengths)
    context = as_context(context)
    over = x > context
    p50, p95 = np.percentile(x, [50, 95])
    return LengthStats(
        count=int(len(x)), tokens=int(x.sum()), mean=float(x.mean()), p50=float(p50),
        p95=float(p95), max=int(x.max()), context=int(context), over_context=int(over.sum()),
        share_over=float(over.mean()), tokens_over=int((x[over] - context).sum()),
    )


@dataclass(frozen=True)
class Histogram:
    """Counts of lengths in equal-width bins; the last bin also holds everything beyond it."""

    edges: np.ndarray   # float64 [bins + 1]
    counts: np.ndarray  # int64 [bins]
    context: int
    clipped: int        # documents counted in the last bin although longer than its edge


def length_histogram(lengths, context: int, bins: int = 60) -> Histogram:
    """About ``bins`` bins up to ``max(1.25 x context, p99)`` (a long tail would squash the picture).

    One edge sits at ``context + 0.5``, so a bin holds either documents that fit or documents
    longer than the context, never both. Built from ``np.histogram``: 200,000 lengths become
    a few dozen numbers, not 200,000 points. Whatever the data, there are at most
    ``2 x bins`` bins: below the context and beyond it, each side has equal widths.

    >>> h = length_histogram([5, 10**9], 512)   # one huge document: still a few bins
    >>> len(h.counts) <= 120, int(h.counts.sum())
    (True, 2)
    """
    x = as_lengths(lengths)
    bins = whole_number(bins, "bins", maximum=1000, hint="try 60")
    context = as_context(context)
    longest = int(x.max())
    if longest <= context:      # everything fits: bins of at least one token up to the longest
        top = longest
        width = max(1.0, top / bins)
        edges = 0.5 + width * np.arange(int(np.ceil(top / width)) + 1)
    else:
        top = min(longest, max(1.25 * context, float(np.percentile(x, 99))))
        below = min(context, max(1, round(bins * context / top)))   # bins up to the context
        width = context / below
        beyond = max(1, min(bins, int(np.ceil((top - context) / width))))  # a far tail: wider bins
        edges = np.concatenate([0.5 + width * np.arange(below + 1),
                                np.linspace(context + 0.5, max(top, context + 1) + 0.5, beyond + 1)[1:]])
    counts, edges = np.histogram(np.clip(x, edges[0], edges[-1]), bins=edges)
    return Histogram(edges=edges, counts=counts.astype(np.int64), context=int(context),
                     clipped=int((x > edges[-1]).sum()))


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
        raise ValueError(f"batch_size must be at least 2 to show an outlier, got {batch_size}")
    rng = np.random.default_rng(seed)
    short = np.clip(np.rint(rng.lognormal(np.log(60), 0.3, batch_size)), 8, outlier // 2).astype(np.int64)
    with_outlier = short.copy()
    with_outlier[int(rng.integers(batch_size))] = outlier
    return short, with_outlier

