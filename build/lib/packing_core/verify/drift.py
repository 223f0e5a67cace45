"""Drift in words: greedy continuations of a document alone and packed after another.

Logit differences are abstract; a continuation is not. Decode ~20 tokens of document 1
greedily twice: alone, and packed after document 0 in one row. When the packed row gives
document 1 the computation it gets alone, the words are the same. When it does not (no
document mask, or a path that drops the mask on its own), document 1 reads document 0,
and the continuation can drift towards its topic::

    alone:   [b0 b1 b2] -> b3' b4' ...
    packed:  [a0 a1 a2 a3 | b0 b1 b2] -> b3'' b4'' ...   (a leaking path: b reads a)

The words must follow the verdict's path, or they can contradict it (an explicit block
mask isolates documents that transformers' sdpa with a cache does not). Two ways:

- :func:`continuations` decodes through the *same runner* the verdict uses
  (``verify.equivalence.Runner``), one fresh forward pass of the whole row per token: the
  exact path, for any backend, at the price of a full row per token;
- :func:`cached_continuations` decodes with the model's KV cache, either with no mask
  (transformers' own sdpa/eager with ``use_cache=True``: exactly that path, which is how
  it leaks) or with the mask given explicitly as 4D tensors (the mask a backend applies,
  for the lab's backends, which take no cache: the same mask, another kernel).

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

from packing_core._validate import MASKS, POSITIONS, InputError, Mask, Positions, choice, whole_number
from packing_core.attention.masks import allowed
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
    return _alone_and_packed(lambda before, doc, steps: _greedy(runner, before, doc, steps, mask, positions, device),
                             documents, decode, document=document, mask=mask, positions=positions, steps=steps,
                             path=path)


def _additive(ok: torch.Tensor, dtype) -> torch.Tensor:
    """bool [q, k] -> the 4D additive mask transformers uses as given: 0 where allowed, -inf-ish elsewhere."""
    return torch.where(ok, 0.0, torch.finfo(dtype).min).to(dtype)[None, None]


def _greedy_cached(model, before_docs: Sequence[Sequence[int]], doc: list[int], steps: int, mask: str,
                   positions: str, explicit: bool) -> list[int]:
    """Greedy decoding with the model's KV cache: one forward of the row, then one per new token.

    ``explicit``: every call gets a 4D mask (block-diagonal causal with the mask on, one causal
    triangle off). Not explicit: no mask at all, as a user calls transformers' own attention
    with ``use_cache=True``; transformers then attends over the whole cached row.
    """
    device, dtype = next(model.parameters()).device, next(model.parameters()).dtype
    before = [t for d in before_docs for t in d]
    n0, T = len(before), len(before) + len(doc)
    layout = segment_layout([*(len(d) for d in before_docs), len(doc)], positions)
    pos = torch.as_tensor(layout.position_ids, dtype=torch.long, device=device)
    own = torch.arange(T, device=device) >= n0                      # keys of the continued document
    kwargs = {}
    if explicit:
        # mask on: two segments, the documents before and the continued one; off: one causal triangle
        segments = own.long() if mask == "on" else torch.zeros(T, dtype=torch.long, device=device)
        kwargs["attention_mask"] = _additive(allowed(segments), dtype)
    out = model(input_ids=torch.tensor([before + doc], device=device), position_ids=pos[None], use_cache=True,
                **kwargs)
    new: list[int] = []
    for step in range(steps):   # one single-token step per new word piece, reading the cache
        token = int(out.logits[0, -1].argmax())
        new.append(token)
        if step == steps - 1:
            break
        if explicit:
            keys = torch.cat([own if mask == "on" else torch.ones_like(own),
                              torch.ones(step + 1, dtype=torch.bool, device=device)])
            kwargs["attention_mask"] = _additive(keys[None], dtype)
        out = model(input_ids=torch.tensor([[token]], device=device),
                    position_ids=(pos[-1] + 1 + step).reshape(1, 1), cache=out.cache, use_cache=True, **kwargs)
    return new


@torch.inference_mode()
def cached_continuations(model, documents: Sequence[Sequence[int]], decode: Callable[[list[int]], str], *,
                         document: int = 1, mask: Mask = "off", positions: Positions = "reset", steps: int = 20,
                         explicit_mask: bool = True, path: str = "") -> Continuations:
    """:func:`continuations` on a transformers causal LM with its KV cache (see the module docstring)."""
    return _alone_and_packed(
        lambda before, doc, steps: _greedy_cached(model, before, doc, steps, mask, positions, explicit_mask),
        documents, decode, document=document, mask=mask, positions=positions, steps=steps, path=path)


def _alone_and_packed(greedy: Callable, documents, decode, *, document: int, mask: str, positions: str,
                      steps: int, path: str) -> Continuations:
    """The settings checked once, then ``greedy(before, doc, steps)`` alone (nothing before) and packed."""
    choice("mask", mask, MASKS)
    choice("positions", positions, POSITIONS)
    steps = whole_number(steps, "steps", maximum=MAX_STEPS, hint="about 20 tokens read as a phrase")
    if not 1 <= document < len(documents):
        raise InputError(f"document must be 1 to {len(documents) - 1} (it needs one before it to read), "
                         f"got {document}")
    doc = list(documents[document])
    alone = greedy([], doc, steps)
    packed = greedy(documents[:document], doc, steps)
    return Continuations(document=document, mask=mask, steps=steps, alone_ids=tuple(alone),
                         packed_ids=tuple(packed), alone_text=decode(alone), packed_text=decode(packed),
                         positions=positions, path=path)
