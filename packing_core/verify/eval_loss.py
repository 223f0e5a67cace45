"""Evaluation under packing: the loss of each document packed, against the same document alone.

A cheap production check. Evaluate a held-out set twice, packed as in training and with every
document alone (or padded one per row), and compare the loss per document: with a right mask the
two agree to the last bits, whatever the packing; a document that reads its neighbour (a lost
boundary, a cu_seqlens over the whole row) or trains on a target across an edge gets another loss.
It needs no access to the trainer's internals, only its eval loop.

Here the tiny model (random init, for speed) reads the batch as a varlen kernel does: its
``cu_seqlens`` and ``position_ids``, each document piece from position 0 when alone.

>>> from packing_core.batch.packed import PackedBatch
>>> from packing_lab.zoo import broken_batch
>>> good = PackedBatch.from_documents([[65, 66, 67, 68], [69, 70, 71]], 8, "next-fit")
>>> eval_loss_packed_vs_alone(good).agree
True
>>> eval_loss_packed_vs_alone(broken_batch(good, "row-cu-seqlens"), good).agree
False
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from packing_core.batch.packed import IGNORE_INDEX, PackedBatch

TOLERANCE = 1e-4   # nats: float32 losses of the same computation agree to about 1e-6


@dataclass(frozen=True)
class EvalLoss:
    """Mean loss per document piece (its trained positions), packed and alone, and over the whole batch."""

    packed: tuple[float, ...]
    alone: tuple[float, ...]
    packed_mean: float
    alone_mean: float
    tolerance: float

    @property
    def max_abs_diff(self) -> float:
        return max((abs(a - b) for a, b in zip(self.packed, self.alone) if np.isfinite(a) and np.isfinite(b)),
                   default=0.0)

    @property
    def agree(self) -> bool:
        return self.max_abs_diff <= self.tolerance and abs(self.packed_mean - self.alone_mean) <= self.tolerance

    @property
    def sentence(self) -> str:
        head = (f"Evaluation loss, packed {self.packed_mean:.4f} against alone {self.alone_mean:.4f}; per document "
                f"up to {self.max_abs_diff:.1e} apart")
        return head + (": they agree. The batch's cu_seqlens, positions and targets give each document its "
                       "alone computation; this check does not read the attention mask, which the verdict above "
                       "judges." if self.agree else
                       f", beyond {self.tolerance:.0e}: packed evaluation is not measuring what each document alone "
                       "would score.")

    def to_dict(self) -> dict:
        return {"packed": list(self.packed), "alone": list(self.alone), "packed_mean": self.packed_mean,
                "alone_mean": self.alone_mean, "tolerance": self.tolerance, "agree": self.agree,
                "max_abs_diff": self.max_abs_diff, "sentence": self.sentence}


def _mean(x: torch.Tensor) -> float:
    return float(x.mean()) if len(x) else float("nan")


@torch.inference_mode()
def eval_loss_packed_vs_alone(batch: PackedBatch, intended: PackedBatch | None = None, *, seed: int = 0,
                              tolerance: float = TOLERANCE) -> EvalLoss:
    """Each piece's loss inside ``batch`` against its loss alone, as ``intended`` (default ``batch``) lays it out."""
    from packing_core.models.tiny import tiny_model

    intended = batch if intended is None else intended
    model = tiny_model("tiny-rope", seed=seed)
    valid = batch.valid
    ids = batch.input_ids[valid]
    logits = model(ids, batch.position_ids[valid], batch.cu_seqlens, int(batch.max_seqlen))
    targets = batch.targets[valid]
    per_token = F.cross_entropy(logits, targets.clamp(min=0), reduction="none")
    trained = batch.loss_mask[valid] & (targets != IGNORE_INDEX)
    pieces = intended.piece_ids[valid]
    packed, alone, alone_losses = [], [], []
    for p in torch.unique(pieces[pieces >= 0]).tolist():       # a row's documents: tens
        at = pieces == p
        packed.append(_mean(per_token[at & trained]))
        tokens = intended.input_ids[intended.piece_ids == p]
        n = len(tokens)
        one = model(tokens, torch.arange(n), torch.tensor([0, n], dtype=torch.int32), n)
        t = intended.targets[intended.piece_ids == p]
        keep = intended.loss_mask[intended.piece_ids == p] & (t != IGNORE_INDEX)
        loss = F.cross_entropy(one[keep], t[keep], reduction="none")
        alone.append(_mean(loss))
        alone_losses.append(loss)
    return EvalLoss(tuple(packed), tuple(alone), _mean(per_token[trained]), _mean(torch.cat(alone_losses)),
                    float(tolerance))
