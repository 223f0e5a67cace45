"""The sentences about plan quality: named bounds, the gap to the proven optimum, a cap's price, a stream's price."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import packing_core as pc
from packing_core.analysis import cap_sentence, plan_bound, stream_price
from packing_core.analysis.quality import bound_sentence, describe_bounds, optimal_gap, table_gap
from packing_core.analysis.stats import length_stats
from packing_core.analysis.tables import recommend
from packing_core.packing import STRATEGIES, bounds_from_counts, make_plan, optimal_from_counts
from packing_core.packing.bounds import RowBound
from packing_core.packing.from_counts import cap_price
from packing_core.packing.optimal import Certificate
from packing_core.packing.registry import get_strategy
from packing_lab.advice import bounds_example, static_example

# at context 100: bfd puts a 28 beside the 66 and needs 3 rows; 66+16+16 and 28+28+28+16 fill 2 (198 tokens > 100)
MISSED = [66, 16, 16, 16, 28, 28, 28]


def test_the_ten_documents_of_300_example_is_computed_six_rows_cut_ten_whole():
    text = bounds_example()
    assert "⌈3,000 / 512⌉ = 6 rows (L1)" in text and "every plan needs 10 rows (L2), not 6" in text
    assert "(600 > 512)" in text


def test_describe_bounds_names_all_three_and_says_when_lp_was_not_computed():
    b = bounds_from_counts({300: 10}, 512)
    assert describe_bounds(b).endswith("L2 10 (whole documents), LP not computed")
    lp = RowBound("LP", 11, 10.5, True, "lp", proven=False)
    text = describe_bounds(bounds_from_counts({300: 10}, 512, lp=lp))
    assert "LP 11 (whole documents, column generation, stopped early" in text


def _cert(rows, bound_rows, seconds=2.0, note=""):
    bound = RowBound("LP", bound_rows, bound_rows - 0.5, True, "lp")
    return Certificate(rows, bound, bound, "column generation and rounding", seconds, 10, True, note)


@pytest.mark.parametrize("bfd, optimal, words", [
    (40_631, 40_196, "bfd is 436 rows (1.08%) above the proven lower bound (LP 40,195); optimal closes all but 1 row "
                     "within its 5 s budget."),
    (40_631, 40_195, "bfd is 436 rows (1.08%) above the proven optimum (40,195 rows, the LP bound); optimal reaches "
                     "it within its 5 s budget."),
    (40_631, 40_631, "bfd is 436 rows (1.08%) above the proven lower bound (LP 40,195); optimal found no better plan"),
    (40_195, 40_195, "bfd is already optimal: its 40,195 rows meet the proven lower bound (LP 40,195)."),
])
def test_the_gap_sentence_says_how_far_bfd_is_and_what_optimal_closed(bfd, optimal, words):
    assert optimal_gap(bfd, _cert(optimal, 40_195)).sentence.startswith(words)


def test_the_gap_sentence_carries_the_certificates_note():
    gap = optimal_gap(12, _cert(11, 10, note="stopped by the time limit (2 s)"))
    assert gap.sentence.endswith("within its 5 s budget (stopped by the time limit (2 s)).")
    assert gap.to_dict()["left_rows"] == 1 and gap.to_dict()["gap_rows"] == 2


def test_the_gap_names_optimals_budget_and_leaves_its_time_out_of_the_sentence_and_the_dict():
    gap = optimal_gap(12, _cert(11, 10, seconds=1.234))
    assert "1.2" not in gap.sentence and "seconds" not in gap.to_dict() and gap.seconds == 1.234


def test_a_plan_at_the_bound_is_proven_optimal_whatever_stopped_the_search():
    gap = optimal_gap(12, _cert(10, 10, note="stopped by the time limit (2 s)"))
    assert gap.sentence.endswith("optimal reaches it within its 5 s budget.")


def test_a_table_with_optimal_gives_bfds_real_gap_and_a_table_without_gives_none():
    rows = pc.strategy_table(MISSED, 100)
    gap = table_gap(rows)
    assert (gap.rows, gap.bound.rows, gap.optimal_rows, gap.gap_rows) == (3, 2, 2, 1)
    assert gap.sentence.startswith("bfd is 1 row (50%) above the proven optimum (2 rows")
    assert table_gap(pc.strategy_table(MISSED, 100, ("pad", "bfd"))) is None
    by = {r.strategy: r for r in rows}
    assert by["bfd"].bound.rows == 2 and by["bfd"].rows_over_bound == 1.5


def test_the_recommendation_ends_on_the_gap_to_the_proven_bound():
    rows = pc.strategy_table(MISSED, 100)
    advice = recommend(length_stats(MISSED, 100), rows, lengths=MISSED)
    assert table_gap(rows).sentence in advice
    alone = pc.strategy_table(MISSED, 100, ("pad", "bucket", "bfd"))
    assert "bfd uses 3 rows, 1 (50%) above the proven lower bound (L2 2)." in recommend(length_stats(MISSED, 100), alone)


@settings(max_examples=40, deadline=None)
@given(lengths=st.lists(st.integers(1, 700), min_size=1, max_size=60), context=st.sampled_from([64, 128, 512]),
       overlong=st.sampled_from(["split", "truncate"]))
def test_every_row_of_a_table_is_at_or_above_the_bound_it_is_measured_against(lengths, context, overlong):
    rows = pc.strategy_table(lengths, context, overlong=overlong, time_limit=0.5)
    for r in rows:
        cuts = get_strategy(r.strategy).cuts
        assert r.bound.name == "L1" if cuts else r.bound.name in ("L2", "LP")
        assert r.bound.rows <= r.rows, r.strategy
        assert r.bound.rows >= r.bounds.l1.rows == r.metrics.lower_bound_rows
    assert [r.strategy for r in rows] == list(STRATEGIES)


def test_a_plans_own_bound_is_its_kinds():
    assert plan_bound(make_plan([300] * 10, 512, "bfd")).name == "L2"
    assert plan_bound(make_plan([300] * 10, 512, "concat-cut")).rows == 6
    assert plan_bound(make_plan(MISSED, 100, "optimal")).rows == 2


def test_the_cap_sentence_counts_rows_with_and_without_the_cap():
    # nine documents of 10 tokens: one row without a cap; at most 4 a row, ceil(9 / 4) = 3 rows
    assert cap_sentence(cap_price([10] * 9, 512, "bfd", 4)) == \
        "A cap of 4 documents per row costs bfd 2 rows (200%): 3 rows instead of 1."
    assert cap_sentence(cap_price([10] * 9, 512, "bfd", 9)).startswith("A cap of 9 documents per row costs bfd "
                                                                       "nothing")


def test_cap_prices_make_the_free_plan_once_and_match_one_cap_at_a_time():
    lengths = np.random.default_rng(0).integers(1, 200, 2000)
    ladder = pc.packing.cap_prices(lengths, 512, "bfd", (2, 8, 32))
    assert [c.rows for c in ladder] == [cap_price(lengths, 512, "bfd", c).rows for c in (2, 8, 32)]
    assert ladder[0].rows >= ladder[1].rows >= ladder[2].rows >= ladder[0].rows_uncapped
    assert ladder[0].rows >= -(-len(lengths) // 2)           # two documents a row at most


def test_the_static_example_is_what_static_cu_seqlens_returns():
    text = static_example()
    assert "rows [5 3] [4]" in text and "[0, 5, 8, 12, 12, 12, 12]" in text and "2 x 3 + 1 = 7 entries" in text


@pytest.mark.parametrize("overlong, words", [
    ("truncate", "TRL's `bfd`, its default (bfd inside each batch of 10 documents, documents longer than the context "
                 "truncated), fills "),
    ("split", "TRL's `bfd_split` (bfd inside each batch of 10 documents, documents longer than the context cut into "
              "pieces), fills "),
    ("drop", "TRL's window (bfd inside each batch of 10 documents) with documents longer than the context dropped, "
             "which no TRL strategy does, fills "),
])
def test_the_stream_price_names_the_trl_strategy_its_window_models(overlong, words):
    assert words in stream_price([300, 200, 700] * 20, 512, sample=60, window=10, overlong=overlong).sentence


def test_the_stream_price_plans_the_first_documents_and_says_so():
    lengths = [300, 200] * 600                      # 1,200 documents: pairs fill 500 of 512
    p = stream_price(lengths, 512, sample=400, window=100)
    assert p.documents == 400 and p.corpus_documents == 1200
    assert p.basis == "the first 400 of 1,200 documents, in the dataset's order"
    assert p.curve.buffer_sizes[0] == 1 and p.curve.buffer_sizes[-1] == 400
    assert p.curve.rows[0] == 400                    # a buffer of one: one document a row
    assert p.window_rows == 200                      # bfd pairs each 300 with a 200 inside every window
    assert p.curve.utilisation[-1] == pytest.approx(500 * 200 / (200 * 512))
    assert "a buffer of 1 document" in p.sentence and "TRL's `bfd_split` (bfd inside each batch of 100" in p.sentence
    assert p.utilisation_at(100) == p.curve.utilisation[p.curve.buffer_sizes.index(64)]


def test_bound_sentence_says_proven_optimal_only_at_the_bound():
    b = bounds_from_counts({300: 10}, 512).l2
    assert bound_sentence("bfd", 10, b) == "bfd uses 10 rows: proven optimal (L2 bound 10)"
    assert bound_sentence("next-fit", 11, b) == "next-fit uses 11 rows, 1 (10%) above the proven lower bound (L2 10)"


def test_optimal_from_counts_certificate_and_the_sentence_agree_on_real_rows():
    cert = optimal_from_counts(dict(zip(*np.unique(MISSED, return_counts=True))), 100).certificate
    assert optimal_gap(3, cert).left_rows == cert.gap_rows == 0
