"""The effective segmentation against transformers' own code, on small batches.

sdpa, eager and flex: the masks ``masking_utils.create_causal_mask`` builds. flash_attention_2/3:
``modeling_flash_attention_utils._flash_attention_forward`` run with recording stand-ins for the
kernels (no GPU here), so the branch it takes and the offsets it hands the kernel are its own.
"""
import numpy as np
import pytest
import torch
import transformers.modeling_flash_attention_utils as fa
from transformers import LlamaConfig
from transformers.cache_utils import DynamicCache
from transformers.masking_utils import create_causal_mask

from packing_core.attention import semantics
from packing_core.attention.semantics import BatchTensors, effective_attention

T6 = 6
BATCHES = {
    "packed rows": dict(input_ids=np.ones((2, 6), int), position_ids=np.array([[0, 1, 2, 0, 1, 2], [0, 1, 0, 1, 2, 3]])),
    "one flattened row": dict(input_ids=np.ones((1, 6), int), position_ids=np.array([[0, 1, 2, 0, 1, 2]])),
    "padded with positions": dict(input_ids=np.ones((2, 6), int), position_ids=np.array([[0, 1, 2, 3, 0, 0]] * 2),
                                  attention_mask=np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], bool)),
    "all-ones mask beside resets": dict(input_ids=np.ones((1, 6), int), position_ids=np.array([[0, 1, 2, 0, 1, 2]]),
                                        attention_mask=np.ones((1, 6), bool)),
    "no positions": dict(input_ids=np.ones((2, 6), int)),
    "pads at position 0": dict(input_ids=np.ones((1, 6), int), position_ids=np.array([[0, 1, 2, 0, 0, 0]])),
    "positions from 2": dict(input_ids=np.ones((1, 6), int), position_ids=np.array([[2, 3, 4, 2, 3, 4]])),
    "continued row": dict(input_ids=np.ones((1, 6), int), position_ids=np.array([[4, 5, 0, 1, 2, 3]])),
    "cu only": dict(input_ids=np.ones((1, 6), int), position_ids=np.arange(6)[None],
                    cu_seq_lens_q=np.array([0, 2, 6]), cu_seq_lens_k=np.array([0, 2, 6]), max_length_q=4,
                    max_length_k=4),
    "cu beside packed rows": dict(input_ids=np.ones((2, 6), int), position_ids=np.array([[0, 1, 2, 0, 1, 2]] * 2),
                                  cu_seq_lens_q=np.array([0, 3, 6, 9, 12]), cu_seq_lens_k=np.array([0, 3, 6, 9, 12]),
                                  max_length_q=3, max_length_k=3),
    # 2D masks of document numbers (axolotl's multipack, LLaMA-Factory's neat_packing): transformers casts them
    "document ids with a pad": dict(input_ids=np.ones((1, 6), int), document_mask=np.array([[1, 1, 1, 2, 2, 0]]),
                                    position_ids=np.array([[0, 1, 2, 0, 1, 0]])),
    "document ids, no pad": dict(input_ids=np.ones((1, 6), int), document_mask=np.array([[1, 1, 1, 2, 2, 2]]),
                                 position_ids=np.array([[0, 1, 2, 0, 1, 2]])),
    "document ids in rows": dict(input_ids=np.ones((2, 6), int), document_mask=np.array([[1, 1, 2, 2, 2, 0],
                                                                                         [1, 2, 2, 3, 3, 3]])),
}


def tensors(name):
    spec = dict(BATCHES[name])
    if "document_mask" in spec:
        spec["attention_mask"] = spec["document_mask"] != 0
    return BatchTensors(**spec)


def given_mask(t: BatchTensors):
    """The attention_mask exactly as the trainer passed it (document numbers included)."""
    m = t.document_mask if t.document_mask is not None else t.attention_mask
    return None if m is None else torch.as_tensor(m)


def config(impl):
    cfg = LlamaConfig(vocab_size=16, hidden_size=8, num_hidden_layers=1, num_attention_heads=1,
                      num_key_value_heads=1, intermediate_size=8)
    cfg._attn_implementation = impl
    return cfg


def library_mask(t: BatchTensors, impl: str, use_cache: bool) -> np.ndarray:
    """bool [B, T, T] from transformers' create_causal_mask (None = plain causal)."""
    B, T = t.shape
    cfg = config(impl)
    cache = DynamicCache(config=cfg) if use_cache else None
    mask = create_causal_mask(cfg, torch.zeros(B, T, 8), given_mask(t), cache,
                              None if t.position_ids is None else torch.as_tensor(t.position_ids))
    if mask is None:
        return np.broadcast_to(np.tril(np.ones((T, T), bool)), (B, T, T))
    if impl == "flex_attention":
        b, q, k = torch.meshgrid(torch.arange(B), torch.arange(T), torch.arange(T), indexing="ij")
        return mask.mask_mod(b, torch.zeros_like(b), q, k).numpy()   # the mask functions index with tensors
    m = mask[:, 0].numpy()
    return m if m.dtype == bool else m == 0


