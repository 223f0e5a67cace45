"""verl 0.9.1's actor micro-batches (remove-padding and padded), judged per implementation.

The batches, their construction and the model's truth live in tests/_trainers/verl_batches.py. One test per
batch kind and attention implementation (ids ``trainer-kind-implementation``): the checker's verdict
must be the tiny model's.
"""
import pytest

from tests._trainers import assert_agrees, implementations, param_id, params
from tests._trainers import verl_batches as corpus

PARAMS = params(corpus)


@pytest.mark.parametrize("kind,impl", PARAMS, ids=[param_id(corpus, k, i) for k, i in PARAMS])
def test_check_hf_batch_gives_the_models_verdict(kind, impl):
    assert_agrees(corpus, kind, impl)


@pytest.mark.parametrize("kind", list(corpus.CASES), ids=[f"{corpus.TRAINER}-{k}" for k in corpus.CASES])
def test_check_all_implementations_gives_the_models_verdicts(kind):
    for impl in implementations(corpus):
        assert_agrees(corpus, kind, impl, all_implementations=True)
