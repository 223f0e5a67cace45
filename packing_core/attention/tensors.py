"""The tensors of a trainer's batch, as numpy arrays, with what each kind of mask and position means.

Trainers hand attention the same information in many layouts. This module names them and
reads each once:

- a 2D ``attention_mask`` of 1s and 0s (pads), or of **document numbers** ``[1, 1, 1, 2, 2, 0]``
  (axolotl's multipack, LLaMA-Factory's ``neat_packing``): transformers casts either to booleans;
- a 4D mask ``[B, H, q, k]``, **boolean** or **additive** (0 where a key may be read, a large
  negative number where not), with **True = may read** (transformers, torch's sdpa) or
  **True = masked** (Megatron-core, TransformerEngine): :func:`read_4d_mask` decides which from
  the tensor itself (every query may read itself), or takes ``mask_convention``;
- ``position_ids`` of 2 dims, or the 3 / 4 dims of multimodal rotary positions (mrope):
  :data:`POSITION_LAYOUTS`. Only a text row reaches the mask: ``Qwen2VLTextModel.forward`` (and
  Qwen3-VL's, Qwen3.5's) take row 0 of ``[4, B, T]`` as ``text_position_ids`` and pass no positions
  for ``[3, B, T]``. Before that, Qwen3.5 handed the 3-D tensor to flash-attention's
  ``_is_packed_sequence``, which read it as packed: ``cu_seqlens`` three times the tokens and an
  out-of-bounds read (transformers #44643; PR #44911 proposed a dimension check there);
- boundary signals no attention implementation of transformers reads (``seq_idx``, OLMo-core's
  ``doc_lens``): :data:`NON_ATTENTION_SIGNALS`, kept for the layers and trainers that do.

    >>> m = read_4d_mask(np.array([[[[False, True], [False, False]]]]))    # Megatron: True = masked
    >>> m.kind, m.convention, m.allowed[0, 0].astype(int).tolist()
    ('boolean', 'masked', [[1, 0], [1, 1]])
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from packing_core._validate import InputError

MASK_CONVENTIONS = ("auto", "may-read", "masked")
# what an additive mask adds where a key may not be read: anything at or below this is "masked" (exp(-1e3) is 0 in
# every float type); -inf, torch.finfo(float16).min, -1e4 and -1e9 all are
MASKED_BELOW = -1e3
POSITION_LAYOUTS = {
    3: "multimodal rotary positions [3, batch, tokens] (temporal, height, width: Qwen2-VL, Qwen2.5-VL, Qwen3-VL, "
       "Qwen3.5); transformers 5.24 builds no packed mask from them (text_position_ids is None)",
    4: "text positions then multimodal rotary positions [4, batch, tokens] (row 0 = text, as Qwen2-VL, Qwen3-VL and "
       "Qwen3.5 build them for packed inputs); transformers 5.24 reads row 0 for the mask and for flash-attention",
}
# boundary signals that no attention implementation of transformers reads, and who does read them: the hook
# a model-aware check extends with the layers beyond attention
NON_ATTENTION_SIGNALS = {
    "seq_idx": "no attention implementation reads it; in transformers 5.24 it reaches only the short convolutions "
               "and state-space scans of hybrid models (through integrations.hub_kernels)",
    "doc_lens": "OLMo-core's own Transformer reads it as varlen boundaries (Transformer._prepare_inputs: "
                "cu_doc_lens = get_cumulative_document_lengths(doc_lens)); no transformers implementation does",
}


@dataclass(frozen=True)
class FourDMask:
    """A 4D attention mask as given, and what it means.

    ``raw`` is the tensor as the trainer built it (``[B or 1, H, q, k]``; float16 and bfloat16
    read as float32). ``kind``: ``boolean``, ``binary`` (numbers that are all 0 or 1) or
    ``additive`` (0 / a large negative number). ``convention`` (boolean and binary masks):
    ``may-read`` (True = the query may read the key) or ``masked`` (True = it may not).
    ``allowed`` is bool, True = may read, as the trainer meant it; ``decided_by`` says how.
    """

    raw: np.ndarray = field(repr=False)
    kind: str
    convention: str
    allowed: np.ndarray = field(repr=False)
    decided_by: str = ""

    def to_dict(self) -> dict:
        return {"kind": self.kind, "convention": self.convention, "decided_by": self.decided_by,
                "shape": list(self.raw.shape)}


def four_d_allowed(mask, convention: str = "may-read") -> np.ndarray:
    """A 4D mask as booleans, True = may read: boolean or 0/1 as given, or additive floats.

    An additive mask adds 0 where a key may be read and a large negative number (``-inf``, or
    ``torch.finfo(dtype).min`` as transformers' ``eager_mask`` writes, or -1e4) where it may not.

    >>> four_d_allowed(np.array([[0.0, -np.inf], [0.0, 0.0]])).tolist()
    [[True, False], [True, True]]
    """
    m = np.asarray(mask)
    # transformers adds a float 4D mask to the scores: all zeros masks nothing (additive), not everything
    if m.dtype.kind == "f" and (not np.isin(m, (0.0, 1.0)).all() or not m.any()):
        return m > MASKED_BELOW
    on = m.astype(bool)
    return ~on if convention == "masked" else on


def _bfloat16(x: float) -> float:
    """``x`` rounded to bfloat16 (float32's upper 16 bits, to nearest even), as torch stores it."""
    bits = int(np.array(x, np.float32).view(np.uint32))
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return float(np.array(bits & 0xFFFFFFFF, np.uint32).view(np.float32))


def finite_mask_value(raw) -> str | None:
    """What an additive mask's finite masked value does in half-precision softmax, or None (``-inf``, or a value
    past float16's range: both mask exactly).

    Added to the scores, the masked value ``m`` leaves a masked key the softmax weight ``e^(m + d)``, ``d``
    its score's lead over the query's best key, which rounds to 0 below half the dtype's smallest step
    (2^-24 in float16, 2^-133 in bfloat16): the key weighs nothing unless ``d >= |m| - ln(2 / step)``.
    bfloat16 keeps 8 bits of mantissa, so -10,000 is stored as -9,984. transformers' own additive mask
    (``masking_utils.eager_mask``) writes ``torch.finfo(dtype).min`` instead; a test checks these leads
    against torch's softmax in each dtype.

    >>> print(finite_mask_value(np.array([0.0, -1e4])))  # doctest: +NORMALIZE_WHITESPACE
    the 4D mask masks with -10,000, a finite value: a masked key keeps softmax weight e^(-10,000 + d), d its
    score's lead over the query's best key, which is 0 in float16 unless d reaches about 9,983 and in bfloat16
    (which stores -10,000 as -9,984) unless about 9,891; no trained model's scores lie that far apart, so it
    masks as -inf does, except that a query whose keys are all masked reads them all equally instead of none
    """
    m = np.asarray(raw)
    masked = m[m <= MASKED_BELOW]
    if not masked.size or not np.isfinite(top := float(masked.max())) or top <= float(np.finfo(np.float16).min):
        return None
    b16 = _bfloat16(top)
    lead16, lead_b = -top - 25 * np.log(2), -b16 - 134 * np.log(2)
    return (f"the 4D mask masks with {top:,.0f}, a finite value: a masked key keeps softmax weight e^({top:,.0f} + d), "
            f"d its score's lead over the query's best key, which is 0 in float16 unless d reaches about "
            f"{lead16:,.0f} and in bfloat16 (which stores {top:,.0f} as {b16:,.0f}) unless about {lead_b:,.0f}; no "
            "trained model's scores lie that far apart, so it masks as -inf does, except that a query whose keys "
            "are all masked reads them all equally instead of none")


def read_4d_mask(mask, convention: str = "auto") -> FourDMask:
    """Read a 4D mask: its kind and its convention, from the tensor where it decides it.

    Every query may read itself, so a query row that reads some keys and not others has its
    diagonal readable: all True there means True = may read, all False means True = masked
    (Megatron). Rows that are all one value (a pad that reads nothing, a last query that reads
    everything) say nothing. Where the rows disagree, ``convention`` (``may-read`` or ``masked``)
    decides, and without it the mask is refused with the way out. Additive masks carry their
    meaning in the numbers. NaN is refused: every score it touches is NaN. So is a mask that lets
    no query read any key (every value masked, an all-False boolean): each query's softmax runs
    over nothing, and there is no document left to check.

    >>> read_4d_mask(np.array([[[[1.0, 0.0], [1.0, 1.0]]]])).kind
    'binary'
    >>> read_4d_mask(np.full((1, 1, 2, 2), -np.inf))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    packing_core._validate.InputError: the 4D attention_mask lets no query read any key ...
    """
    info = _read_4d_mask(mask, convention)
    if not info.allowed.any():
        what = ("every value is a large negative number" if info.kind == "additive" else
                f"every value means masked under {info.convention} (True = "
                f"{'may read' if info.convention == 'may-read' else 'masked'})")
        raise InputError(f"the 4D attention_mask lets no query read any key ({what}): each query's softmax runs over "
                         "nothing (NaN, or uniform over masked keys) and no document is left to check; build it with "
                         "0 (or True) where a key may be read, or check that it belongs to this batch")
    return info


def _read_4d_mask(mask, convention: str) -> FourDMask:
    if convention not in MASK_CONVENTIONS:
        raise InputError(f"unknown mask convention {convention!r}: choose one of {', '.join(MASK_CONVENTIONS)}")
    m = np.asarray(mask)
    if m.dtype.kind == "f" and np.isnan(m).any():
        raise InputError("the 4D attention_mask holds NaN: every attention score it touches becomes NaN; build it "
                         "with 0 where a key may be read and torch.finfo(dtype).min where not")
    # transformers adds a float 4D mask to the scores: all zeros masks nothing (additive), not everything
    if m.dtype.kind == "f" and (not np.isin(m, (0.0, 1.0)).all() or not m.any()):
        if (m > 0).any():
            raise InputError(f"the 4D attention_mask is neither boolean nor additive: it holds positive values "
                             f"(up to {float(m.max()):g}); an additive mask holds 0 and large negative numbers")
        return FourDMask(m, "additive", "may-read", m > MASKED_BELOW, "additive: 0 = may read, a large negative "
                                                                      "number = masked")
    kind = "boolean" if m.dtype.kind == "b" else "binary"
    on = m.astype(bool)
    T = m.shape[-1]
    diag = on[..., np.arange(T), np.arange(T)]                  # [B, H, T]
    informative = on.any(-1) & ~on.all(-1)
    if informative.any():
        diag = diag[informative]
    elif convention == "auto" and not on.any() and T > 1:   # all False: nothing says what False means
        raise InputError("the 4D attention_mask is all False: read as True = may read (transformers, torch's sdpa) "
                         "no query may read any key, read as True = masked (Megatron) every query reads the future; "
                         "build it with True where a key may be read, or check that it belongs to this batch")
    found = "may-read" if diag.all() else "masked" if not diag.any() else ""
    if convention != "auto":
        if found and found != convention:
            raise InputError(f"mask_convention={convention!r}, but every query of this mask can "
                             f"{'read' if found == 'may-read' else 'not read'} itself, which means True = "
                             f"{'may read' if found == 'may-read' else 'masked'}: drop mask_convention, or check "
                             "that the mask belongs to this batch")
        return FourDMask(m, kind, convention, ~on if convention == "masked" else on, "as asked (mask_convention)")
    if not found:
        raise InputError("the 4D attention_mask does not say its convention: some queries can read themselves and "
                         "some cannot. Give mask_convention='may-read' (True = the query may read the key: "
                         "transformers, torch's sdpa) or 'masked' (True = masked: Megatron-core, TransformerEngine)")
    why = f"every query can {'read' if found == 'may-read' else 'not read'} itself where True: True = " \
          f"{'may read' if found == 'may-read' else 'masked'}"
    return FourDMask(m, kind, found, ~on if found == "masked" else on, why)


@dataclass(frozen=True)
class BatchTensors:
    """The tensors of a trainer's batch that attention (and the loss) read, as numpy arrays.

    ``attention_mask`` is 2D ``[B, T]`` (True = a real token, as transformers casts it) or the
    4D mask as given; ``mask_4d_info`` says what a 4D one means, ``document_mask`` holds the
    document numbers of a 2D mask that numbers documents. ``position_ids`` are the positions the
    mask reads (``[B, T]``, or ``[1, T]`` expanded as transformers does); 3-D and 4-D rotary
    positions are kept in ``rope_position_ids``. ``loss_mask`` (Megatron) decides which targets
    train. ``seq_idx`` and ``doc_lens`` are boundary signals attention does not read.
    """

    input_ids: np.ndarray
    position_ids: np.ndarray | None = None
    attention_mask: np.ndarray | None = None
    cu_seq_lens_q: np.ndarray | None = None
    cu_seq_lens_k: np.ndarray | None = None
    max_length_q: int | None = None
    max_length_k: int | None = None
    labels: np.ndarray | None = field(default=None, repr=False)
    loss_mask: np.ndarray | None = field(default=None, repr=False)
    mask_4d_info: FourDMask | None = field(default=None, repr=False)
    document_mask: np.ndarray | None = field(default=None, repr=False)
    rope_position_ids: np.ndarray | None = field(default=None, repr=False)
    seq_idx: np.ndarray | None = field(default=None, repr=False)
    doc_lens: np.ndarray | None = field(default=None, repr=False)
    max_doc_lens: tuple[int, ...] | None = None

    def __post_init__(self):
        m = self.attention_mask
        if m is not None and m.ndim == 4 and self.mask_4d_info is None:   # a mask built by hand: read it once
            object.__setattr__(self, "mask_4d_info", read_4d_mask(m))

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.input_ids.shape)

    @property
    def mask_2d(self) -> np.ndarray | None:
        m = self.attention_mask
        return m.astype(bool) if m is not None and m.ndim == 2 else None

    @property
    def mask_4d(self) -> np.ndarray | None:
        """The 4D mask as booleans, True = may read, as the trainer meant it (None without one)."""
        return None if self.mask_4d_info is None else self.mask_4d_info.allowed

    @property
    def positions(self) -> np.ndarray | None:
        p = self.position_ids
        if p is None:
            return None
        return np.broadcast_to(p, self.shape) if p.shape[0] != self.shape[0] else p

    @property
    def position_layout(self) -> str:
        """What the position tensor holds, in words ("" for plain 2D positions)."""
        r = self.rope_position_ids
        return "" if r is None else POSITION_LAYOUTS[r.shape[0]] if r.shape[0] in POSITION_LAYOUTS else \
            f"rotary positions in {r.shape[0]} sections [{r.shape[0]}, batch, tokens]"

    @property
    def has_varlen_kwargs(self) -> bool:
        """All four of ``cu_seq_lens_q/_k`` and ``max_length_q/_k``: what flash's varlen branch requires."""
        return all(x is not None for x in (self.cu_seq_lens_q, self.cu_seq_lens_k, self.max_length_q,
                                           self.max_length_k))

    @property
    def doc_lens_offsets(self) -> np.ndarray | None:
        """OLMo-core's ``doc_lens`` as offsets over the flattened batch, as its model reads them.

        Mirrors ``olmo_core.utils.get_cumulative_document_lengths``: the non-zero lengths, row by
        row, summed: ``[0, *cumsum(doc_lens[doc_lens != 0])]``.

        >>> BatchTensors(np.zeros((2, 4), int), doc_lens=np.array([[3, 1], [4, 0]])).doc_lens_offsets.tolist()
        [0, 3, 4, 8]
        """
        d = self.doc_lens
        return None if d is None else np.r_[0, np.cumsum(d[d != 0])].astype(np.int64)

    def signals_beyond_attention(self) -> dict[str, str]:
        """The boundary signals this batch carries that attention does not read, with who reads them."""
        return {k: NON_ATTENTION_SIGNALS[k] for k in NON_ATTENTION_SIGNALS if getattr(self, k) is not None}
