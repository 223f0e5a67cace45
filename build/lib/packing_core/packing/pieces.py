"""The over-long policy, once: documents -> *pieces* no longer than the context.

One rule serves both planners: :func:`overlong_pieces` says, for each length, how many
pieces it becomes and how long the last one is (every other piece is a full context).
Arrays of lengths expand that into one entry per piece (:func:`pieces_from_lengths`);
a length histogram turns it into a piece histogram (:func:`piece_histogram`)::

    context 4, lengths [6, 3]
      split    -> pieces (doc0 0:4) (doc0 4:6) (doc1 0:3)     doc0 split, nothing lost
      truncate -> pieces (doc0 0:4) (doc1 0:3)                2 tokens lost
      drop     -> pieces (doc1 0:3)                           doc0 dropped, 6 tokens lost

>>> n, last = overlong_pieces(np.array([6, 3]), 4, "split")
>>> n.tolist(), last.tolist()
([2, 1], [2, 3])
>>> overlong_pieces(np.array([6, 3]), 4, "drop")[0].tolist()
[0, 1]
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from packing_core._validate import (
    MAX_DOCUMENTS,
    MAX_LENGTH,
    MAX_TOTAL_TOKENS,
    OVERLONG_POLICIES,
    InputError,
    whole_number,
    whole_number_text,
)

__all__ = ["OVERLONG_POLICIES", "Pieces", "histogram_arrays", "kept_tokens", "overlong_pieces", "piece_count",
           "piece_histogram", "pieces_from_lengths"]


def overlong_pieces(lengths: np.ndarray, context: int, overlong: str) -> tuple[np.ndarray, np.ndarray]:
    """``(pieces, last)`` per length: how many pieces it becomes, and the last piece's length.

    All pieces but the last are ``context`` long; ``pieces == 0`` means dropped.
    """
    if overlong == "split":
        n = -(-lengths // context)
        return n, lengths - (n - 1) * context
    if overlong == "truncate":
        return np.ones_like(lengths), np.minimum(lengths, context)
    keep = lengths <= context
    return keep.astype(np.int64), np.where(keep, lengths, 0)


def piece_count(lengths, context: int, overlong: str = "split") -> int:
    """How many pieces ``lengths`` become at ``context``, counted before any piece is made: a caller
    checks its budget first, so a document of 10^9 tokens costs nothing to refuse.

    >>> piece_count([6, 3], 4), piece_count([6, 3], 4, "drop"), piece_count([10**9] * 16, 1)
    (3, 1, 16000000000)
    """
    n, _ = overlong_pieces(np.asarray(lengths, dtype=np.int64), int(context), overlong)
    return int(n.sum(dtype=np.float64))    # a float sum: 2^30 documents of 2^40 tokens (the limits) wrap an int64


def kept_tokens(pieces: np.ndarray, last: np.ndarray, context: int) -> np.ndarray:
    """Tokens of each length that reach a row under the policy (0 when dropped)."""
    return np.where(pieces > 0, (pieces - 1) * context + last, 0)


@dataclass(frozen=True)
class Pieces:
    """One entry per piece: which document, where in it the piece starts, and how long it is."""

    doc: np.ndarray
    start: np.ndarray
    length: np.ndarray


def pieces_from_lengths(lengths: np.ndarray, context: int, overlong: str) -> Pieces:
    """The pieces of an array of lengths, in document order.

    >>> it = pieces_from_lengths(np.array([6, 3]), 4, "split")
    >>> it.doc.tolist(), it.start.tolist(), it.length.tolist()
    ([0, 0, 1], [0, 4, 0], [4, 2, 3])
    """
    n, _ = overlong_pieces(lengths, context, overlong)
    doc = np.repeat(np.arange(len(lengths), dtype=np.int64), n)
    if overlong != "split":   # one piece per kept document, from its start
        return Pieces(doc, np.zeros(len(doc), np.int64), np.minimum(lengths[doc], context))
    first = np.repeat(np.cumsum(n) - n, n)
    start = (np.arange(len(doc), dtype=np.int64) - first) * context
    return Pieces(doc, start, np.minimum(context, lengths[doc] - start))


def piece_histogram(lengths: np.ndarray, counts: np.ndarray, context: int, overlong: str):
    """``(piece lengths ascending, pieces of each)`` of a length histogram, and per length ``(pieces, last)``.

    >>> piece_len, piece_n, _ = piece_histogram(np.array([3, 6]), np.array([2, 1]), 4, "split")
    >>> piece_len.tolist(), piece_n.tolist()
    ([2, 3, 4], [1, 2, 1])
    """
    pieces, last = overlong_pieces(lengths, context, overlong)
    kept = pieces > 0
    full = int(((pieces[kept] - 1) * counts[kept]).sum())
    piece_len = np.concatenate([last[kept], [context]])
    piece_n = np.concatenate([counts[kept], [full]])
    # equal piece lengths (a split remainder equal to a short document) become one entry
    uniq, inv = np.unique(piece_len, return_inverse=True)
    piece_n = np.bincount(inv, weights=piece_n).astype(np.int64)
    keep = piece_n > 0
    return uniq[keep], piece_n[keep], (pieces, last)


def _checked_counts(counts: dict) -> tuple[np.ndarray, np.ndarray]:
    """``{length: documents}`` as two int64 arrays (lengths ascending), every value and the totals checked."""
    fix = "give {length: documents} with whole numbers, e.g. {300: 2, 200: 3}"
    pairs = []
    for k, v in counts.items():
        length = whole_number_text(k)
        if length is None or not 1 <= length <= MAX_LENGTH:
            raise InputError(f"length {str(k)[:40]!r} is not a whole number from 1 to {MAX_LENGTH:,}; {fix}")
        pairs.append((length, whole_number(v, f"documents of length {length:,}", minimum=0, maximum=MAX_DOCUMENTS,
                                           hint=fix)))
    pairs.sort()
    if any(a[0] == b[0] for a, b in zip(pairs, pairs[1:])):
        raise InputError(f"the counts hold one length twice (as 7 and '7', say); {fix}")
    documents, tokens = sum(n for _, n in pairs), sum(k * n for k, n in pairs)
    if documents > MAX_DOCUMENTS or tokens > MAX_TOTAL_TOKENS:
        raise InputError(f"the counts hold {documents:,} documents and {tokens:,} tokens, more than the lab accepts "
                         f"({MAX_DOCUMENTS:,} documents, {MAX_TOTAL_TOKENS:,} tokens); plan a sample or a shard")
    return (np.array([k for k, _ in pairs], dtype=np.int64).reshape(-1),
            np.array([n for _, n in pairs], dtype=np.int64).reshape(-1))


def histogram_arrays(counts) -> tuple[np.ndarray, np.ndarray]:
    """``(lengths ascending, documents of each)`` of ``{length: documents}`` or a ``LengthProfile``.

    >>> [a.tolist() for a in histogram_arrays({300: 2, 200: 0, 100: 1})]
    [[100, 300], [1, 2]]

    Keys are whole numbers (or their text, as JSON writes them) from 1 to ``MAX_LENGTH``, counts whole
    numbers from 0 to ``MAX_DOCUMENTS``, and the whole within ``MAX_DOCUMENTS`` documents and
    ``MAX_TOTAL_TOKENS`` tokens (so no sum wraps): a 2.5-token length, 2.7 documents or ``{4: 2**62}``
    are refused in one line.

    >>> histogram_arrays({4: 2**62})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    packing_core._validate.InputError: documents of length 4 must be at most 1,073,741,824, got 4,611,686,018,427,387,904...
    """
    if isinstance(counts, dict):
        lengths, n = _checked_counts(counts)
    elif hasattr(counts, "lengths") and hasattr(counts, "counts"):   # a LengthProfile: checked when it was made
        lengths, n = np.asarray(counts.lengths, np.int64), np.asarray(counts.counts, np.int64)
    else:
        raise InputError(f"length counts are {{length: documents}} or a LengthProfile, got {type(counts).__name__}; "
                         "for a list of lengths use make_plan")
    keep = n > 0
    if (n < 0).any() or (lengths[keep] < 1).any():
        raise InputError("length counts must be >= 0 and lengths >= 1; pass {length: documents}")
    return lengths[keep], n[keep]
