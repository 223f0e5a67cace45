"""Check a batch as a trainer emits it for transformers, not as ``PackedBatch`` built it.

Three formats are read (key names are transformers'):

- *padding-free* (``DataCollatorWithFlattening``): one row ``[1, T]`` with ``input_ids``,
  ``labels``, ``position_ids`` and, optionally, ``cu_seq_lens_q`` / ``cu_seq_lens_k``;
- *padded*: rows ``[B, T]`` with a 2D ``attention_mask`` (1 = real token, 0 = pad);
- *packed rows*: ``input_ids`` and ``position_ids`` only (a reset to 0 starts a document).

Documents are found as transformers finds them: from ``cu_seq_lens`` when given, else
from ``position_ids`` (every step that is not +1 starts one). Pads are the tokens the
``attention_mask`` zeroes, the tokens after ``cu_seq_lens[-1]``, or, with neither, a run of
two or more position-0 tokens at the end of a row (one-token "documents" in a row).

    >>> sound = {"input_ids": [[5, 6, 7, 8, 9]], "labels": [[-100, 6, 7, -100, 9]],
    ...          "position_ids": [[0, 1, 2, 0, 1]]}
    >>> check_hf_batch(sound).violations
    ()
    >>> shifted_over_row = dict(sound, labels=[[-100, 6, 7, 8, 9]])   # 7 -> 8 crosses documents
    >>> [v.name for v in check_hf_batch(shifted_over_row).violations]
    ['label_crosses_boundary']
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from packing_core.batch.checks import Violation
from packing_core.batch.packed import IGNORE_INDEX

HF_VIOLATIONS = {
    "positions_do_not_restart": ("each document's position_ids must start at the model's first position (0 for most "
                                 "models, 2 for RoBERTa-family ones) and count up by 1"),
    "label_crosses_boundary": "the label at every document's first token must be -100: transformers shifts "
                              "labels over the whole row, so a label there trains the previous document's "
                              "last token to predict this document's first",
    "label_is_not_the_token": "labels are unshifted (the model shifts them): where they count they must equal "
                              "input_ids; labels the collator already shifted are shifted twice",
    "pad_in_loss": "pads must carry label -100",
    "cu_seq_lens_malformed": "cu_seq_lens must start at 0, strictly increase and end within the tokens",
    "cu_seq_lens_q_differs_from_k": "packed self-attention needs the same boundaries for queries and keys",
    "cu_seq_lens_disagree_with_positions": "cu_seq_lens (flash-attention's boundaries) and position_ids "
                                           "(sdpa/eager's boundaries) must start documents at the same tokens",
    "pads_given_position_zero": "with no attention_mask, pads must continue the positions (0, 1, 2, ...): "
                                "each pad at position 0 is a new one-token document to transformers",
    "attention_mask_hides_packing": "beside packed position_ids pass no 2D attention_mask: transformers' "
                                    "sdpa/eager skip packed detection when one is given (all ones too), "
                                    "so every document reads the ones before it",
}

_INT_KEYS = ("input_ids", "labels", "position_ids", "attention_mask")
_CU_KEYS = ("cu_seq_lens_q", "cu_seq_lens_k")
FORMATS = ("padding-free", "padded", "packed rows", "plain")


@dataclass(frozen=True)
class HFBatchCheck:
    """What :func:`check_hf_batch` found: the format, the documents, every violation.

    ``marks`` lists ``(violation name, row, slot)`` for each token a violation points at,
    so a figure can mark it; ``segment_ids`` [B, T] is the document index per token
    (counted per row from 0, -1 on pads).
    """

    format: str
    shape: tuple[int, int]
    violations: tuple[Violation, ...]
    documents: tuple[tuple[tuple[int, int], ...], ...]   # per row: (start, length) of each document
    marks: tuple[tuple[str, int, int], ...]
    segment_ids: np.ndarray = field(compare=False)
    arrays: dict = field(compare=False, repr=False)       # the batch as int64 numpy arrays [B, T]

    @property
    def sound(self) -> bool:
        return not self.violations

    @property
    def n_documents(self) -> int:
        return sum(len(r) for r in self.documents)

    def to_dict(self) -> dict:
        return {"format": self.format, "shape": list(self.shape), "sound": self.sound,
                "documents": [[list(d) for d in row] for row in self.documents],
                "violations": [{"name": v.name, "detail": v.detail, "rule": HF_VIOLATIONS[v.name]}
                               for v in self.violations]}

    def format_table(self) -> str:
        rows, width = self.shape
        lines = [f"{self.format} batch: {rows} row(s) x {width} tokens, {self.n_documents} document(s)"]
        if self.sound:
            lines.append("SOUND: no violation")
        else:
            lines.append(f"{len(self.violations)} VIOLATION(S):")
            lines += [f"  {v.name}: {v.detail}\n    rule: {HF_VIOLATIONS[v.name]}" for v in self.violations]
        return "\n".join(lines)


def _int_array(name: str, value, *, allow_bool: bool = False) -> np.ndarray:
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError):
        raise ValueError(f"{name} is ragged (rows of different lengths) or not numbers: give every row the same "
                         "length, integers only") from None
    if arr.dtype == object:
        raise ValueError(f"{name} is ragged or holds non-numbers: give every row the same length, integers only")
    if arr.dtype.kind == "b" and allow_bool:
        return arr.astype(np.int64)
    if arr.dtype.kind not in "iu" or arr.dtype.kind == "b":
        raise ValueError(f"{name} must hold integers, got dtype {arr.dtype}: token ids, labels and positions "
                         "are whole numbers (store them as int64)")
    return arr.astype(np.int64)


def _normalise(batch: Mapping) -> dict[str, np.ndarray]:
    if not isinstance(batch, Mapping):
        raise ValueError(f"a batch is a mapping of names to arrays, got {type(batch).__name__}")
    if "input_ids" not in batch:
        raise ValueError(f"the batch has no input_ids (keys: {', '.join(map(str, batch)) or 'none'}): "
                         "give the dict a trainer passes to model(**batch)")
    out = {}
    for key in _INT_KEYS:
        if key in batch and batch[key] is not None:
            arr = _int_array(key, batch[key], allow_bool=key == "attention_mask")
            if arr.ndim == 1:
                arr = arr[None]
            if arr.ndim != 2:
                raise ValueError(f"{key} must be [batch, tokens] (2D) or one row (1D), got shape {arr.shape}"
                                 + (": a 4D attention mask is used as is by transformers; check a 2D one"
                                    if key == "attention_mask" else ""))
            out[key] = arr
    shape = out["input_ids"].shape
    if shape[1] == 0:
        raise ValueError("input_ids is empty: a batch needs at least one token")
    for key, arr in out.items():
        if arr.shape != shape:
            raise ValueError(f"{key} has shape {tuple(arr.shape)} but input_ids has {tuple(shape)}: pad them to "
                             "the same length (a collator that pads input_ids to a multiple must pad "
                             f"{key} too)")
    if "attention_mask" in out and not np.isin(out["attention_mask"], (0, 1)).all():
        raise ValueError("a 2D attention_mask holds 1 for real tokens and 0 for pads only, got values "
                         f"{np.unique(out['attention_mask'])[:6].tolist()}")
    for key in _CU_KEYS:
        if key in batch and batch[key] is not None:
            cu = _int_array(key, batch[key])
            if cu.ndim != 1 or len(cu) < 2:
                raise ValueError(f"{key} must be 1D with at least 2 offsets (e.g. [0, 5, 9]), got shape {cu.shape}")
            out[key] = cu
    return out


def _run_starts(starts: np.ndarray) -> np.ndarray:
    """Per token: the flat index of its document's first token."""
    idx = np.arange(starts.size)
    return np.maximum.accumulate(np.where(starts.ravel(), idx, 0))


