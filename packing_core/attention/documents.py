"""The intended documents of a trainer's batch: what the data says, from the strongest evidence it carries.

An attention implementation reads one tensor of a batch (see :mod:`.semantics`); whether it
keeps documents apart is judged against the documents the batch was meant to hold. Evidence
comes in tiers, strongest first (:data:`TIERS`):

1. what the trainer wrote down: ``cu_seq_lens`` (DataCollatorWithFlattening, TRL), OLMo-core's
   ``doc_lens``, a 2D attention mask of document numbers, ``seq_idx``, ``position_ids`` that
   restart (a document starts wherever a position does not follow its predecessor by +1), the
   blocks of a 4D mask; each is deliberate, so every start any of them marks is a document start
   (a kernel that reads a coarser one lets documents meet), and where they differ the check says so;
2. ``labels``: an isolated -100 between counted labels, as ``DataCollatorWithFlattening`` writes at
   each document's first label (with shifted labels: at its last target);
3. ``padding``: a batch whose rows end in pads (not only its last row) holds one example a row;
4. ``eos`` / ``bos``: a token after an end-of-sequence id, or a beginning-of-sequence id.

The strongest tier that carries evidence decides. Offsets, document numbers and ``seq_idx``
carry it whenever present; positions, mask blocks and labels only where they mark a boundary;
none as fixed-size chunks (pieces all of one length with EOS ids inside: wrapped packing
cuts the stream there, not at documents). A weaker source that starts a document inside a
decided one is *overruled*: an EOS there ends a chat turn, not a document (``<|im_end|>`` ends
every turn of SmolLM2's template). So EOS decides only where nothing stronger exists: a
wrapped stream.

    >>> t = BatchTensors(np.array([[5, 2, 6, 7, 2, 8]]), position_ids=np.array([[0, 1, 2, 3, 4, 0]]))
    >>> d = intended_documents(t, eos_ids=(2,))
    >>> d.document_ids.tolist(), d.decided_by, [e.source for e in d.overruled]
    ([[0, 0, 0, 0, 0, 1]], ('position_ids',), ['eos'])
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from packing_core._validate import InputError
from packing_core.attention.tensors import BatchTensors
from packing_core.batch.packed import IGNORE_INDEX

LABEL_MODES = ("unshifted", "shifted", "auto")
# evidence sources, strongest tier first; piece_ids are a lab PackedBatch's own truth
TIERS = (("piece_ids", "cu_seq_lens", "doc_lens", "document_mask", "seq_idx", "position_ids", "mask_blocks"),
         ("labels",), ("padding",), ("eos", "bos"))
_EXPLICIT = {"piece_ids", "cu_seq_lens", "doc_lens", "document_mask", "seq_idx"}   # decide whenever present


def tier_of(source: str) -> int:
    return next(i for i, names in enumerate(TIERS) if source in names)


@dataclass(frozen=True)
class Evidence:
    """One source of document boundaries: where it starts documents."""

    source: str                               # one of TIERS' names
    starts: np.ndarray = field(repr=False)    # bool [B, T]: a document starts here (row starts excluded)

    @property
    def tier(self) -> int:
        return tier_of(self.source)

    def flat_starts(self) -> list[int]:
        return np.flatnonzero(self.starts).tolist()


@dataclass(frozen=True)
class IntendedDocuments:
    """Documents as the data means them: ``document_ids`` [B, T] in flattened order, -1 on pads.

    ``decided_by`` names the sources of the tier that decided; ``overruled`` holds the weaker
    evidence that starts documents inside them (only its starts there); ``chunks`` names the
    sources read as fixed-size chunks, not documents.
    """

    document_ids: np.ndarray = field(repr=False)
    real: np.ndarray = field(repr=False)              # bool [B, T]: not a pad
    evidence: tuple[Evidence, ...]
    pads_from: str                                    # how pads were found ("" = none)
    labels_mode: str                                  # unshifted | shifted: as decided
    labels_reason: str                                # why (auto says what it decided)
    decided_by: tuple[str, ...] = ()
    overruled: tuple[Evidence, ...] = ()
    chunks: tuple[str, ...] = ()

    @property
    def starts(self) -> np.ndarray:
        """bool [B, T]: the first token of every document."""
        d = self.document_ids
        prev = np.concatenate([np.full((d.shape[0], 1), -2), d[:, :-1]], 1)
        return self.real & (d != prev)

    @property
    def count(self) -> int:
        return int(len(np.unique(self.document_ids[self.real])))

    def per_row(self) -> tuple[tuple[tuple[int, int], ...], ...]:
        """Per row: ``(start, length)`` of each document piece, in tokens of that row."""
        out = []
        for r in range(self.document_ids.shape[0]):       # rows of one batch: a handful (documents: any number)
            d = self.document_ids[r]
            at = np.flatnonzero(d >= 0)
            _, first, count = np.unique(d[at], return_index=True, return_counts=True)
            out.append(tuple(zip(at[first].tolist(), count.tolist())))
        return tuple(out)

    def disagreements(self) -> list[str]:
        """One line per pair of evidence sources that start documents at different tokens."""
        lines = []
        for a, b in zip(self.evidence, self.evidence[1:]):
            if not np.array_equal(a.starts & self.real, b.starts & self.real):
                only_a = np.flatnonzero(a.starts & ~b.starts & self.real)[:6].tolist()
                only_b = np.flatnonzero(b.starts & ~a.starts & self.real)[:6].tolist()
                lines.append(f"{a.source} start documents at flattened tokens {a.flat_starts()[:8]}, {b.source} at "
                             f"{b.flat_starts()[:8]} (only {a.source}: {only_a}; only {b.source}: {only_b})")
        return lines


def _shifted_left(a: np.ndarray, fill) -> np.ndarray:
    return np.concatenate([a[:, 1:], np.full((a.shape[0], 1), fill, dtype=a.dtype)], 1)


def _shifted_right(a: np.ndarray, fill) -> np.ndarray:
    return np.concatenate([np.full((a.shape[0], 1), fill, dtype=a.dtype), a[:, :-1]], 1)


def decide_labels(t: BatchTensors, mode: str = "auto") -> tuple[str, str]:
    """``(unshifted | shifted, why)``. HF labels are unshifted (the model shifts them); torchtune's
    recipes, Megatron and nanoGPT hand the loss targets already shifted. A ``loss_mask`` (Megatron's
    batch) means shifted. ``auto`` counts which reading makes more counted labels equal to a token.

    >>> decide_labels(BatchTensors(np.array([[5, 6, 7]]), labels=np.array([[6, 7, -100]])))[0]
    'shifted'
    """
    if mode not in LABEL_MODES:
        raise InputError(f"unknown labels mode {mode!r}: choose one of {', '.join(LABEL_MODES)}")
    if mode != "auto":
        return mode, f"labels read as {mode} (as asked)"
    if t.labels is None:
        return "unshifted", "no labels"
    if t.loss_mask is not None:
        return "shifted", "labels read as shifted targets, loss_mask deciding which train (Megatron's batch)"
    ids, lab = t.input_ids, t.labels
    counted = lab != IGNORE_INDEX
    same = int((counted & (lab == ids)).sum())
    nxt = int((counted[:, :-1] & (lab[:, :-1] == ids[:, 1:])).sum())
    if nxt > same:
        return "shifted", (f"labels read as shifted (auto): {nxt} counted labels equal the next token, {same} their "
                           "own token")
    return "unshifted", (f"labels read as unshifted (auto, transformers' convention): {same} counted labels equal "
                         f"their own token, {nxt} the next one")


def _pads(t: BatchTensors) -> tuple[np.ndarray, str]:
    """bool [B, T] pads, and how they were found: the 2D mask's zeros, tokens a 4D mask lets nobody
    read, tokens past ``cu_seq_lens[-1]`` or a row's ``doc_lens``, or with none of them a trailing run
    of two or more tokens whose position does not step (0 0 0, as TRL pads)."""
    B, T = t.shape
    if t.mask_2d is not None:
        return ~t.mask_2d, "attention_mask zeros"
    if t.mask_4d is not None:                     # a token no query may read, not even itself, is in no document
        unread = np.broadcast_to(~t.mask_4d.any(axis=(1, 2)), (B, T))
        if unread.any():
            return unread.copy(), "tokens the 4D mask lets no query read"
        tail = _pad_block(t)
        if tail.any():
            return tail, "a trailing block of one repeated, untrained id (torchtune's pad sequence)"
    cu = t.cu_seq_lens_q if t.cu_seq_lens_q is not None else t.cu_seq_lens_k
    if cu is not None and len(cu) >= 2 and 0 < int(cu[-1]) < B * T:
        return (np.arange(B * T) >= int(cu[-1])).reshape(B, T), "tokens after cu_seq_lens[-1]"
    if t.doc_lens is not None and t.doc_lens.shape[0] == B:
        used = t.doc_lens.sum(1)
        if (used < T).any() and (used > 0).all():
            return np.arange(T)[None] >= used[:, None], "tokens past each row's doc_lens"
    pos = t.positions
    if pos is None or T < 2:
        return np.zeros((B, T), dtype=bool), ""
    steps = np.diff(pos, axis=1) == 1                          # [B, T-1]: token k+1 continues token k
    last_step = np.where(steps.any(1), T - 2 - np.argmax(steps[:, ::-1], 1), -1)  # last k with a +1 step
    tail_start = last_step + 2                                # tokens from here never continue a predecessor
    run = T - tail_start
    pads = (np.arange(T)[None] >= tail_start[:, None]) & (run >= 2)[:, None]
    return pads, ("a trailing run of positions that do not step by +1" if pads.any() else "")


def _pad_block(t: BatchTensors) -> np.ndarray:
    """bool [B, T]: a trailing run of one repeated id, all labels -100, that the 4D mask walls off as its own block
    (torchtune's ``PackedDataset._pad_pack`` adds the pads as one more sequence of ``padding_idx``)."""
    ids, B, T = t.input_ids, *t.shape
    if t.labels is None or T < 2:
        return np.zeros((B, T), bool)
    same = ids == ids[:, -1:]
    run = np.where(same.all(1), T, np.argmax(~same[:, ::-1], 1))
    tail = np.arange(T)[None] >= (T - run)[:, None]
    start = np.clip(T - run, 1, T - 1)
    meant = t.mask_4d.any(axis=1)
    walled = ~meant[np.arange(B) if meant.shape[0] == B else np.zeros(B, int), start, start - 1]
    ok = (run >= 2) & (run < T) & walled & ((t.labels == IGNORE_INDEX) | ~tail).all(1)
    return tail & ok[:, None]


def offsets_starts(cu: np.ndarray | None, B: int, T: int) -> np.ndarray | None:
    """bool [B, T] starts from offsets over the flattened batch; zero-length documents (a repeated
    offset) start nothing. None for offsets that do not rise from 0 within the tokens."""
    if cu is None or len(cu) < 2 or cu[0] != 0 or (np.diff(cu) < 0).any() or cu[-1] > B * T:
        return None
    s = np.zeros(B * T, dtype=bool)
    s[np.asarray(cu[:-1], dtype=np.int64)[cu[:-1] < B * T]] = True
    return s.reshape(B, T)


def _changes(ids: np.ndarray, shape) -> np.ndarray:
    ids = np.broadcast_to(ids, shape)
    return ids != _shifted_right(ids, ids[0, 0] if ids.size else 0)


def _rope_starts(t: BatchTensors) -> np.ndarray | None:
    """Starts in 3-D rotary positions: the text row (4 sections), else every section back at its minimum."""
    r = t.rope_position_ids
    if r is None:
        return None
    if r.shape[0] == 4:
        return None                               # the text row is position_ids already
    low = (r == r.min(axis=(0, 2), keepdims=True)).all(0)      # [B, T]: every section at its first position
    return low & ~_shifted_right(low, False)


def _evidence(t: BatchTensors, mode: str, eos_ids, bos_ids, real: np.ndarray) -> list[Evidence]:
    B, T = t.shape
    out: list[Evidence] = []
    cu = offsets_starts(t.cu_seq_lens_q if t.cu_seq_lens_q is not None else t.cu_seq_lens_k, B, T)
    if cu is not None:
        out.append(Evidence("cu_seq_lens", cu))
    dl = offsets_starts(t.doc_lens_offsets, B, T)
    if dl is not None:
        out.append(Evidence("doc_lens", dl))
    if t.document_mask is not None:
        out.append(Evidence("document_mask", _changes(t.document_mask, (B, T))))
    if t.seq_idx is not None and t.seq_idx.shape[-1] == T:
        out.append(Evidence("seq_idx", _changes(t.seq_idx.reshape(-1, T), (B, T))))
    pos = t.positions
    if pos is not None:
        out.append(Evidence("position_ids", _shifted_right(real, False) & (pos != _shifted_right(pos, -10) + 1)))
    elif (rope := _rope_starts(t)) is not None:
        out.append(Evidence("position_ids", rope))
    if t.mask_4d is not None:                                          # a query that cannot read its predecessor
        reads_prev = t.mask_4d.any(axis=1)[:, np.arange(1, T), np.arange(T - 1)]       # [B or 1, T-1]
        cannot = np.concatenate([np.zeros((reads_prev.shape[0], 1), bool), ~reads_prev], 1)
        out.append(Evidence("mask_blocks", np.broadcast_to(cannot, (B, T)) & _shifted_right(real, False)))
    if t.labels is not None:
        counted = t.labels != IGNORE_INDEX
        sep = ~counted & _shifted_right(counted, False) & _shifted_left(counted, False) & real
        out.append(Evidence("labels", sep if mode == "unshifted" else _shifted_right(sep, False)))
    pad_rows = (~real).any(1)
    if pad_rows[:-1].any() or (B == 1 and pad_rows[0]):
        out.append(Evidence("padding", np.zeros((B, T), bool)))       # one example a row: no start inside
    ids = t.input_ids
    if len(eos_ids):
        is_eos = np.isin(ids, list(eos_ids))
        run = is_eos & _shifted_right(is_eos, False) & (ids == _shifted_right(ids, -1))   # EOS repeated: padding
        out.append(Evidence("eos", _shifted_right(is_eos, False) & ~run & _shifted_right(real, False)))
    if len(bos_ids):
        out.append(Evidence("bos", np.isin(ids, list(bos_ids))))
    return out


def _chunked(e: Evidence, real: np.ndarray, eos_starts: np.ndarray | None) -> bool:
    """Whether ``e`` cuts the tokens into three or more pieces of one length (the last may be shorter), EOS ids inside."""
    if eos_starts is None or not (eos_starts & ~e.starts).any():
        return False
    flat_real = real.reshape(-1)
    idx = np.flatnonzero((e.starts | _row_firsts(real)).reshape(-1)[flat_real])
    lengths = np.diff(np.r_[idx, int(flat_real.sum())])
    full = lengths[:-1] == lengths[0]
    return len(lengths) >= 3 and lengths[0] >= 2 and full.all() and lengths[-1] <= lengths[0]


def _row_firsts(real: np.ndarray) -> np.ndarray:
    first = np.zeros_like(real)
    first[np.arange(real.shape[0]), np.argmax(real, 1)] = real.any(1)
    return first


def intended_documents(t: BatchTensors, *, eos_ids=(), bos_ids=(), labels: str = "auto",
                       extra: tuple[Evidence, ...] = ()) -> IntendedDocuments:
    """The documents ``t`` is meant to hold, from the strongest evidence it carries (see the module).

    Every row starts a document. ``eos_ids`` / ``bos_ids`` come from a tokenizer (or ``--eos-id``);
    ``extra`` adds evidence the caller owns (a PackedBatch's piece ids). With neither a stronger
    source nor ``eos_ids``, a batch whose documents are separated only by EOS tokens (TRL's
    ``wrapped`` packing) shows no boundary here, and the checker says so.
    """
    B, T = t.shape
    pads, pads_from = _pads(t)
    real = ~pads
    mode, reason = decide_labels(t, labels)
    row_first = _row_firsts(real)
    evidence = [Evidence(e.source, e.starts & real & ~row_first)
                for e in [*_evidence(t, mode, tuple(eos_ids), tuple(bos_ids), real), *extra]]
    eos = next((e.starts for e in evidence if e.source == "eos"), None)
    chunks = tuple(e.source for e in evidence if e.source not in ("eos", "bos", "piece_ids")
                   and _chunked(e, real, eos))
    carries = [e for e in evidence if e.source not in chunks and (e.source in _EXPLICIT or e.source == "padding"
                                                                  or e.starts.any())]
    top = min((e.tier for e in carries), default=len(TIERS))
    decided = [e for e in carries if e.tier == top]
    starts = np.zeros((B, T), dtype=bool)
    for e in decided:
        starts |= e.starts
    overruled = tuple(Evidence(e.source, e.starts & ~starts) for e in evidence
                      if e.tier > top and (e.starts & ~starts).any())
    starts |= row_first
    starts &= real
    starts[:, 0] = True
    doc = np.cumsum(starts.reshape(-1)).reshape(B, T) - 1
    doc = np.where(real, doc, -1)
    shown = tuple(e for e in evidence if e.source != "padding" and (e.starts.any() or e.source != "labels"))
    return IntendedDocuments(doc, real, shown, pads_from, mode, reason, tuple(e.source for e in decided),
                             overruled, chunks)
