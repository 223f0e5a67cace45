"""Which keys each query can read, for a batch and the attention implementation that reads it.

A trainer's batch does not carry one mask: each attention implementation reads different
tensors of it. transformers' ``sdpa``, ``eager`` and ``flex_attention`` build their mask in
``masking_utils.create_causal_mask`` from ``attention_mask`` and, only with no 2D mask and no
cache, from ``position_ids``; ``flash_attention_2``/``_3`` read ``cu_seq_lens_*`` or, on one
flattened row only, ``position_ids`` (``modeling_flash_attention_utils._flash_attention_forward``).
This module mirrors those code paths (transformers 5.24), rule by rule, and gives the result as
the *effective segmentation*: per token the segment the kernel attends within.

Packed rows ``[2, 4]`` with resetting positions, no mask, no cache::

    position_ids   [[0 1 0 1]    sdpa: find_packed_sequence_indices splits each row
                    [0 1 2 0]]         at every step that is not +1 -> sound
                                 flash_attention_2: _is_packed_sequence needs batch
                                       size 1 -> plain causal per row -> documents meet

    >>> t = BatchTensors(np.array([[5, 6, 7, 8], [1, 2, 3, 4]]), position_ids=np.array([[0, 1, 0, 1], [0, 1, 2, 0]]))
    >>> effective_attention(t, "sdpa").segment_ids.tolist()
    [[0, 0, 1, 1], [4, 4, 4, 5]]
    >>> effective_attention(t, "flash_attention_2").segment_ids.tolist()
    [[0, 0, 0, 0], [1, 1, 1, 1]]

Segments are numbered over the flattened batch (flash-attention's varlen path flattens
``[B, T]`` to ``[B*T]``); ``-1`` marks a token the kernel computes no output for. Every
effective segment is a contiguous run of the flattened tokens, read causally, except a 4D
mask, which is used as given (``dense``).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from packing_core._lazy import warn_renamed
from packing_core._validate import InputError
from packing_core.attention.masks import allowed

if TYPE_CHECKING:
    from packing_core.batch.packed import PackedBatch

IMPLEMENTATIONS = ("sdpa", "eager", "flex_attention", "flash_attention_2", "flash_attention_3")
BACKEND_READERS = ("varlen", "segments", "dense", "causal_only")   # the lab's own backends (attention.backends)
# everything that can read a batch's attention tensors: transformers' implementations, then the lab's backends
ATTENTION_READERS = IMPLEMENTATIONS + BACKEND_READERS


def __getattr__(name: str):
    if name == "READERS":   # the old name, kept one release; data.sources.READERS are file readers
        warn_renamed("packing_core.attention.semantics.READERS", "ATTENTION_READERS")
        return ATTENTION_READERS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
FLASH = ("flash_attention_2", "flash_attention_3")
_MASKING = "transformers.masking_utils"
_FLASH = "transformers.modeling_flash_attention_utils"


@dataclass(frozen=True)
class BatchTensors:
    """The tensors of a trainer's batch that attention reads, as numpy arrays.

    ``attention_mask`` is 2D ``[B, T]`` (True = a real token) or 4D ``[B, H, T, T]``
    (True = the query may read the key: boolean, or an additive mask already turned into one).
    ``position_ids`` of shape ``[1, T]`` beside ``B`` rows are expanded, as transformers does.
    """

    input_ids: np.ndarray
    position_ids: np.ndarray | None = None
    attention_mask: np.ndarray | None = None
    cu_seq_lens_q: np.ndarray | None = None
    cu_seq_lens_k: np.ndarray | None = None
    max_length_q: int | None = None
    max_length_k: int | None = None
    labels: np.ndarray | None = field(default=None, repr=False)

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.input_ids.shape)

    @property
    def mask_2d(self) -> np.ndarray | None:
        m = self.attention_mask
        return m.astype(bool) if m is not None and m.ndim == 2 else None

    @property
    def mask_4d(self) -> np.ndarray | None:
        m = self.attention_mask
        return m if m is not None and m.ndim == 4 else None

    @property
    def positions(self) -> np.ndarray | None:
        p = self.position_ids
        if p is None:
            return None
        return np.broadcast_to(p, self.shape) if p.shape[0] != self.shape[0] else p

    @property
    def has_varlen_kwargs(self) -> bool:
        """All four of ``cu_seq_lens_q/_k`` and ``max_length_q/_k``: what flash's varlen branch requires."""
        return all(x is not None for x in (self.cu_seq_lens_q, self.cu_seq_lens_k, self.max_length_q,
                                           self.max_length_k))


