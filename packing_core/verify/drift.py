"""Drift in words: greedy continuations of a document alone and packed after another.

Logit differences are abstract; a continuation is not. Decode ~20 tokens of document 1
greedily twice: alone, and packed after document 0 in one row. With the document mask
on, both rows give document 1 the same computation, so the words are the same. With it
off, document 1 reads document 0, and the continuation drifts towards its topic::

    alone:   [b0 b1 b2] -> b3' b4' ...
    packed:  [a0 a1 a2 a3 | b0 b1 b2] -> b3'' b4'' ...   (mask off: b reads a)

``model`` is a transformers causal LM: the prompt row runs once with an explicit 4D mask
(block-diagonal, or one causal triangle), then each new token reads a KV cache with its
own 4D mask row, so 20 tokens cost one long forward pass and 19 short ones.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import torch

from packing_core._validate import MASKS, Mask, choice, whole_number

MAX_STEPS = 64


@dataclass(frozen=True)
class Continuations:
    """Document ``document``'s greedy continuation alone and packed after the documents before it."""

    document: int
    mask: str
    steps: int
    alone_ids: tuple[int, ...]
    packed_ids: tuple[int, ...]
    alone_text: str
    packed_text: str

    @property
    def same(self) -> bool:
        return self.alone_ids == self.packed_ids

    @property
    def first_difference(self) -> int | None:
        """Index of the first generated token that differs, or None."""
        diff = [i for i, (a, b) in enumerate(zip(self.alone_ids, self.packed_ids)) if a != b]
        return diff[0] if diff else None

    def to_dict(self) -> dict:
        return {**asdict(self), "same": self.same, "first_difference": self.first_difference}


def _additive(allowed: torch.Tensor, dtype) -> torch.Tensor:
    """bool [q, k] -> the 4D additive mask transformers uses as given: 0 where allowed, -inf-ish elsewhere."""
    return torch.where(allowed, 0.0, torch.finfo(dtype).min).to(dtype)[None, None]


def _greedy(model, before: list[int], doc: list[int], steps: int, mask: str) -> list[int]:
    """Greedy decoding of ``doc`` after ``before`` in one row, with a KV cache and explicit 4D masks.

    The prompt row gets a block-diagonal causal mask (``mask="on"``) or one causal triangle
    (``"off"``); each new token then reads its own document's keys (or, off, every key).
    A 4D mask is the one mask transformers uses exactly as given, on every attention.
    """
    device, dtype = next(model.parameters()).device, next(model.parameters()).dtype
    n0, T = len(before), len(before) + len(doc)
    own = torch.arange(T, device=device) >= n0                      # keys of the continued document
    allowed = torch.ones(T, T, dtype=torch.bool, device=device).tril()
    if mask == "on":
        allowed &= own[:, None] == own[None, :]
    pos = torch.cat([torch.arange(n0), torch.arange(len(doc))]).to(device)
    out = model(input_ids=torch.tensor([before + doc], device=device), position_ids=pos[None],
                attention_mask=_additive(allowed, dtype), use_cache=True)
    new = []
    for step in range(steps):   # one single-token step per new word piece, reading the cache
        token = int(out.logits[0, -1].argmax())
        new.append(token)
        if step == steps - 1:
            break
        keys = torch.cat([own if mask == "on" else torch.ones_like(own),
                          torch.ones(step + 1, dtype=torch.bool, device=device)])
        out = model(input_ids=torch.tensor([[token]], device=device),
                    position_ids=torch.tensor([[len(doc) + step]], device=device),
                    attention_mask=_additive(keys[None], dtype), cache=out.cache, use_cache=True)
    return new


@torch.inference_mode()
def continuations(model, documents: Sequence[Sequence[int]], decode: Callable[[list[int]], str], *,
                  document: int = 1, mask: Mask = "off", steps: int = 20) -> Continuations:
    """Greedy continuations of ``documents[document]`` on ``model`` (a transformers causal LM):
    alone, and packed after the documents before it.

    Only the documents before it share its row (the ones after it cannot reach it).
    """
    choice("mask", mask, MASKS)
    steps = whole_number(steps, "steps", maximum=MAX_STEPS, hint="about 20 tokens read as a phrase")
    if not 1 <= document < len(documents):
        raise ValueError(f"document must be 1 to {len(documents) - 1} (it needs one before it to read), "
                         f"got {document}")
    before = [t for d in documents[:document] for t in d]
    doc = list(documents[document])
    alone = _greedy(model, [], doc, steps, mask)
    packed = _greedy(model, before, doc, steps, mask)
    return Continuations(document=document, mask=mask, steps=steps, alone_ids=tuple(alone),
                         packed_ids=tuple(packed), alone_text=decode(alone), packed_text=decode(packed))
