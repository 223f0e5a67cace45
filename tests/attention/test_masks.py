"""attention/masks.py: the block-causal rule, written once, for torch and numpy alike."""
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from packing_core.attention import block_causal_mask
from packing_core.attention.masks import (
    allowed,
    and_masks,
    block_causal,
    causal,
    in_segment,
    materialise,
    readable_keys,
    same_document,
    segments_from_cu,
)

PACKAGE = Path(__file__).resolve().parents[2] / "packing_core"
HOME = PACKAGE / "attention" / "masks.py"
# the rule written by hand: a causal triangle, or "same segment" as an outer comparison of one array
RULE_WRITTEN_AGAIN = {
    "a causal triangle (tril / triu)": re.compile(r"\btri[lu]\b|\btri[lu]_"),
    "same segment by an outer ==": re.compile(r"(\w+)\[:, None\] == \1\[None, :\]|(\w+)\[:, :, None\] == \2\[:, None, :\]"
                                             r"|(\w+)\[\.\.\., :, None\] == \3\[\.\.\., None, :\]"),
    "same segment in a mask_mod": re.compile(r"(\w+)\[q_idx\] == \1\[kv_idx\]"),
    "causal by an outer <=": re.compile(r"(\w+)\[None, :\] <= \1\[:, None\]|(\w+)\[:, None\] >= \2\[None, :\]"),
}
# what the rule looked like in the seven places that wrote it before it had one home
OLD_COPIES = [
    "ok = np.tril(np.ones((T, T), dtype=bool)) & (seg[:, None] == seg[None, :]) & (seg[:, None] >= 0)",
    "mask = (seg[:, :, None] == seg[:, None, :]) & (pos[None, :] <= pos[:, None])",
    "causal = torch.ones(width, width, dtype=torch.bool).tril()",
    "allowed &= own[:, None] == own[None, :]",
    "return (document_ids[q_idx] == document_ids[kv_idx]) & (kv_idx <= q_idx)",
    "same = doc[:, None] == doc[None, :]",
]


def test_every_old_copy_of_the_rule_is_recognised_by_the_patterns():
    for line in OLD_COPIES:
        assert any(p.search(line) for p in RULE_WRITTEN_AGAIN.values()), line
    assert not any(p.search("keep = np.arange(n)[None, :] <= body[:, None]") for p in RULE_WRITTEN_AGAIN.values())


def test_the_block_causal_rule_is_written_only_in_masks_py():
    found = [f"{path.relative_to(PACKAGE)}:{n}: {what}: {line.strip()}"
             for path in sorted(PACKAGE.rglob("*.py")) if path != HOME
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             for what, pattern in RULE_WRITTEN_AGAIN.items() if pattern.search(line)]
    assert found == [], "call attention.masks (allowed, block_causal, the predicates) instead:\n" + "\n".join(found)


def random_segments(rng, shape):
    """Runs of equal ids (documents), some -1 (pads), as kernels see them."""
    starts = rng.random(shape) < 0.3
    seg = np.cumsum(starts, axis=-1)
    return np.where(rng.random(shape) < 0.15, -1, seg).astype(np.int64)


@pytest.mark.parametrize("shape", [(7,), (3, 9), (2, 2, 5)])
def test_numpy_and_torch_give_the_same_mask_for_any_leading_shape(shape):
    rng = np.random.default_rng(0)
    for _ in range(20):
        seg = random_segments(rng, shape)
        keys = rng.random(shape) < 0.7
        for itself in (False, True):
            a = allowed(seg, keys, reads_itself=itself)
            b = allowed(torch.from_numpy(seg), torch.from_numpy(keys), reads_itself=itself)
            assert isinstance(a, np.ndarray) and a.shape == (*shape, shape[-1])
            assert np.array_equal(a, b.numpy())


def test_the_rule_is_the_definition_cell_by_cell():
    rng = np.random.default_rng(1)
    seg, keys = random_segments(rng, (12,)), rng.random(12) < 0.6
    got = allowed(seg, keys, reads_itself=True)
    for i in range(12):
        for j in range(12):
            want = j <= i and seg[i] == seg[j] and seg[i] >= 0 and (keys[j] or i == j)
            assert got[i, j] == want, (i, j)


def test_the_predicates_compose_into_the_rule():
    seg = torch.tensor([0, 0, 1, 1, -1])
    idx = torch.arange(5)
    composed = and_masks(causal, same_document(seg), in_segment(seg))(idx[:, None], idx[None, :])
    assert torch.equal(composed, allowed(seg)) and torch.equal(materialise(block_causal(seg), 5), composed)
    hidden = readable_keys(torch.tensor([False, True, True, True, True]), reads_itself=True)
    assert materialise(hidden, 5)[0, 0] and not materialise(hidden, 5)[1, 0]


def test_block_causal_mask_is_the_rule_over_the_segments_of_cu_seqlens():
    cu = torch.tensor([0, 2, 5])
    assert segments_from_cu(cu, 7).tolist() == [0, 0, 1, 1, 1, 2, 2]      # the pad tail: one more segment
    assert torch.equal(block_causal_mask(cu, 7), allowed(segments_from_cu(cu, 7)))
