"""The greedy packers' worst-case guarantees hold against the optimum the LP proves, on random documents."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from packing_core.packing.guarantees import GUARANTEES
from packing_core.packing.strategies import make_plan


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 512), min_size=1, max_size=60))
def test_next_fit_ffd_and_bfd_stay_within_their_guarantees_of_the_proven_optimum(lengths):
    best = make_plan(lengths, 512, "optimal")
    cert = best.certificate
    if cert is None or cert.rows != cert.bound.rows:        # only where the optimum is proven
        return
    for name, g in GUARANTEES.items():
        assert make_plan(lengths, 512, name).n_rows <= g.allows(cert.rows), name


def test_next_fit_can_reach_twice_the_optimum_on_alternating_lengths():
    """The classic worst case: halves and slivers in turn, so no two neighbours share a row."""
    lengths = [256, 1] * 40
    nf, best = make_plan(lengths, 512, "next-fit").n_rows, make_plan(lengths, 512, "optimal").n_rows
    assert nf > 1.8 * best and nf <= GUARANTEES["next-fit"].allows(best)


@pytest.mark.parametrize("opt, ffd", [(1, 1), (5, 6), (9, 11), (44_547, 54_447)])
def test_an_allowance_is_the_floor_of_the_bound(opt, ffd):
    assert GUARANTEES["ffd"].allows(opt) == ffd == (11 * opt + 6) // 9
