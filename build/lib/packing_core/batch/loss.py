"""How a loss average weights documents once they share rows.

Three rules for turning per-token losses into one number:

- ``"token"``: sum over every counted token / the number of counted tokens (transformers'
  Trainer and TRL's SFTTrainer: over the whole global batch, via ``num_items_in_batch``);
- ``"row"``: mean inside each row, then mean over rows;
- ``"document"``: mean inside each document, then mean over documents.

The gradient weight of a token is d(loss)/d(its loss). A document's weight is the sum
over its tokens. Under "token" a document weighs its share of the tokens; under "row" a
short document that shares a row with few others weighs more; under "document" every
document weighs the same, whatever its length::

    rows [[2, 6], [8]] (tokens per document)
    token:    [0.125, 0.375, 0.5]
    row:      [0.125, 0.375, 0.5]      row 0: 8 tokens, row 1: 8 tokens (same as token here)
    document: [0.333, 0.333, 0.333]

>>> document_weights([[2, 6], [4]], "token").round(3).tolist()
[0.167, 0.5, 0.333]
>>> document_weights([[2, 6], [4]], "row").round(3).tolist()
[0.125, 0.375, 0.5]
"""
from __future__ import annotations

import numpy as np

from packing_core._validate import InputError, choice

LOSS_RULES = ("token", "row", "document")


def token_weights(rows, rule: str) -> list[np.ndarray]:
    """Per-token gradient weights under ``rule``; ``rows`` lists the counted tokens per document, row by row."""
    choice("rule", rule, LOSS_RULES)
    counts = [np.asarray(r, dtype=np.int64) for r in rows]
    if not counts or any(c.ndim != 1 or len(c) == 0 or (c < 1).any() for c in counts):
        raise InputError(f"rows must be lists of counted tokens per document (each >= 1), got {rows!r}")
    total = sum(int(c.sum()) for c in counts)
    n_docs = sum(len(c) for c in counts)
    out = []
    for c in counts:   # rows of one batch: a handful
        if rule == "token":
            w = np.full(len(c), 1.0 / total)
        elif rule == "row":
            w = np.full(len(c), 1.0 / (len(counts) * c.sum()))
        else:
            w = 1.0 / (n_docs * c)
        out.append(w)
    return out


def document_weights(rows, rule: str) -> np.ndarray:
    """Each document's total gradient weight (its tokens' weights summed), in row order; sums to 1."""
    counts = [np.asarray(r, dtype=np.int64) for r in rows]
    return np.concatenate([w * c for w, c in zip(token_weights(rows, rule), counts)])


def reduce_loss(per_token, document_ids, row_ids, rule: str):
    """One loss from per-token losses (torch, counted tokens only) under ``rule``; differentiable.

    ``document_ids`` numbers documents across the batch, ``row_ids`` gives each token's row.
    """
    import torch

    choice("rule", rule, LOSS_RULES)
    seg = torch.as_tensor(document_ids, dtype=torch.long)
    if rule == "token":
        return per_token.mean()
    groups = seg if rule == "document" else torch.as_tensor(row_ids, dtype=torch.long)
    _, groups = torch.unique(groups, return_inverse=True)
    n = int(groups.max()) + 1
    sums = torch.zeros(n, dtype=per_token.dtype).index_add(0, groups, per_token)
    counts = torch.bincount(groups, minlength=n).to(per_token.dtype)
    return (sums / counts).mean()
