"""Drift in words: greedy continuations of a document alone and packed after another.

Logit differences are abstract; a continuation is not. Decode ~20 tokens of document 1
greedily twice: alone, and packed after document 0 in one row. When the packed row gives
document 1 the computation it gets alone, the words are the same. When it does not (no
document mask, or a path that drops the mask on its own), document 1 reads document 0,
and the continuation can drift towards its topic::

    alone:   [b0 b1 b2] -> b3' b4' ...
    packed:  [a0 a1 a2 a3 | b0 b1 b2] -> b3'' b4'' ...   (a leaking path: b reads a)

Every token is decoded through the *same runner* the alone-vs-packed verdict uses
(``verify.equivalence.Runner``: the backend, ``use_cache`` and the positions of the
scenario), so the words can never contradict the verdict above them. Each new token is
one fresh forward pass of the whole row through that runner: no KV cache of our own,
whose explicit mask would isolate documents that the scenario's path does not.

    >>> import torch
    >>> def runner(ids, pos, cu, max_len):   # a toy model: it predicts the previous token + 1
    ...     return torch.nn.functional.one_hot((ids + 1) % 16, 16).float()
    >>> c = continuations(runner, [[3, 4], [7, 8]], str, steps=3)
    >>> c.alone_ids, c.packed_ids, c.same
    ((9, 10, 11), (9, 10, 11), True)
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch

from packing_core._validate import MASKS, POSITIONS, Mask, Positions, choice, whole_number
from packing_core.batch.packed import segment_layout

MAX_STEPS = 64


@dataclass(frozen=True)
class Continuations:
    """Document ``document``'s greedy continuation alone and packed after the documents before it.

    ``path`` says in words which attention path produced both (the verdict's own).
    """

    document: int
    mask: str
    steps: int
    alone_ids: tuple[int, ...]
    packed_ids: tuple[int, ...]
    alone_text: str
    packed_text: str
    positions: str = "reset"
    path: str = ""

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


def _greedy(runner, before: Sequence[Sequence[int]], doc: list[int], steps: int, mask: str,
            positions: str, device) -> list[int]:
    """Greedy decoding of ``doc`` after the documents ``before`` in one row, one full forward per token.

    The row is laid out exactly as ``verify_runner`` lays out its packed row: positions by
    ``positions``, ``cu_seqlens`` per document with the mask on, ``[0, T]`` with it off.
    """
    prefix = [t for d in before for t in d]
    new: list[int] = []
    for _ in range(steps):   # a handful of steps: one forward pass each
        lengths = [*(len(d) for d in before), len(doc) + len(new)]
        layout = segment_layout(lengths, positions)
        ids = torch.tensor(prefix + doc + new, dtype=torch.long, device=device)
        T = len(ids)
        cu = layout.cu_seqlens if mask == "on" else np.array([0, T], dtype=np.int32)
        out = runner(ids, torch.as_tensor(layout.position_ids, dtype=torch.long, device=device),
                     torch.as_tensor(cu, dtype=torch.int32, device=device), max(lengths) if mask == "on" else T)
        new.append(int(out[-1].argmax()))
    return new


@torch.inference_mode()
def continuations(runner, documents: Sequence[Sequence[int]], decode: Callable[[list[int]], str], *,
                  document: int = 1, mask: Mask = "off", positions: Positions = "reset", steps: int = 20,
                  path: str = "", device="cpu") -> Continuations:
    """Greedy continuations of ``documents[document]`` through ``runner``: alone, and packed
    after the documents before it.

    ``runner`` is a verify runner (``hf_runner(model, attn, use_cache)`` or
    ``model_runner(tiny, backend)``): the same one the verdict ran. Only the documents
    before the continued one share its row (the ones after it cannot reach it).
    """
    choice("mask", mask, MASKS)
    choice("positions", positions, POSITIONS)
    steps = whole_number(steps, "steps", maximum=MAX_STEPS, hint="about 20 tokens read as a phrase")
    if not 1 <= document < len(documents):
        raise ValueError(f"document must be 1 to {len(documents) - 1} (it needs one before it to read), "
                         f"got {document}")
    doc = list(documents[document])
    alone = _greedy(runner, [], doc, steps, mask, positions, device)
    packed = _greedy(runner, documents[:document], doc, steps, mask, positions, device)
    return Continuations(document=document, mask=mask, steps=steps, alone_ids=tuple(alone),
                         packed_ids=tuple(packed), alone_text=decode(alone), packed_text=decode(packed),
                         positions=positions, path=path)
