"""OLMo-core 3.0.0's batches (DataCollator with doc_lens / max_doc_lens), judged for OLMo-core's own model (the
``olmo_core`` reader) and for a transformers model given the same batch (transformers' five names).

The batches, their construction and the model's truth live in tests/_trainers/olmo_batches.py. One test per
batch kind and reader (ids ``trainer-kind-reader``): the checker's verdict must be the tiny model's.

The corpus once named OLMo-core's flash backends ``flash_attention_2/3`` and its torch backend ``sdpa``, while the
checker reads those names as transformers' implementations (which read no ``doc_lens``). Now OLMo-core's own model is
``olmo_core``: ``Transformer.forward`` turns ``doc_lens`` into ``cu_doc_lens`` (olmo_core/nn/transformer/model.py)
for its varlen backends; its torch backend raises on them (olmo_core/nn/attention/backend.py), as the reader says.
"""
import pytest

from tests._trainers import assert_agrees, implementations, param_id, params
from tests._trainers import olmo_batches as corpus

PARAMS = params(corpus)


@pytest.mark.parametrize("kind,impl", PARAMS, ids=[param_id(corpus, k, i) for k, i in PARAMS])
def test_check_hf_batch_gives_the_models_verdict(kind, impl):
    assert_agrees(corpus, kind, impl)


@pytest.mark.parametrize("kind", list(corpus.CASES), ids=[f"{corpus.TRAINER}-{k}" for k in corpus.CASES])
def test_check_all_implementations_gives_the_models_verdicts(kind):
    for impl in implementations(corpus):
        assert_agrees(corpus, kind, impl, all_implementations=True)
