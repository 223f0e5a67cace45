"""The classic packing bugs, planted on purpose in a sound batch: the zoo's model-free entries.

Each is a :class:`Bug` whose ``run(batch)`` plants it in the lab's own PackedBatch, for the
Masks and labels page and for tests; ``caught_by`` names the findings that see it.

>>> from packing_core.batch.packed import PackedBatch
>>> from packing_core.check.batch import check_batch
>>> good = PackedBatch.from_documents([[1, 2, 3], [4, 5]], 6, "bfd")
>>> check_batch(broken_batch(good, "row-shifted-targets")).names
('label_crosses_boundary', 'loss_count_mismatch')
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

from packing_core._validate import InputError
from packing_core.attention.semantics import packed_attention
from packing_core.attention.varlen_grid import varlen_grid
from packing_core.batch.packed import IGNORE_INDEX, PackedBatch
from packing_core.check.batch import check_batch
from packing_lab.zoo._types import Bug, ZooResult


@dataclass(frozen=True)
class NaiveTargets:
    """Targets made by shifting a whole row left by one: what a packing bug trains on."""

    naive: np.ndarray     # int64 [width]: next token in the row, -100 after the last real token
    crosses: np.ndarray   # bool [width]: the naive target belongs to another document


def naive_targets(batch: PackedBatch, row: int) -> NaiveTargets:
    """``a b c | d e`` -> naive ``b c d e -``: c -> d crosses (the batch's own targets are ``b c - e -``)."""
    if not 0 <= row < batch.input_ids.shape[0]:
        raise InputError(f"row {row} does not exist: the batch has rows 0..{batch.input_ids.shape[0] - 1}")
    ids = batch.input_ids[row].numpy()
    seg = batch.piece_ids[row].numpy()
    valid = seg >= 0
    nxt_valid = np.r_[valid[1:], False]
    naive = np.where(valid & nxt_valid, np.r_[ids[1:], 0], IGNORE_INDEX)
    crosses = valid & nxt_valid & (np.r_[seg[1:], -1] != seg)
    return NaiveTargets(naive.astype(np.int64), crosses)


def loss_vs_answers(batch: PackedBatch) -> tuple[int, int]:
    """``(loss positions, answer targets)``: equal in a sound batch (TEACHING 11's one assertion).

    An answer target is a position whose next token is an answer token of the same piece.
    """
    seg = batch.piece_ids.numpy()
    answer = batch.answer_mask.numpy()
    same_next = (seg >= 0) & (np.roll(seg, -1, axis=1) == seg)
    same_next[:, -1] = False
    expected = int((same_next & np.roll(answer, -1, axis=1)).sum())
    return int(batch.loss_mask.numpy().sum()), expected



def _shift(t, fill):
    return torch.cat([t[:, 1:], torch.full_like(t[:, :1], fill)], 1)


def _row_shifted_targets(batch: PackedBatch) -> PackedBatch:
    valid, seg, ids = batch.valid, batch.piece_ids, batch.input_ids
    keep = valid & _shift(valid, False) & (batch.loss_mask | (_shift(seg, -1) != seg))
    targets = torch.where(keep, _shift(ids, 0), IGNORE_INDEX)
    return dataclasses.replace(batch, targets=targets, loss_mask=targets != IGNORE_INDEX)


def _continuous_positions(batch: PackedBatch) -> PackedBatch:
    ids = batch.input_ids
    return dataclasses.replace(batch, position_ids=torch.arange(ids.shape[1]).expand_as(ids).clone(),
                               positions="continuous")


def _pads_in_the_loss(batch: PackedBatch) -> PackedBatch:
    return dataclasses.replace(batch, targets=torch.where(batch.valid, batch.targets, batch.pad_id),
                               loss_mask=batch.loss_mask | ~batch.valid)


def _prompts_in_the_loss(batch: PackedBatch) -> PackedBatch:
    valid, seg = batch.valid, batch.piece_ids
    inner = valid & _shift(valid, False) & (_shift(seg, -1) == seg)
    return dataclasses.replace(batch, targets=torch.where(inner, _shift(batch.input_ids, 0), IGNORE_INDEX),
                               loss_mask=inner)


def _prompts_cut_from_attention(batch: PackedBatch) -> PackedBatch:
    """The loss mask used as the attention mask: only answer tokens stay keys (each token still reads itself).

    Every loss tensor is as built, so ``loss_vs_answers`` and ``check_batch`` see nothing; only
    a comparison of each document alone against packed shows it.

    >>> good = PackedBatch.from_documents([[1, 2, 3, 4]], 4, "bfd", prompt_lengths=[2])
    >>> from packing_core.attention.semantics import packed_attention
    >>> packed_attention(_prompts_cut_from_attention(good)).allowed(0).astype(int).tolist()
    [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 1, 1]]
    """
    return dataclasses.replace(batch, key_mask=batch.answer_mask.clone())


def _row_cu_seqlens(batch: PackedBatch) -> PackedBatch:
    return dataclasses.replace(batch, cu_seqlens=torch.tensor([0, int(batch.valid.sum())], dtype=torch.int32))


def _max_seqlen_too_small(batch: PackedBatch) -> PackedBatch:
    """``max_seqlen`` half the longest piece, as when it is taken from another batch, a sample or a config."""
    return dataclasses.replace(batch, max_seqlen=max(1, batch.max_seqlen // 2))


BUGS: tuple[Bug, ...] = (
    Bug("row-shifted-targets", "Targets shifted across the whole row",
        "targets shifted across the whole row: the last token of a document predicts the next document",
        ("pytorch/torchtitan #4075 (merged)", "meta-pytorch/torchtune #1177"),
        "-100 at every document's last target.", "nothing", ("label_crosses_boundary",), _row_shifted_targets),
    Bug("continuous-positions", "Positions count across the row",
        "position ids count across the row instead of restarting at each document",
        ("huggingface/transformers #47496 -> #47525 (merged), a sibling bug: positions that restart at the wrong "
         "origin (0, where RoBERTa-family models start at padding_idx + 1), not positions counting across the row",),
        "Reset position_ids per document, from the model's first position.", "nothing",
        ("positions_do_not_restart",), _continuous_positions),
    Bug("pads-in-the-loss", "Pads in the loss",
        "pad positions get a target and a loss-mask bit: pad predictions dilute the loss, and the model is trained "
        "to emit pads", (), "Give pads target -100.", "nothing",
        ("pad_in_loss",), _pads_in_the_loss),
    Bug("prompts-in-the-loss", "Prompts in the loss", "prompt tokens are trained on, not only the answers",
        (), "Mask prompt targets with -100.", "nothing", ("loss_count_mismatch",),
        _prompts_in_the_loss),
    Bug("prompts-cut-from-attention", "Prompts cut from attention",
        "the loss mask is used as the attention mask: prompt tokens stop being keys, so the answers cannot read "
        "the question; the loss tensors are untouched", (),
        "Keep the attention mask and the loss mask apart.", "nothing", (), _prompts_cut_from_attention),
    Bug("row-cu-seqlens", "cu_seqlens over the whole batch",
        "cu_seqlens marks the whole batch (its rows laid end to end) as one document: the mask that lets "
        "documents see each other",
        (), "One cu_seqlens offset per document piece.", "nothing",
        ("segments_disagree_with_cu_seqlens",), _row_cu_seqlens),
    Bug("max-seqlen-too-small", "max_seqlen shorter than the longest document",
        "max_seqlen (max_length_q/_k) is half the longest document: flash-attn sizes its launch by it, one row of "
        "query blocks per document, so queries past those blocks get no output and nothing raises; sdpa and eager "
        "never read it", (),
        "Take max_seqlen from the batch's own offsets: int(cu_seqlens.diff().max()), or the context (a larger value "
        "only costs idle blocks).", "nothing", ("max_length_too_small",), _max_seqlen_too_small,
        read_by="flash_attention_2"),
)
_BY_NAME = {b.name: b for b in BUGS}
PLANTED = ("none",) + tuple(_BY_NAME)
BREAKS = {"none": "the batch as PackedBatch builds it", **{b.name: b.what for b in BUGS}}


def broken_batch(batch: PackedBatch, how: str) -> PackedBatch:
    """``batch`` with one planted bug (``PLANTED``; ``"none"`` returns it as built).

    ``"prompts-cut-from-attention"`` leaves every tensor as built; only a comparison of each
    document alone against packed (``alone_vs_packed_attention``) catches it.
    """
    if how not in PLANTED:
        raise InputError(f"unknown break {how!r}; choose one of {', '.join(PLANTED)}")
    return batch if how == "none" else _BY_NAME[how].run(batch)


# The row a planted fault is drawn on: two questions with their answers, in byte tokens, and
# pads at the end, so every cell shows its character and each kind of fault has somewhere to land.
SHOWN_DOCUMENTS = ("2+2? 4.", "Hi? Hey!")
SHOWN_PROMPTS = (5, 4)
SHOWN_WIDTH = 20


def shown_batch() -> PackedBatch:
    """The sound batch a planted fault is drawn on: one row, two instruction documents, pads."""
    docs = [list(t.encode()) for t in SHOWN_DOCUMENTS]
    return PackedBatch.from_documents(docs, SHOWN_WIDTH, "next-fit", prompt_lengths=list(SHOWN_PROMPTS))


def _chars(ids) -> tuple[str, ...]:
    return tuple("␣" if i == 32 else chr(i) if 33 <= i < 127 else "·" for i in np.asarray(ids).tolist())


def plant_bug(name: str) -> ZooResult:
    """A planted fault in :func:`shown_batch` against the batch as built: what differs, and what the check says.

    Only what the fault changes is drawn: the keys each query reads (as a varlen kernel reads
    the batch, ``attention.packed_attention``), the targets, or the position ids.

    >>> r = plant_bug("row-shifted-targets")
    >>> r.drawn, r.caught, r.silent_on_fix
    (('targets',), True, True)
    >>> int((r.broken_targets != r.fixed_targets).sum())   # the one target across the edge
    1
    """
    bug = next((b for b in BUGS if b.name == name), None)
    if bug is None:
        raise InputError(f"unknown planted bug {name!r}; choose one of {', '.join(b.name for b in BUGS)}")
    good = shown_batch()
    bad = bug.run(good)
    cb, cg = check_batch(bad, bug.read_by), check_batch(good, bug.read_by)
    mask_b, mask_g = packed_attention(bad, "varlen").allowed(0), packed_attention(good, "varlen").allowed(0)
    tgt_b, tgt_g = bad.targets[0].numpy(), good.targets[0].numpy()
    pos_b, pos_g = bad.position_ids[0].numpy(), good.position_ids[0].numpy()
    doc = good.document_ids[0].numpy()
    differs = {"mask": not np.array_equal(mask_b, mask_g), "targets": not np.array_equal(tgt_b, tgt_g),
               "positions": not np.array_equal(pos_b, pos_g)}
    across = int((mask_b & (doc[:, None] != doc[None, :])).sum())
    symptom = []
    if differs["mask"]:
        symptom.append(f"queries read {int(mask_b.sum())} keys in all ({int(mask_g.sum())} as built): "
                       f"{across} across a document edge, {int((mask_g & ~mask_b).sum())} of their own cut")
    if differs["targets"]:
        symptom.append(f"{int((tgt_b != tgt_g).sum())} of {len(tgt_g)} targets differ from the batch as built")
    if differs["positions"]:
        symptom.append(f"{int((pos_b != pos_g).sum())} of {len(pos_g)} position ids differ from the batch as built")
    if differs["positions"] and not differs["mask"]:
        symptom.append("a varlen kernel reads the same mask (cu_seqlens unchanged)")
    if differs["targets"] and not differs["mask"]:
        symptom.append("attention unchanged")
    if bad.max_seqlen != good.max_seqlen:
        symptom.append(f"max_seqlen {bad.max_seqlen} ({good.max_seqlen} as built); "
                       + varlen_grid(bad.cu_seqlens, bad.max_seqlen).sentence)
    loss, answers = loss_vs_answers(bad)
    symptom.append(f"loss positions {loss}, answer targets {answers}")
    loss_g, answers_g = loss_vs_answers(good)
    found = set(cb.names)
    return ZooResult(
        name=name, symptom="; ".join(symptom),
        fixed=f"the batch as built: loss positions {loss_g} = answer targets {answers_g}",
        broken_max_abs_diff=None, fixed_max_abs_diff=None, changed_predictions=None,
        caught=bool(bug.caught_by) and set(bug.caught_by) <= found,
        silent_on_fix=not set(bug.caught_by) & set(cg.names),
        check_says=", ".join(f"{f.name} ({f.severity})" for f in cb.errors + cb.warnings)
        or "nothing: every tensor it reads is as built (alone vs packed, on the Masks and labels page, shows it)",
        document_ids=doc, input_ids=good.input_ids[0].numpy(), tokens=_chars(good.input_ids[0].numpy()),
        broken_mask=mask_b if differs["mask"] else None, fixed_mask=mask_g if differs["mask"] else None,
        broken_targets=tgt_b if differs["targets"] else None, fixed_targets=tgt_g if differs["targets"] else None,
        broken_position_ids=pos_b if differs["positions"] else None,
        fixed_position_ids=pos_g if differs["positions"] else None,
        **_launches(bad, good))


def _launches(bad: PackedBatch, good: PackedBatch) -> dict:
    """max_seqlen and the queries flash-attn covers per document, broken and as built, when max_seqlen differs."""
    if bad.max_seqlen == good.max_seqlen:
        return {}
    grids = [varlen_grid(b.cu_seqlens, b.max_seqlen) for b in (bad, good)]
    return {f"{name}_launch": np.array([g.max_seqlen, g.blocks * g.block]) for name, g in zip(("broken", "fixed"), grids)}
