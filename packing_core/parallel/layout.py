"""The rules of a context-parallel cut: the schemes, the multiple each pads to, and where each chunk goes.

With context parallelism (CP) of size N, every rank holds 1/N of each row and attention passes
keys and values from rank to rank (:mod:`.ring`). Three schemes say which tokens a rank holds:

- ``contiguous``: each row cut into N equal windows, rank r takes window r (Megatron-Bridge's
  contiguous partition mode, NVIDIA-NeMo/Megatron-Bridge #5126; NeMo Automodel's block-diagonal CP,
  ``nemo_automodel/components/distributed/blockdiag_cp/batch.py`` ``make_cp_blockdiag_batch_and_ctx``).
- ``zigzag-row``: each row cut into 2N chunks, rank r takes chunks r and 2N-1-r (Megatron-LM,
  ``megatron/core/utils.py`` ``_get_batch_on_this_cp_rank_per_sequence_balancing``).
- ``zigzag-document``: every *document* cut into 2N chunks, rank r takes chunks r and 2N-1-r of each
  (Transformer Engine's THD layout: ``thd_get_partitioned_indices``, whose source index is
  ``thd_partition_src_index`` in ``transformer_engine/common/fused_attn/context_parallel.cu``;
  Megatron-LM ``_get_batch_on_this_cp_rank_per_document_balancing``).

A zigzag scheme needs each cut unit (a document, or a row) to be a multiple of 2N tokens: TE's kernel
divides each padded offset by N and halves it (``cu_seqlens_s[i] = seqlen / world_size``, then
``seq_len / 2``), after a device ``assert(seqlen % (world_size * 2) == 0)``. With sequence parallelism
(tensor-parallel size TP) too, each is a multiple of lcm(2N, TP·N): Megatron-Bridge's recipe runner
(``scripts/training/recipe_runner.py``) sets ``pad_seq_to_mult = math.lcm(..., 2 * cp, cp * tp)``.

>>> pad_multiple(2, "zigzag-document"), pad_multiple(2, "zigzag-document", tp=4, sequence_parallel=True)
(4, 8)
>>> pad_multiple(3, "contiguous")
3
>>> chunk_order(2, "zigzag-row")        # the chunks of one unit each rank holds, in its local order
((0, 3), (1, 2))
"""
from __future__ import annotations

import math

import numpy as np

from packing_core._validate import choice, whole_number

SCHEMES = ("contiguous", "zigzag-row", "zigzag-document")
# the lab's bound on CP: a split holds 2N chunks of every document, so N bounds its padding as much as the tokens
MAX_CP = 1024
MAX_TP = 1024


def as_cp(value, name: str = "cp") -> int:
    """A context-parallel size: a whole number from 1 (no split) to :data:`MAX_CP`.

    >>> as_cp(4)
    4
    >>> as_cp(0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    packing_core._validate.InputError: cp must be at least 1...
    """
    return whole_number(value, name, minimum=1, maximum=MAX_CP,
                        hint="the number of context-parallel ranks, e.g. 2, 4 or 8")


def as_scheme(value) -> str:
    return choice("scheme", value, SCHEMES)


def pad_multiple(cp: int, scheme: str, *, tp: int = 1, sequence_parallel: bool = False) -> int:
    """The multiple every cut unit is padded to: N (contiguous) or 2N (zigzag), with sequence parallelism lcm(., TP·N)."""
    cp, scheme = as_cp(cp), as_scheme(scheme)
    tp = whole_number(tp, "tp", minimum=1, maximum=MAX_TP, hint="the tensor-parallel size")
    base = chunks_per_unit(cp, scheme)
    return math.lcm(base, tp * cp) if sequence_parallel and tp > 1 else base


def chunks_per_unit(cp: int, scheme: str) -> int:
    """N (contiguous) or 2N (zigzag); 1 at CP 1, where nothing is cut (Megatron-Bridge: ``2 * size if size > 1 else 1``)."""
    return cp if scheme == "contiguous" or cp == 1 else 2 * cp


def chunk_order(cp: int, scheme: str) -> tuple[tuple[int, ...], ...]:
    """Per rank, the chunks of one unit it holds, in local order: ``(r,)`` or ``(r, 2N-1-r)``."""
    if scheme == "contiguous" or cp == 1:
        return tuple((r,) for r in range(cp))
    return tuple((r, 2 * cp - 1 - r) for r in range(cp))


