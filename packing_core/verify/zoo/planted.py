"""The classic packing bugs, planted on purpose in a sound batch, for teaching and for tests.

>>> from packing_core import PackedBatch, check_batch
>>> good = PackedBatch.from_documents([[1, 2, 3], [4, 5]], 6, "bfd")
>>> [v.name for v in check_batch(broken_batch(good, "row-shifted targets"))]
['target_crosses_boundary', 'loss_count_mismatch']
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

from packing_core.batch.packed import IGNORE_INDEX, PackedBatch


@dataclass(frozen=True)
class NaiveTargets:
    """Targets made by shifting a whole row left by one: what a packing bug trains on."""

    naive: np.ndarray     # int64 [width]: next token in the row, -100 after the last real token
    crosses: np.ndarray   # bool [width]: the naive target belongs to another document


def naive_targets(batch: PackedBatch, row: int) -> NaiveTargets:
    """``a b c | d e`` -> naive ``b c d e -``: c -> d crosses (the batch's own targets are ``b c - e -``)."""
    if not 0 <= row < batch.input_ids.shape[0]:
        raise ValueError(f"row {row} does not exist: the batch has rows 0..{batch.input_ids.shape[0] - 1}")
    ids = batch.input_ids[row].numpy()
    seg = batch.segment_ids[row].numpy()
    valid = seg >= 0
    nxt_valid = np.r_[valid[1:], False]
    naive = np.where(valid & nxt_valid, np.r_[ids[1:], 0], IGNORE_INDEX)
    crosses = valid & nxt_valid & (np.r_[seg[1:], -1] != seg)
    return NaiveTargets(naive.astype(np.int64), crosses)


def loss_vs_answers(batch: PackedBatch) -> tuple[int, int]:
    """``(loss positions, answer targets)``: equal in a sound batch (TEACHING 11's one assertion).

    An answer target is a position whose next token is an answer token of the same piece.
    """
    seg = batch.segment_ids.numpy()
    answer = batch.answer_mask.numpy()
    same_next = (seg >= 0) & (np.roll(seg, -1, axis=1) == seg)
    same_next[:, -1] = False
    expected = int((same_next & np.roll(answer, -1, axis=1)).sum())
    return int(batch.loss_mask.numpy().sum()), expected


@dataclass(frozen=True, eq=False)
class PromptBlindBatch(PackedBatch):
    """A batch whose attention reads only the keys in ``key_mask``: the prompt-blind bug.

    It is what happens when the loss mask is handed to the model as its attention mask:
    prompt tokens look like padding, so no answer token can read its question. Every loss
    tensor is as built, so ``loss_vs_answers`` and ``check_batch`` see nothing. Only a
    comparison of each document alone against packed shows it. Each token still reads
    itself, so no softmax row is empty.

    >>> from packing_core.batch.packed import PackedBatch
    >>> good = PackedBatch.from_documents([[1, 2, 3, 4]], 4, "bfd", prompt_lengths=[2])
    >>> broken_batch(good, "prompts cut from attention").dense_mask(0).int().tolist()
    [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 1, 1]]
    """

    key_mask: torch.Tensor   # bool [rows, width]: tokens any query may read (besides itself)

    def dense_mask(self, row: int) -> torch.Tensor:
        mask = super().dense_mask(row)
        return mask & (self.key_mask[row][None, :] | torch.eye(mask.shape[0], dtype=torch.bool))


BREAKS = {
    "none": "the batch as PackedBatch builds it",
    "row-shifted targets": "targets shifted across the whole row: the last token of a document predicts the next document",
    "continuous positions": "position ids count across the row instead of restarting at each document",
    "pads in the loss": "pad positions get a target and a loss-mask bit: the mean loss is diluted by "
                        "pad predictions, so the real tokens' gradient shrinks",
    "prompts in the loss": "prompt tokens are trained on, not only the answers",
    "prompts cut from attention": "the loss mask is used as the attention mask: prompt tokens stop being keys, so the "
                                  "answers cannot read the question; the loss tensors are untouched",
    "row cu_seqlens": "cu_seqlens marks whole rows, not documents: the mask that lets documents see each other",
}


def broken_batch(batch: PackedBatch, how: str) -> PackedBatch:
    """``batch`` with one classic packing bug planted: ``check_batch`` catches most of them.

    ``"prompts cut from attention"`` leaves every tensor as built; only a comparison of each
    document alone against packed (``alone_vs_packed_attention``) catches it.
    """
    if how not in BREAKS:
        raise ValueError(f"unknown break {how!r}; choose one of {', '.join(BREAKS)}")
    if how == "none":
        return batch
    valid, seg, ids = batch.valid, batch.segment_ids, batch.input_ids
    shift = lambda t, fill: torch.cat([t[:, 1:], torch.full_like(t[:, :1], fill)], 1)  # noqa: E731
    nxt_ids, nxt_valid = shift(ids, 0), shift(valid, False)
    replace = dataclasses.replace
    if how == "row-shifted targets":
        keep = valid & nxt_valid & (batch.loss_mask | (shift(seg, -1) != seg))
        targets = torch.where(keep, nxt_ids, IGNORE_INDEX)
        return replace(batch, targets=targets, loss_mask=targets != IGNORE_INDEX)
    if how == "continuous positions":
        width = ids.shape[1]
        return replace(batch, position_ids=torch.arange(width).expand_as(ids).clone(), positions="continuous")
    if how == "pads in the loss":
        return replace(batch, targets=torch.where(valid, batch.targets, batch.pad_id),
                       loss_mask=batch.loss_mask | ~valid)
    if how == "prompts in the loss":
        inner = valid & nxt_valid & (shift(seg, -1) == seg)
        return replace(batch, targets=torch.where(inner, nxt_ids, IGNORE_INDEX), loss_mask=inner)
    if how == "prompts cut from attention":
        fields = {f.name: getattr(batch, f.name) for f in dataclasses.fields(PackedBatch)}
        return PromptBlindBatch(**fields, key_mask=batch.answer_mask.clone())
    total = int(valid.sum())
    return replace(batch, cu_seqlens=torch.tensor([0, total], dtype=torch.int32))

