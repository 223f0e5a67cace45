"""plan_trace replays a packer one piece at a time and ends on make_plan's rows, row for row."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from packing_core import InputError
from packing_core.packing import TRACE_STRATEGIES, make_plan, plan_trace
from packing_core.packing.trace import MAX_TRACE_PIECES

GREEDY = ("next-fit", "ffd", "bfd")


def _plan_pieces(plan) -> np.ndarray:
    return np.stack([plan.piece_doc, plan.piece_start, plan.piece_len, plan.piece_row, plan.piece_offset], 1)


def _trace_pieces(trace) -> np.ndarray:
    a = trace.placements()
    return a[np.lexsort((a[:, 4], a[:, 3]))]


@st.composite
def small_sets(draw):
    # small contexts and many documents: rows often tie on their room, where the tie-break shows
    context = draw(st.integers(4, 40))
    lengths = draw(st.lists(st.integers(1, int(context * 1.6)), min_size=1, max_size=40))
    return lengths, context, draw(st.sampled_from(("split", "truncate", "drop")))


@pytest.mark.parametrize("strategy", GREEDY)
@settings(max_examples=150, deadline=None)
@given(case=small_sets())
def test_a_greedy_trace_ends_on_make_plans_rows_pieces_and_offsets(strategy, case):
    lengths, context, overlong = case
    if overlong == "drop" and all(n > context for n in lengths):
        return   # make_plan refuses it too (test_the_trace_refuses_what_it_cannot_show)
    trace = plan_trace(lengths, context, strategy, overlong=overlong)
    plan = make_plan(lengths, context, strategy, overlong=overlong)
    assert trace.rows == plan.n_rows
    np.testing.assert_array_equal(_trace_pieces(trace), _plan_pieces(plan))


@settings(max_examples=25, deadline=None)
@given(lengths=st.lists(st.integers(20, 500), min_size=1, max_size=20))
def test_an_optimal_trace_fills_the_solvers_rows_one_document_at_a_time(lengths):
    trace = plan_trace(lengths, 512, "optimal")
    plan = make_plan(lengths, 512, "optimal")
    np.testing.assert_array_equal(_trace_pieces(trace), _plan_pieces(plan))
    fills = np.bincount(plan.piece_row, weights=plan.piece_len).astype(int).tolist()
    assert list(trace.steps[-1].fill) == fills
    for s in trace.steps:       # row by row, each piece right after the previous one in its row
        assert s.offset == s.fill[s.row] - s.length and "holds" in s.rule
    assert trace.note.startswith(f"{plan.n_rows:,} rows")      # the certificate's sentence (its time varies)


@pytest.mark.parametrize("strategy", GREEDY)
@settings(max_examples=80, deadline=None)
@given(lengths=st.lists(st.integers(1, 60), min_size=1, max_size=30))
def test_every_step_follows_the_rule_it_names(strategy, lengths):
    """Checked from the rows before each step alone, not from the code that chose the row."""
    context = 64
    fill: tuple[int, ...] = ()
    for s in plan_trace(lengths, context, strategy).steps:
        room = [context - f for f in fill]
        fits = [r for r, free in enumerate(room) if free >= s.length]
        if strategy == "next-fit":
            fits = fits[-1:] if fits and fits[-1] == len(room) - 1 else []
        if not fits:
            assert s.new_row and s.row == len(fill) and s.rule.startswith("a new row")
        elif strategy == "bfd":
            assert room[s.row] == min(room[r] for r in fits) and s.rule.startswith("the fullest row it still fits")
        elif strategy == "ffd":
            assert s.row == fits[0] and s.rule.startswith("the first row it fits")
        else:
            assert s.row == len(fill) - 1 and s.rule.startswith("next-fit keeps the order")
        assert s.offset == (fill[s.row] if s.row < len(fill) else 0) and s.room == context - s.offset
        fill = s.fill


def test_packers_take_documents_in_their_own_order():
    lengths = [3, 9, 5, 9]
    assert [s.doc for s in plan_trace(lengths, 10, "next-fit").steps] == [0, 1, 2, 3]   # the dataset's order
    assert [s.doc for s in plan_trace(lengths, 10, "bfd").steps] == [1, 3, 2, 0]        # longest first, ties in order


def test_best_fit_breaks_a_tie_for_the_row_that_reached_its_room_first():
    # 7 -> row 0 (room 3), 5 -> row 1 (room 5), 4 -> row 1 (room 1), 2 -> row 0 (room 1): both rows
    # now have room 1, row 1 since step 2 and row 0 since step 3, so the last document goes to row 1
    steps = plan_trace([7, 5, 4, 2, 1], 10, "bfd").steps
    assert [s.row for s in steps] == [0, 1, 1, 0, 1]
    assert make_plan([7, 5, 4, 2, 1], 10, "bfd").placed.row.tolist() == [0, 1, 1, 0, 1]


def test_a_split_document_is_placed_piece_by_piece():
    steps = plan_trace([25, 4], 10, "next-fit").steps
    assert [(s.doc, s.start, s.length) for s in steps] == [(0, 0, 10), (0, 10, 10), (0, 20, 5), (1, 0, 4)]


def test_the_trace_refuses_what_it_cannot_show():
    with pytest.raises(InputError, match="'next-fit', 'ffd', 'bfd', 'optimal'"):
        plan_trace([3, 4], 10, "pad")
    with pytest.raises(InputError, match=f"at most {MAX_TRACE_PIECES}"):
        plan_trace([1] * (MAX_TRACE_PIECES + 1), 10, "bfd")
    with pytest.raises(InputError, match="dropped them all"):
        plan_trace([30], 10, "bfd", overlong="drop")
    assert set(TRACE_STRATEGIES) == {"next-fit", "ffd", "bfd", "optimal"}


def test_a_trace_is_plain_data():
    d = plan_trace([5, 7, 2, 3], 10, "ffd").to_dict()
    assert d["rows"] == 2 and len(d["steps"]) == 4 and d["steps"][0]["rule"] == "a new row: no row yet"


def test_a_trace_counts_its_pieces_before_it_makes_them(monkeypatch):
    """16 documents of 10^9 tokens are 31,250,000 pieces at context 512: refused from the count, none made."""
    from packing_core.packing import trace

    made = []
    monkeypatch.setattr(trace, "pieces_from_lengths", lambda *a: made.append(a))
    with pytest.raises(InputError, match=r"31,250,000 pieces are too many to step through"):
        trace.plan_trace([10**9] * 16, 512, "bfd")
    assert made == []
