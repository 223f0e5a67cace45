"""torchtune 0.6.1's PackedDataset batches, judged for every transformers implementation given the batch.

The batches, their construction and the model's truth live in tests/_trainers/torchtune_batches.py. One test per
batch kind and implementation (ids ``trainer-kind-implementation``): the checker's verdict must be the tiny model's.

The corpus once let ``flex_attention`` mean torchtune's own flex path. That path takes only a ``BlockMask``
(torchtune/modules/attention_utils.py ``_sdpa_or_flex_attention``; ``packed_block_causal_mask`` builds one only on
CUDA): a batch holding the boolean ``[B, T, T]`` mask is read by ``F.scaled_dot_product_attention`` in both branches,
which is transformers' ``sdpa`` column. transformers' flex adds a 4D mask in its ``score_mod``
(integrations/flex_attention.py ``flex_attention_forward``), so there the boolean mask masks nothing: a leak.
"""
import pytest

from tests._trainers import assert_agrees, implementations, param_id, params
from tests._trainers import torchtune_batches as corpus

PARAMS = params(corpus)


@pytest.mark.parametrize("kind,impl", PARAMS, ids=[param_id(corpus, k, i) for k, i in PARAMS])
def test_check_hf_batch_gives_the_models_verdict(kind, impl):
    assert_agrees(corpus, kind, impl)


@pytest.mark.parametrize("kind", list(corpus.CASES), ids=[f"{corpus.TRAINER}-{k}" for k in corpus.CASES])
def test_check_all_implementations_gives_the_models_verdicts(kind):
    for impl in implementations(corpus):
        assert_agrees(corpus, kind, impl, all_implementations=True)
