"""A trainer's batch as arrays: the keys it may use, each entry coerced and its shape checked.

Trainers name the same tensor differently: transformers' ``input_ids`` / ``position_ids`` /
``attention_mask`` / ``labels``, torchtune's ``tokens`` / ``input_pos`` / ``mask``, Megatron's
``tokens`` / ``labels`` / ``loss_mask`` / ``attention_mask`` / ``position_ids``, OLMo-core's
``doc_lens`` / ``max_doc_lens``; TRL 1.16 and transformers 5.24 add ``cu_seq_lens_q/_k``,
``max_length_q/_k`` and ``seq_idx``. Every entry becomes a numpy array (a tensor on an
accelerator is copied to the CPU, bfloat16 widened to float32), with one clear
:class:`~packing_core._validate.InputError` for a ragged, non-integer or misshapen one. A 2D
mask may number documents (``[1, 1, 2, 2, 0]``); a 4D mask is read once for its kind and
convention (:func:`packing_core.attention.tensors.read_4d_mask`); 3-D / 4-D rotary
``position_ids`` are kept whole, their text row read as the positions.

    >>> t, ignored = batch_tensors({"input_ids": [[5, 6, 7, 0]], "attention_mask": [[1, 1, 1, 0]]})
    >>> t.shape, batch_format(t), ignored
    ((1, 4), 'padded', ())
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from packing_core._validate import InputError
from packing_core.attention.tensors import MASK_CONVENTIONS, BatchTensors, read_4d_mask

FORMATS = ("padding-free", "padded", "packed rows", "4D mask", "document-id mask", "plain")
# the keys a trainer's batch may use for each tensor: transformers' first, then torchtune's / Megatron's
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


def _rows(name: str, arr: np.ndarray, key: str, B: int, T: int, *, rows_of_one: bool = True) -> np.ndarray:
    """A ``[B, T]`` tensor (``[T]`` and, where allowed, ``[1, T]`` beside ``B`` rows are fine)."""
    arr = arr[None] if arr.ndim == 1 else arr
    if arr.ndim != 2 or arr.shape[1] != T or arr.shape[0] not in ((1, B) if rows_of_one else (B,)):
        raise InputError(f"{name} has shape {tuple(arr.shape)} but {key} has {(B, T)}: pad them to the same length (a "
                         f"collator that pads input_ids to a multiple must pad {name} too)")
    return arr


def _positions(name: str, arr: np.ndarray, key: str, B: int, T: int) -> dict:
    """2-D positions as they are; 3-D / 4-D rotary positions ``[sections, B, T]`` kept whole, with the text row
    (section 0 of 4) as the positions the mask reads, as Qwen2-VL's ``Qwen2VLTextModel.forward`` takes them."""
    if arr.ndim == 3:
        if arr.shape[1] not in (1, B) or arr.shape[2] != T or arr.shape[0] < 2:
            raise InputError(f"{name} has shape {tuple(arr.shape)}: 3-D rotary positions are [sections, batch, "
                             f"tokens] = [3 or 4, {B}, {T}]")
        rope = np.broadcast_to(arr, (arr.shape[0], B, T))
        return {"rope_position_ids": rope, "position_ids": rope[0] if arr.shape[0] == 4 else None}
    return {"position_ids": _rows(name, arr, key, B, T)}


def _attention_mask(name: str, m: np.ndarray, key: str, B: int, T: int, convention: str) -> dict:
    if m.ndim == 1:
        m = m[None]
    if m.ndim == 3:            # torchtune's block mask [B, T, T]: one head
        m = m[:, None]
    if m.ndim == 2:
        if m.shape != (B, T):
            raise InputError(f"{name} has shape {tuple(m.shape)} but {key} has {(B, T)}")
        if m.dtype.kind == "f" and not (m == np.round(m)).all() or (m < 0).any():
            raise InputError(f"a 2D {name} holds 1 for real tokens and 0 for pads (or document numbers 1, 2, ... and "
                             f"0 for pads), got values {np.unique(m)[:6].tolist()}")
        out = {"attention_mask": m != 0}
        if (m > 1).any():      # document numbers: axolotl's multipack, LLaMA-Factory's neat_packing
            out["document_mask"] = m.astype(np.int64)
        return out
    if m.ndim == 4:
        if m.shape[0] not in (1, B) or m.shape[2:] != (T, T):
            raise InputError(f"a 4D {name} is [batch, heads, {T}, {T}] (queries x keys), got {tuple(m.shape)}")
        if m.dtype.kind == "f" and m.dtype.itemsize < 4:
            m = m.astype(np.float32)
        info = read_4d_mask(m, convention)
        return {"attention_mask": info.raw, "mask_4d_info": info}
    raise InputError(f"{name} must be 2D [batch, tokens], 3D (torchtune) or 4D [batch, heads, q, k], "
                     f"got shape {tuple(m.shape)}")


