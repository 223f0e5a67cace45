"""Lower bounds on rows: L1 for plans that cut, L2 and LP for plans of whole documents; each below every plan."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from packing_core.packing import STRATEGIES, bounds_from_counts, make_plan, optimal_from_counts
from packing_core.packing.bounds import bound_for, l2_bound
from packing_core.packing.optimal import solve_optimal
from packing_core.packing.pieces import piece_histogram
from packing_core.packing.registry import get_strategy


def _fewest_rows(items: list[int], context: int, cap: int | None = None) -> int:
    """The exact optimum by branch and bound: each item, longest first, into every distinct open row or a new one."""
    items = sorted(items, reverse=True)
    best = [len(items)]

    def go(i: int, rows: list[tuple[int, int]]) -> None:
        if len(rows) >= best[0]:
            return
        if i == len(items):
            best[0] = len(rows)
            return
        tried = set()
        for r, (load, n) in enumerate(rows):
            if load + items[i] <= context and (cap is None or n < cap) and (load, n) not in tried:
                tried.add((load, n))
                go(i + 1, rows[:r] + [(load + items[i], n + 1)] + rows[r + 1:])
        go(i + 1, rows + [(items[i], 1)])

    go(0, [])
    return best[0]


def test_ten_documents_of_300_at_512_need_10_whole_rows_though_their_tokens_fill_6():
    b = bounds_from_counts({300: 10}, 512)
    assert (b.l1.rows, b.l2.rows) == (6, 10)
    assert _fewest_rows([300] * 10, 512) == 10          # the bound is the optimum here
    assert bound_for(get_strategy("concat-cut"), b) is b.l1
    assert bound_for(get_strategy("bfd"), b) is b.l2
    assert make_plan([300] * 10, 512, "concat-cut").n_rows == b.l1.rows   # only cutting reaches L1


def test_l2_never_falls_below_l1_and_names_what_it_covers():
    b = bounds_from_counts({3: 5, 200: 2, 400: 1}, 512)
    assert b.l2.rows >= b.l1.rows
    assert b.l2.whole_documents and not b.l1.whole_documents
    assert {"name", "rows", "value", "whole_documents", "what", "proven"} <= set(b.l1.to_dict())


def test_an_lp_bound_above_l2_becomes_the_whole_document_bound():
    sizes, n = np.array([120, 130, 260]), np.array([6, 6, 6])
    lp = solve_optimal(sizes, n, 512).certificate.lp
    b = bounds_from_counts(dict(zip(sizes.tolist(), n.tolist())), 512, lp=lp)
    assert b.whole_documents.name == ("LP" if lp is not None and lp.rows > b.l2.rows else "L2")
    assert b.whole_documents.rows == max(b.l2.rows, lp.rows if lp else 0)


def test_l2_is_vectorised_on_100_000_distinct_lengths():
    """The path, not the clock: no line of Python per distinct length."""
    from tests._support import python_lines

    rng = np.random.default_rng(0)
    sizes = np.sort(rng.choice(np.arange(1, 2**17 + 1), 100_000, replace=False))
    n = rng.integers(1, 50, len(sizes))
    r, lines = python_lines(l2_bound, sizes, n, 2**17)
    assert lines < 2_000, f"{lines} lines of Python for 100,000 distinct lengths: a loop per length"
    assert r.rows >= -(-int((sizes * n).sum()) // 2**17)


@settings(max_examples=150, deadline=None)
@given(items=st.lists(st.integers(1, 64), min_size=1, max_size=9), context=st.integers(64, 128),
       cap=st.sampled_from([None, 1, 2, 3]))
def test_l2_and_the_lp_bound_never_exceed_the_true_optimum(items, context, cap):
    sizes, n = np.unique(items, return_counts=True)
    best = _fewest_rows(items, context, cap)
    assert l2_bound(sizes, n, context, cap).rows <= best
    lp = solve_optimal(sizes, n, context, max_docs_per_row=cap).certificate.lp
    assert lp is None or lp.rows <= best


@settings(max_examples=80, deadline=None)
@given(counts=st.dictionaries(st.integers(1, 300), st.integers(1, 30), min_size=1, max_size=12),
       context=st.sampled_from([64, 128, 512]), overlong=st.sampled_from(["split", "truncate", "drop"]),
       cap=st.sampled_from([None, 2, 5]))
def test_every_bound_is_at_most_the_rows_of_every_strategy(counts, context, overlong, cap):
    lengths = np.repeat(list(counts), list(counts.values()))
    if overlong == "drop" and (lengths > context).all():
        return
    item_len, item_n, _ = piece_histogram(*map(np.asarray, (sorted(counts), [counts[k] for k in sorted(counts)])),
                                         context, overlong)
    lp = solve_optimal(item_len, item_n, context, max_docs_per_row=cap).certificate.lp
    b = bounds_from_counts(counts, context, overlong=overlong, max_docs_per_row=cap, lp=lp)
    for name in STRATEGIES:
        s = get_strategy(name)
        if cap is not None and s.cuts:
            continue    # concat-cut refuses a cap
        rows = make_plan(lengths, context, name, overlong=overlong, max_docs_per_row=cap, batch_size=4).n_rows
        assert b.l1.rows <= rows, name
        if not s.cuts:
            assert b.l2.rows <= rows and b.whole_documents.rows <= rows, name


def _lp_optimum(sizes, n, context: int) -> float:
    """The Gilmore-Gomory LP by brute force: every pattern (at most ``n`` of each length, within
    ``context``) as a column, one equality row per length, solved by HiGHS."""
    import highspy

    ranges = [np.arange(min(int(k), context // int(s)) + 1) for s, k in zip(sizes, n)]
    grid = np.stack(np.meshgrid(*ranges, indexing="ij"), -1).reshape(-1, len(sizes))
    pats = grid[(grid @ np.asarray(sizes) <= context) & (grid.sum(1) > 0)]
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    d = np.asarray(n, np.float64)
    h.addRows(len(d), d, d, 0, np.zeros(len(d), np.int32), np.zeros(0, np.int32), np.zeros(0))
    col, row = np.nonzero(pats)
    starts = np.searchsorted(col, np.arange(len(pats))).astype(np.int32)
    h.addCols(len(pats), np.ones(len(pats)), np.zeros(len(pats)), np.full(len(pats), highspy.kHighsInf), len(col),
              starts, row.astype(np.int32), pats[col, row].astype(np.float64))
    h.run()
    return h.getInfo().objective_function_value


def test_an_lp_bound_short_of_the_lp_optimum_is_named_a_lower_bound_and_is_never_below_l1():
    # column generation proves ⌈LP⌉ = 25 here before it reaches the LP optimum; the duals' bound
    # (Farley) is below tokens / context, so the bound's value is L1's, named as such
    counts, context = {9: 18, 15: 27, 25: 1, 30: 19, 35: 20, 58: 22}, 128
    lp = optimal_from_counts(counts, context).certificate.lp
    l1 = bounds_from_counts(counts, context).l1
    exact = _lp_optimum(list(counts), list(counts.values()), context)
    assert lp.rows == 25 and l1.value <= lp.value <= exact + 1e-9
    assert not lp.proven and lp.value < exact - 1e-6         # not the LP optimum, and not called so
    assert lp.what.startswith("a lower bound on the LP optimum, tokens / context (L1)")


@settings(max_examples=60, deadline=None)
@given(counts=st.dictionaries(st.integers(10, 64), st.integers(1, 6), min_size=1, max_size=5),
       context=st.sampled_from([64, 100, 128]))
def test_the_lp_bounds_value_is_the_lp_optimum_when_marked_proven_and_below_it_otherwise(counts, context):
    sizes, n = np.array(sorted(counts)), np.array([counts[k] for k in sorted(counts)])
    lp = solve_optimal(sizes, n, context, time_limit=1).certificate.lp
    if lp is None:
        return                      # bfd met L2: no LP was needed
    exact = _lp_optimum(sizes, n, context)
    assert bounds_from_counts(counts, context).l1.value - 1e-9 <= lp.value <= exact + 1e-6
    if lp.proven:
        assert abs(lp.value - exact) <= 1e-6 and lp.what.startswith("the LP optimum")
    else:
        assert lp.what.startswith("a lower bound on the LP optimum")
