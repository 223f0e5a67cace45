"""One rank's share of a context-parallel batch, its offsets, and how a kernel reads them.

A rank holds ``[B, L]`` tensors (zigzag-document: one row, its chunks of every document) and two sets
of offsets. Megatron's batch keeps the *global* ``cu_seqlens`` and ``cu_seqlens_padded`` unchanged
on every rank (``megatron/core/utils.py``: the CP partition leaves the metadata keys alone); Transformer
Engine derives each rank's own from them: ``cu_seqlens_padded // N`` for the layout and, per document,
the real tokens this rank holds, which are a prefix of each of its two chunks
(``transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py``
``get_cu_seqlens_on_cp_rank``). :func:`local_offsets` computes the same for every scheme: this rank's
slots cut into runs of one segment (a document and its pads), and the real tokens at the front of each::

    document of 7, CP 2 (padded to 8): rank 0 holds a0 a1 a6 __   cu_seqlens_padded_rank [0 4], cu_seqlens_rank [0 3]
                                       rank 1 holds a2 a3 a4 a5   cu_seqlens_padded_rank [0 4], cu_seqlens_rank [0 4]

:func:`kernel_view` is what a ring kernel believes of each slot: which document it belongs to (or
none: a pad, or a token it drops) and where it sits in the unsplit batch. ``offsets`` names how the
kernel reads the rank's offsets:

- ``"rank"``: as above, each rank's own real tokens (Transformer Engine with ``pad_between_seqs=True``);
- ``"average"``: the global real offsets divided by N, as if every rank held the same share of each
  document (Transformer Engine's ``pad_between_seqs=False`` path: ``cu_seqlens_q // cp_size`` in
  ``cp_p2p_fwd_prepare_qkv``; TransformerEngine #1929, #1930, #3331);
- ``"prefix"``: the real tokens of a rank taken as its first ones, whatever pads sit between them
  (NeMo Automodel ``blockdiag_cp/kernels.py`` ``_varlen_seg_for_rank``: ``real_dids = local[:n_real]``,
  "padding is a tail"; NVIDIA-NeMo/Automodel #3640).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from packing_core._validate import InputError, choice
from packing_core.batch.packed import IGNORE_INDEX
from packing_core.parallel.layout import unit_indices

READINGS = ("rank", "average", "prefix")
PSEUDO = 1 << 40     # documents a kernel invents for pads it reads as tokens: above every real one


@dataclass(frozen=True, eq=False)
class RankBatch:
    """The tensors one CP rank holds, and its offsets: local (this rank's) and global (the batch's)."""

    rank: int
    cp: int
    scheme: str
    multiple: int
    input_ids: np.ndarray              # int64 [B, L]
    position_ids: np.ndarray           # int64 [B, L]: position in the padded document
    targets: np.ndarray                # int64 [B, L]: next token of the document, -100 elsewhere (shifted labels)
    piece_ids: np.ndarray              # int64 [B, L]: -1 on every pad
    global_index: np.ndarray           # int64 [B, L]: column in the padded row (zigzag-document: in the stream)
    cu_seqlens_padded_rank: np.ndarray  # int32: this rank's runs of one segment, laid end to end
    cu_seqlens_rank: np.ndarray         # int32: the real tokens at the front of each run
    cu_seqlens: np.ndarray | None = None         # int32: the batch's real offsets (every rank carries them)
    cu_seqlens_padded: np.ndarray | None = None  # int32: the batch's padded offsets

    @property
    def padding_mask(self) -> np.ndarray:
        """bool [B, L]: True on a pad (NeMo Automodel's ``padding_mask`` convention)."""
        return self.piece_ids < 0

    @property
    def tokens(self) -> int:
        return int(self.input_ids.size)

    def to_file(self) -> dict:
        """The arrays of a rank's batch file, by the engines' names: Megatron's ``labels`` are already shifted.

        ``pad_between_seqs`` is the flag a runner passes Transformer Engine: 1 when any document (the last
        one too) is shorter than its padded slot.
        """
        real, padded = np.asarray(self.cu_seqlens), np.asarray(self.cu_seqlens_padded)
        gap = real.shape != padded.shape or bool((real != padded).any())
        return {"input_ids": self.input_ids, "position_ids": self.position_ids, "labels": self.targets,
                "loss_mask": (self.targets != IGNORE_INDEX).astype(np.int64),
                "padding_mask": self.padding_mask.astype(np.int64),
                "cu_seqlens": np.asarray(self.cu_seqlens, np.int32),
                "cu_seqlens_padded": np.asarray(self.cu_seqlens_padded, np.int32),
                "cu_seqlens_rank": np.asarray(self.cu_seqlens_rank, np.int32),
                "cu_seqlens_padded_rank": np.asarray(self.cu_seqlens_padded_rank, np.int32),
                "cp_size": np.array(self.cp, np.int64), "cp_rank": np.array(self.rank, np.int64),
                "pad_between_seqs": np.array(int(gap), np.int64)}

    def to_dict(self) -> dict:
        return {"rank": self.rank, "tokens": self.tokens, "input_ids": self.input_ids.tolist(),
                "position_ids": self.position_ids.tolist(), "cu_seqlens_rank": self.cu_seqlens_rank.tolist(),
                "cu_seqlens_padded_rank": self.cu_seqlens_padded_rank.tolist()}


def local_offsets(flat: np.ndarray, seg_start: np.ndarray, seg_len: np.ndarray, seg_real: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """``(cu_seqlens_padded_rank, cu_seqlens_rank)`` of the slots ``flat`` (global, in local order).

    >>> local_offsets(np.array([0, 1, 6, 7]), np.array([0]), np.array([8]), np.array([7]))
    (array([0, 4], dtype=int32), array([0, 3], dtype=int32))
    """
    seg = np.searchsorted(seg_start, flat, side="right") - 1
    real = (flat - seg_start[seg]) < seg_real[seg]
    if not len(flat):
        return np.zeros(1, np.int32), np.zeros(1, np.int32)
    starts = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]])
    run_len = np.diff(np.r_[starts, len(flat)])
    run_real = np.add.reduceat(real.astype(np.int64), starts)
    return (np.r_[0, np.cumsum(run_len)].astype(np.int32), np.r_[0, np.cumsum(run_real)].astype(np.int32))