def batch_tensors(batch: Mapping, mask_convention: str = "auto") -> tuple[BatchTensors, tuple[str, ...]]:
    """``(BatchTensors, ignored entry names)`` from a trainer's batch; bad shapes raise ``InputError``.

    ``mask_convention`` says what True means in a boolean 4D mask where the mask cannot say it
    itself (:func:`packing_core.attention.tensors.read_4d_mask`).

    >>> t, ignored = batch_tensors({"tokens": [[1, 2, 3]], "input_pos": [[0, 1, 2]], "seq_lens": [[3]], "tag": "x"})
    >>> t.position_ids.tolist(), ignored
    ([[0, 1, 2]], ('tag',))
    """
    if not isinstance(batch, Mapping):
        raise InputError(f"a batch is a mapping of names to arrays, got {_describe(batch)}")
    if mask_convention not in MASK_CONVENTIONS:
        raise InputError(f"unknown mask convention {mask_convention!r}: choose one of {', '.join(MASK_CONVENTIONS)}")
    key, ids = _pick(batch, "input_ids")
    if key is None:
        raise InputError(f"the batch has no input_ids (or torchtune's / Megatron's tokens); keys: "
                         f"{', '.join(map(str, batch)) or 'none'}: give the dict a trainer passes to model(**batch)")
    ids = _array(key, ids)
    if ids.ndim == 1:
        ids = ids[None]
    if ids.ndim != 2 or ids.shape[1] == 0:
        raise InputError(f"{key} must be [batch, tokens] with at least one token, got shape {ids.shape}")
    B, T = ids.shape
    if (ids < 0).any():     # an embedding has no row -3: int8 -3 is no token (a uint8 251 cast wrong?)
        r, i = (int(x[0]) for x in np.nonzero(ids < 0))
        raise InputError(f"{key} holds {int(ids[r, i])} at row {r}, token {i}: token ids are rows of the embedding, "
                         "0 or more; save the ids as int64 (a signed 8- or 16-bit type wraps large ids negative)")
    out: dict = {"input_ids": ids}
    used = {key}
    k, v = _pick(batch, "position_ids")
    if k is not None:
        used.add(k)
        out.update(_positions(k, _array(k, v), key, B, T))
    k, v = _pick(batch, "labels")
    if k is not None:
        used.add(k)
        out["labels"] = _rows(k, _array(k, v), key, B, T, rows_of_one=False)
    if batch.get("loss_mask") is not None:
        used.add("loss_mask")
        out["loss_mask"] = _rows("loss_mask", _array("loss_mask", batch["loss_mask"], kind="mask"), key, B, T,
                                 rows_of_one=False) > 0
    k, m = _pick(batch, "attention_mask")
    if k is not None:
        used.add(k)
        out.update(_attention_mask(k, _array(k, m, kind="mask"), key, B, T, mask_convention))
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
    if batch.get("seq_idx") is not None:
        used.add("seq_idx")
        out["seq_idx"] = _rows("seq_idx", _array("seq_idx", batch["seq_idx"]), key, B, T)
    if batch.get("doc_lens") is not None:
        used.add("doc_lens")
        lens = _array("doc_lens", batch["doc_lens"])
        lens = lens[None] if lens.ndim == 1 else lens
        if lens.ndim != 2 or lens.shape[0] != B or (lens < 0).any() or (lens.sum(1) > T).any():
            raise InputError(f"doc_lens (OLMo-core) are [batch, documents] of lengths that sum to at most {T} per "
                             f"row, got shape {tuple(lens.shape)} summing to {lens.sum(-1).tolist()[:4]}")
        out["doc_lens"] = lens
    if batch.get("max_doc_lens") is not None:
        used.add("max_doc_lens")
        out["max_doc_lens"] = tuple(int(x) for x in _array("max_doc_lens", batch["max_doc_lens"]).reshape(-1))
    ignored = tuple(str(k) for k in batch if k not in used and k not in _QUIET)
    return BatchTensors(**out), ignored


def batch_format(t: BatchTensors) -> str:
    """Which of ``FORMATS`` the batch's tensors make: how a trainer laid it out."""
    if t.mask_4d is not None:
        return "4D mask"
    if t.document_mask is not None:
        return "document-id mask"
    if t.cu_seq_lens_q is not None or t.cu_seq_lens_k is not None or (
            t.position_ids is not None and t.mask_2d is None and t.shape[0] == 1):
        return "padding-free"
    if t.mask_2d is not None:
        return "padded"
    return "packed rows" if t.position_ids is not None else "plain"
