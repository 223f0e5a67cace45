"""The longest documents: what they cost a varlen batch, and which positions they alone train.

**Cost.** A varlen kernel computes one square per document piece, so a batch's attention is
Σ len²: a few long documents hold most of it. ``max_seqlen`` (the longest piece) sizes the
kernel's launch: flash-attn's ``run_flash_fwd`` (``csrc/flash_attn/src/flash_fwd_launch_template.h``)
starts ``ceil(max_seqlen / kBlockM)`` query blocks for *every* document of the batch, and the blocks
past a shorter document's end return at once.

**Positions.** With positions reset per document, position p is trained only by documents longer
than p: at long context the large positions see few tokens. Without resets (GPT-3's
concatenation; Megatron-LM's ``--reset-position-ids`` is off by default) every full row trains
every position up to the context once.

>>> from packing_core.packing.strategies import make_plan
>>> lengths = [40] * 98 + [400, 500]
>>> share = longest_share(make_plan(lengths, 512, "bfd"))
>>> round(share.top_tokens[0], 3), round(share.top_cells[0], 3)      # the longest 1 % of the pieces
(0.104, 0.441)
>>> t = trained_positions(make_plan(lengths, 512, "bfd"), bins=4)
>>> t.edges.tolist(), t.reset.tolist(), t.continuous.tolist()
([0, 128, 256, 384, 512], [4176, 256, 256, 132], [1280, 1280, 1280, 980])
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from packing_core._validate import whole_number
from packing_core.packing.plan import Plan

TOP = (0.01, 0.1)    # the longest 1 % and 10 % of the pieces


@dataclass(frozen=True, eq=False)
class LongestShare:
    """How much of a plan's attention its longest pieces hold, and each batch's ``max_seqlen``."""

    strategy: str
    pieces: int
    top: tuple[float, ...]            # shares of the pieces, longest first (TOP)
    top_tokens: tuple[float, ...]     # their share of the tokens
    top_cells: tuple[float, ...]      # their share of Σ len² (full squares)
    rows_per_batch: int
    batch_max_seqlen: np.ndarray      # int [batches]: the longest piece of each batch of rows
    batch_mean_len: np.ndarray        # float [batches]: the mean piece length of each batch
    mean_piece: float                 # the mean piece length over the plan

    @property
    def sentence(self) -> str:
        """The numbers in words."""
        parts = [f"the longest {t:.0%} of the pieces hold {k:.0%} of the tokens but {c:.0%} of Σ len²"
                 for t, k, c in zip(self.top, self.top_tokens, self.top_cells)]
        m = self.batch_max_seqlen
        return (f"In the {self.strategy} rows of this data, " + "; ".join(parts) + ". Over batches of "
                f"{self.rows_per_batch} rows, max_seqlen runs from {int(m.min()):,} to {int(m.max()):,} tokens "
                f"(median {int(np.median(m)):,}) while the mean piece is {self.mean_piece:.0f} tokens. A varlen "
                "kernel's launch grid is sized by max_seqlen, one row of query blocks per document (blocks past a "
                "short document's end exit at once); the work is Σ len², and the longest pieces hold most of it.")

    def to_dict(self) -> dict:
        return {"strategy": self.strategy, "pieces": self.pieces, "top": list(self.top),
                "top_tokens": list(self.top_tokens), "top_cells": list(self.top_cells),
                "rows_per_batch": self.rows_per_batch, "batch_max_seqlen": self.batch_max_seqlen.tolist(),
                "sentence": self.sentence}


def longest_share(plan: Plan, rows_per_batch: int = 32, top=TOP) -> LongestShare:
    """The share of tokens and of Σ len² in the longest pieces of ``plan``, and ``max_seqlen`` per batch."""
    rows_per_batch = whole_number(rows_per_batch, "rows_per_batch", hint="rows per batch, e.g. 32")
    pieces = np.sort(plan.piece_len.astype(np.int64))[::-1]
    tokens, cells = np.cumsum(pieces), np.cumsum(pieces.astype(np.float64) ** 2)
    n = len(pieces)
    take = [max(1, int(np.ceil(t * n))) for t in top]
    batch = plan.piece_row // rows_per_batch
    nb = int(batch.max()) + 1 if n else 0
    longest = np.zeros(nb, dtype=np.int64)
    np.maximum.at(longest, batch, plan.piece_len)
    count = np.bincount(batch, minlength=nb)
    mean = np.bincount(batch, weights=plan.piece_len, minlength=nb) / np.maximum(count, 1)
    return LongestShare(plan.strategy, n, tuple(top), tuple(float(tokens[k - 1] / tokens[-1]) for k in take),
                        tuple(float(cells[k - 1] / cells[-1]) for k in take), rows_per_batch, longest, mean,
                        float(pieces.mean()) if n else 0.0)


@dataclass(frozen=True, eq=False)
class TrainedPositions:
    """Tokens trained at each position bin: positions reset per document, or counting along the row."""

    context: int
    edges: np.ndarray        # int [bins + 1]: position bins [edges[i], edges[i+1])
    reset: np.ndarray        # int [bins]: tokens at these positions, positions restarting per piece
    continuous: np.ndarray   # int [bins]: tokens at these positions, positions counting along each row

    @property
    def sentence(self) -> str:
        half = len(self.edges) // 2
        lo = int(self.edges[half])
        r, c = int(self.reset[half:].sum()), int(self.continuous[half:].sum())
        total = int(self.reset.sum())
        return (f"Positions {lo:,} to {self.context - 1:,}: {r:,} trained tokens with positions reset per document "
                f"({r / total:.2%} of all), {c:,} with positions counting along the row ({c / total:.2%}). With "
                f"resets, only the documents longer than {lo:,} tokens teach those positions; without them, every "
                "full row trains every position up to the context.")

    def to_dict(self) -> dict:
        return {"context": self.context, "edges": self.edges.tolist(), "reset": self.reset.tolist(),
                "continuous": self.continuous.tolist(), "sentence": self.sentence}


def trained_positions(plan: Plan, bins: int = 16) -> TrainedPositions:
    """Trained tokens per position bin of ``plan``, with positions reset per piece and continuous per row.

    Vectorised over the distinct lengths, not the tokens.
    """
    bins = whole_number(bins, "bins", maximum=512)
    context = int(plan.context)
    edges = np.unique(np.linspace(0, context, bins + 1).round().astype(np.int64))
    pieces, counts = np.unique(plan.piece_len.astype(np.int64), return_counts=True)
    rows, rcounts = np.unique(np.bincount(plan.piece_row, weights=plan.piece_len,
                                          minlength=plan.n_rows).astype(np.int64), return_counts=True)

    def per_bin(lengths, counts):
        below = (np.minimum(lengths[None, :], edges[:, None]) * counts[None, :]).sum(axis=1)
        return np.diff(below).astype(np.int64)

    return TrainedPositions(context, edges, per_bin(pieces, counts), per_bin(rows, rcounts))
