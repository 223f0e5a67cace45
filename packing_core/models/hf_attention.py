"""Transformers integration: our attention backends inside any HF causal LM, and a runner for it.

HF causal LMs accept packed rows in the *padding-free* format: one row ``[1, T]``, no
attention mask, plus the document boundaries as keyword arguments::

    lengths [3, 2] -> input_ids     [[a0 a1 a2 b0 b1]]
                      position_ids  [[ 0  1  2  0  1]]
                      cu_seq_lens_q = cu_seq_lens_k = [0 3 5]
                      max_length_q  = max_length_k  = 3

:func:`register_attention` (an explicit call; :func:`hf_runner` makes it) registers one
attention function per backend of ``attention.BACKENDS`` under ``packing_lab_<backend>`` (``packing_lab_segments``, ...),
so ``model.set_attn_implementation("packing_lab_segments")`` runs any model built on
``AttentionInterface`` through them. They read ``cu_seq_lens_q`` and never guess; they
take no padding mask (HF builds none for them), so feed packed rows, not padded ones.

HF's own ``sdpa`` / ``eager`` / ``flex_attention`` guess instead: they rebuild the document
mask from ``position_ids`` (every step that is not +1 starts a document) and silently skip that
when a cache is present. In transformers 5.24, ``masking_utils._preprocess_mask_arguments`` calls
``find_packed_sequence_indices`` only when ``attention_mask is None and cache is None``, and
``create_causal_mask`` then ANDs ``packed_sequence_mask_function`` into the mask; for
``flex_attention``, ``flex_attention_mask`` turns that predicate into a BlockMask with
``create_block_mask(..., _compile=True)`` (every token pair, compiled), and
``integrations/flex_attention.py`` runs ``torch.compile(flex_attention)``.
``use_cache`` defaults to True in the config, in ``train()`` mode as well, so a plain
forward over a packed row leaks across documents unless the caller passes ``use_cache=False``.
:func:`hf_runner` keeps that behaviour so the verifier can show it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import threading
import weakref
from typing import Any

import torch
from transformers import AttentionInterface

import packing_core.attention.backends as attention
from packing_core._validate import InputError
from packing_core.models.api import switch_attention

ATTN_PREFIX = "packing_lab_"
ATTN_IMPLEMENTATIONS = tuple(ATTN_PREFIX + b for b in attention.BACKENDS)
HF_IMPLEMENTATIONS = ("sdpa", "eager", "flex_attention")  # the model's own: mask guessed from position_ids


def _attention_function(backend: str):
    """An ``AttentionInterface`` function running ``attention.attend(..., backend)``."""

    def packing_lab_attention(module, query, key, value, attention_mask=None, dropout=0.0,
                              scaling=None, **kwargs):
        # HF hands over [B, H, T, D]; our kernels take packed [T, H, D].
        B, H, T, D = query.shape
        if dropout:
            raise InputError(f"attention dropout {dropout} is not supported by "
                             f"{ATTN_PREFIX}{backend}: set config.attention_dropout = 0")
        if key.shape[2] != T:
            raise InputError(f"{ATTN_PREFIX}{backend} got {key.shape[2]} keys for {T} queries "
                             "(a KV cache from generation): run packed rows with "
                             "use_cache=False, or generate with attn_implementation='sdpa'")
        if key.shape[1] != H:  # grouped-query attention: share each kv head
            key = key.repeat_interleave(H // key.shape[1], dim=1)
            value = value.repeat_interleave(H // value.shape[1], dim=1)
        q, k, v = (t.transpose(1, 2).reshape(B * T, H, t.shape[-1]) for t in (query, key, value))
        rows = torch.arange(B + 1, dtype=torch.int32, device=query.device) * T
        cu = kwargs.get("cu_seq_lens_q")
        if cu is None:  # no boundaries given: each row is one document
            cu, longest = rows, T
        else:
            cu_k = kwargs.get("cu_seq_lens_k")
            if cu_k is not None and not torch.equal(cu_k.to(cu.device), cu):
                raise InputError("cu_seq_lens_k differs from cu_seq_lens_q: packed "
                                 "self-attention needs the same boundaries; pass one for both")
            cu = cu.to(device=query.device, dtype=torch.int32)
            longest = kwargs.get("max_length_q")
            longest = int(longest) if longest is not None else int((cu[1:] - cu[:-1]).max())
        out = attention.attend(q, k, v, cu, longest, backend, row_offsets=rows, scale=scaling)
        return out.view(B, T, H, out.shape[-1]), None  # [B, T, H, D], no weights

    packing_lab_attention.__name__ = f"{ATTN_PREFIX}{backend}"
    return packing_lab_attention


def register_attention() -> tuple[str, ...]:
    """Register every backend with transformers' ``AttentionInterface``; idempotent."""
    for backend in attention.BACKENDS:
        AttentionInterface.register(ATTN_PREFIX + backend, _attention_function(backend))
    return ATTN_IMPLEMENTATIONS