@dataclass(frozen=True)
class KernelView:
    """What a ring kernel believes of one rank's slots, flattened row after row."""

    document: np.ndarray   # int64 [n]: the document each slot belongs to (the same number on every rank); -1 = skipped
    position: np.ndarray   # int64 [n]: where it sits in the unsplit batch (causality compares these)


def believed_position(rb: RankBatch) -> np.ndarray:
    """int64 [n]: where the scheme puts each of this rank's slots, from its shape and padded offsets alone."""
    B, L = rb.input_ids.shape
    if rb.scheme == "zigzag-document":
        cu = np.asarray(rb.cu_seqlens_padded_rank, np.int64)
        return unit_indices(cu[:-1] * rb.cp, np.diff(cu) * rb.cp, rb.cp, rb.scheme, rb.rank)
    width = L * rb.cp
    cols = unit_indices(np.zeros(1, np.int64), np.array([width]), rb.cp, rb.scheme, rb.rank)
    return (cols[None] + (np.arange(B) * width)[:, None]).reshape(-1)


def second_chunk(rb: RankBatch) -> np.ndarray:
    """bool [n]: the slots of a zigzag rank's second chunk (2N-1-r) of their unit; all False under contiguous.

    Transformer Engine reads these halves apart (``thd_read_half_tensor``) to skip what causality hides.
    """
    n = rb.tokens
    if rb.scheme == "contiguous" or rb.cp == 1:
        return np.zeros(n, bool)
    if rb.scheme == "zigzag-document":
        run, within = _runs(rb.cu_seqlens_padded_rank, n)
        return within >= np.diff(np.asarray(rb.cu_seqlens_padded_rank, np.int64))[run] // 2
    B, L = rb.input_ids.shape
    return np.broadcast_to(np.arange(L) >= L // 2, (B, L)).reshape(-1)


def _runs(cu_padded: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(run of each slot, index of the slot within its run)`` for padded offsets over ``n`` slots."""
    cu = np.asarray(cu_padded, np.int64)
    if len(cu) < 1 or cu[0] != 0 or cu[-1] != n or (np.diff(cu) < 0).any():
        raise InputError(f"cu_seqlens_padded_rank {cu[:8].tolist()} does not rise from 0 to this rank's {n} tokens: "
                         "build it from the rank's slots")
    run = np.searchsorted(cu, np.arange(n), side="right") - 1
    return run, np.arange(n) - cu[run]


def kernel_view(rb: RankBatch, offsets: str = "rank") -> KernelView:
    """The documents and places a kernel reading ``offsets`` (:data:`READINGS`) gives this rank's slots."""
    choice("offsets", offsets, READINGS)
    n = rb.tokens
    position = believed_position(rb)
    piece = rb.piece_ids.reshape(-1)
    if offsets == "rank":
        run, within = _runs(rb.cu_seqlens_padded_rank, n)
        real_count = np.diff(np.asarray(rb.cu_seqlens_rank, np.int64))
        if len(real_count) != len(np.diff(rb.cu_seqlens_padded_rank)):
            raise InputError("cu_seqlens_rank and cu_seqlens_padded_rank have different lengths: one entry per run")
        real = within < real_count[run]
        if rb.scheme == "zigzag-document":
            ident = run            # Transformer Engine: the i-th document of every rank is the same one
        else:                      # a doc-aware ring all-gathers each token's document
            ident = piece
        return KernelView(np.where(real, ident, -1), position)
    if offsets == "average":
        if rb.scheme != "zigzag-document":
            raise InputError("offsets='average' is Transformer Engine's THD path: it needs scheme zigzag-document")
        cu = np.asarray(rb.cu_seqlens, np.int64) // rb.cp
        run = np.searchsorted(cu, np.arange(n), side="right") - 1
        inside = (np.arange(n) < cu[-1]) & (run >= 0) & (run < len(cu) - 1)
        return KernelView(np.where(inside, run, -1), position)
    B, L = rb.input_ids.shape
    real = (rb.piece_ids >= 0)
    first = np.arange(L)[None] < real.sum(1, keepdims=True)    # the first n_real slots of each row
    pseudo = PSEUDO + rb.rank * n + np.arange(n).reshape(B, L)   # a pad read as a token: a document of one
    ident = np.where(real, rb.piece_ids, pseudo)
    return KernelView(np.where(first, ident, -1).reshape(-1), position)
