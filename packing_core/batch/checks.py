"""Invariant checker: a sound packed batch has no named violation.

    >>> from packing_core import PackedBatch
    >>> check_batch(PackedBatch.from_documents([[5, 6, 7], [8, 9]], 8, "next-fit"))
    []

Each check names one way packing silently goes wrong. ``check_batch`` returns them
all, so a broken batch tells you every fault at once, not just the first. Positions that
do not restart are reported with ``kind="model-specific"``: they break learned absolute
positions and transformers' padding-free path, not plain RoPE under a correct mask.

A check of tensors cannot see everything: a mask that hides the prompt from the answers
leaves every tensor here intact. ``alone_vs_packed_attention`` (analysis) catches that one.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from packing_core.batch.packed import IGNORE_INDEX, PackedBatch, segment_layout

VIOLATIONS = {
    "cu_seqlens_not_monotone": "cu_seqlens must start at 0 and strictly increase",
    "cu_seqlens_wrong_total": "cu_seqlens must end at the number of real (non-pad) tokens",
    "segments_disagree_with_cu_seqlens": "segment ids must change exactly where cu_seqlens puts a boundary",
    "positions_do_not_restart": "position ids do not restart at 0 at each document. Model-specific: it changes the "
                                "output of learned absolute positions and of scaled RoPE that depends on the row "
                                "(dynamic NTK, LongRoPE). transformers' padding-free path starts a document at "
                                "every step that is not +1 (sdpa/eager) or every return to the minimum position "
                                "(FlashAttention, one flattened row), so there it also removes the mask. Plain "
                                "RoPE with a correct mask: no change",
    "target_crosses_boundary": "the last token of a document must have target -100 (no target across an edge)",
    "target_is_not_next_token": "a target must be the next token of the same document",
    "pad_in_loss": "pads must carry target -100 and stay out of the loss mask",
    "pad_in_attention": "pads (slots the plan leaves empty) must not belong to any document segment",
    "loss_mask_disagrees_with_targets": "the loss mask must be true exactly where the target is not -100",
    "loss_count_mismatch": "loss positions must equal the answer tokens that have a predecessor in their document",
}


# Findings that are wrong for some models only: check_batch reports them with kind "model-specific".
MODEL_SPECIFIC = frozenset({"positions_do_not_restart"})


@dataclass(frozen=True)
class Violation:
    name: str      # one of VIOLATIONS
    detail: str    # where, with the offending values
    kind: str = "violation"   # or "model-specific": wrong for some models only (MODEL_SPECIFIC)

    def __str__(self) -> str:
        return f"{self.name}: {self.detail}"


def check_batch(batch: PackedBatch) -> list[Violation]:
    """All violated invariants of ``batch``; an empty list when it is sound."""
    out: list[Violation] = []
    ids = batch.input_ids.numpy()
    seg = batch.segment_ids.numpy()
    pos = batch.position_ids.numpy()
    tgt = batch.targets.numpy()
    loss = batch.loss_mask.numpy()
    answer = batch.answer_mask.numpy()
    cu = batch.cu_seqlens.numpy().astype(np.int64)
    valid = seg >= 0

    def add(name, detail):
        out.append(Violation(name, detail, "model-specific" if name in MODEL_SPECIFIC else "violation"))

    if cu[0] != 0 or (np.diff(cu) <= 0).any():
        add("cu_seqlens_not_monotone", f"cu_seqlens = {cu[:12].tolist()}{' ...' if len(cu) > 12 else ''}")
    if cu[-1] != valid.sum():
        add("cu_seqlens_wrong_total", f"cu_seqlens ends at {cu[-1]}, but there are {int(valid.sum())} real tokens")

    # walk the valid tokens in row-major order: the order cu_seqlens counts them in
    flat_seg = seg[valid]
    flat_row = np.nonzero(valid)[0]
    starts = np.r_[True, (flat_seg[1:] != flat_seg[:-1]) | (flat_row[1:] != flat_row[:-1])]
    if len(cu) - 1 != starts.sum() or not np.array_equal(np.nonzero(starts)[0], cu[:-1][: starts.sum()]):
        add("segments_disagree_with_cu_seqlens",
            f"segment ids give {int(starts.sum())} documents starting at {np.nonzero(starts)[0][:8].tolist()}, "
            f"cu_seqlens gives {len(cu) - 1} starting at {cu[:8].tolist()}")

    flat_pos = pos[valid]
    expect = np.arange(len(flat_pos)) - np.maximum.accumulate(np.where(starts, np.arange(len(flat_pos)), 0))
    bad = np.nonzero(flat_pos != expect)[0]
    if len(bad):
        add("positions_do_not_restart",
            f"token {int(bad[0])} (valid-token order) has position {int(flat_pos[bad[0]])}, expected {int(expect[bad[0]])}")

    flat_tgt, flat_ids, flat_answer = tgt[valid], ids[valid], answer[valid]
    ends = np.r_[starts[1:], True]
    crossing = np.nonzero(ends & (flat_tgt != IGNORE_INDEX))[0]
    if len(crossing):
        add("target_crosses_boundary",
            f"{len(crossing)} document-final tokens have a target, first at valid token {int(crossing[0])}")
    inner = ~ends & (flat_tgt != IGNORE_INDEX)
    wrong = np.nonzero(inner & (flat_tgt != np.r_[flat_ids[1:], 0]))[0]
    if len(wrong):
        add("target_is_not_next_token", f"{len(wrong)} targets differ from the next token, first at valid token {int(wrong[0])}")

    pads_in = np.nonzero(~valid & ((tgt != IGNORE_INDEX) | loss))
    if len(pads_in[0]):
        add("pad_in_loss", f"{len(pads_in[0])} pad positions in the loss, "
                           f"first at row {int(pads_in[0][0])}, slot {int(pads_in[1][0])}")
    plan = batch.plan
    pieces = segment_layout(plan.piece_len)
    piece, within = pieces.segment_ids, pieces.position_ids
    planned = np.zeros_like(valid)
    planned.reshape(-1)[plan.piece_row[piece] * valid.shape[1] + plan.piece_offset[piece] + within] = True
    if (valid & ~planned).any():
        r, c = np.nonzero(valid & ~planned)
        add("pad_in_attention", f"{len(r)} pad slots carry a segment id, first at row {int(r[0])}, slot {int(c[0])}")
    if (loss != (tgt != IGNORE_INDEX)).any():
        r, c = np.nonzero(loss != (tgt != IGNORE_INDEX))
        add("loss_mask_disagrees_with_targets", f"{len(r)} positions, first at row {int(r[0])}, slot {int(c[0])}")

    expected = int((~ends & np.r_[flat_answer[1:], False]).sum())
    got = int(loss.sum())
    if got != expected:
        add("loss_count_mismatch", f"{got} loss positions, but the data has {expected} trainable answer tokens")
    return out
