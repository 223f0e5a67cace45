"""transformers' sdpa attention over a long row, a block of queries at a time: the same mask, the same kernel.

A row of 16,384 tokens under a block mask costs torch's CPU ``scaled_dot_product_attention`` its boolean
mask turned into a float one, 16,384² x 4 bytes = 1 GiB, before it computes anything. The queries of an
attention call are independent of each other, so the lab calls transformers' own ``sdpa_attention_forward``
(``transformers/integrations/sdpa_attention.py``) on blocks of ``QUERY_BLOCK`` queries with the matching
rows of the mask transformers built, and joins the outputs: every query reads the keys the whole call
would let it read, and the float copy holds one block. Models reach it through the attention registry
(``AttentionInterface`` in ``transformers/modeling_utils.py``: ``ALL_ATTENTION_FUNCTIONS.get_interface``
in each model's attention), whose ``"sdpa"`` entry :func:`query_blocks` registers anew for the time of one run
(``AttentionInterface.register``, transformers' public way to replace one).
``tests/verify/test_chunked.py`` checks that the logits agree with the unblocked call on a real model.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager

import torch

QUERY_BLOCK = 1024      # queries per call: the float mask of a block of a 16k row is 64 MiB
_swap = threading.Lock()


def _blocked(sdpa):
    def forward(module, query, key, value, attention_mask, *args, position_bias=None, **kwargs):
        q = query.shape[2]
        rows_of = lambda m: m is not None and m.dim() == 4 and m.shape[-2] == q  # noqa: E731  per-query rows
        if q <= QUERY_BLOCK or not rows_of(attention_mask) or (position_bias is not None and not rows_of(position_bias)):
            return sdpa(module, query, key, value, attention_mask, *args, position_bias=position_bias, **kwargs)
        outs = []
        for a in range(0, q, QUERY_BLOCK):
            b = min(q, a + QUERY_BLOCK)
            out, _ = sdpa(module, query[:, :, a:b], key, value, attention_mask[..., a:b, :], *args,
                          position_bias=None if position_bias is None else position_bias[..., a:b, :], **kwargs)
            outs.append(out)
        return torch.cat(outs, dim=1), None     # sdpa_attention_forward returns [batch, queries, heads, dim]
    return forward


@contextmanager
def query_blocks(enabled: bool = True):
    """While open, transformers' ``sdpa`` attention runs in blocks of ``QUERY_BLOCK`` queries (one run at a time)."""
    if not enabled:
        yield
        return
    from transformers.modeling_utils import AttentionInterface

    with _swap:
        original = AttentionInterface()["sdpa"]     # a fresh interface: the library-wide entry, no local override
        AttentionInterface.register("sdpa", _blocked(original))
        try:
            yield
        finally:
            AttentionInterface.register("sdpa", original)
