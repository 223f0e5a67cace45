"""The intended documents of a trainer's batch: what the data says, from evidence no kernel owns.

An attention implementation reads one tensor of a batch (see :mod:`.semantics`); whether it
keeps documents apart is judged against the documents the batch was meant to hold. Those
come from every piece of evidence the batch carries, each read on its own:

- ``cu_seq_lens``: offsets over the flattened batch (DataCollatorWithFlattening, TRL);
- ``position_ids``: a document starts wherever a position does not follow its predecessor by +1;
- ``labels``: an isolated -100 between counted labels, as ``DataCollatorWithFlattening(separator_id=-100)``
  writes at each document's first label (with shifted labels: at its last target);
- ``eos`` / ``bos``: a token after an end-of-sequence id, or a beginning-of-sequence id, starts one.

The intended documents are the union of every start found: a kernel that reads any fewer
boundaries lets documents meet. Where the pieces of evidence disagree, :attr:`IntendedDocuments.disagreements`
says which says what.

    >>> t = BatchTensors(np.array([[5, 6, 7, 8, 9]]), labels=np.array([[-100, 6, 7, -100, 9]]))
    >>> d = intended_documents(t)
    >>> d.document_ids.tolist(), [e.source for e in d.evidence]
    ([[0, 0, 0, 1, 1]], ['labels'])
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from packing_core._validate import InputError
from packing_core.attention.semantics import BatchTensors
from packing_core.batch.packed import IGNORE_INDEX

LABEL_MODES = ("unshifted", "shifted", "auto")


@dataclass(frozen=True)
class Evidence:
    """One source of document boundaries: where it starts documents."""

    source: str                               # cu_seq_lens | position_ids | labels | eos | bos | piece_ids
    starts: np.ndarray = field(repr=False)    # bool [B, T]: a document starts here (row starts excluded)

    def flat_starts(self) -> list[int]:
        return np.flatnonzero(self.starts).tolist()


@dataclass(frozen=True)
class IntendedDocuments:
    """Documents as the data means them: ``document_ids`` [B, T] in flattened order, -1 on pads."""

    document_ids: np.ndarray = field(repr=False)
    real: np.ndarray = field(repr=False)              # bool [B, T]: not a pad
    evidence: tuple[Evidence, ...]
    pads_from: str                                    # how pads were found ("" = none)
    labels_mode: str                                  # unshifted | shifted: as decided
    labels_reason: str                                # why (auto says what it decided)

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
        for r in range(self.document_ids.shape[0]):       # rows of one batch: a handful
            d = self.document_ids[r]
            ids = np.unique(d[d >= 0])
            out.append(tuple((int(np.argmax(d == i)), int((d == i).sum())) for i in ids))
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
    recipes, Megatron and nanoGPT hand the loss targets already shifted. ``auto`` counts which
    reading makes more counted labels equal to a token.

    >>> decide_labels(BatchTensors(np.array([[5, 6, 7]]), labels=np.array([[6, 7, -100]])))[0]
    'shifted'
    """
    if mode not in LABEL_MODES:
        raise InputError(f"unknown labels mode {mode!r}: choose one of {', '.join(LABEL_MODES)}")
    if mode != "auto":
        return mode, f"labels read as {mode} (as asked)"
    if t.labels is None:
        return "unshifted", "no labels"
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
    """bool [B, T] pads, and how they were found: the 2D mask's zeros, tokens past ``cu_seq_lens[-1]``,
    or with neither a trailing run of two or more tokens whose position does not step (0 0 0, as TRL pads)."""
    B, T = t.shape
    if t.mask_2d is not None:
        return ~t.mask_2d, "attention_mask zeros"
    cu = t.cu_seq_lens_q if t.cu_seq_lens_q is not None else t.cu_seq_lens_k
    if cu is not None and len(cu) >= 2 and 0 < int(cu[-1]) < B * T:
        return (np.arange(B * T) >= int(cu[-1])).reshape(B, T), "tokens after cu_seq_lens[-1]"
    pos = t.positions
    if pos is None or T < 2:
        return np.zeros((B, T), dtype=bool), ""
    steps = np.diff(pos, axis=1) == 1                          # [B, T-1]: token k+1 continues token k
    last_step = np.where(steps.any(1), T - 2 - np.argmax(steps[:, ::-1], 1), -1)  # last k with a +1 step
    tail_start = last_step + 2                                # tokens from here never continue a predecessor
    run = T - tail_start
    pads = (np.arange(T)[None] >= tail_start[:, None]) & (run >= 2)[:, None]
    return pads, ("a trailing run of positions that do not step by +1" if pads.any() else "")


def _cu_starts(cu: np.ndarray | None, B: int, T: int) -> np.ndarray | None:
    if cu is None or len(cu) < 2 or cu[0] != 0 or (np.diff(cu) <= 0).any() or cu[-1] > B * T:
        return None
    s = np.zeros(B * T, dtype=bool)
    s[np.asarray(cu[:-1], dtype=np.int64)] = True
    return s.reshape(B, T)


def intended_documents(t: BatchTensors, *, eos_ids=(), bos_ids=(), labels: str = "auto",
                       extra: tuple[Evidence, ...] = ()) -> IntendedDocuments:
    """The documents ``t`` is meant to hold, from every piece of evidence it carries.

    Every row starts a document. ``eos_ids`` / ``bos_ids`` come from a tokenizer (or ``--eos-id``);
    ``extra`` adds evidence the caller owns (a PackedBatch's piece ids). With none of
    ``eos_ids``/``bos_ids``, a batch whose documents are separated only by EOS tokens (TRL's ``wrapped``
    packing) shows no boundary here, and the checker says so.
    """
    B, T = t.shape
    pads, pads_from = _pads(t)
    real = ~pads
    mode, reason = decide_labels(t, labels)
    evidence: list[Evidence] = []
    cu = _cu_starts(t.cu_seq_lens_q if t.cu_seq_lens_q is not None else t.cu_seq_lens_k, B, T)
    if cu is not None:
        evidence.append(Evidence("cu_seq_lens", cu & real))
    pos = t.positions
    if pos is not None:
        prev = _shifted_right(pos, -10)
        evidence.append(Evidence("position_ids", real & _shifted_right(real, False) & (pos != prev + 1)))
    if t.labels is not None:
        counted = t.labels != IGNORE_INDEX
        before, after = _shifted_right(counted, False), _shifted_left(counted, False)
        sep = ~counted & before & after & real
        starts = sep if mode == "unshifted" else _shifted_right(sep, False)
        evidence.append(Evidence("labels", starts & real))
    ids = t.input_ids
    if len(eos_ids):
        after_eos = _shifted_right(np.isin(ids, list(eos_ids)), False)
        evidence.append(Evidence("eos", after_eos & real & _shifted_right(real, False)))
    if len(bos_ids):
        evidence.append(Evidence("bos", np.isin(ids, list(bos_ids)) & real))
    evidence += list(extra)
    row_first = np.zeros((B, T), dtype=bool)
    row_first[np.arange(B), np.argmax(real, 1)] = True
    evidence = [Evidence(e.source, e.starts & real & ~row_first) for e in evidence]
    starts = np.zeros((B, T), dtype=bool)
    starts[:, 0] = True
    for e in evidence:
        starts |= e.starts
    starts &= real
    starts[:, 0] = True
    doc = np.cumsum(starts.reshape(-1)).reshape(B, T) - 1
    doc = np.where(real, doc, -1)
    return IntendedDocuments(doc, real, tuple(e for e in evidence if e.starts.any() or e.source != "labels"),
                             pads_from, mode, reason)