def check_hf_batch(batch: Mapping) -> HFBatchCheck:
    """Every named violation (``HF_VIOLATIONS``) of a transformers-style batch.

    ``batch`` maps names to arrays, lists or tensors, as a trainer passes to
    ``model(**batch)``. Bad shapes, dtypes or lengths raise ``ValueError``.

    >>> pads_at_zero = {"input_ids": [[5, 6, 7, 0, 0, 0]], "position_ids": [[0, 1, 2, 0, 0, 0]]}
    >>> check_hf_batch(pads_at_zero).violations[0].name
    'pads_given_position_zero'
    """
    a = _normalise(batch)
    ids = a["input_ids"]
    B, T = ids.shape
    pos, labels, mask = a.get("position_ids"), a.get("labels"), a.get("attention_mask")
    cu_q, cu_k = a.get("cu_seq_lens_q"), a.get("cu_seq_lens_k")
    cu = cu_q if cu_q is not None else cu_k
    out: list[Violation] = []
    marks: list[tuple[str, int, int]] = []

    def add(name: str, detail: str, where: np.ndarray | None = None):
        out.append(Violation(name, detail))
        if where is not None:
            rows, slots = np.nonzero(where)
            marks.extend((name, int(r), int(s)) for r, s in zip(rows, slots))

    # ---- which tokens are real
    real = np.ones((B, T), dtype=bool)
    if mask is not None:
        real &= mask.astype(bool)
    cu_ok = False
    if cu is not None:
        if cu[0] != 0 or (np.diff(cu) <= 0).any() or cu[-1] > B * T:
            add("cu_seq_lens_malformed", f"cu_seq_lens = {cu[:10].tolist()}{' ...' if len(cu) > 10 else ''} "
                                         f"for {B * T} tokens")
        else:
            cu_ok = True
            real &= (np.arange(B * T) < cu[-1]).reshape(B, T)
        if cu_q is not None and cu_k is not None and not np.array_equal(cu_q, cu_k):
            add("cu_seq_lens_q_differs_from_k", f"q {cu_q[:8].tolist()} vs k {cu_k[:8].tolist()}")
    guessed_pads = np.zeros((B, T), dtype=bool)
    if mask is None and not cu_ok and pos is not None:
        # trailing run of position-0 tokens: read as pads once it is two or longer
        nonzero = pos != 0
        last_nonzero = np.where(nonzero.any(1), T - 1 - np.argmax(nonzero[:, ::-1], 1), -1)
        tail = np.arange(T)[None] > last_nonzero[:, None]
        guessed_pads = tail & ((T - 1 - last_nonzero) >= 2)[:, None]
        real &= ~guessed_pads
    pads = ~real

    # ---- document starts: from positions (sdpa/eager) and from cu_seq_lens (flash)
    first_real = real & (np.cumsum(real, 1) == 1)
    prev_pos = np.concatenate([np.full((B, 1), -2), pos[:, :-1]], 1) if pos is not None else None
    by_pos = first_real | (real & (pos - prev_pos != 1)) if pos is not None else first_real
    if cu_ok:
        by_cu = np.zeros(B * T, dtype=bool)
        by_cu[cu[:-1]] = True
        by_cu = (by_cu.reshape(B, T) | first_real) & real
        if pos is not None and not np.array_equal(by_cu, by_pos):
            diff = by_cu != by_pos
            r, s = np.argwhere(diff)[0]
            add("cu_seq_lens_disagree_with_positions",
                f"cu_seq_lens start documents at {np.flatnonzero(by_cu)[:8].tolist()}, position_ids at "
                f"{np.flatnonzero(by_pos)[:8].tolist()} (flattened); first disagreement row {r}, token {s}", diff)
        starts = by_cu
    else:
        starts = by_pos
    seg = np.where(real, np.cumsum(starts, 1) - 1, -1)

    # ---- positions
    if pos is not None:
        bad_start = starts & real & (pos != 0)
        if cu_ok:  # inside a cu document positions must count 0, 1, 2, ...
            first = _run_starts(starts).reshape(B, T)
            expect = np.arange(B * T).reshape(B, T) - first
            bad = real & (pos != expect)
        else:
            bad = bad_start
        if bad.any():
            r, s = np.argwhere(bad)[0]
            add("positions_do_not_restart", f"{int(bad.sum())} token(s) off, first row {r}, token {s}: position "
                                            f"{pos[r, s]} where its document needs {0 if starts[r, s] else 'the next'}"
                                            , bad)
        if mask is None:
            zero_pads = pads & (pos == 0)
            if zero_pads.sum() >= 2:
                segs = 1 + (np.diff(pos, axis=1) != 1).sum(1)
                r = int(np.argmax(zero_pads.sum(1)))
                add("pads_given_position_zero",
                    f"{int(zero_pads.sum())} pads at position 0; transformers sees {int(segs[r])} documents in row "
                    f"{r} where there are {int(seg[r].max()) + 1}", zero_pads)
        if mask is not None:
            packed_rows = (starts & ~first_real).any(1)
            if packed_rows.any():
                r = int(np.argmax(packed_rows))
                kind = "an all-ones" if mask[r].all() else "a"
                add("attention_mask_hides_packing",
                    f"row {r} holds {int(seg[r].max()) + 1} documents by position_ids, with {kind} 2D attention_mask "
                    "beside them: drop the mask (and use_cache=False), or pass a 4D block-diagonal mask",
                    starts & ~first_real)

    # ---- labels
    if labels is not None:
        counted = labels != IGNORE_INDEX
        crossing = starts & ~first_real & counted
        if crossing.any():
            r, s = np.argwhere(crossing)[0]
            add("label_crosses_boundary", f"{int(crossing.sum())} document start(s) carry a label, first row {r}, "
                                          f"token {s} (label {labels[r, s]}): set it to -100", crossing)
        wrong = real & counted & (labels != ids)
        if wrong.any():
            r, s = np.argwhere(wrong)[0]
            add("label_is_not_the_token", f"{int(wrong.sum())} label(s) differ from input_ids, first row {r}, "
                                          f"token {s}: label {labels[r, s]}, token {ids[r, s]}", wrong)
        in_loss = pads & counted
        if in_loss.any():
            r, s = np.argwhere(in_loss)[0]
            add("pad_in_loss", f"{int(in_loss.sum())} pad(s) carry a label, first row {r}, token {s}", in_loss)

    docs = []
    for r in range(B):  # rows of one batch: a handful
        st = np.flatnonzero(starts[r])
        ends = np.r_[st[1:], T]
        docs.append(tuple((int(s), int(real[r, s:e].sum())) for s, e in zip(st, ends)))
    if cu is not None or (pos is not None and mask is None and B == 1):
        fmt = "padding-free"
    elif mask is not None:
        fmt = "padded"
    elif pos is not None:
        fmt = "packed rows"
    else:
        fmt = "plain"
    return HFBatchCheck(format=fmt, shape=(B, T), violations=tuple(out), documents=tuple(docs),
                        marks=tuple(marks), segment_ids=seg, arrays=a)
