"""A multi-source corpus under offline bfd: batches carry the sources of their lengths, until rows are shuffled."""
import numpy as np
import pytest

from packing_core import make_plan
from packing_core.data.builtin import load_mixture
from packing_core.data.lengths import byte_tokenizer
from packing_lab.advice import mixture_sentence, source_mixture


@pytest.fixture(scope="module")
def mixture():
    return load_mixture(byte_tokenizer)


def _shares(mix, shuffle):
    plan = make_plan(mix.lengths, 512, "bfd", overlong="split", shuffle=shuffle, seed=0)
    return plan, source_mixture(plan, mix.source, mix.names)


def test_each_batchs_shares_are_its_tokens_by_source(mixture):
    plan, m = _shares(mixture, False)
    first = plan.placed.row < 32                                         # the first batch, counted by hand
    tokens = np.bincount(mixture.source[plan.placed.doc[first]], weights=plan.placed.length[first],
                         minlength=len(mixture.names))
    assert m.batches[0] == pytest.approx(tokens / tokens.sum())
    assert np.allclose(m.batches.sum(axis=1), 1) and m.corpus == pytest.approx(mixture.shares())


def test_bfd_in_order_drifts_from_the_corpus_and_shuffled_rows_stay_near_it(mixture):
    _, before = _shares(mixture, False)
    _, after = _shares(mixture, True)
    assert before.drift.max() > 0.4 and after.drift.max() < before.drift.max() / 2
    assert after.mean_drift < before.mean_drift / 2
    said = mixture_sentence(before, after)
    assert f"{100 * before.mean_drift:.0f} points off the corpus's on average" in said
    assert f"brings that to {100 * after.mean_drift:.0f} points on average" in said
