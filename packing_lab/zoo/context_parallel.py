"""Bugs of packed rows across context-parallel ranks, reproduced on the lab's CPU ring simulation.

No engine here runs on a CPU (Transformer Engine's ring and Megatron need CUDA and several GPUs), so
each entry reproduces the engine's arithmetic on :mod:`packing_core.parallel`: the same documents cut
over the ranks as the engine cuts them, the tiny model (``tiny-rope``) run through the simulated ring
with the offsets the buggy path reads, against the batch unsplit; the rank batches the buggy path
holds go through ``check --cp`` (:mod:`packing_core.check.ranks`), broken and fixed.
"""
from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import numpy as np
import torch

from packing_core.batch.packed import IGNORE_INDEX, PackedBatch
from packing_core.check.ranks import check_cp_ranks
from packing_core.parallel.layout import te_partition_indices
from packing_core.parallel.ring import ring_model_run
from packing_core.parallel.roll import rolled_targets
from packing_core.parallel.split import split_batch
from packing_lab.zoo._shared import caught, says
from packing_lab.zoo._types import Bug, ZooResult

MODEL = "tiny-rope"


@lru_cache(maxsize=1)
def _model():
    from packing_core.models.tiny import tiny_model

    return tiny_model(MODEL)


def documents_batch(lengths, seed: int = 0) -> PackedBatch:
    """Documents of ``lengths`` (random byte ids, seeded) in one row."""
    rng = np.random.default_rng(seed)
    docs = [rng.integers(32, 127, n).tolist() for n in lengths]
    return PackedBatch.from_documents(docs, sum(lengths), "next-fit")


def _says(check) -> str:
    return says(check) if not check.sound else "nothing"


def _real_order(batch: PackedBatch) -> tuple[np.ndarray, np.ndarray]:
    """``(document of each real token, its id)`` in the batch's order."""
    valid = batch.valid
    return batch.document_ids[valid].numpy(), batch.input_ids[valid].numpy()


def _compare(batch, broken, fixed, broken_offsets, fixed_offsets, broken_files, fixed_files, caught_by,
             cp: int, scheme: str) -> ZooResult:
    """Both splits through the ring against the batch unsplit, and both sets of rank files checked."""
    from packing_core.verify.equivalence import default_tolerance

    model = _model()
    with torch.inference_mode(False):
        rb = ring_model_run(model, batch, broken, broken_offsets)
        rf = ring_model_run(model, batch, fixed, fixed_offsets)
    tolerance = default_tolerance(torch.float32, "segments", rf.logit_scale)[0]
    cb, cf = check_cp_ranks(broken_files, cp, scheme), check_cp_ranks(fixed_files, cp, scheme)
    doc, ids = _real_order(batch)
    return ZooResult(
        name="", symptom=f"max |dlogit| {rb.max_abs_diff:.2f} vs the batch unsplit; {rb.changed_top1} top-1 "
                         f"predictions changed; loss {rb.loss_ring:.4f} instead of {rb.loss_unsplit:.4f}",
        fixed=f"max |dlogit| {rf.max_abs_diff:.1e} vs the batch unsplit; loss {rf.loss_ring:.4f}",
        broken_max_abs_diff=rb.max_abs_diff, fixed_max_abs_diff=rf.max_abs_diff,
        changed_predictions=rb.changed_top1, caught=caught(cb, caught_by), silent_on_fix=not caught(cf, caught_by),
        check_says=_says(cb), document_ids=doc, input_ids=ids, tokens=tuple(map(str, ids)), tolerance=tolerance,
        broken_token_diffs=rb.token_diffs, fixed_token_diffs=rf.token_diffs)


def _files(split, **override) -> list[dict]:
    return [{**rb.to_file(), **override} for rb in split.ranks]


# ---------------------------------------------------------------- Transformer Engine
def _te_unpadded() -> ZooResult:
    """One document of 7 tokens at CP 2, laid out padded to 8, with only its real offsets [0, 7] given."""
    batch = documents_batch([7], seed=1)
    split = split_batch(batch, 2, "zigzag-document")
    broken = _files(split, cu_seqlens_padded=None, cu_seqlens_padded_rank=None, pad_between_seqs=None)
    return _compare(batch, split, split, "average", "rank", broken, _files(split), ("cp_document_not_padded",),
                    2, "zigzag-document")


def _te_pad_between_false() -> ZooResult:
    """Documents of 8 and 7 at CP 2: the padding is only a tail, so the auto-detect chose pad_between_seqs=False."""
    batch = documents_batch([8, 7], seed=2)
    split = split_batch(batch, 2, "zigzag-document")
    broken = _files(split, pad_between_seqs=np.array(0))
    return _compare(batch, split, split, "average", "rank", broken, _files(split), ("cp_unpadded_offsets",),
                    2, "zigzag-document")


