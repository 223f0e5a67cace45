"""Ring attention, simulated on a CPU: N virtual ranks in one process, step by step around the ring.

At step s, rank r holds its own queries and the keys and values of rank (r - s) mod N, passed along
the ring (Transformer Engine's ``AttnFuncWithCPAndKVP2P``,
``transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py``). The mask of each
step is the lab's one rule (:mod:`packing_core.attention.masks`: the same document, a real key, no key
after the query), evaluated on what the kernel believes of each slot (:func:`~.rank.kernel_view`):
its document and its place in the unsplit batch. Each step returns a partial output and its
log-sum-exp; the steps merge as TE merges them (``flash_attn_fwd_out_correction`` and
``flash_attn_fwd_softmax_lse_correction``: weights ``exp(lse_step - lse)``). A query no step lets
read anything outputs zeros, as TE zeroes the rows it skips.

Under zigzag the steps take TE's three shapes: step 0 the causal diagonal; keys from an earlier rank
read whole by every query of the rank, but only their first chunk ("lower-triangle"); keys from a
later rank read only by the rank's second chunk ("upper-triangle"). Under a contiguous cut an
earlier rank's keys are read whole and a later rank's not at all, so the last rank works most.

>>> import torch
>>> from packing_core.batch.packed import PackedBatch
>>> from packing_core.parallel.split import split_batch
>>> b = PackedBatch.from_documents([[1] * 7, [2] * 5], 16, "next-fit")
>>> [(s.rank, s.source, s.section) for s in ring_steps(split_batch(b, 2))]
[(0, 0, 'diagonal'), (0, 1, 'upper-triangle'), (1, 1, 'diagonal'), (1, 0, 'lower-triangle')]
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from packing_core._validate import InputError
from packing_core.attention.masks import and_masks, in_segment, readable_keys, same_document
from packing_core.parallel.rank import KernelView, kernel_view, second_chunk


def before_or_at(position):
    """Predicate: key ``j`` is not after query ``i`` in the unsplit batch (causality across chunks)."""
    def predicate(i, j):
        return position[..., j] <= position[..., i]
    return predicate


def step_mask(query: KernelView, key: KernelView) -> np.ndarray:
    """bool [queries, keys]: what one ring step lets each query read, by :mod:`packing_core.attention.masks`."""
    nq = len(query.document)
    document = np.r_[query.document, key.document]
    position = np.r_[query.position, key.position]
    i, j = np.arange(nq)[:, None], nq + np.arange(len(key.document))[None, :]
    rule = and_masks(before_or_at(position), same_document(document), in_segment(document),
                     readable_keys(document >= 0))
    return rule(i, j)


def _section(mask: np.ndarray, r: int, source: int, second_q: np.ndarray, second_k: np.ndarray) -> str:
    """TE's name for a step's shape, where the mask has one; else where its keys come from."""
    if source == r:
        return "diagonal"
    if not mask.any():
        return "nothing"
    if source < r and second_k.any() and not mask[:, second_k].any():
        return "lower-triangle"
    if source > r and second_q.any() and not mask[~second_q].any():
        return "upper-triangle"
    return "earlier rank" if source < r else "later rank"


@dataclass(frozen=True)
class RingStep:
    """Step ``step`` of rank ``rank``: the keys of ``source``, the mask it applies, the pairs it computes."""

    rank: int
    step: int
    source: int
    section: str          # diagonal | lower-triangle | upper-triangle | earlier rank | later rank | nothing
    mask: np.ndarray      # bool [rank's slots, source's slots]

    @property
    def pairs(self) -> int:
        return int(self.mask.sum())


def ring_steps(split, offsets: str = "rank") -> tuple[RingStep, ...]:
    """Every step of every rank, rank by rank, with the mask a kernel reading ``offsets`` applies."""
    views = [kernel_view(rb, offsets) for rb in split.ranks]
    second = [second_chunk(rb) for rb in split.ranks]
    n = len(views)
    out = []
    for r in range(n):
        for s in range(n):
            src = (r - s) % n
            m = step_mask(views[r], views[src])
            out.append(RingStep(r, s, src, _section(m, r, src, second[r], second[src]), m))
    return tuple(out)


def _step(q, k, v, mask: torch.Tensor, scale: float):
    """``(out, lse)`` of queries over one step's keys; rows that read nothing: out 0, lse -inf."""
    scores = torch.einsum("qhd,khd->hqk", q, k) * scale
    scores = scores.masked_fill(~mask[None], float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)                                  # [H, q]
    weights = torch.exp(scores - torch.where(torch.isinf(lse), 0.0, lse)[..., None])
    return torch.einsum("hqk,khd->qhd", weights, v), lse


