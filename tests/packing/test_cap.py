"""A cap on documents per row: a placement option every packing strategy honours exactly, at a price in rows."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from packing_core.packing import STRATEGIES, make_plan, plan_from_counts
from packing_core.packing.from_counts import cap_price
from packing_core.packing.plan import static_cu_seqlens
from packing_core.packing.registry import PACKING_STRATEGIES, get_strategy

CAPPED = [s for s in PACKING_STRATEGIES if not get_strategy(s).cuts]


def _textbook(lengths, context, cap, rule):
    """The per-document loop: next-fit, or first/best fit over the lengths longest first, with a cap."""
    loads, counts, row_of = [], [], {}
    order = range(len(lengths)) if rule == "next-fit" else sorted(range(len(lengths)), key=lambda i: -lengths[i])
    for i in order:
        fits = [r for r in range(len(loads)) if loads[r] + lengths[i] <= context and counts[r] < cap]
        if rule == "next-fit":
            fits = [r for r in fits if r == len(loads) - 1]
        if fits:
            r = fits[0] if rule != "bfd" else min(fits, key=lambda r: (context - loads[r], r))
        else:
            loads.append(0)
            counts.append(0)
            r = len(loads) - 1
        loads[r] += lengths[i]
        counts[r] += 1
        row_of[i] = r
    return row_of, len(loads)


@settings(max_examples=120, deadline=None)
@given(lengths=st.lists(st.integers(1, 90), min_size=1, max_size=80), context=st.integers(90, 200),
       cap=st.integers(1, 6), strategy=st.sampled_from(CAPPED))
def test_every_packing_strategy_holds_at_most_the_cap_in_every_row(lengths, context, cap, strategy):
    plan = make_plan(lengths, context, strategy, max_docs_per_row=cap)
    assert np.bincount(plan.piece_row).max() <= cap
    assert (np.bincount(plan.piece_row, weights=plan.piece_len) <= context).all()
    assert sorted(plan.kept.tolist()) == sorted(lengths)


@settings(max_examples=120, deadline=None)
@given(lengths=st.lists(st.integers(1, 90), min_size=1, max_size=60), context=st.integers(90, 200),
       cap=st.integers(1, 6), rule=st.sampled_from(["next-fit", "ffd", "bfd"]))
def test_capped_placement_is_the_textbook_per_document_algorithm(lengths, context, cap, rule):
    row_of, rows = _textbook(lengths, context, cap, rule)
    plan = make_plan(lengths, context, rule, max_docs_per_row=cap)
    assert plan.n_rows == rows
    got = dict(zip(plan.piece_doc.tolist(), plan.piece_row.tolist()))
    # the textbook's rows, up to the order of equal lengths (which documents of one length go where)
    want = sorted((lengths[i], r) for i, r in row_of.items())
    assert sorted((lengths[i], r) for i, r in got.items()) == want


@settings(max_examples=80, deadline=None)
@given(counts=st.dictionaries(st.integers(1, 300), st.integers(1, 30), min_size=1, max_size=15),
       context=st.sampled_from([64, 128, 512]), cap=st.integers(1, 8),
       strategy=st.sampled_from(["ffd", "bfd", "optimal", "pad"]), overlong=st.sampled_from(["split", "truncate"]))
def test_a_capped_plan_from_counts_has_the_rows_of_the_capped_plan_from_lengths(counts, context, cap, strategy,
                                                                                overlong):
    expanded = np.repeat(list(counts), list(counts.values()))
    got = plan_from_counts(counts, context, strategy, max_docs_per_row=cap, overlong=overlong).metrics
    want = make_plan(expanded, context, strategy, max_docs_per_row=cap, overlong=overlong).metrics()
    assert (got.rows, got.slots, got.real_tokens) == (want.rows, want.slots, want.real_tokens)


def test_the_price_of_a_cap_is_reported_in_rows():
    lengths = [20] * 40 + [400] * 10                  # at 512: ten rows of 400 + 5 x 20, or fewer without a cap
    p = cap_price(lengths, 512, "bfd", 2)
    assert (p.rows, p.rows_uncapped) == (make_plan(lengths, 512, "bfd", max_docs_per_row=2).n_rows,
                                         make_plan(lengths, 512, "bfd").n_rows)
    assert p.rows == 25 and p.extra_rows == p.rows - p.rows_uncapped > 0     # 50 documents, 2 a row
    counts = cap_price({20: 40, 400: 10}, 512, "bfd", 2)
    assert counts.to_dict()["extra_rows"] == p.extra_rows


def test_static_cu_seqlens_pad_to_rows_times_cap_with_zero_length_documents():
    plan = make_plan([5, 3, 4, 2, 7], 8, "bfd", max_docs_per_row=2)
    cu = static_cu_seqlens(plan, 2)
    assert len(cu) == plan.n_rows * 2 + 1 and cu.dtype == np.int32
    real = np.cumsum(np.r_[0, plan.piece_len])
    assert cu[: len(real)].tolist() == real.tolist()
    assert (cu[len(real):] == real[-1]).all()                 # padding entries: documents of length 0
    with pytest.raises(ValueError, match="max_docs_per_row=1"):
        static_cu_seqlens(plan, 1)


def test_concat_cut_refuses_a_cap_in_one_line_naming_the_strategies_that_take_it():
    for call in (lambda: make_plan([5, 3], 8, "concat-cut", max_docs_per_row=2),
                 lambda: plan_from_counts({5: 1, 3: 1}, 8, "concat-cut", max_docs_per_row=2)):
        with pytest.raises(ValueError, match="concat-cut.*bfd") as e:
            call()
        assert "\n" not in str(e.value)


@pytest.mark.parametrize("bad", [0, -3, 10**12, 2.5, float("nan"), True, "4"])
def test_a_cap_that_makes_no_sense_is_one_line_naming_it(bad):
    with pytest.raises(ValueError, match="max_docs_per_row") as e:
        make_plan([10, 10], 512, "bfd", max_docs_per_row=bad)
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="max_docs_per_row"):
        plan_from_counts({10: 2}, 512, "optimal", max_docs_per_row=bad)


def test_padding_strategies_take_a_cap_they_meet_by_holding_one_document_a_row():
    for s in STRATEGIES:
        if not get_strategy(s).packs:
            plan = make_plan([10, 20, 30], 512, s, max_docs_per_row=1)
            assert np.bincount(plan.piece_row).max() == 1
