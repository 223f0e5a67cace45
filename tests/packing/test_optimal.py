"""The optimal strategy: column generation with a certificate, from counts and from lengths, within a budget."""
import math
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from packing_core.packing import make_plan, optimal_from_counts, plan_from_counts
from packing_core.packing.optimal import solve_optimal

WIKIPEDIA = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "wikipedia_512_hist.txt"


def wikipedia() -> dict[int, int]:
    counts = [int(x) for x in WIKIPEDIA.read_text().replace("\n", " ").split(",") if x.strip()]
    return {length: n for length, n in enumerate(counts, start=1) if n}


def test_the_certificate_proves_an_optimum_that_best_fit_misses():
    # at 100: bfd puts a 28 beside the 66 (room 6 left), then 28+28+16+16 and a lone 16: 3 rows;
    # 66+16+16 and 28+28+28+16 is 2 rows, and 198 tokens cannot fit in fewer
    counts = {66: 1, 16: 3, 28: 3}
    assert plan_from_counts(counts, 100, "bfd").metrics.rows == 3
    s = optimal_from_counts(counts, 100)
    assert (s.certificate.rows, s.certificate.bound.rows, s.certificate.gap_rows) == (2, 2, 0)
    assert sorted(s.patterns.docs_per_row().tolist()) == [3, 4]


def test_wikipedia_512_is_within_one_row_of_the_lp_bound_well_inside_the_budget():
    # the figures, from an independent prototype: LP bound 8,135,727; bfd 8,138,483
    s = optimal_from_counts(wikipedia(), 512, time_limit=30)
    c = s.certificate
    assert c.lp is not None and c.lp.rows == 8_135_727 and c.converged
    assert c.rows - c.lp.rows <= 1
    assert plan_from_counts(wikipedia(), 512, "bfd").metrics.rows == 8_138_483
    assert c.seconds < 10
    assert s.patterns.rows == c.rows and s.patterns.items()[1].sum() == sum(wikipedia().values())


def test_from_lengths_it_deals_real_documents_into_the_optimal_rows():
    rng = np.random.default_rng(3)
    lengths = rng.integers(1, 700, 3000)
    plan = make_plan(lengths, 512, "optimal")
    counts = plan_from_counts(dict(zip(*np.unique(lengths, return_counts=True))), 512, "optimal")
    assert plan.n_rows == counts.metrics.rows == plan.certificate.rows
    assert sorted(plan.kept.tolist()) == sorted(lengths.tolist())        # every token placed once
    loads = np.bincount(plan.piece_row, weights=plan.piece_len)
    assert loads.max() <= 512 and plan.certificate.bound.rows <= plan.n_rows
    assert plan.n_rows <= make_plan(lengths, 512, "bfd").n_rows
    assert counts.certificate.to_dict()["gap_rows"] == plan.certificate.gap_rows


def test_a_tight_budget_returns_the_best_plan_so_far_with_its_gap_and_says_so():
    rng = np.random.default_rng(1)     # bfd is 57 rows above L2 here; column generation needs seconds
    sizes = np.sort(rng.choice(np.arange(1, 4097), 3000, replace=False))
    n = rng.integers(1, 50, len(sizes))
    t = time.perf_counter()
    s = solve_optimal(sizes, n, 4096, time_limit=0.5)
    assert time.perf_counter() - t < 3      # the start (bfd and a first LP) may outlast a tiny budget, not hang
    c = s.certificate
    assert c.rows >= c.bound.rows and c.gap_rows == c.rows - c.bound.rows
    assert c.gap_rows > 0 and not c.converged and "time limit" in c.note
    assert str(c.gap_rows) in c.sentence().replace(",", "")


def test_100_000_distinct_lengths_at_131_072_fall_back_to_bfd_with_l2_inside_the_budget():
    rng = np.random.default_rng(0)
    sizes = np.sort(rng.choice(np.arange(1, 2**17 + 1), 100_000, replace=False))
    n = rng.integers(1, 50, len(sizes))
    t = time.perf_counter()
    s = solve_optimal(sizes, n, 2**17, time_limit=5)
    assert time.perf_counter() - t < 5
    c = s.certificate
    assert c.method == "bfd" and "column generation skipped" in c.note and c.bound.name == "L2"
    assert c.gap_rows >= 0 and c.lp is None
    assert c.rows == plan_from_counts(dict(zip(sizes.tolist(), n.tolist())), 2**17, "bfd").metrics.rows


@settings(max_examples=60, deadline=None)
@given(counts=st.dictionaries(st.integers(1, 120), st.integers(1, 20), min_size=1, max_size=10),
       context=st.sampled_from([64, 100, 128]), cap=st.sampled_from([None, 1, 2, 4]))
def test_the_plan_holds_every_item_and_never_beats_its_own_bound(counts, context, cap):
    lengths = np.repeat(list(counts), list(counts.values()))
    plan = make_plan(lengths, context, "optimal", max_docs_per_row=cap, overlong="split")
    c = plan.certificate
    assert c.bound.rows <= plan.n_rows == c.rows
    assert sorted(plan.kept.tolist()) == sorted(lengths.tolist())
    if cap is not None:
        assert np.bincount(plan.piece_row).max() <= cap
    assert plan.n_rows <= make_plan(lengths, context, "bfd", max_docs_per_row=cap).n_rows


@pytest.mark.parametrize("bad", [0, -1, 1e12, math.nan, math.inf, True, "5"])
def test_a_budget_that_makes_no_sense_is_one_line_naming_it(bad):
    with pytest.raises(ValueError, match="time_limit") as e:
        make_plan([10, 20], 512, "optimal", time_limit=bad)
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="time_limit"):
        optimal_from_counts({10: 2}, 512, time_limit=bad)
