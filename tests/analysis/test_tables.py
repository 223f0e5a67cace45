"""The recommender's first-run advice depends on the data (review M8)."""
import numpy as np

import packing_core as pc
from packing_core.analysis import length_stats
from packing_core.analysis.tables import BUCKET_WASTES_TOO_MUCH, length_shape
from packing_core.data import synthetic_lengths


def _advice(lengths, context, **kw):
    lengths = np.asarray(lengths)
    return pc.recommend(length_stats(lengths, context), pc.strategy_table(lengths, context), lengths=lengths, **kw)


def _long_tailed():
    return synthetic_lengths("long-tailed", n=20_000)


def test_long_tailed_lengths_at_a_long_context_say_pack_from_the_start():
    lengths = _long_tailed()
    bucket = {r.strategy: r for r in pc.strategy_table(lengths, 8192)}["bucket"]
    assert 1 - bucket.utilisation > BUCKET_WASTES_TOO_MUCH          # the data make the case
    advice = _advice(lengths, 8192)
    assert advice.startswith("Pack from the start") and "long-tailed" in advice
    assert f"wastes {1 - bucket.utilisation:.0%} of its slots" in advice and "First run: bucket" not in advice


def test_the_same_lengths_at_a_short_context_still_bucket_first():
    advice = _advice(_long_tailed(), 512)
    assert advice.startswith("First run: bucket.") and "Long run: pack with" in advice


def test_the_shape_word_comes_from_the_lengths():
    assert length_shape(length_stats([10] * 90 + [100] * 10, 512)) == "long-tailed"
    assert length_shape(length_stats([100] * 50 + [120] * 50, 512)) == "compact"
    two = [20] * 50 + [400] * 50
    assert length_shape(length_stats(two, 512), two) == "bimodal"