# ---------------------------------------------------------------- Megatron-Bridge
SENTINELS = 5    # -1 entries after the real offsets: a fixed-length cu_seqlens, as Bridge's packed dataset writes it


def partitioned_with(split, cu_seqlens) -> tuple:
    """The ranks as Transformer Engine's partition (:func:`te_partition_indices`) cuts ``split`` by ``cu_seqlens``."""
    total = split.input_ids.size
    out = []
    for rb in split.ranks:
        idx = te_partition_indices(cu_seqlens, total, split.cp, rb.rank)[None]
        grids = {k: getattr(split, k).reshape(-1)[idx] for k in ("input_ids", "position_ids", "targets", "piece_ids")}
        out.append(replace(rb, global_index=idx, **grids))
    return tuple(out)


def _bridge_sentinels() -> ZooResult:
    batch = documents_batch([8, 7], seed=3)
    split = split_batch(batch, 2, "zigzag-document")
    padded = split.cu_seqlens_padded
    with_sentinels = np.r_[padded, np.full(SENTINELS, -1)].astype(np.int32)
    broken = replace(split, ranks=partitioned_with(split, with_sentinels))
    files = _files(broken, cu_seqlens_padded=with_sentinels,
                   cu_seqlens=np.r_[split.cu_seqlens, np.full(SENTINELS, -1)].astype(np.int32))
    return _compare(batch, broken, split, "rank", "rank", files, _files(split), ("cp_chunks_not_the_scheme",),
                    2, "zigzag-document")


# ---------------------------------------------------------------- NeMo Automodel
def prefix_offsets(rb) -> np.ndarray:
    """int32: a rank's real offsets as a prefix reading finds them (Automodel's ``_varlen_seg_for_rank``):
    the first n_real slots, cut where the document id changes (a pad's id is 0)."""
    did = np.where(rb.piece_ids >= 0, rb.piece_ids + 1, 0).reshape(-1)
    first = did[: int((did > 0).sum())]
    if not len(first):
        return np.zeros(1, np.int32)
    starts = np.flatnonzero(np.r_[True, first[1:] != first[:-1]])
    return np.r_[starts, len(first)].astype(np.int32)


def _automodel_interior() -> ZooResult:
    """Documents of 3 and 6 tokens padded to 4 and 8, cut contiguously over 2 ranks: rank 0 holds [1 1 1 0 2 2]."""
    batch = documents_batch([3, 6], seed=4)
    split = split_batch(batch, 2, "contiguous", pad_documents=True)
    broken = [{**rb.to_file(), "cu_seqlens_rank": prefix_offsets(rb)} for rb in split.ranks]
    return _compare(batch, split, split, "prefix", "rank", broken, _files(split), ("cp_interior_padding_as_tail",),
                    2, "contiguous")


# ---------------------------------------------------------------- Megatron-LM
def _in_batch_order(split, per_rank) -> np.ndarray:
    """int64 [real tokens]: per-rank ``[1, L]`` values put back in the batch's order."""
    grid = np.full(split.input_ids.size, IGNORE_INDEX, np.int64)
    for rb, v in zip(split.ranks, per_rank):
        grid[rb.global_index.reshape(-1)] = v.reshape(-1)
    return grid[split.real.reshape(-1)]


def _megatron_mtp_roll() -> ZooResult:
    batch = documents_batch([7, 5], seed=5)
    split = split_batch(batch, 2, "zigzag-document")
    bad, good = rolled_targets(split, "real"), rolled_targets(split, "padded")
    files_b = [{**rb.to_file(), "labels": t} for rb, t in zip(split.ranks, bad)]
    files_f = [{**rb.to_file(), "labels": t} for rb, t in zip(split.ranks, good)]
    caught_by = ("target_is_not_the_next_token",)
    cb, cf = check_cp_ranks(files_b, 2, "zigzag-document"), check_cp_ranks(files_f, 2, "zigzag-document")
    tb, tf = _in_batch_order(split, bad), _in_batch_order(split, good)
    doc, ids = _real_order(batch)
    counted = int((tb != IGNORE_INDEX).sum()), int((tf != IGNORE_INDEX).sum())
    wrong = int(((tb != tf) & (tb != IGNORE_INDEX)).sum())
    lost = int(((tb == IGNORE_INDEX) & (tf != IGNORE_INDEX)).sum())
    return ZooResult(
        name="", symptom=f"{counted[0]} targets instead of {counted[1]}: {wrong} hold a token that is not their "
                         f"successor, {lost} lost",
        fixed=f"{counted[1]} targets, each the next token of its document", broken_max_abs_diff=None,
        fixed_max_abs_diff=None, changed_predictions=None, caught=caught(cb, caught_by),
        silent_on_fix=not caught(cf, caught_by), check_says=_says(cb), document_ids=doc, input_ids=ids,
        tokens=tuple(map(str, ids)), broken_targets=tb, fixed_targets=tf)