def chunk_owner(cp: int, scheme: str) -> np.ndarray:
    """int64 [chunks]: the rank that holds each chunk of a unit.

    >>> chunk_owner(2, "zigzag-document").tolist()
    [0, 1, 1, 0]
    """
    owner = np.zeros(chunks_per_unit(cp, scheme), np.int64)
    for r, chunks in enumerate(chunk_order(cp, scheme)):
        owner[list(chunks)] = r
    return owner


def ragged_arange(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``concat(arange(s, s + n) for s, n in zip(starts, lengths))``, without a Python loop.

    >>> ragged_arange(np.array([10, 3]), np.array([2, 3])).tolist()
    [10, 11, 3, 4, 5]
    """
    starts, lengths = np.asarray(starts, np.int64), np.asarray(lengths, np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    first = np.cumsum(lengths) - lengths
    return np.repeat(starts - first, lengths) + np.arange(total, dtype=np.int64)


def unit_indices(unit_start: np.ndarray, unit_len: np.ndarray, cp: int, scheme: str, rank: int) -> np.ndarray:
    """The slots of every unit that ``rank`` holds, in its local order (unit by unit, then chunk by chunk).

    Each unit's length must be a multiple of its chunk count (pad it first). For zigzag-document this is
    what Transformer Engine's ``thd_get_partitioned_indices(cu_seqlens_padded, total, N, rank)`` returns
    (its own test: offsets [0, 8, 16], N = 2 give rank 0 ``[0, 1, 6, 7, 8, 9, 14, 15]``):

    >>> unit_indices(np.array([0, 8]), np.array([8, 8]), 2, "zigzag-document", 0).tolist()
    [0, 1, 6, 7, 8, 9, 14, 15]
    """
    unit_start, unit_len = np.asarray(unit_start, np.int64), np.asarray(unit_len, np.int64)
    chunks = chunk_order(cp, scheme)[rank]
    c = unit_len // chunks_per_unit(cp, scheme)
    starts = np.stack([unit_start + k * c for k in chunks], 1).reshape(-1)
    return ragged_arange(starts, np.repeat(c, len(chunks)))


def te_partition_indices(cu_seqlens, total_tokens: int, cp: int, rank: int) -> np.ndarray:
    """Transformer Engine's THD partition, index for index, as its kernel computes it (int32 arithmetic).

    Mirrors ``thd_partition_indices_kernel`` / ``thd_partition_src_index`` and ``binary_search`` of
    ``transformer_engine/common/fused_attn/context_parallel.cu``: each offset divided by N with C's
    truncation, the token's sequence found by a binary search over those offsets, its half by
    ``index < seq_len / 2``. Offsets that break the kernel's assumption (an entry that is no multiple of
    2N, negative sentinels) are computed as the kernel computes them, not refused: that is the point.
    The search assumes rising offsets; with Megatron-Bridge's ``-1`` sentinels after the real ones
    (NVIDIA-NeMo/Megatron-Bridge #4489) it can land among them.

    >>> te_partition_indices([0, 8, 16], 16, 2, 1).tolist()
    [2, 3, 4, 5, 10, 11, 12, 13]
    >>> te_partition_indices([0, 8, 16, -1, -1, -1, -1, -1], 16, 2, 1).tolist()   # sentinels: the search lands on them
    [0, 1, 2, 3, 4, 5, 6, 7]
    """
    cu = np.asarray(cu_seqlens, np.int64)
    s = np.trunc(cu / cp).astype(np.int64)          # C's integer division truncates toward zero: -1 / 2 == 0
    n = len(cu)
    token = np.arange(total_tokens // cp, dtype=np.int64)
    left, right = np.ones_like(token), np.full_like(token, n - 1)
    for _ in range(max(1, int(np.ceil(np.log2(max(n, 2)))) + 1)):
        going = left < right
        mid = (left + right) // 2
        up = going & (s[np.clip(mid, 0, n - 1)] <= token)
        left = np.where(up, mid + 1, left)
        right = np.where(going & ~up, mid, right)
    seq = left - 1
    seq_len = s[seq + 1] - s[seq]
    index = token - s[seq]
    half = np.trunc(seq_len / 2).astype(np.int64)
    offset = np.where(index < half, rank, (cp - 1) * 2 - rank)
    return index + s[seq] * cp + half * offset
