"""A trainer's batch as arrays: the keys it may use, each entry coerced and its shape checked.

Trainers name the same tensor differently: transformers' ``input_ids`` / ``position_ids`` /
``attention_mask`` / ``labels``, torchtune's ``tokens`` / ``input_pos`` / ``mask``. Every
entry becomes a numpy array (a tensor on an accelerator is copied to the CPU), with one clear
:class:`~packing_core._validate.InputError` for a ragged, non-integer or misshapen one.

    >>> t, ignored = batch_tensors({"input_ids": [[5, 6, 7, 0]], "attention_mask": [[1, 1, 1, 0]]})
    >>> t.shape, batch_format(t), ignored
    ((1, 4), 'padded', ())
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from packing_core._validate import InputError
from packing_core.attention.semantics import BatchTensors, four_d_allowed

FORMATS = ("padding-free", "padded", "packed rows", "4D mask", "plain")
# the keys a trainer's batch may use for each tensor: transformers' first, then torchtune's
_ALIASES = {"input_ids": ("input_ids", "tokens"), "position_ids": ("position_ids", "input_pos"),
            "attention_mask": ("attention_mask", "mask"), "labels": ("labels",),
            "cu_seq_lens_q": ("cu_seq_lens_q",), "cu_seq_lens_k": ("cu_seq_lens_k",)}
_LENGTH_KEYS = ("max_length_q", "max_length_k")
# entries a trainer passes that attention does not read: ignored without a note
_QUIET = {"use_cache", "return_dict", "num_items_in_batch", "seq_lens"}


def _describe(value) -> str:
    return type(value).__name__


def _array(name: str, value, *, kind: str = "int") -> np.ndarray:
    """One entry as a numpy array; tensors on an accelerator are copied to the CPU, meta tensors refused."""
    device = getattr(value, "device", None)
    if device is not None and getattr(device, "type", "") == "meta":
        raise InputError(f"{name} is a tensor on the meta device: it has a shape but no values, so there is "
                         "nothing to check; pass the batch the dataloader yields (on cpu or cuda)")
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        value = value.detach().cpu()
        if str(getattr(value, "dtype", "")) == "torch.bfloat16":
            value = value.float()
        value = value.numpy()
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError):
        raise InputError(f"{name} is ragged (rows of different lengths) or not numbers: give every row the same "
                         "length, integers only") from None
    if arr.dtype == object:
        raise InputError(f"{name} is ragged or holds non-numbers: give every row the same length, integers only")
    if kind == "mask":
        if arr.dtype.kind not in "biuf":
            raise InputError(f"{name} must hold numbers or booleans, got dtype {arr.dtype}")
        return arr
    if arr.dtype.kind not in "iu":
        raise InputError(f"{name} must hold integers, got dtype {arr.dtype}: token ids, labels and positions "
                         "are whole numbers (store them as int64)")
    return arr.astype(np.int64)


def _pick(batch: Mapping, key: str):
    for alias in _ALIASES[key]:
        if alias in batch and batch[alias] is not None:
            return alias, batch[alias]
    return None, None


def batch_tensors(batch: Mapping) -> tuple[BatchTensors, tuple[str, ...]]:
    """``(BatchTensors, ignored entry names)`` from a trainer's batch; bad shapes raise ``InputError``.

    >>> t, ignored = batch_tensors({"tokens": [[1, 2, 3]], "input_pos": [[0, 1, 2]], "seq_lens": [[3]], "tag": "x"})
    >>> t.position_ids.tolist(), ignored
    ([[0, 1, 2]], ('tag',))
    """
    if not isinstance(batch, Mapping):
        raise InputError(f"a batch is a mapping of names to arrays, got {_describe(batch)}")
    key, ids = _pick(batch, "input_ids")
    if key is None:
        raise InputError(f"the batch has no input_ids (or torchtune's tokens); keys: {', '.join(map(str, batch)) or 'none'}: "
                         "give the dict a trainer passes to model(**batch)")
    ids = _array(key, ids)
    if ids.ndim == 1:
        ids = ids[None]
    if ids.ndim != 2 or ids.shape[1] == 0:
        raise InputError(f"{key} must be [batch, tokens] with at least one token, got shape {ids.shape}")
    B, T = ids.shape
    out: dict = {"input_ids": ids}
    used = {key}
    for name in ("position_ids", "labels"):
        k, v = _pick(batch, name)
        if k is None:
            continue
        used.add(k)
        arr = _array(k, v)
        arr = arr[None] if arr.ndim == 1 else arr
        if arr.ndim != 2 or arr.shape[1] != T or arr.shape[0] not in (1, B) or (name == "labels" and arr.shape[0] != B):
            raise InputError(f"{k} has shape {tuple(arr.shape)} but {key} has {(B, T)}: pad them to the same length (a "
                             f"collator that pads input_ids to a multiple must pad {k} too)")
        out[name] = arr
    k, m = _pick(batch, "attention_mask")
    if k is not None:
        used.add(k)
        m = _array(k, m, kind="mask")
        if m.ndim == 1:
            m = m[None]
        if m.ndim == 3:            # torchtune's block mask [B, T, T]: one head
            m = m[:, None]
        if m.ndim == 2:
            if m.shape != (B, T):
                raise InputError(f"{k} has shape {tuple(m.shape)} but {key} has {(B, T)}")
            if not np.isin(m, (0, 1)).all():
                raise InputError(f"a 2D {k} holds 1 for real tokens and 0 for pads only, got values "
                                 f"{np.unique(m)[:6].tolist()}")
            m = m.astype(bool)
        elif m.ndim == 4:
            if m.shape[0] not in (1, B) or m.shape[2:] != (T, T):
                raise InputError(f"a 4D {k} is [batch, heads, {T}, {T}] (queries x keys), got {tuple(m.shape)}")
            m = four_d_allowed(m)
        else:
            raise InputError(f"{k} must be 2D [batch, tokens], 3D (torchtune) or 4D [batch, heads, q, k], "
                             f"got shape {tuple(m.shape)}")
        out["attention_mask"] = m
    for name in ("cu_seq_lens_q", "cu_seq_lens_k"):
        if batch.get(name) is not None:
            used.add(name)
            cu = _array(name, batch[name]).reshape(-1)
            if len(cu) < 2:
                raise InputError(f"{name} needs at least 2 offsets (e.g. [0, 5, 9]), got {cu.tolist()}")
            out[name] = cu
    for name in _LENGTH_KEYS:
        if batch.get(name) is not None:
            used.add(name)
            v = _array(name, batch[name]).reshape(-1)
            if v.size != 1:
                raise InputError(f"{name} is one whole number (the longest document), got {v.size} values")
            out[name] = int(v[0])
    ignored = tuple(str(k) for k in batch if k not in used and k not in _QUIET)
    return BatchTensors(**out), ignored


def batch_format(t: BatchTensors) -> str:
    """Which of ``FORMATS`` the batch's tensors make: how a trainer laid it out."""
    if t.mask_4d is not None:
        return "4D mask"
    if t.cu_seq_lens_q is not None or t.cu_seq_lens_k is not None or (
            t.position_ids is not None and t.mask_2d is None and t.shape[0] == 1):
        return "padding-free"
    if t.mask_2d is not None:
        return "padded"
    return "packed rows" if t.position_ids is not None else "plain"
