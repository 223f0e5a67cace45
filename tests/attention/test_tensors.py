"""What an additive mask's finite masked value does in half-precision softmax, checked against torch's softmax."""
import re

import numpy as np
import pytest
import torch

from packing_core.attention.tensors import finite_mask_value


def _leads(note: str) -> tuple[float, float]:
    found = re.search(r"float16 unless d reaches about ([\d,]+) and in bfloat16 .* unless about ([\d,]+);", note)
    return tuple(float(x.replace(",", "")) for x in found.groups())


def _masked_weight(masked: float, lead: float, dtype) -> float:
    """The softmax weight torch gives a masked key whose score leads the query's only readable key by ``lead``."""
    scores = torch.tensor([0.0, lead], dtype=dtype) + torch.tensor([0.0, masked], dtype=dtype)
    return float(torch.softmax(scores, -1)[1])


@pytest.mark.parametrize("masked", [-1e4, -3e4])
def test_the_leads_the_note_names_are_where_torch_softmax_starts_to_weigh_a_masked_key(masked):
    lead16, lead_b = _leads(finite_mask_value(np.array([0.0, masked], np.float32)))
    for dtype, lead in ((torch.float16, lead16), (torch.bfloat16, lead_b)):
        step = 2 * abs(masked) * 2.0 ** -(11 if dtype == torch.float16 else 8)    # the scores' rounding there
        assert _masked_weight(masked, lead - step, dtype) == 0.0
        assert _masked_weight(masked, lead + step, dtype) > 0.0


def test_minus_inf_and_values_past_float16_need_no_note():
    assert finite_mask_value(np.array([0.0, -np.inf])) is None
    assert finite_mask_value(np.array([0.0, np.finfo(np.float16).min], np.float16)) is None
    assert finite_mask_value(np.array([0.0, -1e9])) is None