BUGS: tuple[Bug, ...] = (
    Bug("cp-document-not-padded", "A document that is no multiple of 2·CP is computed shorter",
        "Transformer Engine's THD context parallelism cuts each document into 2·CP chunks and reads each rank's "
        "share of it as its offsets divided by CP. Given a 7-token document's real offsets [0, 7] at CP 2 and no "
        "padded ones, each rank takes 7 // 2 = 3 of its 4 slots as the document: the document is computed as if "
        "it had 6 tokens, one real token dropped as a key and its own output zeroed. No error.",
        ("NVIDIA/TransformerEngine #1929 / #1930: a sequence of length 7 with CP 2 behaves as if cu_seqlens were "
         "[0, 6]",),
        "Pad every document to a multiple of 2·CP and pass both offsets: cu_seqlens_padded for the layout, the "
        "real cu_seqlens beside them, with pad_between_seqs=True.",
        f"{MODEL} through the simulated ring (CPU)", ("cp_document_not_padded",), run=_te_unpadded),
    Bug("cp-pad-between-seqs-false", "Tail padding taken for no padding: real keys dropped, real queries zeroed",
        "With THD and CP, a packed row whose last document is padded (real 7, padded 8 at CP 2) has padded and "
        "real offsets that differ only at the end. Transformer Engine's auto-detect compared all but the last "
        "entry and chose pad_between_seqs=False, whose path takes each rank's documents as cu_seqlens // CP: on "
        "one rank the last real token falls outside, dropped as a key and zeroed as a query.",
        ("NVIDIA/TransformerEngine #3331 / #3332: THD + CP (p2p) pad_between_seqs auto-detect is blind to tail "
         "padding",),
        "Pass pad_between_seqs=True whenever any document, the last one too, is shorter than its padded slot.",
        f"{MODEL} through the simulated ring (CPU)", ("cp_unpadded_offsets",), run=_te_pad_between_false),
    Bug("cp-mtp-roll-unpadded", "Multi-token prediction's roll reads the real offsets: successors from elsewhere",
        "Megatron's multi-token prediction rolls each rank's chunks one token left per document, slicing the "
        "rank's tensor at cu_seqlens // CP. The tensor is laid out by the padded offsets; with the real ones "
        "and documents that are no multiple of 2·CP, the slices straddle documents: a token's successor comes "
        "from another document, another loses its own. The rank files here carry the rolled successors as "
        "their shifted labels.",
        ("NVIDIA/Megatron-LM #4494 / #4495: fix(mtp): use padded cu_seqlens in MTP roll for THD with CP",),
        "Slice each rank's chunks with cu_seqlens_padded (the layout), never the real cu_seqlens.",
        "the simulated ranks (no model)", ("target_is_not_the_next_token",), run=_megatron_mtp_roll),
    Bug("cp-partition-sentinels", "Sentinel offsets sent to the partition: ranks hold the wrong chunks",
        "Megatron-Bridge's packed datasets pad cu_seqlens to a fixed length with -1 sentinels. Given them, "
        "Transformer Engine's THD partition divides every entry by CP and binary-searches them as if they rose: "
        "with more sentinels than documents the search lands among them, and every rank takes the first "
        "tokens of the stream. The ring then computes each rank's tokens as if they sat in its own chunks.",
        ("NVIDIA-NeMo/Megatron-Bridge #4489: trim padded cu_seqlens before thd_get_partitioned_indices; #1867 "
         "pre-pads each packed sample to a multiple of 2·CP",),
        "Trim the sentinels (cut cu_seqlens at its first negative entry, or at cu_seqlens_argmin) before the "
        "partition reads it.",
        f"{MODEL} through the simulated ring (CPU)", ("cp_chunks_not_the_scheme",), run=_bridge_sentinels),
    Bug("cp-interior-padding-as-tail", "Padding between documents read as a tail",
        "A THD packer pads every document to 2·CP, so a rank's slots hold pads between documents: [1 1 1 0 2 2] "
        "(0 a pad, document 2 going on in the next rank). A kernel that counts the real tokens and takes them as "
        "its first slots reads the pad at slot 3 as a token and drops the real token at slot 5.",
        ("NVIDIA-NeMo/Automodel #3640: the Flash varlen path treats interior padding as a tail "
         "(_varlen_seg_for_rank)",),
        "Find a rank's real tokens from its padding mask or its per-document offsets.",
        f"{MODEL} through the simulated ring (CPU)", ("cp_interior_padding_as_tail",), run=_automodel_interior),
)