class Recorder:
    """Stand-ins for the flash kernels that record what _flash_attention_forward hands them."""

    def __init__(self):
        self.calls = []

    def imports(self, _impl):
        def flash_fn(q, k, v, **kw):
            self.calls.append(("rows", None))
            return q

        def varlen_fn(q, k, v, cu_seqlens_q=None, cu_seqlens_k=None, **kw):
            self.calls.append(("varlen", cu_seqlens_q.tolist()))
            return q

        return ((flash_fn, varlen_fn, None, fa._pad_input, fa._unpad_input),
                (lambda **kw: {}, lambda **kw: {}))


def library_flash_segments(t: BatchTensors, monkeypatch) -> np.ndarray:
    """Segments over the flattened batch as flash-attention's own forward chooses them."""
    B, T = t.shape
    rec = Recorder()
    monkeypatch.setattr(fa, "lazy_import_flash_attention", rec.imports)
    pos = None if t.position_ids is None else torch.as_tensor(t.position_ids)
    # the mask as the model builds it: create_causal_mask casts a 2D mask to booleans, then flash_attention_mask
    mask = create_causal_mask(config("flash_attention_2"), torch.zeros(B, T, 8), given_mask(t), None, pos)
    q = torch.zeros(B, T, 1, 4)
    kw = {k: torch.as_tensor(getattr(t, k), dtype=torch.int32) for k in ("cu_seq_lens_q", "cu_seq_lens_k")
          if getattr(t, k) is not None}
    kw.update({k: getattr(t, k) for k in ("max_length_q", "max_length_k") if getattr(t, k) is not None})
    fa._flash_attention_forward(q, q, q, mask, T, True, position_ids=pos, **kw)
    kind, cu = rec.calls[-1]
    if kind == "rows":
        return np.repeat(np.arange(B), T).reshape(B, T)
    if mask is not None:        # unpadded per row: each row's real tokens are one sequence
        return np.where(mask.numpy().astype(bool), np.arange(B)[:, None], -1)
    flat = np.arange(B * T)
    seg = np.searchsorted(cu, flat, side="right") - 1
    seg[(flat < cu[0]) | (flat >= cu[-1])] = -1
    return seg.reshape(B, T)


def same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = a.reshape(-1), b.reshape(-1)
    return bool(((a[:, None] == a[None]) == (b[:, None] == b[None])).all() and ((a < 0) == (b < 0)).all())


def mismatches(monkeypatch) -> list[str]:
    """Every (batch, implementation, cache) where our reading differs from the library's."""
    wrong = []
    for name in BATCHES:
        t = tensors(name)
        for impl in ("sdpa", "eager", "flex_attention"):
            for use_cache in (False, True):
                ours = effective_attention(t, impl, use_cache=use_cache)
                theirs = library_mask(t, impl, use_cache)
                for r in range(t.shape[0]):
                    if not np.array_equal(ours.allowed(r), theirs[r]):
                        wrong.append(f"{name} / {impl} / cache={use_cache} / row {r}")
        for impl in ("flash_attention_2", "flash_attention_3"):
            ours = effective_attention(t, impl)
            if not same_partition(ours.segment_ids, library_flash_segments(t, monkeypatch)):
                wrong.append(f"{name} / {impl}")
    return wrong


def test_every_reading_matches_transformers_own_code(monkeypatch):
    assert mismatches(monkeypatch) == []


def test_dropping_flash_attentions_batch_size_1_rule_is_caught(monkeypatch):
    def any_batch_size(position_ids, batch_size, rules=None):
        if position_ids is None or position_ids.shape[-1] == 1:
            return False
        p = position_ids
        return bool((np.arange(p.shape[1]) + p.min(axis=1, keepdims=True) != p).any())

    monkeypatch.setattr(semantics, "is_packed_sequence", any_batch_size)
    assert "packed rows / flash_attention_2" in mismatches(monkeypatch)


def test_dropping_the_cache_gate_is_caught(monkeypatch):
    monkeypatch.setattr(semantics, "packed_detection_on",
                        lambda pos, mask, use_cache, rules=None: pos is not None and mask is None)
    assert "packed rows / sdpa / cache=True / row 0" in mismatches(monkeypatch)


def test_a_4d_mask_is_used_as_given_by_sdpa_and_refused_by_flash():
    allowed = np.tril(np.ones((4, 4), bool))
    allowed[2:, :2] = False                                   # two documents of 2
    t = BatchTensors(np.ones((1, 4), int), attention_mask=allowed[None, None])
    assert np.array_equal(effective_attention(t, "sdpa").allowed(0), allowed)
    assert effective_attention(t, "flash_attention_2").refused


def test_additive_4d_masks_read_like_boolean_ones():
    allowed = np.tril(np.ones((3, 3), bool))
    additive = np.where(allowed, 0.0, np.finfo(np.float32).min)
    assert np.array_equal(semantics.four_d_allowed(additive), allowed)


def test_our_backends_read_cu_seqlens_or_only_the_rows():
    t = tensors("cu only")
    assert effective_attention(t, "varlen").segment_ids.tolist() == [[0, 0, 1, 1, 1, 1]]
    assert effective_attention(t, "causal_only").segment_ids.tolist() == [[0] * 6]


@pytest.mark.parametrize("name", ["packed rows", "one flattened row"])
def test_sdpa_reads_resetting_positions_without_a_cache(name):
    t = tensors(name)
    assert len(np.unique(effective_attention(t, "sdpa").segment_ids)) > t.shape[0]
    assert len(np.unique(effective_attention(t, "sdpa", use_cache=True).segment_ids)) == t.shape[0]