# transformers' kernels that live in optional packages: (module to find, pip name)
_KERNEL_PACKAGES = {"flash_attention_2": ("flash_attn", "flash-attn"),
                    "flash_attention_3": ("flash_attn_interface", "flash-attn-3")}


def attn_name(attn: str) -> str:
    """Full implementation name: ``"segments" -> "packing_lab_segments"``; HF names pass."""
    if attn in attention.BACKENDS:
        return ATTN_PREFIX + attn
    if attn in ATTN_IMPLEMENTATIONS or attn == "eager" or attn in AttentionInterface():
        package = _KERNEL_PACKAGES.get(attn)
        if package is not None and importlib.util.find_spec(package[0]) is None:
            raise InputError(f"attention {attn!r} needs the {package[1]} package, which is not installed "
                             f"(it needs a CUDA GPU: pip install {package[1]}); use sdpa, eager or one of the "
                             f"lab's backends ({', '.join(attention.BACKENDS)})")
        return attn
    raise InputError(f"unknown attention {attn!r}: choose one of "
                     f"{', '.join(ATTN_IMPLEMENTATIONS + HF_IMPLEMENTATIONS)}")


_model_locks: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


_model_locks_guard = threading.Lock()


@contextlib.contextmanager
def _attn_implementation(model, name: str):
    """Run ``model`` with attention ``name``, then put its previous choice back.

    The choice lives in the shared config, and a cached model is shared by every
    session of the app: one lock per model holds the switch for the whole forward
    pass, so a concurrent call can never finish on another caller's attention.
    """
    with _model_locks_guard:
        lock = _model_locks.setdefault(model, threading.RLock())
    with lock:
        previous = model.config._attn_implementation
        switch_attention(model, name)
        try:
            yield
        finally:
            switch_attention(model, previous)


def hf_runner(model, attn: str = "packing_lab_segments", use_cache: bool = False):
    """A ``verify`` runner: ``(input_ids[T], position_ids[T], cu_seqlens, max_seqlen) -> logits[T, V]``.

    Our backends get the padding-free format (``cu_seq_lens_q/k``, ``max_length_q/k``).
    HF's own ``sdpa`` / ``eager`` get only ``position_ids`` and ``use_cache``, as users
    call them: they ignore ``cu_seqlens`` and infer documents from position resets,
    unless ``use_cache=True`` (the config default), when they attend across documents.
    Each call switches the model's attention and then restores it, under a lock per
    model, so threads sharing one model run one forward pass at a time.
    """
    register_attention()   # idempotent: our names must exist before the model switches to one
    name = attn_name(attn)
    ours = name in ATTN_IMPLEMENTATIONS
    if name == "flex_attention":   # compiles a kernel like our flex backend: the same requirement
        from packing_core.attention.flex import flex_unavailable
        reason = flex_unavailable(next(model.parameters()).device)
        if reason is not None:
            raise InputError(reason.replace("backend 'flex'", "attention 'flex_attention'"))

    def run(input_ids, position_ids, cu_seqlens, max_seqlen):
        device = next(model.parameters()).device
        ids = torch.as_tensor(input_ids, dtype=torch.long, device=device)[None]
        pos = torch.as_tensor(position_ids, dtype=torch.long, device=device)[None]
        kwargs: dict[str, Any] = {"use_cache": use_cache}
        if ours:
            cu = torch.as_tensor(cu_seqlens, dtype=torch.int32, device=device)
            kwargs.update(cu_seq_lens_q=cu, cu_seq_lens_k=cu,
                          max_length_q=int(max_seqlen), max_length_k=int(max_seqlen))
        with _attn_implementation(model, name), torch.no_grad():
            out = model(input_ids=ids, position_ids=pos, **kwargs)
        return out.logits[0].float()

    run.attn = name
    return run