def four_d_allowed(mask) -> np.ndarray:
    """A 4D mask as booleans, True = may read: boolean as is, 0/1 integers, or additive floats.

    An additive mask adds 0 where a key may be read and a large negative number (``-inf``, or
    ``torch.finfo(dtype).min`` as transformers' ``eager_mask`` writes) where it may not.

    >>> four_d_allowed(np.array([[0.0, -np.inf], [0.0, 0.0]])).tolist()
    [[True, False], [True, True]]
    """
    m = np.asarray(mask)
    if m.dtype.kind == "b":
        return m
    if m.dtype.kind in "iu":
        return m != 0
    return np.isfinite(m) & (m > np.finfo(np.float32).min / 2) if m.dtype.kind == "f" else m.astype(bool)


@dataclass(frozen=True)
class EffectiveAttention:
    """What one attention implementation will let each query read in a batch.

    ``segment_ids`` [B, T]: the effective segment of each token, over the flattened batch
    (-1: the kernel computes nothing for it); a query reads the keys of its own segment at or
    before it whose ``key_ok`` is True (and itself, with ``reads_itself``): the block-causal rule
    of :mod:`.masks`. ``dense`` [B, T, T], when set, replaces that rule: a 4D mask read as given
    (True where any head may read).
    """

    attn_implementation: str
    use_cache: bool
    path: str                  # the code path taken, in one sentence
    mirrors: str               # the library function(s) this reading follows
    segment_ids: np.ndarray = field(repr=False)
    key_ok: np.ndarray = field(repr=False)
    dense: np.ndarray | None = field(default=None, repr=False)
    refused: str = ""          # non-empty: the kernel cannot run this batch, and why
    reads_itself: bool = False  # a query reads itself even where key_ok is False (keys hidden by the batch)

    def allowed(self, row: int) -> np.ndarray:
        """bool [T, T] for one row: True where query i may read key j (for a picture or a reference run).

        >>> t = BatchTensors(np.array([[5, 6, 7]]), position_ids=np.array([[0, 1, 0]]))
        >>> effective_attention(t, "sdpa").allowed(0).astype(int).tolist()
        [[1, 0, 0], [1, 1, 0], [0, 0, 1]]
        """
        if self.dense is not None:
            return self.dense[row].copy()
        return allowed(self.segment_ids[row], self.key_ok[row], reads_itself=self.reads_itself)

    def to_dict(self) -> dict:
        return {"attn_implementation": self.attn_implementation, "use_cache": self.use_cache, "path": self.path,
                "mirrors": self.mirrors, "refused": self.refused,
                "segments": int(len(np.unique(self.segment_ids[self.segment_ids >= 0])))}


def find_packed_sequence_indices(position_ids: np.ndarray) -> np.ndarray:
    """Per row, the packed sequence of each token: a new one at every step that is not +1.

    Mirrors ``transformers.masking_utils.find_packed_sequence_indices`` (``position_diff != 1``,
    then a cumulative sum; the first token always continues its dummy predecessor).

    >>> find_packed_sequence_indices(np.array([[0, 1, 2, 0, 1, 5]])).tolist()
    [[0, 0, 0, 1, 1, 2]]
    """
    p = np.asarray(position_ids, dtype=np.int64)
    diff = np.diff(p, prepend=p[:, :1] - 1, axis=-1)
    return np.cumsum(diff != 1, axis=-1)


def is_packed_sequence(position_ids: np.ndarray | None, batch_size: int) -> bool:
    """Whether flash-attention infers packed sequences from ``position_ids``.

    Mirrors ``transformers.modeling_flash_attention_utils._is_packed_sequence``: position ids
    exist, the batch size is 1 (one flattened row), more than one position, and the positions
    are not one ``arange`` from their minimum.

    >>> is_packed_sequence(np.array([[0, 1, 0, 1]]), 1), is_packed_sequence(np.array([[0, 1, 0, 1]] * 2), 2)
    (True, False)
    """
    if position_ids is None or batch_size != 1 or position_ids.shape[-1] == 1:
        return False
    p = position_ids.reshape(1, -1)
    return bool((np.arange(p.shape[1]) + p.min() != p).any())


