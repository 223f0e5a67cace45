"""Which keys each query can read, for a batch and the attention implementation that reads it.

A trainer's batch does not carry one mask: each attention implementation reads different
tensors of it. transformers' ``sdpa``, ``eager`` and ``flex_attention`` build their mask in
``masking_utils.create_causal_mask`` from ``attention_mask`` and, only with no 2D mask and no
cache, from ``position_ids``; ``flash_attention_2``/``_3`` read ``cu_seq_lens_*`` or, on one
flattened row only, ``position_ids`` (``modeling_flash_attention_utils._flash_attention_forward``).
A 4D mask is used as given, but each applies it its own way: sdpa reads a boolean one as
True = may read and adds a float one; eager (``modeling_llama.eager_attention_forward``) and
flex (``integrations.flex_attention``'s ``score_mod``, head 0 only) *add* it to the scores, so a
boolean or 0/1 mask masks nothing there. This module mirrors those code paths rule by rule, for
the release that reads the batch (:mod:`.releases`: packed detection arrived in 4.53.1, flash
attention's position-ids path changed five times), and gives the result as the *effective
segmentation*: per token the segment the kernel attends within. Two trainers' own models read their batches too:
``megatron`` (Megatron-core: a 4D mask with True = masked) and ``olmo_core`` (``doc_lens``).
One convention for every batch: a transformers implementation's name means a transformers model
given the batch's tensors (a trainer's keys under transformers' names), a trainer reader's name
(``TRAINER_READERS``) that trainer's own model; so a Megatron batch checked for ``sdpa`` says what
a transformers model would make of Megatron's mask, and for ``megatron`` what Megatron's does.

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
mask, which is read as each implementation applies it (``dense``).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from packing_core._validate import InputError
from packing_core.attention.masks import allowed
from packing_core.attention.releases import ReaderRules, release_rules
from packing_core.attention.tensors import MASKED_BELOW, BatchTensors, four_d_allowed

if TYPE_CHECKING:
    from packing_core.batch.packed import PackedBatch

__all__ = ["ATTENTION_READERS", "BACKEND_READERS", "FLASH", "IMPLEMENTATIONS", "TRAINER_READERS", "BatchTensors",
           "EffectiveAttention", "effective_attention", "find_packed_sequence_indices", "four_d_allowed",
           "is_packed_sequence", "packed_attention", "packed_detection_on"]

IMPLEMENTATIONS = ("sdpa", "eager", "flex_attention", "flash_attention_2", "flash_attention_3")
BACKEND_READERS = ("varlen", "segments", "dense", "causal_only")   # the lab's own backends (attention.backends)
TRAINER_READERS = ("megatron", "olmo_core")                          # trainers whose own model reads the batch
# everything that can read a batch's attention tensors: transformers' implementations, the lab's backends, trainers
ATTENTION_READERS = IMPLEMENTATIONS + BACKEND_READERS + TRAINER_READERS



FLASH = ("flash_attention_2", "flash_attention_3")
_MASKING = "transformers.masking_utils"
_FLASH = "transformers.modeling_flash_attention_utils"


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
    release: str = ""          # the transformers release whose rules were read ("" for the lab's and trainers' readers)

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
                "mirrors": self.mirrors, "refused": self.refused, "transformers": self.release,
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


def is_packed_sequence(position_ids: np.ndarray | None, batch_size: int, rules: ReaderRules | None = None) -> bool:
    """Whether flash-attention infers packed sequences from ``position_ids``, in ``rules``' release.

    Mirrors ``transformers.modeling_flash_attention_utils._is_packed_sequence`` (4.55 on): position
    ids exist, the batch size is 1 (one flattened row), more than one position, and the positions
    are not one ``arange`` from their minimum. Earlier releases read any number of rows, flattened,
    when a position ever steps down (``not (torch.diff(position_ids) >= 0).all()``, 4.44.1 to 4.52;
    4.53 with batch size 1), when a row's last position is not its width - 1 (4.44.0), or whenever
    position ids are given (4.54): :attr:`ReaderRules.flash_positions`.

    >>> is_packed_sequence(np.array([[0, 1, 0, 1]]), 1), is_packed_sequence(np.array([[0, 1, 0, 1]] * 2), 2)
    (True, False)
    >>> is_packed_sequence(np.array([[0, 1, 0, 1]] * 2), 2, release_rules("4.46.3"))
    True
    """
    rules = rules or release_rules()
    if position_ids is None or position_ids.shape[-1] == 1 or (rules.flash_rows == "one" and batch_size != 1):
        return False
    p = position_ids.reshape(batch_size, -1)
    trigger = rules.flash_trigger
    if trigger == "always":
        return True
    if trigger == "last_not_end":
        return bool((p[:, -1] != p.shape[1] - 1).any())
    if trigger == "not_monotone":
        return bool((np.diff(p, axis=-1) < 0).any())
    return bool((np.arange(p.shape[1]) + p.min() != p).any())


def packed_detection_on(position_ids, mask_2d, use_cache: bool, rules: ReaderRules | None = None) -> bool:
    """sdpa/eager/flex look for packed sequences only with position ids, no 2D mask and no cache, and only
    in a release that has packed detection (4.53.1 on: :attr:`ReaderRules.packed_detection`).

    Mirrors the gate in ``transformers.masking_utils._preprocess_mask_arguments``:
    ``if position_ids is not None and attention_mask is None and cache is None``.
    """
    return (rules or release_rules()).packed_detection and position_ids is not None and mask_2d is None \
        and not use_cache


def _row_segments(B: int, T: int) -> np.ndarray:
    return np.repeat(np.arange(B, dtype=np.int64), T).reshape(B, T)


def _from_cu(cu: np.ndarray, B: int, T: int) -> np.ndarray:
    """Segments of the flattened batch from offsets; tokens outside ``[cu[0], cu[-1])`` get -1."""
    flat = np.arange(B * T)
    seg = np.searchsorted(np.asarray(cu, dtype=np.int64), flat, side="right") - 1
    seg[(flat < cu[0]) | (flat >= cu[-1])] = -1
    return seg.reshape(B, T)


def applied_4d_mask(t: BatchTensors, attn_implementation: str) -> tuple[np.ndarray | None, str]:
    """bool ``[B, T, T]``: what a 4D mask lets each query read, as ``attn_implementation`` applies it, and how.

    - ``sdpa`` (``integrations.sdpa_attention`` -> ``torch.nn.functional.scaled_dot_product_attention``):
      a boolean mask is read as True = may read; a float mask is added to the scores; an integer
      mask is refused by torch (``None``, with the reason);
    - ``eager`` (``modeling_llama.eager_attention_forward``: ``attn_weights + attention_mask``) adds
      it, whatever its type: True / 1 add 1 and False / 0 add 0, which masks nothing;
    - ``flex_attention`` (``integrations.flex_attention.flex_attention_forward``) adds it in its
      ``score_mod`` (``score_mask[batch_idx][0][q_idx][kv_idx]``: head 0 for every head), with no
      block mask: the same as eager, from head 0;
    - ``megatron`` (Megatron-core's ``attention_mask_func``: ``masked_fill(attention_mask, -10000.0)``)
      reads True = masked.

    A leak in any head counts. For an additive mask, a query whose every key is masked reads
    nothing (softmax of all ``-inf`` is NaN; of all ``finfo.min``, even weights over every key).

    >>> causal = allowed(np.zeros(3, int))[None, None]                      # a boolean causal 4D mask
    >>> applied_4d_mask(BatchTensors(np.zeros((1, 3), int), attention_mask=causal), "eager")[0][0].astype(int).tolist()
    [[1, 1, 1], [1, 1, 1], [1, 1, 1]]
    """
    info = t.mask_4d_info
    raw, (B, T) = info.raw, t.shape
    if attn_implementation == "megatron":
        read = raw > MASKED_BELOW if info.kind == "additive" else ~raw.astype(bool)
        how = "Megatron-core reads a 4D mask as True = masked (attention_mask_func: masked_fill)"
    elif attn_implementation == "sdpa":
        if info.kind == "binary" and raw.dtype.kind != "f":
            return None, ("torch's scaled_dot_product_attention refuses an integer attn_mask (it takes bool or "
                          "float): pass a boolean mask (mask.bool()) or an additive float one")
        if info.kind == "boolean":
            read, how = raw, "a boolean 4D mask is read as True = may read (torch's sdpa)"
        else:
            read, how = four_d_allowed(raw) if info.kind == "additive" else np.ones_like(raw, bool), \
                "a float 4D mask is added to the scores (torch's sdpa)"
    else:
        heads = raw[:, :1] if attn_implementation == "flex_attention" else raw
        read = heads > MASKED_BELOW if info.kind == "additive" else np.ones_like(heads, bool)
        how = (f"{attn_implementation} adds the 4D mask to the scores"
               + (" (head 0 for every head)" if attn_implementation == "flex_attention" else "")
               + ("" if info.kind == "additive" else f": a {info.kind} mask adds 0 and 1, which masks nothing"))
    return np.broadcast_to(read.any(axis=1), (B, T, T)), how


def effective_attention(t: BatchTensors, attn_implementation: str = "sdpa", *, use_cache: bool = False,
                        rules: ReaderRules | None = None) -> EffectiveAttention:
    """The effective segmentation of ``t`` under ``attn_implementation`` (one of ``ATTENTION_READERS``).

    ``use_cache`` is the value the forward call will use: a model called with ``use_cache=True``
    (the default of LLaMA-style configs outside the Trainer) creates a ``DynamicCache``, and
    ``_preprocess_mask_arguments`` then skips packed detection for sdpa/eager/flex. ``rules``: the
    transformers release that reads the batch (:func:`packing_core.attention.releases.release_rules`;
    None: the installed one).

    >>> t = BatchTensors(np.array([[5, 6, 7, 8]]), position_ids=np.array([[0, 1, 0, 1]]))
    >>> effective_attention(t, "sdpa", rules=release_rules("4.46.3")).segment_ids.tolist()
    [[0, 0, 0, 0]]
    """
    rules = rules or release_rules()
    if attn_implementation not in ATTENTION_READERS:
        raise InputError(f"unknown attention implementation {attn_implementation!r}: choose one of "
                         f"{', '.join(ATTENTION_READERS)}")
    B, T = t.shape
    pos, mask2, mask4 = t.positions, t.mask_2d, t.mask_4d
    all_keys = np.ones((B, T), dtype=bool)

    def made(path, mirrors, seg, key_ok=all_keys, dense=None, refused=""):
        return EffectiveAttention(attn_implementation, bool(use_cache), path, mirrors, seg, key_ok, dense, refused,
                                  release=rules.release if attn_implementation in IMPLEMENTATIONS else "")

    ids_cast = (" (its document numbers cast to booleans by _preprocess_mask_arguments: "
                "attention_mask.to(torch.bool))" if t.document_mask is not None else "")
    rope = ("; the 3-D rotary positions give the mask no text positions" if t.rope_position_ids is not None
            and t.position_ids is None else "")
    if attn_implementation in TRAINER_READERS:
        return _trainer_reading(t, attn_implementation, made)
    if attn_implementation in ("sdpa", "eager", "flex_attention"):
        mirrors = f"{_MASKING}.create_causal_mask -> _preprocess_mask_arguments"
        if mask4 is not None:
            dense, how = applied_4d_mask(t, attn_implementation)
            if dense is None:
                return made("a 4D attention_mask torch refuses", mirrors, np.full((B, T), -1), refused=how)
            return made(f"a 4D attention_mask is used as given: {how}", f"{_MASKING}._preprocess_mask_arguments "
                        "(a 4D mask returns early, as is)", _row_segments(B, T), dense=dense)
        if attn_implementation == "flex_attention" and not rules.flex:
            return made(f"{rules.label} offers no flex_attention", "transformers.models.llama.modeling_llama "
                        "(_supports_flex_attn)", np.full((B, T), -1), refused=f"{rules.label} has no flex_attention "
                        "for LLaMA-style models: choose sdpa or eager")
        if packed_detection_on(pos, mask2, use_cache, rules):
            packed = find_packed_sequence_indices(pos)
            seg = packed + (np.arange(B, dtype=np.int64) * T)[:, None]
            return made("packed detection on: no 2D attention_mask and no cache, so find_packed_sequence_indices "
                        "splits each row at every position step that is not +1",
                        f"{mirrors}, find_packed_sequence_indices, packed_sequence_mask_function", seg)
        why = (f"no packed detection in transformers {rules.release}: find_packed_sequence_indices first shipped in 4.53.1, "
               "transformers PR #39194" if not rules.packed_detection and pos is not None else
               "a 2D attention_mask is given" + ids_cast if mask2 is not None else
               "a cache is in use (use_cache=True)" if use_cache and pos is not None else "no position_ids" + rope)
        keys = mask2 if mask2 is not None else all_keys
        return made(f"packed detection off ({why}): one causal triangle per row"
                    + (", pads masked out as keys" if mask2 is not None and not mask2.all() else ""),
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
            return made("a 2D attention_mask with pads" + ids_cast + ": each row's real tokens are unpadded into "
                        "one sequence", f"{fwd} -> _upad_input, _get_unpad_data", seg, mask2)
        note = (f"an all-ones attention_mask{ids_cast} is dropped (flash_attention_mask), then "
                if mask2 is not None else "")
        varlen = rules.flash_varlen
        if t.has_varlen_kwargs and (varlen == "all_four" or varlen == "needs_position_ids" and pos is not None):
            return made(note + "cu_seq_lens_q/_k with max_length_q/_k: varlen over the flattened batch",
                        f"{_MASKING}.flash_attention_mask, {fwd} (is_fa_with_varlen_kwargs)",
                        _from_cu(t.cu_seq_lens_q, B, T))
        by_max = varlen == "needs_position_ids" and pos is not None and t.max_length_q is not None
        if by_max or is_packed_sequence(pos, B, rules):
            p = pos.reshape(-1)
            first = p.min() if rules.flash_starts == "min" else 0
            cu = np.r_[np.flatnonzero(p == first), p.size]
            return made(note + ("one flattened row" if B == 1 else f"{B} rows flattened into one") + " with "
                        f"position_ids: a sequence starts at every position {'equal to the minimum' if first else '0'}",
                        f"{fwd} ({rules.flash_positions.replace('_', ' ')}: {rules.cite('flash_positions')})",
                        _from_cu(cu, B, T))
        why = (f"{B} rows: _is_packed_sequence needs one flattened row, batch size 1" if pos is not None and B != 1
               and rules.flash_rows == "one" else
               "no position_ids" + rope if pos is None else "positions count up once over the row")
        if t.cu_seq_lens_q is not None and (not t.has_varlen_kwargs or varlen == "none"):
            why += ("; cu_seq_lens without max_length_q/_k are not used" if varlen != "none" else
                    f"; {rules.label} reads no cu_seq_lens_q/_k")
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


def _trainer_reading(t: BatchTensors, reader: str, made) -> EffectiveAttention:
    """What a trainer's own model reads: Megatron-core's 4D mask, or OLMo-core's ``doc_lens``."""
    B, T = t.shape
    if reader == "megatron":
        if t.mask_4d is not None:
            dense, how = applied_4d_mask(t, "megatron")
            return made(f"the 4D attention_mask as Megatron-core's local DotProductAttention applies it with the "
                        f"PyTorch softmax: {how}", "megatron.core.transformer.utils.attention_mask_func "
                        "(FusedScaleMaskSoftmax.forward_torch_softmax)", _row_segments(B, T), dense=dense)
        return made("no attention_mask: one causal triangle per row (attn_mask_type causal), as Megatron's fused "
                    "softmax and Transformer Engine also read a batch with one",
                    "megatron.core.transformer.dot_product_attention (AttnMaskType.causal)", _row_segments(B, T))
    cu = t.doc_lens_offsets
    if cu is None:
        return made("no doc_lens: one causal triangle per row", "olmo_core.nn.transformer.model.Transformer",
                    _row_segments(B, T))
    return made("doc_lens as varlen boundaries over the flattened batch (cu_doc_lens, max_doc_len), as OLMo-core's "
                "flash_2, flash_3 and te backends read them (its torch backend raises on them)",
                "olmo_core.nn.transformer.model.Transformer._prepare_inputs, olmo_core.utils."
                "get_cumulative_document_lengths", _from_cu(cu, B, T))


def packed_attention(batch: PackedBatch, attn_implementation: str = "varlen", *,
                     use_cache: bool = False, rules: ReaderRules | None = None) -> EffectiveAttention:
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
    eff = effective_attention(t, attn_implementation, use_cache=use_cache, rules=rules)
    valid = batch.valid.numpy()
    seg = np.full(valid.shape, -1, dtype=np.int64)
    seg[valid] = eff.segment_ids[0]
    key_ok = np.zeros(valid.shape, dtype=bool)
    key_ok[valid] = eff.key_ok[0]
    hidden = batch.key_mask is not None
    if hidden:
        key_ok &= batch.key_mask.numpy().astype(bool)
    return dataclasses.replace(eff, segment_ids=seg, key_ok=key_ok, reads_itself=hidden)
