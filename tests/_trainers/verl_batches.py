"""verl 0.9.1's actor micro-batches, with and without ``use_remove_padding``.

An RL batch is prompts left-padded and responses right-padded, with ``attention_mask`` and
``position_ids = compute_position_id_with_mask(attention_mask)`` (verl/utils/model.py). With
remove-padding, ``left_right_2_no_padding`` (verl/workers/utils/padding.py) unpads the tokens with
``unpad_input`` and keeps each row's valid positions, and ``FSDPEngine.prepare_model_inputs``
(verl/workers/engine/fsdp/transformer_impl.py) calls the model with one flattened row:
``input_ids`` and ``position_ids`` ``[1, total]``, ``attention_mask=None``, ``use_cache=False``;
``pad_to_length`` appends a static pad with ``pad_packed_inputs`` (verl/workers/engine/utils.py).
Those functions are compiled from verl's files (its package imports tensordict); the nested-tensor
bookkeeping between them is re-done here in two lines, cited. Log-probs train each response
token from the position before it.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from tests._trainers.truth import Case, hf_calls, model_kwargs
from tests._trainers.vendor import library_functions

TRAINER = "verl"
BOS = 1
PROMPTS = [[BOS, 11, 12], [BOS, 21, 22, 23, 24], [BOS, 31]]
RESPONSES = [[13, 14, 15, 2], [25, 2], [32, 33, 34, 35, 2]]
P, R = 6, 6
SOURCE = "verl 0.9.1: verl/utils/attention_utils.py, verl/utils/model.py, verl/workers/engine/utils.py"


def _library():
    ns = library_functions("verl/utils/attention_utils.py", ["_fallback_index_first_axis", "_fallback_unpad_input"],
                           {"torch": torch, "F": F})
    ns |= library_functions("verl/utils/model.py", ["compute_position_id_with_mask"], {"torch": torch})
    ns |= library_functions("verl/workers/engine/utils.py", ["pad_packed_inputs"], {"torch": torch})
    return ns


def rl_batch():
    ids = torch.zeros(len(PROMPTS), P + R, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, (p, r) in enumerate(zip(PROMPTS, RESPONSES)):
        ids[i, P - len(p):P], ids[i, P:P + len(r)] = torch.tensor(p), torch.tensor(r)
        mask[i, P - len(p):P + len(r)] = 1
    return ids, mask


def _trained(lengths, responses) -> np.ndarray:
    """Each response token is trained from the position before it (``no_padding_2_padding``'s slice)."""
    total = sum(lengths)
    trained = np.zeros((1, total), bool)
    end = np.cumsum(lengths)
    for e, r in zip(end, responses):
        trained[0, e - len(r) - 1:e - 1] = True
    return trained


def remove_padding(pad: str = "") -> Case:
    lib = _library()
    ids, mask = rl_batch()
    pos = lib["compute_position_id_with_mask"](mask)
    flat_ids, indices, cu, *_ = lib["_fallback_unpad_input"](ids.unsqueeze(-1), mask)
    # left_right_2_no_padding keeps each row's valid positions; prepare_model_inputs takes .values().unsqueeze(0)
    input_ids, position_ids = flat_ids.squeeze(-1).unsqueeze(0), pos[mask.bool()].unsqueeze(0)
    lengths = cu.diff().tolist()
    if pad == "flat_positions":
        position_ids = torch.arange(input_ids.shape[1])[None]
    n = input_ids.shape[1]
    if pad == "static":
        input_ids, position_ids = lib["pad_packed_inputs"](input_ids, position_ids, 32 - n)
    elif pad == "position_zero":      # pads at position 0 one by one (VeOmni PR #746 before its fix)
        input_ids = F.pad(input_ids, (0, 32 - n))
        position_ids = F.pad(position_ids, (0, 32 - n))
    width = input_ids.shape[1]
    docs = np.full((1, width), -1)
    docs[0, :n] = np.repeat(np.arange(len(lengths)), lengths)
    trained = np.zeros((1, width), bool)
    trained[:, :n] = _trained(lengths, RESPONSES)
    batch = {"input_ids": input_ids, "position_ids": position_ids}
    return Case(TRAINER, "", batch, docs, trained, np.zeros_like(trained),
                hf_calls(model_kwargs(batch, attention_mask=None, use_cache=False),
                         "FSDPEngine.prepare_model_inputs: attention_mask=None, use_cache=False"),
                {"bos_ids": (BOS,)}, SOURCE)


def padded() -> Case:
    """``use_remove_padding=False``: the left/right padded batch with its mask and positions."""
    lib = _library()
    ids, mask = rl_batch()
    pos = lib["compute_position_id_with_mask"](mask)
    docs = np.where(mask.numpy() > 0, np.arange(len(PROMPTS))[:, None], -1)
    trained = np.zeros(ids.shape, bool)
    for i, r in enumerate(RESPONSES):
        trained[i, P - 1:P - 1 + len(r)] = True
    batch = {"input_ids": ids, "attention_mask": mask, "position_ids": pos}
    return Case(TRAINER, "", batch, docs, trained, np.zeros_like(trained),
                hf_calls(model_kwargs(batch, use_cache=False)), {"bos_ids": (BOS,)}, SOURCE)


CASES = {
    "remove_padding": remove_padding,
    "remove_padding-static_pad": lambda: remove_padding("static"),
    "remove_padding-pads_at_position_zero": lambda: remove_padding("position_zero"),
    "remove_padding-positions_not_reset": lambda: remove_padding("flat_positions"),
    "padded": padded,
}
