"""Which tiles of the block-diagonal causal mask a tiled kernel must compute (numpy only).

A tiled kernel (FlexAttention, a flash kernel) cuts the ``[T, T]`` score matrix into
``tile x tile`` squares and skips a square only when every cell in it is masked. Over
documents packed end to end, query tile ``i`` (tokens ``[i*tile, (i+1)*tile)``) reads
keys from the first token of the document it opens with up to its own last token, so it
touches one contiguous run of key tiles ``[first_kv[i], i]``. A touched tile is *full*
(no cell masked, the kernel skips the mask) when it lies strictly below the diagonal and
every token of both sides is one document; the others are *partial*::

    lengths [3, 9] -> cu_seqlens [0 3 12], tile 4: 3 x 3 tiles
            kv tile: 0 1 2
        q tile 0     P . .      tokens 0-3: documents 0 and 1
        q tile 1     P P .      tokens 4-7: document 1 reads back to token 3 (tile 0)
        q tile 2     P F P      tokens 8-11 read tokens 4-7: all document 1, all past

>>> s = tile_spans([0, 3, 12], 4)
>>> s.first_kv.tolist(), s.full_from.tolist(), s.touched, s.full
([0, 0, 0], [0, 1, 1], 6, 1)

Everything here costs one entry per query tile, never one per token pair: this is what
the ``flex`` backend builds its block mask from, and what :mod:`packing_core.analysis.costs`
counts as a tiled kernel's cells, so the bound and the kernel cannot disagree.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from packing_core._validate import InputError

DEFAULT_TILE = 128   # FlexAttention's default block size (torch's _DEFAULT_SPARSE_BLOCK_SIZE)

# What each correct backend computes: the bound it is judged by (padded is the baseline).
BOUND_LABELS = {
    "padded": "rows x context²",
    "dense": "packed rows x context²",
    "segments": "Σ len²",
    "varlen": "Σ len²",
    "flex": "causal tiles touched x tile²",
}


@dataclass(frozen=True)
class TileSpans:
    """Per query tile: the key tiles a document-causal tiled kernel computes.

    Query tile ``i`` computes key tiles ``first_kv[i] .. i``; of those, ``full_from[i] ..
    i - 1`` are full (every cell unmasked) and the rest partial. A query tile holding
    only tokens past ``cu_seqlens[-1]`` (a pad tail) computes nothing: ``first_kv[i] ==
    i + 1``.
    """

    tile: int
    total: int               # tokens the tiles cover (>= cu_seqlens[-1])
    first_kv: np.ndarray     # int64 [n_tiles]
    full_from: np.ndarray    # int64 [n_tiles], == i when no full tile in row i

    @property
    def n_tiles(self) -> int:
        return len(self.first_kv)

    @property
    def per_row(self) -> np.ndarray:
        """Tiles computed by each query tile."""
        return np.arange(self.n_tiles) + 1 - self.first_kv

    @property
    def full_per_row(self) -> np.ndarray:
        """Full (unmasked) tiles of each query tile."""
        return np.maximum(np.arange(self.n_tiles) - self.full_from, 0)

    @property
    def touched(self) -> int:
        """Tiles the kernel computes."""
        return int(self.per_row.sum())

    @property
    def full(self) -> int:
        return int(self.full_per_row.sum())

    @property
    def cells(self) -> int:
        """Cells the kernel computes: causal tiles touched x tile², the bound a tiled kernel is judged by."""
        return self.touched * self.tile ** 2

    def dense(self) -> np.ndarray:
        """``[n_tiles, n_tiles]`` int8: 0 skipped, 1 partial, 2 full (for pictures and tests)."""
        n = self.n_tiles
        i, j = np.arange(n)[:, None], np.arange(n)[None, :]
        touched = (j >= self.first_kv[:, None]) & (j <= i)
        full = (j >= self.full_from[:, None]) & (j < i)
        return (touched.astype(np.int8) + (touched & full)).astype(np.int8)

    def to_dict(self) -> dict:
        return {"tile": self.tile, "total": self.total, "n_tiles": self.n_tiles,
                "touched": self.touched, "full": self.full, "cells": self.cells}


def _check_tile(tile) -> int:
    if isinstance(tile, bool) or not isinstance(tile, (int, np.integer)) or tile < 1:
        raise InputError(f"tile must be a whole number of tokens >= 1, got {tile!r}: try {DEFAULT_TILE}")
    return int(tile)


def tile_spans(cu_seqlens, tile: int = DEFAULT_TILE, total: int | None = None) -> TileSpans:
    """The tiles a document-causal tiled kernel computes over ``cu_seqlens``, in O(tiles) work.

    ``total`` (default ``cu_seqlens[-1]``) is the sequence length the kernel runs on; tokens
    past ``cu_seqlens[-1]`` are a pad tail that attends to nothing real.

    >>> tile_spans([0, 128, 256], 128).touched        # two documents, one tile each
    2
    >>> tile_spans([0, 100, 200], 128).touched        # 100-token documents straddle a tile edge
    3
    """
    tile = _check_tile(tile)
    cu = np.asarray(cu_seqlens, dtype=np.int64).reshape(-1)
    end = int(cu[-1]) if len(cu) else 0
    if len(cu) < 2 or cu[0] != 0 or (np.diff(cu) < 0).any():
        raise InputError(f"cu_seqlens must rise from 0, got {cu[:8].tolist()}: build it as "
                         "[0, *cumsum(lengths)]")
    total = end if total is None else int(total)
    if total < end:
        raise InputError(f"total={total} is shorter than cu_seqlens[-1]={end}: pass total >= {end}")
    n = -(-total // tile)
    rows = np.arange(n, dtype=np.int64)
    start = rows * tile
    stop = np.minimum(start + tile, end)            # last real token + 1 of each query tile
    real = start < end
    # The document holding a token t is the last one starting at or before it
    # (searchsorted on the right skips empty documents, which start where the next does).
    first_doc = np.searchsorted(cu, np.minimum(start, max(end - 1, 0)), side="right") - 1
    last_doc = np.searchsorted(cu, np.maximum(stop - 1, 0), side="right") - 1
    first_kv = np.where(real, cu[first_doc] // tile, rows + 1)
    # A tile below the diagonal is full when its key tile starts inside the query tile's
    # last document and the query tile is all real tokens (no pad tail, no ragged end).
    whole = real & (start + tile <= end)
    full_from = np.where(whole, np.minimum(-(-cu[last_doc] // tile), rows), rows)
    return TileSpans(tile=tile, total=total, first_kv=first_kv, full_from=full_from)
