"""The loss-normalisation lesson, measured: each document's gradient weight on the tiny model.

Documents of the given counted lengths run through the tiny model (random init, for
speed); their per-token losses are reduced per token, per row and per document, and
autograd gives d(loss)/d(token loss), summed per document. It matches
:func:`~packing_core.batch.loss.document_weights` exactly: the weights are a property of the
rule and the packing, not of the model.

    >>> lesson = loss_lesson([[4], [60, 60]])
    >>> [round(w, 3) for w in lesson.measured["row"]]
    [0.5, 0.25, 0.25]
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from packing_core._validate import InputError, whole_number
from packing_core.batch.loss import LOSS_RULES, document_weights, reduce_loss
from packing_core.verify.equivalence import default_documents

MAX_LESSON_TOKENS = 4096


@dataclass(frozen=True)
class LossLesson:
    rows: tuple[tuple[int, ...], ...]     # counted tokens per document, row by row
    expected: dict                        # rule -> tuple of document weights (analytic)
    measured: dict                        # rule -> tuple of document weights (autograd, tiny model)
    loss: dict                            # rule -> the loss value under that rule

    def to_dict(self) -> dict:
        return {"rows": [list(r) for r in self.rows], "expected": self.expected, "measured": self.measured,
                "loss": self.loss}


def loss_lesson(rows, seed: int = 0) -> LossLesson:
    """Gradient weight per document under each rule, on the tiny model; ``rows`` as in ``document_weights``."""
    from packing_core.models.tiny import tiny_model

    rows = tuple(tuple(whole_number(n, "counted tokens", hint="e.g. 4 | 60 60") for n in r) for r in rows)
    if sum(map(sum, rows)) > MAX_LESSON_TOKENS:
        raise InputError(f"the rows hold {sum(map(sum, rows)):,} tokens; the lesson runs at most "
                         f"{MAX_LESSON_TOKENS:,}: use smaller numbers")
    expected = {rule: tuple(float(w) for w in document_weights(rows, rule)) for rule in LOSS_RULES}
    lengths = [n for r in rows for n in r]
    row_of = [i for i, r in enumerate(rows) for _ in r]
    torch.manual_seed(seed)
    model = tiny_model("tiny-rope")
    per_token, seg, row = [], [], []
    with torch.enable_grad():
        for d, doc in enumerate(default_documents([n + 1 for n in lengths], seed=seed)):   # n targets need n + 1 tokens
            ids = torch.tensor(doc)
            n = len(doc) - 1
            logits = model(ids[:-1], torch.arange(n), torch.tensor([0, n], dtype=torch.int32), n)
            per_token.append(torch.nn.functional.cross_entropy(logits, ids[1:], reduction="none"))
            seg += [d] * n
            row += [row_of[d]] * n
        losses = torch.cat(per_token).detach().requires_grad_(True)
        measured, values = {}, {}
        for rule in LOSS_RULES:
            loss = reduce_loss(losses, seg, row, rule)
            (g,) = torch.autograd.grad(loss, losses)
            measured[rule] = tuple(float(x) for x in np.bincount(seg, weights=g.numpy(), minlength=len(lengths)))
            values[rule] = float(loss.detach())
    return LossLesson(rows=rows, expected=expected, measured=measured, loss=values)