def packed_detection_on(position_ids, mask_2d, use_cache: bool) -> bool:
    """sdpa/eager/flex look for packed sequences only with position ids, no 2D mask and no cache.

    Mirrors the gate in ``transformers.masking_utils._preprocess_mask_arguments``:
    ``if position_ids is not None and attention_mask is None and cache is None``.
    """
    return position_ids is not None and mask_2d is None and not use_cache


def _row_segments(B: int, T: int) -> np.ndarray:
    return np.repeat(np.arange(B, dtype=np.int64), T).reshape(B, T)


def _from_cu(cu: np.ndarray, B: int, T: int) -> np.ndarray:
    """Segments of the flattened batch from offsets; tokens outside ``[cu[0], cu[-1])`` get -1."""
    flat = np.arange(B * T)
    seg = np.searchsorted(np.asarray(cu, dtype=np.int64), flat, side="right") - 1
    seg[(flat < cu[0]) | (flat >= cu[-1])] = -1
    return seg.reshape(B, T)


def _dense_from_4d(mask4: np.ndarray, B: int, T: int) -> np.ndarray:
    allowed = four_d_allowed(mask4).any(axis=1)          # [B or 1, T, T]: a leak in any head counts
    return np.broadcast_to(allowed, (B, T, T))


def effective_attention(t: BatchTensors, attn_implementation: str = "sdpa", *,
                        use_cache: bool = False) -> EffectiveAttention:
    """The effective segmentation of ``t`` under ``attn_implementation`` (one of ``ATTENTION_READERS``).

    ``use_cache`` is the value the forward call will use: a model called with ``use_cache=True``
    (the default of LLaMA-style configs outside the Trainer) creates a ``DynamicCache``, and
    ``_preprocess_mask_arguments`` then skips packed detection for sdpa/eager/flex.
    """
    if attn_implementation not in ATTENTION_READERS:
        raise InputError(f"unknown attention implementation {attn_implementation!r}: choose one of "
                         f"{', '.join(ATTENTION_READERS)}")
    B, T = t.shape
    pos, mask2, mask4 = t.positions, t.mask_2d, t.mask_4d
    all_keys = np.ones((B, T), dtype=bool)

    def made(path, mirrors, seg, key_ok=all_keys, dense=None, refused=""):
        return EffectiveAttention(attn_implementation, bool(use_cache), path, mirrors, seg, key_ok, dense, refused)

    if attn_implementation in ("sdpa", "eager", "flex_attention"):
        mirrors = f"{_MASKING}.create_causal_mask -> _preprocess_mask_arguments"
        if mask4 is not None:
            return made("a 4D attention_mask is used as given", f"{_MASKING}._preprocess_mask_arguments "
                        "(a 4D mask returns early, as is)", _row_segments(B, T), dense=_dense_from_4d(mask4, B, T))
        if packed_detection_on(pos, mask2, use_cache):
            packed = find_packed_sequence_indices(pos)
            seg = packed + (np.arange(B, dtype=np.int64) * T)[:, None]
            return made("packed detection on: no 2D attention_mask and no cache, so find_packed_sequence_indices "
                        "splits each row at every position step that is not +1",
                        f"{mirrors}, find_packed_sequence_indices, packed_sequence_mask_function", seg)
        why = ("a 2D attention_mask is given" if mask2 is not None else
               "a cache is in use (use_cache=True)" if use_cache and pos is not None else "no position_ids")
        keys = mask2 if mask2 is not None else all_keys
        return made(f"packed detection off ({why}): one causal triangle per row"
                    + (", pads masked out as keys" if mask2 is not None else ""),
                    f"{mirrors} (packed only if position_ids given, attention_mask is None and cache is None), "
                    "padding_mask_function", _row_segments(B, T), keys)

    if attn_implementation in FLASH:
        fwd = f"{_FLASH}._flash_attention_forward"
        if mask4 is not None:
            return made("flash attention takes no 4D mask", f"{fwd} (expects a 2D padding mask)",
                        np.full((B, T), -1), refused=f"{attn_implementation} cannot read a 4D attention_mask: pass "
                        "cu_seq_lens_q/_k with max_length_q/_k (or position_ids in one flattened row) instead")
        if mask2 is not None and not mask2.all():
            seg = np.where(mask2, _row_segments(B, T), -1)
            return made("a 2D attention_mask with pads: each row's real tokens are unpadded into one sequence",
                        f"{fwd} -> _upad_input, _get_unpad_data", seg, mask2)
        note = "an all-ones attention_mask is dropped (flash_attention_mask), then " if mask2 is not None else ""
        if t.has_varlen_kwargs:
            return made(note + "cu_seq_lens_q/_k with max_length_q/_k: varlen over the flattened batch",
                        f"{_MASKING}.flash_attention_mask, {fwd} (is_fa_with_varlen_kwargs)",
                        _from_cu(t.cu_seq_lens_q, B, T))
        if is_packed_sequence(pos, B):
            p = pos.reshape(-1)
            starts = np.flatnonzero(p == p.min())
            cu = np.r_[starts, p.size]
            return made(note + "one flattened row with position_ids: a sequence starts at every return to the "
                        "minimum position", f"{fwd} -> _is_packed_sequence, prepare_fa_kwargs_from_position_ids",
                        _from_cu(cu, B, T))
        why = (f"{B} rows: _is_packed_sequence needs one flattened row, batch size 1" if pos is not None and B != 1 else
               "no position_ids" if pos is None else "positions count up once over the row")
        if t.cu_seq_lens_q is not None and not t.has_varlen_kwargs:
            why += "; cu_seq_lens without max_length_q/_k are not used"
        return made(note + f"plain causal attention per row ({why})",
                    f"{fwd} (flash_fn; _is_packed_sequence needs batch size 1)", _row_segments(B, T))

    # the lab's backends (attention.backends.attend): varlen, segments and dense read cu_seqlens,
    # causal_only reads the row offsets
    if attn_implementation == "causal_only" or t.cu_seq_lens_q is None:
        why = "causal_only reads only the rows" if attn_implementation == "causal_only" else "no cu_seqlens given"
        return made(f"one causal triangle per row ({why})", "packing_core.attention.backends.attend",
                    _row_segments(B, T))
    return made("cu_seqlens over the flattened batch", "packing_core.attention.backends.attend",
                _from_cu(t.cu_seq_lens_q, B, T))


