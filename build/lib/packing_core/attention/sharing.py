"""Where an implementation's reading lets documents meet, and what that reaches.

:func:`shared_attention` finds the queries that read a key of another intended document.
That alone does not say the numbers are wrong: a query's output changes, and so does the
output of every query that reads it in a later layer (:func:`reached`). Only positions whose
output is trained matter to the loss. A pad tail that reads the document before it changes
nothing any trained token reads; a prompt that reads another document changes the answer that
reads the prompt.

    >>> from packing_core.attention.semantics import effective_attention
    >>> t = BatchTensors(np.zeros((1, 6), int), position_ids=np.arange(6)[None])     # one causal triangle
    >>> eff = effective_attention(t, "sdpa")
    >>> shared = shared_attention(eff, np.array([[0, 0, 0, 1, 1, 1]]))
    >>> shared.queries.astype(int).tolist(), reached(eff, shared.queries).astype(int).tolist()
    ([[0, 0, 0, 1, 1, 1]], [[0, 0, 0, 1, 1, 1]])
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from packing_core.attention.masks import allowed
from packing_core.attention.semantics import BatchTensors, EffectiveAttention

MAX_HOPS = 256     # layers a change can travel through (deeper than any model's stack)


@dataclass(frozen=True)
class SharedAttention:
    """Real queries that read a key of another intended document (one ``[B, T]`` bool), with an example."""

    queries: np.ndarray = field(repr=False)
    example: tuple[int, int, int, int] | None      # (row, token) reads (key row, key token)

    @property
    def count(self) -> int:
        return int(self.queries.sum())

    @property
    def rows(self) -> tuple[int, ...]:
        return tuple(int(r) for r in np.flatnonzero(self.queries.any(1)))


def shared_attention(eff: EffectiveAttention, document_ids: np.ndarray) -> SharedAttention:
    """Where ``eff`` lets a query read a key of another document (``document_ids`` [B, T], -1 on pads).

    ``document_ids`` number the intended documents in flattened order, so within a contiguous
    segment the first readable real key holds the smallest document id: a query leaks exactly
    when that key's document is not its own.

    >>> from packing_core.attention.semantics import effective_attention
    >>> t = BatchTensors(np.zeros((1, 4), int), position_ids=np.array([[0, 1, 2, 3]]))
    >>> shared_attention(effective_attention(t, "sdpa"), np.array([[0, 0, 1, 1]])).example
    (0, 2, 0, 0)
    """
    docs = np.asarray(document_ids, dtype=np.int64)
    B, T = docs.shape
    real = docs >= 0
    if eff.dense is not None:
        reads_other = eff.dense & real[:, None, :] & (docs[:, None, :] != docs[:, :, None])
        queries = reads_other.any(-1) & real
        example = None
        if queries.any():
            r, i = np.argwhere(queries)[0]
            j = int(np.flatnonzero(reads_other[r, i])[0])
            example = (int(r), int(i), int(r), j)
        return SharedAttention(queries, example)
    seg = eff.segment_ids.reshape(-1)
    flat_docs = docs.reshape(-1)
    readable = (seg >= 0) & eff.key_ok.reshape(-1) & real.reshape(-1)
    first = np.full(B * T + 1, B * T, dtype=np.int64)     # per segment (shifted by 1): its first readable key
    idx = np.flatnonzero(readable)
    np.minimum.at(first, seg[idx] + 1, idx) if len(idx) else None
    key = first[np.where(seg >= 0, seg + 1, 0)]
    has_key = (key < B * T) & (key <= np.arange(B * T))
    queries = has_key & (seg >= 0) & real.reshape(-1) & (flat_docs[np.minimum(key, B * T - 1)] != flat_docs)
    example = None
    if queries.any():
        q = int(np.flatnonzero(queries)[0])
        k = int(key[q])
        example = (q // T, q % T, k // T, k % T)
    return SharedAttention(queries.reshape(B, T), example)


def reached(eff: EffectiveAttention, changed: np.ndarray) -> np.ndarray:
    """bool [B, T]: every token whose output a change at ``changed`` reaches, through the layers.

    A changed token changes every later query that reads it in the next layer, and so on. In a
    contiguous causal segment that is every token at or after the first changed one whose key is
    readable; a 4D reading is followed hop by hop (at most ``MAX_HOPS``, one per layer).
    """
    changed = np.asarray(changed, bool)
    B, T = changed.shape
    if not changed.any():
        return changed.copy()
    if eff.dense is not None:
        out = changed.copy()
        for _ in range(MAX_HOPS):
            nxt = out | (eff.dense & out[:, None, :]).any(-1)
            if np.array_equal(nxt, out):
                break
            out = nxt
        return out
    seg = eff.segment_ids.reshape(-1)
    flat = changed.reshape(-1)
    source = flat & (seg >= 0) & eff.key_ok.reshape(-1)
    first = np.full(B * T + 1, B * T, dtype=np.int64)
    idx = np.flatnonzero(source)
    np.minimum.at(first, seg[idx] + 1, idx) if len(idx) else None
    start = first[np.where(seg >= 0, seg + 1, 0)]
    return (flat | ((seg >= 0) & (np.arange(B * T) >= start))).reshape(B, T)


def skipped_tokens(eff: EffectiveAttention, real: np.ndarray) -> np.ndarray:
    """bool [B, T]: real tokens the kernel computes no output for (a varlen call that leaves them out)."""
    if eff.dense is not None:
        return np.zeros_like(real)
    return real & (eff.segment_ids < 0)


def future_reads(eff: EffectiveAttention, real: np.ndarray) -> np.ndarray:
    """bool [B, T]: real queries that read a later real key (only a 4D reading can let them).

    >>> t = BatchTensors(np.zeros((1, 3), int), attention_mask=allowed(np.zeros(3, int))[None, None])
    >>> from packing_core.attention.semantics import effective_attention
    >>> future_reads(effective_attention(t, "eager"), np.ones((1, 3), bool)).astype(int).tolist()
    [[1, 1, 0]]
    """
    if eff.dense is None:
        return np.zeros_like(real)
    T = real.shape[1]
    later = ~allowed(np.zeros(T, dtype=np.int64))           # keys after the query
    return (eff.dense & later & real[:, None, :]).any(-1) & real


def unreadable_queries(t: BatchTensors, real: np.ndarray) -> np.ndarray:
    """bool [B, T]: real queries that the 4D mask, as meant, lets read no key at all in some head."""
    if t.mask_4d is None:
        return np.zeros_like(real)
    empty = (~t.mask_4d).all(-1).any(1)                 # [B or 1, T]
    return np.broadcast_to(empty, real.shape) & real
