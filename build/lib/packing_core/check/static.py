"""The rules that hold for every attention implementation: offsets, positions, labels, pads.

Half of a check does not depend on who reads the batch: whether ``cu_seq_lens`` rise, whether
positions restart at each document, whether a label trains across a document edge
(:mod:`.labels`), whether a pad is in the loss, what the evidence decided (:mod:`.evidence`).
:func:`static_check` computes that half once, with the intended documents it is judged
against; :mod:`packing_core.check.batch` then adds, per implementation, what the kernel lets
each query read. A lab ``PackedBatch`` adds the rules only it can be held to (its
targets, loss mask and piece ids against its plan): :func:`packed_findings`.

    >>> ids, pos = np.array([[5, 6, 7, 8]]), np.array([[0, 1, 0, 1]])     # two documents of two tokens
    >>> [f.name for f in static_check(BatchTensors(ids, pos, labels=np.array([[-100, 6, -100, 8]]))).findings]
    []
    >>> [f.name for f in static_check(BatchTensors(ids, pos, labels=np.array([[-100, 6, 7, 8]]))).findings]
    ['label_crosses_boundary']
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from packing_core.attention.documents import Evidence, IntendedDocuments, intended_documents
from packing_core.attention.tensors import BatchTensors
from packing_core.batch.packed import IGNORE_INDEX, PackedBatch, segment_layout
from packing_core.check.evidence import TokenizerFacts, evidence_findings, tokenizer_fit
from packing_core.check.labels import first_hit, label_findings, marks_of, trained_positions
from packing_core.check.rules import Finding

__all__ = ["StaticCheck", "first_hit", "marks_of", "packed_findings", "static_check", "static_findings"]


@dataclass(frozen=True)
class StaticCheck:
    """The implementation-free half of a check, computed once per batch.

    ``findings`` hold for every reader; ``packed`` are a PackedBatch's own (empty for a
    trainer's dict); ``ignored`` names the entries no attention reads; ``trained`` marks the
    positions whose output the loss trains (bool [B, T]).
    """

    tensors: BatchTensors = field(repr=False)
    documents: IntendedDocuments = field(repr=False)
    findings: tuple[Finding, ...]
    packed: tuple[Finding, ...] = ()
    ignored: tuple[str, ...] = ()
    trained: np.ndarray | None = field(default=None, repr=False, compare=False)
    trainer: str = ""             # the trainer the batch's shape names (check.trainers), "" when none

    def to_dict(self) -> dict:
        return {"documents": self.documents.count, "findings": [f.to_dict() for f in self.findings],
                "packed": [f.to_dict() for f in self.packed], "ignored": list(self.ignored)}


def static_check(t: BatchTensors, ignored: tuple[str, ...] = (), *, eos_ids=(), bos_ids=(), labels: str = "auto",
                 evidence: tuple[Evidence, ...] = (), packed: tuple[Finding, ...] = (),
                 tokenizer: TokenizerFacts | None = None, allow_cross_document: bool = False) -> StaticCheck:
    """The intended documents of ``t`` and every finding that does not depend on the implementation.

    ``tokenizer`` (:func:`packing_core.check.evidence.tokenizer_facts`) adds its EOS ids to
    ``eos_ids`` where it fits the batch, and says so where it does not.
    """
    fit_eos, fit = tokenizer_fit(t, tokenizer)
    eos_ids = tuple(dict.fromkeys((*tuple(eos_ids), *fit_eos)))
    bos_ids = tuple(bos_ids)
    docs = intended_documents(t, eos_ids=eos_ids, bos_ids=bos_ids, labels=labels, extra=evidence)
    found = [*fit, *static_findings(t, docs),
             *label_findings(t, docs, eos_ids=eos_ids, allow_cross_document=allow_cross_document),
             *evidence_findings(t, docs, eos_given=bool(eos_ids or bos_ids or tokenizer))]
    return StaticCheck(t, docs, tuple(found), tuple(packed), tuple(ignored), trained_positions(t, docs))


def static_findings(t: BatchTensors, docs: IntendedDocuments) -> list[Finding]:
    """Findings on offsets, positions and pads, which do not depend on the attention implementation."""
    out: list[Finding] = []
    B, T = t.shape
    real, starts = docs.real, docs.starts
    row_start = np.zeros((B, T), dtype=bool)
    row_start[np.arange(B), np.argmax(real, 1)] = real.any(1)
    for name in ("cu_seq_lens_q", "cu_seq_lens_k"):
        cu = getattr(t, name)
        if cu is not None and (cu[0] != 0 or (np.diff(cu) < 0).any() or cu[-1] > B * T):
            out.append(Finding("cu_seq_lens_malformed", f"{name} = {cu[:10].tolist()}{' ...' if len(cu) > 10 else ''} "
                                                        f"for {B * T} tokens"))
    if t.cu_seq_lens_q is not None and t.cu_seq_lens_k is not None and not np.array_equal(t.cu_seq_lens_q,
                                                                                          t.cu_seq_lens_k):
        out.append(Finding("cu_seq_lens_q_differs_from_k",
                           f"q {t.cu_seq_lens_q[:8].tolist()} vs k {t.cu_seq_lens_k[:8].tolist()}"))
    pos = t.positions
    if pos is not None and real.any():
        first_pos = int(pos[real].min())
        continued = row_start & (pos != first_pos)
        if continued.any():
            r, s = first_hit(continued)
            out.append(Finding("document_continues_from_previous_row",
                               f"{int(continued.sum())} row(s) begin mid-document, first row {r} at position "
                               f"{int(pos[r, s])} (documents start at {first_pos})", marks=marks_of(continued)))
        late = starts & ~row_start & (pos != first_pos)
        if late.any():
            r, s = first_hit(late)
            out.append(Finding("positions_do_not_restart",
                               f"{int(late.sum())} document start(s) not at position {first_pos}, first row {r}, token "
                               f"{s}: position {int(pos[r, s])}", marks=marks_of(late)))
        if t.mask_2d is None:
            zero_pads = ~real & (pos == 0)
            if zero_pads.sum() >= 2:
                r = int(np.argmax(zero_pads.sum(1)))
                seen = int((np.diff(pos[r]) != 1).sum()) + 1
                out.append(Finding("pads_given_position_zero",
                                   f"{int(zero_pads.sum())} pads at position 0: transformers' packed detection sees "
                                   f"{seen} sequences in row {r} (so do varlen offsets taken from them), the data "
                                   f"{len(docs.per_row()[r])} documents and a pad tail: {int(zero_pads.sum())} "
                                   "one-token sequences, a kernel call shaped by the pad count (it changes each step); "
                                   "no real token reads a later pad", marks=marks_of(zero_pads)))
    return out


def packed_findings(batch: PackedBatch) -> list[Finding]:
    """What only a PackedBatch knows: its targets, loss mask and piece ids against its plan and cu_seqlens."""
    out: list[Finding] = []
    ids = batch.input_ids.numpy()
    seg = batch.piece_ids.numpy()
    tgt = batch.targets.numpy()
    loss = batch.loss_mask.numpy()
    answer = batch.answer_mask.numpy()
    cu = batch.cu_seqlens.numpy().astype(np.int64)
    valid = seg >= 0
    if (cu != cu[-1]).any():   # static shapes: a tail of the final offset repeated (zero-length pieces, noted)
        cu = cu[: len(cu) - int(np.argmax(cu[::-1] != cu[-1])) + 1]
    if cu[0] != 0 or (np.diff(cu) <= 0).any():
        out.append(Finding("cu_seqlens_not_monotone", f"cu_seqlens = {cu[:12].tolist()}{' ...' if len(cu) > 12 else ''}"))
    if cu[-1] != valid.sum():
        out.append(Finding("cu_seqlens_wrong_total", f"cu_seqlens ends at {cu[-1]}, but there are {int(valid.sum())} "
                                                     "real tokens"))
    flat_seg, flat_row = seg[valid], np.nonzero(valid)[0]
    starts = np.r_[True, (flat_seg[1:] != flat_seg[:-1]) | (flat_row[1:] != flat_row[:-1])]
    if len(cu) - 1 != starts.sum() or not np.array_equal(np.nonzero(starts)[0], cu[:-1][: starts.sum()]):
        out.append(Finding("segments_disagree_with_cu_seqlens",
                           f"piece ids give {int(starts.sum())} pieces starting at "
                           f"{np.nonzero(starts)[0][:8].tolist()}, cu_seqlens gives {len(cu) - 1} starting at "
                           f"{cu[:8].tolist()}"))
    flat_tgt, flat_ids, flat_answer = tgt[valid], ids[valid], answer[valid]
    ends = np.r_[starts[1:], True]
    crossing = np.nonzero(ends & (flat_tgt != IGNORE_INDEX))[0]
    if len(crossing):
        out.append(Finding("label_crosses_boundary", f"{len(crossing)} document-final tokens have a target, first at "
                                                     f"valid token {int(crossing[0])}"))
    inner = ~ends & (flat_tgt != IGNORE_INDEX)
    wrong = np.nonzero(inner & (flat_tgt != np.r_[flat_ids[1:], 0]))[0]
    if len(wrong):
        out.append(Finding("target_is_not_the_next_token", f"{len(wrong)} targets differ from the next token, first at "
                                                           f"valid token {int(wrong[0])}"))
    pads_in = np.nonzero(~valid & ((tgt != IGNORE_INDEX) | loss))
    if len(pads_in[0]):
        out.append(Finding("pad_in_loss", f"{len(pads_in[0])} pad positions in the loss, first at row "
                                          f"{int(pads_in[0][0])}, slot {int(pads_in[1][0])}"))
    plan = batch.plan
    pieces = segment_layout(plan.piece_len)
    planned = np.zeros_like(valid)
    piece = pieces.document_ids                 # laid out by segment_layout, each piece is one "document"
    planned.reshape(-1)[plan.piece_row[piece] * valid.shape[1] + plan.piece_offset[piece] + pieces.position_ids] = True
    if (valid & ~planned).any():
        r, c = np.nonzero(valid & ~planned)
        out.append(Finding("pad_in_attention", f"{len(r)} pad slots carry a piece id, first at row {int(r[0])}, "
                                               f"slot {int(c[0])}"))
    if (loss != (tgt != IGNORE_INDEX)).any():
        r, c = np.nonzero(loss != (tgt != IGNORE_INDEX))
        out.append(Finding("loss_mask_disagrees_with_targets", f"{len(r)} positions, first at row {int(r[0])}, "
                                                               f"slot {int(c[0])}"))
    expected = int((~ends & np.r_[flat_answer[1:], False]).sum())
    if int(loss.sum()) != expected:
        out.append(Finding("loss_count_mismatch", f"{int(loss.sum())} loss positions, but the data has {expected} "
                                                  "trainable answer tokens"))
    return out
