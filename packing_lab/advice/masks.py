"""What a materialised mask costs, beside varlen and flex: memory per micro-batch, and the padding-free format
under sdpa. The numbers come from the one cost model (``packing_core.analysis.costs``); this module words them.

>>> pf = padding_free_example()
>>> pf.tokens, pf.flat_cells, pf.dense_cells, pf.document_cells
(4096, 16777216, 2097152, 524288)
>>> print(pf.sentence)  # doctest: +NORMALIZE_WHITESPACE
In the padding-free format the row is the whole per-device batch: 8 packed rows of 512 become one row of 4,096
tokens, so sdpa gets a (1, 1, 4,096, 4,096) boolean mask and computes 16,777,216 cells: 8x the same rows as
[8, 512] with a block-diagonal mask (2,097,152), 32x a varlen kernel's Σ len² (524,288).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from packing_core.analysis.costs import MaskMemory, attention_cells, mask_memory, padding_free_cells
from packing_core.packing.strategies import make_plan

MIB = 1 << 20
TITLES = {"varlen": "varlen (cu_seqlens)", "flex": "FlexAttention (block mask)", "dense": "sdpa, a mask per row",
          "eager": "eager, an additive mask per row", "padding-free-sdpa": "sdpa, padding-free",
          "padding-free-eager": "eager, padding-free"}


@dataclass(frozen=True)
class PaddingFree:
    """``rows`` packed rows of ``width`` (documents of ``document`` tokens) under sdpa, padding-free and not."""

    rows: int
    width: int
    document: int
    tokens: int            # the flattened row
    flat_cells: int        # padding-free on sdpa: tokens²
    dense_cells: int       # the same rows as [rows, width] with a block-diagonal mask: rows x width²
    document_cells: int    # Σ len²: what a varlen kernel computes

    @property
    def sentence(self) -> str:
        t = f"{self.tokens:,}"
        return (f"In the padding-free format the row is the whole per-device batch: {self.rows} packed rows of "
                f"{self.width} become one row of {t} tokens, so sdpa gets a (1, 1, {t}, {t}) boolean mask and "
                f"computes {self.flat_cells:,} cells: {self.flat_cells / self.dense_cells:.0f}x the same rows as "
                f"[{self.rows}, {self.width}] with a block-diagonal mask ({self.dense_cells:,}), "
                f"{self.flat_cells / self.document_cells:.0f}x a varlen kernel's Σ len² ({self.document_cells:,}).")


def padding_free_example(rows: int = 8, width: int = 512, document: int = 128) -> PaddingFree:
    """Full rows of equal documents, packed by bfd, then flattened as TRL's padding-free collator flattens them."""
    plan = make_plan([document] * (rows * (width // document)), width, "bfd")
    return PaddingFree(plan.n_rows, width, document, int(plan.placed.length.sum()), padding_free_cells(plan, rows),
                       attention_cells(plan, "dense"), attention_cells(plan, "varlen"))


@dataclass(frozen=True)
class MicroBatchMasks:
    """What each kernel builds for one micro-batch of a dataset's bfd rows at one context."""

    context: int
    rows: int
    documents: int
    tokens: int
    kernels: tuple[MaskMemory, ...]

    def table(self) -> dict:
        """Columns for a page's table: the kernel, what it holds, its size in MiB and the cells it computes."""
        return {"kernel": [TITLES[k.kernel] for k in self.kernels], "what it builds": [k.holds for k in self.kernels],
                "shape": [" x ".join(f"{n:,}" for n in k.shape) for k in self.kernels],
                "MiB": [k.bytes / MIB for k in self.kernels], "cells computed": [k.cells for k in self.kernels]}

    @property
    def sentence(self) -> str:
        m = {k.kernel: k for k in self.kernels}
        row = self.context * self.context
        return (f"At context {self.context:,} one row's boolean mask holds {row:,} entries ({row / MIB:,.0f} MiB) "
                f"before any arithmetic, and eager's additive mask {m['eager'].bytes // m['dense'].bytes}x that; "
                f"{self.rows} rows take {m['dense'].bytes / MIB:,.0f} MiB for sdpa and {m['eager'].bytes / MIB:,.0f} "
                f"MiB for eager, once per forward call. Padding-free, sdpa's one mask over all {self.tokens:,} tokens "
                f"takes {m['padding-free-sdpa'].bytes / MIB:,.0f} MiB. A varlen kernel reads "
                f"{m['varlen'].bytes:,} bytes of cu_seqlens and FlexAttention a block mask of "
                f"{m['flex'].bytes / 1024:,.0f} KiB: nothing of size T² is built.")


def micro_batch_masks(lengths, context: int, rows: int = 8, *, float_bytes: int = 2) -> MicroBatchMasks:
    """The first ``rows`` bfd rows of ``lengths`` at ``context`` (documents longer than it split) as one micro-batch.

    >>> mb = micro_batch_masks([2048] * 16, 8192, rows=4)
    >>> mb.rows, mb.tokens, [k.kernel for k in mb.kernels][:3]
    (4, 32768, ['varlen', 'flex', 'dense'])
    """
    plan = make_plan(lengths, context, "bfd", overlong="split")
    chosen = np.arange(min(int(rows), plan.n_rows))
    kernels = mask_memory(plan, chosen, float_bytes=float_bytes)
    tokens = int(np.isin(plan.placed.row, chosen) @ plan.placed.length)
    return MicroBatchMasks(context, len(chosen), kernels[0].entries - 1, tokens, kernels)