def packed_attention(batch: PackedBatch, attn_implementation: str = "varlen", *,
                     use_cache: bool = False) -> EffectiveAttention:
    """What ``attn_implementation`` lets each query of a lab ``PackedBatch`` read, in the batch's own rows.

    The batch is read as ``to_hf()`` hands it to a model (one flattened row of real tokens with
    its ``cu_seqlens``), then laid back into ``[rows, width]``: pads get segment -1. Keys the
    batch hides (``PackedBatch.key_mask``) are hidden from every query but themselves. So a
    fault planted in the batch, such as ``cu_seqlens`` over whole rows, shows in ``allowed``.

    >>> from packing_core.batch.packed import PackedBatch
    >>> b = PackedBatch.from_documents([[5, 6], [7]], 4, "next-fit")
    >>> eff = packed_attention(b)
    >>> eff.segment_ids.tolist(), eff.allowed(0)[2].astype(int).tolist()
    ([[0, 0, 1, -1]], [0, 0, 1, 0])
    """
    hf = batch.to_hf()
    t = BatchTensors(**{k: int(v) if k.startswith("max_length") else np.asarray(v, dtype=np.int64)
                        for k, v in hf.items()})
    eff = effective_attention(t, attn_implementation, use_cache=use_cache)
    valid = batch.valid.numpy()
    seg = np.full(valid.shape, -1, dtype=np.int64)
    seg[valid] = eff.segment_ids[0]
    key_ok = np.zeros(valid.shape, dtype=bool)
    key_ok[valid] = eff.key_ok[0]
    hidden = batch.key_mask is not None
    if hidden:
        key_ok &= batch.key_mask.numpy().astype(bool)
    return dataclasses.replace(eff, segment_ids=seg, key_ok=key_ok, reads_itself=hidden)


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


def skipped_tokens(eff: EffectiveAttention, real: np.ndarray) -> np.ndarray:
    """bool [B, T]: real tokens the kernel computes no output for (a varlen call that leaves them out)."""
    if eff.dense is not None:
        return np.zeros_like(real)
    return real & (eff.segment_ids < 0)
