"""What the loss trains on: counted targets, trained positions, and the label rules.

transformers' labels are unshifted: the model compares the logits at position ``i`` with
``labels[i + 1]`` over the whole row, so a counted label on a document's first token trains the
previous document's last position to predict it. Shifted labels (targets: torchtune recipes,
Megatron, nanoGPT) sit on the position that predicts them; Megatron's ``loss_mask`` decides which
train (``megatron.core.datasets.gpt_dataset._get_ltor_masks_and_position_ids``: 0 at pads and,
with ``eod_mask_loss``, at every EOD token, whose target is the next document's first token).

A row's last target predicts a token the row does not hold: in Megatron's batch it is the next
token of the stream (each sample is ``seq_length + 1`` tokens, ``tokens = text[:-1]``,
``labels = text[1:]``). It crosses a document edge only where the document ends there: the
row's last token is an EOS id, or the next row starts a new document with exactly that token. A
row that starts with an EOS id starts no document: the EOS ends the one the row before was in
(Megatron's stream ends each document with its EOD, and ``_get_ltor_masks_and_position_ids``
restarts positions at every sample, so a row cut just before an EOD begins at position 0 with it).

    >>> from packing_core.attention.documents import intended_documents
    >>> t = BatchTensors(np.array([[5, 6, 7, 8]]), np.array([[0, 1, 0, 1]]), labels=np.array([[6, -100, 8, 9]]))
    >>> trained_positions(t, intended_documents(t)).astype(int).tolist()
    [[1, 0, 1, 1]]
"""
from __future__ import annotations

import numpy as np

from packing_core.attention.documents import IntendedDocuments
from packing_core.attention.tensors import BatchTensors
from packing_core.batch.packed import IGNORE_INDEX
from packing_core.check.rules import Finding


def first_hit(where: np.ndarray) -> tuple[int, int]:
    """``(row, token)`` of the first True."""
    r, s = np.argwhere(where)[0]
    return int(r), int(s)


def marks_of(where: np.ndarray, limit: int = 2000) -> tuple[tuple[int, int], ...]:
    """``(row, token)`` of every True, up to ``limit``: what a figure marks."""
    return tuple((int(r), int(s)) for r, s in np.argwhere(where)[:limit])


def counted_labels(t: BatchTensors) -> np.ndarray | None:
    """bool [B, T]: labels the loss counts (not -100, and in the ``loss_mask`` where one is given)."""
    if t.labels is None:
        return None
    counted = t.labels != IGNORE_INDEX
    return counted & t.loss_mask if t.loss_mask is not None else counted


def trained_positions(t: BatchTensors, docs: IntendedDocuments) -> np.ndarray:
    """bool [B, T]: positions whose output the loss trains (all real tokens when there are no labels)."""
    counted = counted_labels(t)
    if counted is None:
        return docs.real.copy()
    if docs.labels_mode == "shifted":
        return counted & docs.real
    return np.concatenate([counted[:, 1:], np.zeros((counted.shape[0], 1), bool)], 1) & docs.real


def _last_real(real: np.ndarray) -> np.ndarray:
    """bool [B, T]: each row's last real token."""
    B, T = real.shape
    out = np.zeros_like(real)
    last = T - 1 - np.argmax(real[:, ::-1], 1)
    out[np.arange(B), last] = real.any(1)
    return out


def _row_end_crossings(t: BatchTensors, docs: IntendedDocuments, counted: np.ndarray, eos_ids) -> np.ndarray:
    """bool [B, T]: counted targets at a row's last real token that cross into another document."""
    B, T = t.shape
    real, ids, lab = docs.real, t.input_ids, t.labels
    last = _last_real(real) & counted
    ends_doc = np.isin(ids, list(eos_ids)) if len(eos_ids) else np.zeros_like(real)
    nxt_first = np.full(B, -1, dtype=np.int64)       # the next row's first real token, where it starts a document
    firsts = np.argmax(real, 1)
    pos = t.positions
    if B > 1:
        starts_new = np.ones(B - 1, bool)
        if pos is not None:
            p0 = int(pos[real].min()) if real.any() else 0
            starts_new = pos[np.arange(1, B), firsts[1:]] == p0
        first_ids = ids[np.arange(1, B), firsts[1:]]
        starts_new &= ~np.isin(first_ids, list(eos_ids))          # an EOS ends the document it continues
        nxt_first[:-1] = np.where(starts_new & real[1:].any(1), first_ids, -1)
    into_next = lab == nxt_first[:, None]
    return last & (ends_doc | into_next)


def label_findings(t: BatchTensors, docs: IntendedDocuments, *, eos_ids=(),
                   allow_cross_document: bool = False) -> list[Finding]:
    """Labels across document edges, labels that are not their token, pads in the loss."""
    if t.labels is None:
        return []
    out: list[Finding] = []
    B, T = t.shape
    real, starts, lab, ids = docs.real, docs.starts, t.labels, t.input_ids
    counted = counted_labels(t)
    row_start = np.zeros((B, T), dtype=bool)
    row_start[np.arange(B), np.argmax(real, 1)] = real.any(1)
    if docs.labels_mode == "unshifted":
        crossing = starts & ~row_start & counted
        wrong = real & counted & (lab != ids)
        wrong_name, wrong_what = "label_is_not_the_token", "differ from their token"
    else:
        row_end = _last_real(real) & real[:, -1:]             # the last token of a full row: its target is unseen
        inner_end = np.concatenate([starts[:, 1:] | ~real[:, 1:], np.ones((B, 1), bool)], 1) & ~row_end
        crossing = (real & inner_end & counted) | (row_end & _row_end_crossings(t, docs, counted, eos_ids))
        nxt = np.concatenate([ids[:, 1:], np.full((B, 1), -1)], 1)
        wrong = real & counted & ~inner_end & ~row_end & (lab != nxt)
        wrong_name, wrong_what = "target_is_not_the_next_token", "differ from the next token"
    if crossing.any():
        r, s = first_hit(crossing)
        where = "" if t.loss_mask is None else " (loss_mask counts them)"
        detail = (f"{int(crossing.sum())} label(s) train across a document edge{where}, first row {r}, token {s} "
                  f"(label {int(lab[r, s])})")
        name = "cross_document_targets_allowed" if allow_cross_document else "label_crosses_boundary"
        out.append(Finding(name, detail, marks=marks_of(crossing)))
    if wrong.any():
        r, s = first_hit(wrong)
        out.append(Finding(wrong_name, f"{int(wrong.sum())} counted label(s) {wrong_what}, first row {r}, token {s}: "
                                       f"label {int(lab[r, s])}, token {int(ids[r, s])}", marks=marks_of(wrong)))
    in_loss = ~real & counted
    if in_loss.any():
        r, s = first_hit(in_loss)
        out.append(Finding("pad_in_loss", f"{int(in_loss.sum())} pad(s) carry a label, first row {r}, token {s}",
                           marks=marks_of(in_loss)))
    return out
