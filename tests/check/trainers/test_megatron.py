"""Megatron-core 0.16.1's GPT batches (_get_ltor_masks_and_position_ids, its three flags), judged for Megatron's own
model (the ``megatron`` reader) and for a transformers model given the same tensors (transformers' five names).

The batches, their construction and the model's truth live in tests/_trainers/megatron_batches.py. One test per
batch kind and reader (ids ``trainer-kind-reader``): the checker's verdict must be the tiny model's.

The corpus once named Megatron's own paths ``eager`` (its local DotProductAttention) and ``flash_attention_2/3``
(Transformer Engine), while the checker reads those names as transformers' implementations: two conventions for one
name. Now each name means one model (tests/_trainers/__init__.py): Megatron's own is ``megatron``, which reads the
mask as ``FusedScaleMaskSoftmax.forward_torch_softmax`` applies it (megatron/core/fusions/fused_softmax.py,
``attention_mask_func``); its fused and Transformer Engine paths, which ignore the mask under attn_mask_type=causal,
are the checker's ``megatron_mask_needs_unfused_softmax`` warning.
"""
import pytest

from tests._trainers import assert_agrees, implementations, param_id, params
from tests._trainers import megatron_batches as corpus

PARAMS = params(corpus)


@pytest.mark.parametrize("kind,impl", PARAMS, ids=[param_id(corpus, k, i) for k, i in PARAMS])
def test_check_hf_batch_gives_the_models_verdict(kind, impl):
    assert_agrees(corpus, kind, impl)


@pytest.mark.parametrize("kind", list(corpus.CASES), ids=[f"{corpus.TRAINER}-{k}" for k in corpus.CASES])
def test_check_all_implementations_gives_the_models_verdicts(kind):
    for impl in implementations(corpus):
        assert_agrees(corpus, kind, impl, all_implementations=True)