def _merge(out, lse, out_s, lse_s):
    new = torch.logaddexp(lse, lse_s)
    safe = torch.where(torch.isinf(new), 0.0, new)
    a = torch.where(torch.isinf(lse), 0.0, torch.exp(lse - safe)).T[..., None]
    b = torch.where(torch.isinf(lse_s), 0.0, torch.exp(lse_s - safe)).T[..., None]
    return out * a + out_s * b, new


def ring_attention(qs, ks, vs, views, *, scale: float | None = None) -> list[torch.Tensor]:
    """Per rank ``[n_r, H, D]`` outputs of ring attention over per-rank q, k, v and kernel views."""
    n = len(views)
    if not (len(qs) == len(ks) == len(vs) == n) or n == 0:
        raise InputError(f"ring_attention needs q, k, v and a view for each of the {n} ranks")
    scale = scale if scale is not None else qs[0].shape[-1] ** -0.5
    outs = []
    for r in range(n):
        H = qs[r].shape[1]
        out = torch.zeros_like(qs[r])
        lse = torch.full((H, qs[r].shape[0]), float("-inf"), dtype=qs[r].dtype, device=qs[r].device)
        for s in range(n):
            src = (r - s) % n
            mask = torch.from_numpy(step_mask(views[r], views[src])).to(qs[r].device)
            if mask.any():
                out_s, lse_s = _step(qs[r], ks[src], vs[src], mask, scale)
                out, lse = _merge(out, lse, out_s, lse_s)
        outs.append(out)
    return outs


def ring_backend(split, offsets: str = "rank"):
    """A ``backend`` callable for :class:`~packing_core.models.tiny.TinyTransformer`: ``(q, k, v) -> out``.

    The model runs on every rank's tokens laid end to end (rank 0's, then rank 1's ...); the per-token
    layers do not care where a token sits, and attention goes round the ring.
    """
    views = [kernel_view(rb, offsets) for rb in split.ranks]
    sizes = [rb.tokens for rb in split.ranks]

    def attention(q, k, v):
        parts = [torch.split(t, sizes) for t in (q, k, v)]
        return torch.cat(ring_attention(*parts, views), 0)
    return attention


@dataclass(frozen=True)
class RingRun:
    """A model run through the ring against the same batch unsplit, token by token.

    ``token_diffs`` (float [real tokens], in the batch's order) is the largest |logit difference| at
    each real token; ``loss_*`` the mean cross-entropy over the targets (the ring's: each rank's own
    targets, summed over the ranks).
    """

    token_diffs: np.ndarray
    loss_unsplit: float
    loss_ring: float
    logit_scale: float     # the largest |logit| unsplit: the scale of a tolerance
    changed_top1: int      # real tokens whose most likely next token differs from the unsplit run's

    @property
    def max_abs_diff(self) -> float:
        return float(self.token_diffs.max(initial=0.0))


def ring_model_run(model, batch, split, offsets: str = "rank") -> RingRun:
    """``model`` (the tiny model's call signature) on ``batch`` unsplit and on ``split`` through the ring."""
    from packing_core.batch.packed import IGNORE_INDEX

    flat = batch.flat()
    with torch.no_grad():
        whole = model(flat.input_ids, flat.position_ids, flat.cu_seqlens, flat.max_seqlen, "segments")
        ids = torch.from_numpy(np.concatenate([rb.input_ids.reshape(-1) for rb in split.ranks]))
        pos = torch.from_numpy(np.concatenate([rb.position_ids.reshape(-1) for rb in split.ranks]))
        cu = torch.tensor([0, len(ids)], dtype=torch.int32)
        local = model(ids, pos, cu, len(ids), ring_backend(split, offsets))
    views = [kernel_view(rb, offsets) for rb in split.ranks]
    believed = np.concatenate([v.position for v in views])
    placed = torch.zeros(split.input_ids.size, local.shape[-1], dtype=local.dtype)
    placed[torch.from_numpy(believed)] = local
    real = split.real.reshape(-1)
    piece, within = split.piece_ids.reshape(-1)[real], split.position_ids.reshape(-1)[real]
    order = np.asarray(flat.cu_seqlens, np.int64)[piece] + within          # each real slot's place unsplit
    ring = placed[torch.from_numpy(np.flatnonzero(real))]
    unsplit = whole[torch.from_numpy(order)]
    diffs = (ring - unsplit).abs().amax(-1)
    token_diffs = np.zeros(len(order))
    token_diffs[order] = diffs.double().numpy()
    changed = int((ring.argmax(-1) != unsplit.argmax(-1)).sum())
    targets = torch.from_numpy(np.concatenate([rb.targets.reshape(-1) for rb in split.ranks]))
    whole_targets = batch.targets[batch.valid]
    ce = torch.nn.functional.cross_entropy
    return RingRun(token_diffs, float(ce(whole.double(), whole_targets, ignore_index=IGNORE_INDEX)),
                   float(ce(local.double(), targets, ignore_index=IGNORE_INDEX)), float(whole.abs().max()), changed)
