"""Batches built by eight trainers' own code, judged per reader: the checker's verdict must be the tiny model's.

The batches, their construction and the model's truth live in ``tests/_trainers/`` (one module per trainer,
``MODULES``; each says which code builds its batches and what its own model reads). One test per trainer,
batch kind and reader (ids ``trainer-kind-reader``), through ``check_hf_batch`` and through
``check_all_implementations``.
"""
import pytest

from tests._trainers import MODULES, assert_agrees, corpus, implementations, param_id, params

CORPORA = [corpus(name) for name in MODULES]
PARAMS = [(c, kind, impl) for c in CORPORA for kind, impl in params(c)]
KINDS = [(c, kind) for c in CORPORA for kind in c.CASES]


@pytest.mark.parametrize("module,kind,impl", PARAMS, ids=[param_id(c, k, i) for c, k, i in PARAMS])
def test_check_hf_batch_gives_the_models_verdict(module, kind, impl):
    assert_agrees(module, kind, impl)


@pytest.mark.parametrize("module,kind", KINDS, ids=[f"{c.TRAINER}-{k}" for c, k in KINDS])
def test_check_all_implementations_gives_the_models_verdicts(module, kind):
    for impl in implementations(module):
        assert_agrees(module, kind, impl, all_implementations=True)
