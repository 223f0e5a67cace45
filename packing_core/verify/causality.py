"""The second check, causality: a later token must never change an earlier output.

Isolation (:mod:`.equivalence`: each document alone vs packed) catches every difference
between a document alone and the same document packed, on the call path it runs. It cannot
see an error that the alone run shares. The commonest one is a missing causal flag: torch's
``varlen_attn`` defaults to ``window_size=(-1, -1)`` and flash-attn's ``flash_attn_varlen_func``
to ``causal=False``, both full attention; each document then reads its own future, alone and
packed alike, and the two runs agree exactly. So this check asks another question::

    row:      a0 a1 a2 a3 a4 | b0 b1 b2        cut after a2: change every token after it
    changed:  a0 a1 a2 x  x  | x  x  x         the logits at a0..a2 must not move

One cut inside each document (its middle); the first position whose logits move beyond the
dtype's tolerance is reported as the finding ``future_visible``.

>>> import torch
>>> table = torch.randn(16, 16)
>>> def running_sum(ids, pos, cu, n):                     # each logit reads its token and every earlier one
...     return table[ids].cumsum(0)
>>> causality_runner(running_sum, [[1, 2, 3, 4], [5, 6, 7]]).future_visible
False
>>> def next_token(ids, pos, cu, n):                      # reads the token after it: the future
...     return table[ids] + table[torch.roll(ids, -1)]
>>> causality_runner(next_token, [[1, 2, 3, 4], [5, 6, 7]]).first_moved
(0, 1)
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from packing_core._validate import MASKS, POSITIONS, InputError, choice
from packing_core.batch.packed import segment_layout
from packing_core.check.result import BatchCheck
from packing_core.models.api import switch_attention
from packing_core.verify.batch_run import batch_kwargs
from packing_core.verify.chunked import QUERY_BLOCK, query_blocks
from packing_core.verify.equivalence import CausalityReport, Cut, Runner, default_tolerance

MAX_CUTS = 8            # cuts per run: one forward pass each
CUT_CELLS = 2**28       # mask cells (rows x width²) of a model's cuts together: four cuts of an 8,192-token row


def _cut(before: torch.Tensor, after: torch.Tensor, start: int, position: int,
         tolerance: float) -> tuple[float, int | None, np.ndarray]:
    """The moves at positions ``start..position`` of one row's logits ``[T, V]``."""
    moved = (after[start:position + 1] - before[start:position + 1]).abs().amax(-1).double().cpu().numpy()
    over = np.flatnonzero(moved > tolerance)
    return float(moved.max()), (start + int(over[0]) if len(over) else None), moved


def _changed(ids: torch.Tensor, after: int, vocab: int) -> torch.Tensor:
    """``ids`` with every token after ``after`` replaced by another id (a shift by a fixed step, modulo the vocabulary)."""
    out = ids.clone()
    out[after + 1:] = (out[after + 1:] + 1 + vocab // 3) % vocab
    return out


def _cut_points(spans, most: int = MAX_CUTS) -> list[tuple[int, int, int]]:
    """``(row, start, cut)``: the middle of each document of two or more tokens, the first ``most`` of them."""
    return [(r, s, s + (n - 1) // 2) for r, s, n in spans if n >= 2][:most]


@torch.inference_mode()
def causality_runner(runner: Runner, documents: Sequence[Sequence[int]], *, mask: str = "on",
                     positions: str = "reset", dtype: torch.dtype = torch.float32, backend_name: str = "segments",
                     tolerance: float | None = None, device="cpu") -> CausalityReport:
    """The causality check on the same packed row :func:`.equivalence.verify_runner` builds.

    One cut in the middle of each document: every token after it (its own document's and the
    later documents') is changed, the row runs again, and the logits up to the cut must not
    move. ``mask`` and ``positions`` are the isolation check's.
    """
    choice("mask", mask, MASKS)
    choice("positions", positions, POSITIONS)
    lengths = [len(d) for d in documents]
    if not lengths or min(lengths) < 1:
        raise InputError(f"documents must be a non-empty list of non-empty token lists, got lengths {lengths}")
    layout = segment_layout(lengths, positions)
    ids = torch.tensor([t for d in documents for t in d], dtype=torch.long, device=device)
    T = len(ids)
    cu = layout.cu_seqlens if mask == "on" else np.array([0, T])
    pos = torch.as_tensor(layout.position_ids, dtype=torch.long, device=device)
    cu_t = torch.as_tensor(cu, dtype=torch.int32, device=device)
    longest = max(lengths) if mask == "on" else T

    def run(x):
        return runner(x, pos, cu_t, longest).float()

    base = run(ids)
    if tolerance is None:
        tolerance, _ = default_tolerance(dtype, backend_name, float(base.abs().max()))
    starts = layout.cu_seqlens
    spans = [(0, int(a), int(b - a)) for a, b in zip(starts[:-1], starts[1:])]
    cuts, diffs = [], np.zeros((1, T))
    for r, _start, i in _cut_points(spans):
        biggest, first, moved = _cut(base, run(_changed(ids, i, base.shape[-1])), 0, i, tolerance)
        diffs[0, :i + 1] = np.maximum(diffs[0, :i + 1], moved)
        cuts.append(Cut(r, i, biggest, first))
    return CausalityReport(float(tolerance), tuple(cuts), diffs, backend_name)


@torch.inference_mode()
def causality_of_batch(model, check: BatchCheck, *, tolerance: float | None = None,
                       use_cache: bool | None = False) -> CausalityReport:
    """The causality check of a trainer's batch on a transformers ``model``, as :func:`.batch_run.run_hf_batch`
    passes it (the same kwargs, the same attention implementation): one cut in each intended document."""
    param = next(model.parameters())
    kwargs = batch_kwargs(check, param.device, param.dtype)
    if use_cache is not None:
        kwargs["use_cache"] = use_cache
    switch_attention(model, check.attn_implementation)
    rows, width = check.shape
    with query_blocks(check.attn_implementation == "sdpa" and width > QUERY_BLOCK):
        base = model(**kwargs).logits.float()
    if tolerance is None:
        tolerance, _ = default_tolerance(param.dtype, check.attn_implementation, float(base.abs().max()))
    spans = [(r, s, n) for r, row in enumerate(check.documents.per_row()) for s, n in row]
    cuts, diffs = [], np.zeros(base.shape[:2])
    # one forward pass per cut: a wide batch gets fewer (spread over its documents), so the run stays minutes
    most = max(1, min(MAX_CUTS, CUT_CELLS // max(1, rows * width * width)))
    for r, _start, i in _cut_points(spans, most):
        ids = kwargs["input_ids"].clone()
        ids[r] = _changed(ids[r], i, model.config.vocab_size)
        with query_blocks(check.attn_implementation == "sdpa" and width > QUERY_BLOCK):
            after = model(**{**kwargs, "input_ids": ids}).logits.float()
        biggest, first, moved = _cut(base[r], after[r], 0, i, tolerance)     # every earlier position of the row
        diffs[r, :i + 1] = np.maximum(diffs[r, :i + 1], moved)
        cuts.append(Cut(r, i, biggest, first))
    return CausalityReport(float(tolerance), tuple(cuts), diffs, check.attn_implementation)
