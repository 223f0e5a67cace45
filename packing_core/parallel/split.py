"""A packed batch cut over context-parallel ranks: each rank's tensors, its offsets, and the pads the cut adds.

:func:`split_batch` takes the lab's :class:`~packing_core.batch.packed.PackedBatch` and CP = N and
returns a :class:`CPSplit`: the padded batch, and one :class:`~packing_core.parallel.rank.RankBatch` per
rank (tokens, positions, targets, its per-rank ``cu_seqlens`` padded and unpadded). Under
``zigzag-document`` (Transformer Engine's THD layout) the rows are laid end to end as one stream, as
Megatron feeds a THD micro-batch, and every document is padded to a multiple of 2N (:mod:`.layout`)::

    documents a (7 tokens) and b (5), CP 2: each padded to 8
    stream     a0 a1 a2 a3 a4 a5 a6 __ | b0 b1 b2 b3 b4 __ __ __
    rank 0     a0 a1 a6 __  b0 b1 __ __         chunks 0 and 3 of each document
    rank 1     a2 a3 a4 a5  b2 b3 b4 __         chunks 1 and 2

>>> from packing_core.batch.packed import PackedBatch
>>> b = PackedBatch.from_documents([list(range(10, 17)), list(range(20, 25))], 16, "next-fit")
>>> s = split_batch(b, 2, "zigzag-document")
>>> s.ranks[0].input_ids.tolist(), s.pads.tolist()
([[10, 11, 16, 0, 20, 21, 0, 0]], [1, 3])
>>> s.ranks[1].cu_seqlens_padded_rank.tolist(), s.ranks[1].cu_seqlens_rank.tolist()
([0, 4, 8], [0, 4, 7])

The row schemes keep the rows; a row is padded at its end to a multiple of N (contiguous) or 2N
(zigzag-row). ``pad_documents=True`` pads every document inside the row too (what a THD packer does
before a contiguous cut: the pads then sit *between* documents).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from packing_core._validate import MAX_BATCH_TOKENS, InputError, limit_hint
from packing_core.batch.packed import IGNORE_INDEX, PackedBatch
from packing_core.packing.plan import cu_seqlens_from_lengths
from packing_core.parallel.layout import (
    as_cp,
    as_scheme,
    chunk_order,
    chunks_per_unit,
    pad_multiple,
    ragged_arange,
    unit_indices,
)
from packing_core.parallel.rank import RankBatch, local_offsets


@dataclass(frozen=True, eq=False)
class CPSplit:
    """A batch padded for CP and cut over its ranks; ``[B, W]`` grids (zigzag-document: one row, the stream).

    ``segment_*`` describe the padded layout: each piece with the CP pads after it, and (row schemes)
    each row's pad tail as a segment with no piece and no real token. ``pads[i]`` is what the cut added
    to piece ``i``; ``pads_added`` counts every slot the cut added (documents and row tails).
    """

    cp: int
    scheme: str
    multiple: int                 # each document (zigzag-document, pad_documents) or row is padded to a multiple of it
    input_ids: np.ndarray         # int64 [B, W]
    position_ids: np.ndarray      # int64 [B, W]: within the padded piece (CP pads go on counting); 0 on a row's tail
    targets: np.ndarray           # int64 [B, W]: the batch's own targets; -100 on every pad
    piece_ids: np.ndarray         # int64 [B, W]: the piece of each real token, -1 on every pad
    segment_start: np.ndarray     # int64 [segments]: where it starts, over the flattened grid
    segment_len: np.ndarray       # int64 [segments]: its slots (the piece and its CP pads)
    segment_real: np.ndarray      # int64 [segments]: its real tokens, first in it
    segment_piece: np.ndarray     # int64 [segments]: its piece, -1 for a row's pad tail
    pads: np.ndarray              # int64 [pieces]: CP pads added after each piece
    pads_added: int               # every slot the cut added
    real_tokens: int
    ranks: tuple[RankBatch, ...]

    @property
    def cu_seqlens(self) -> np.ndarray:
        """int32: the real tokens of each segment, laid end to end (Transformer Engine's ``cu_seqlens``)."""
        return cu_seqlens_from_lengths(self.segment_real, np.int32)

    @property
    def cu_seqlens_padded(self) -> np.ndarray:
        """int32: the segments as laid out, pads included (Transformer Engine's ``cu_seqlens_padded``)."""
        return np.r_[self.segment_start, self.input_ids.size].astype(np.int32)

    @property
    def real(self) -> np.ndarray:
        return self.piece_ids >= 0

    def to_dict(self) -> dict:
        return {"cp": self.cp, "scheme": self.scheme, "multiple": self.multiple, "real_tokens": self.real_tokens,
                "pads_added": self.pads_added, "pads_per_document": self.pads.tolist(),
                "cu_seqlens": self.cu_seqlens.tolist(), "cu_seqlens_padded": self.cu_seqlens_padded.tolist(),
                "ranks": [r.to_dict() for r in self.ranks]}


def _layout(batch: PackedBatch, scheme: str, doc_multiple: int, row_multiple: int, pad_documents: bool):
    """``(rows, width, piece slot start over the flattened grid, piece slots, row tail starts)``."""
    plan = batch.plan
    length = plan.piece_len.astype(np.int64)
    padded = -(-length // doc_multiple) * doc_multiple if pad_documents else length
    if scheme == "zigzag-document":
        start = cu_seqlens_from_lengths(padded)[:-1]
        return 1, int(padded.sum()), start, padded, np.zeros(0, np.int64)
    row = plan.piece_row.astype(np.int64)
    if pad_documents:       # re-laid end to end inside each row, each piece followed by its pads
        first = np.searchsorted(row, row, side="left")
        offset = np.cumsum(padded) - padded
        offset = offset - offset[first]
        used = np.bincount(row, weights=padded, minlength=plan.n_rows).astype(np.int64)
    else:
        offset = plan.piece_offset.astype(np.int64)
        used = np.bincount(row, weights=length, minlength=plan.n_rows).astype(np.int64)
    content = max(int(used.max(initial=0)), batch.input_ids.shape[1])
    width = -(-content // row_multiple) * row_multiple
    return plan.n_rows, width, row * width + offset, padded, np.arange(plan.n_rows) * width + used


def split_batch(batch: PackedBatch, cp: int, scheme: str = "zigzag-document", *, tp: int = 1,
                sequence_parallel: bool = False, pad_documents: bool | None = None) -> CPSplit:
    """``batch`` padded as the engines pad it and cut over ``cp`` ranks under ``scheme``.

    ``pad_documents`` (default: only for ``zigzag-document``) pads every document to a multiple of 2N,
    as a THD packer does; the row schemes pad each row to their own multiple (N or 2N). ``tp`` with
    ``sequence_parallel`` raises the multiple to lcm(2N, TP·N) (N for contiguous). The padded batch may hold at most
    ``MAX_BATCH_TOKENS`` slots.
    """
    if not isinstance(batch, PackedBatch):
        raise InputError(f"split_batch takes a PackedBatch, got {type(batch).__name__}: build one with "
                         "PackedBatch.from_documents(documents, context)")
    cp, scheme = as_cp(cp), as_scheme(scheme)
    multiple = pad_multiple(cp, scheme, tp=tp, sequence_parallel=sequence_parallel)
    pad_documents = scheme == "zigzag-document" if pad_documents is None else bool(pad_documents)
    if scheme == "zigzag-document" and not pad_documents:
        raise InputError("zigzag-document cuts every document into 2N chunks, so every document is padded: "
                         "leave pad_documents at its default")
    plan = batch.plan
    length = plan.piece_len.astype(np.int64)
    doc_multiple = (pad_multiple(cp, "zigzag-document", tp=tp, sequence_parallel=sequence_parallel) if pad_documents
                    else 1)
    rows, width, start, padded, tail = _layout(batch, scheme, doc_multiple, multiple, pad_documents)
    if rows * width > MAX_BATCH_TOKENS:
        raise InputError(f"CP {cp} pads this batch to {rows * width:,} slots, more than a batch the lab splits may "
                         f"hold ({MAX_BATCH_TOKENS:,}): split fewer rows, or a smaller CP "
                         f"({limit_hint('MAX_BATCH_TOKENS')})")

    # every slot of every piece: its piece, its place in the piece, and where its token sits in the batch
    piece = np.repeat(np.arange(len(length)), padded)
    within = ragged_arange(np.zeros(len(length), np.int64), padded)
    dest = np.repeat(start, padded) + within
    real = within < length[piece]
    src_row, src_col = plan.piece_row[piece], plan.piece_offset[piece] + np.minimum(within, length[piece] - 1)
    ids, tgt = batch.input_ids.numpy(), batch.targets.numpy()

    def grid(fill, values):
        out = np.full(rows * width, fill, np.int64)
        out[dest] = values
        return out.reshape(rows, width)

    input_ids = grid(batch.pad_id, np.where(real, ids[src_row, src_col], batch.pad_id))
    targets = grid(IGNORE_INDEX, np.where(real, tgt[src_row, src_col], IGNORE_INDEX))
    piece_ids = grid(-1, np.where(real, piece, -1))
    position_ids = grid(0, within)

    # the segments, in order over the flattened grid: the pieces, and each row's pad tail
    seg_start = np.r_[start, tail]
    row_end = (np.arange(rows) + 1) * width
    seg_len = np.r_[padded, row_end[: len(tail)] - tail]
    seg_real = np.r_[length, np.zeros(len(tail), np.int64)]
    seg_piece = np.r_[np.arange(len(length)), np.full(len(tail), -1)]
    keep = seg_len > 0
    order = np.argsort(seg_start[keep], kind="stable")
    seg_start, seg_len, seg_real, seg_piece = (a[keep][order] for a in (seg_start, seg_len, seg_real, seg_piece))

    pads = padded - length
    original = int(length.sum()) if scheme == "zigzag-document" else batch.input_ids.numel()
    glob = (cu_seqlens_from_lengths(seg_real, np.int32), np.r_[seg_start, rows * width].astype(np.int32))
    ranks = tuple(_rank(r, cp, scheme, multiple, rows, width, seg_start, seg_len, seg_real, input_ids,
                        position_ids, targets, piece_ids, glob) for r in range(cp))
    return CPSplit(cp, scheme, multiple, input_ids, position_ids, targets, piece_ids, seg_start, seg_len, seg_real,
                   seg_piece, pads, rows * width - original, int(length.sum()), ranks)


def _rank(r, cp, scheme, multiple, rows, width, seg_start, seg_len, seg_real, input_ids, position_ids, targets,
          piece_ids, glob) -> RankBatch:
    if scheme == "zigzag-document":
        cols = unit_indices(seg_start, seg_len, cp, scheme, r)[None]
        flat = cols
    else:
        cols = unit_indices(np.zeros(1, np.int64), np.array([width]), cp, scheme, r)
        cols = np.broadcast_to(cols, (rows, len(cols)))
        flat = cols + (np.arange(rows) * width)[:, None]
    take = lambda a: np.ascontiguousarray(a.reshape(-1)[flat])   # noqa: E731
    padded_cu, real_cu = local_offsets(flat.reshape(-1), seg_start, seg_len, seg_real)
    return RankBatch(r, cp, scheme, multiple, take(input_ids), take(position_ids), take(targets), take(piece_ids),
                     np.ascontiguousarray(cols), padded_cu, real_cu, *glob)


def check_chunks(split: CPSplit) -> None:
    """Every slot of the padded batch is held by exactly one rank (a sanity check the tests and the CLI share)."""
    seen = np.zeros(split.input_ids.size, np.int64)
    width = split.input_ids.shape[1]
    for rb in split.ranks:
        flat = rb.global_index + (0 if split.scheme == "zigzag-document" else
                                  (np.arange(rb.input_ids.shape[0]) * width)[:, None])
        np.add.at(seen, flat.reshape(-1), 1)
    if not (seen == 1).all():
        raise AssertionError(f"{int((seen != 1).sum())} slots are held by no rank or by several")
    assert chunks_per_unit(split.cp, split.scheme) == sum(len(c) for c in chunk_order(split.cp, split.scheme))
