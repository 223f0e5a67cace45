"""The strategy registry: one list that make_plan, the count planner, the CLI and the pages read."""
import io
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from packing_core import LengthProfile, make_plan
from packing_core.cli import main
from packing_core.packing import count_rows, place
from packing_core.packing.from_counts import compare_counts, plan_from_counts
from packing_core.packing.pieces import Pieces
from packing_core.packing.registry import (
    COUNT_STRATEGIES,
    ORDER_STRATEGIES,
    PACKING_STRATEGIES,
    STRATEGIES,
    STRATEGY_INFO,
    Strategy,
    get_strategy,
    register_strategy,
    strategies,
    unregister_strategy,
)

PROFILE = {12: 40, 30: 25, 64: 9, 100: 3, 700: 2}   # two documents longer than the context below
CONTEXT = 128


def toy_place(it, context, opts, rng):
    """Reversed next-fit: the items in reverse order, a new row when the next one does not fit."""
    order = np.arange(len(it.length))[::-1]
    return place.place_next_fit(Pieces(it.doc[order], it.start[order], it.length[order]), context, opts, rng)


def toy(**changes) -> Strategy:
    fields = dict(name="toy-reverse-fit", info="Next-fit over the documents in reverse order.", packs=True,
                  place=toy_place, from_counts=None)
    return Strategy(**{**fields, **changes})


@pytest.fixture
def registered():
    """A throwaway strategy, registered for one test and removed after it."""
    s = register_strategy(toy())
    yield s
    unregister_strategy(s.name)


def test_count_and_order_strategies_together_are_every_strategy():
    assert sorted(COUNT_STRATEGIES + ORDER_STRATEGIES) == sorted(STRATEGIES)
    assert not set(COUNT_STRATEGIES) & set(ORDER_STRATEGIES)


def test_the_views_follow_the_registry_fields():
    assert list(STRATEGIES) == [s.name for s in strategies()]
    assert list(PACKING_STRATEGIES) == [s.name for s in strategies() if s.packs]
    assert dict(STRATEGY_INFO) == {s.name: s.info for s in strategies()}
    assert list(ORDER_STRATEGIES) == [s.name for s in strategies() if s.from_counts is None]


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_every_strategy_plans_from_a_length_profile_exactly_or_on_a_labelled_sample(name):
    profile = LengthProfile.from_counts(PROFILE)
    expanded = np.repeat(list(PROFILE), list(PROFILE.values()))
    (got,) = compare_counts(profile, CONTEXT, (name,))
    s = get_strategy(name)
    if s.from_counts is None:
        assert got.basis.startswith(("sample of", "all ")) and "order" in got.note
        return
    assert got.basis == "counts"
    want = make_plan(expanded, CONTEXT, name).metrics()
    assert (got.metrics.rows, got.metrics.real_tokens, got.metrics.tokens_lost) == (want.rows, want.real_tokens,
                                                                                    want.tokens_lost)
    if s.counts_exact:
        assert got.metrics.slots == want.slots
    else:   # an upper bound on the shuffled plan
        assert got.metrics.slots >= want.slots


@settings(max_examples=60, deadline=None)
@given(counts=st.dictionaries(st.integers(1, 300), st.integers(1, 40), min_size=1, max_size=25),
       context=st.sampled_from([16, 64, 128, 512]), overlong=st.sampled_from(["split", "truncate", "drop"]))
def test_first_and_best_fit_from_counts_equal_the_array_planner(counts, context, overlong):
    expanded = np.repeat(list(counts), list(counts.values()))
    if overlong == "drop" and (expanded > context).all():
        return
    for name in ("ffd", "bfd", "concat-cut", "pad"):
        got = plan_from_counts(counts, context, name, overlong=overlong).metrics
        want = make_plan(expanded, context, name, overlong=overlong).metrics()
        assert (got.rows, got.slots, got.tokens_lost, got.docs_dropped, got.docs_truncated) == (
            want.rows, want.slots, want.tokens_lost, want.docs_dropped, want.docs_truncated), name


def test_best_fit_from_counts_stays_near_linear_in_distinct_lengths():
    # 20,000 distinct lengths at a long context: the old scan of every room per length took seconds
    rng = np.random.default_rng(0)
    lengths = np.sort(rng.choice(np.arange(1, 2**17 + 1), 20_000, replace=False))   # items: at most the context
    n = rng.integers(1, 50, len(lengths))
    rows = count_rows.rows_bfd(lengths, n, 2**17, None).rows
    assert rows >= -(-int((lengths * n).sum()) // 2**17)


def test_a_name_registers_once_and_unknown_names_are_one_line(registered):
    with pytest.raises(ValueError, match="already registered"):
        register_strategy(toy())
    with pytest.raises(ValueError, match="unknown strategy 'nope': choose one of pad, .*toy-reverse-fit"):
        make_plan([3, 2], 8, "nope")


@pytest.mark.parametrize("edges", [[2.5], [True], [0], [], "64", [64, np.float64(3.0)]])
def test_bucket_edges_must_be_whole_positive_token_counts(edges):
    with pytest.raises(ValueError, match="bucket_edges"):
        make_plan([3, 2, 9], 16, "bucket", bucket_edges=edges)


def test_bucket_edges_accept_numpy_integers():
    plan = make_plan([3, 2, 9, 12], 16, "bucket", bucket_edges=np.array([4, 16]), batch_size=2)
    assert sorted(plan.row_width.tolist()) == [3, 3, 12, 12]


def test_a_strategy_registered_in_one_place_reaches_make_plan_cli_profile_report_and_the_page(registered, tmp_path):
    from streamlit.testing.v1 import AppTest

    lengths = [5, 3, 6, 2]
    plan = make_plan(lengths, 8, registered.name)
    assert plan.packed and plan.strategy == registered.name
    assert sorted(plan.kept.tolist()) == sorted(lengths)
    rows = make_plan(lengths[::-1], 8, "next-fit").metrics().rows
    # 1. the CLI's report table lists it and its one-line info
    out, err = io.StringIO(), io.StringIO()
    assert main(["report", "--lengths", "5,3,6,2", "--context", "8"], out=out, err=err) == 0, err.getvalue()
    assert registered.name in out.getvalue() and registered.info in out.getvalue()
    assert main(["report", "--lengths", "5,3,6,2", "--context", "8", "--strategy", registered.name,
                 "--format", "json"], out=(o := io.StringIO()), err=err) == 0
    assert json.loads(o.getvalue())["strategies"][0]["rows"] == rows
    # 2. report --profile plans it on a labelled sample (it has no from_counts)
    path = LengthProfile.from_counts({5: 1, 3: 1, 6: 1, 2: 1}).save(tmp_path / "p.json")
    assert main(["report", "--profile", str(path), "--context", "8", "--format", "json"], out=(o := io.StringIO()),
                err=err) == 0, err.getvalue()
    rows = {r["strategy"]: r for r in json.loads(o.getvalue())["strategies"]}
    assert rows[registered.name]["basis"].startswith("all 4 documents")
    # 3. the Padded vs packed page offers it and draws its plan
    at = AppTest.from_file("../../app.py", default_timeout=90)
    at.switch_page("app_pages/padded_vs_packed.py").run()
    box = at.selectbox(key="w_padded_vs_packed.strategy")
    assert registered.name in box.options
    box.set_value(registered.name).run()
    assert not at.exception and not at.error, [e.value for e in at.exception]
    assert registered.info in [c.value for c in at.caption]


def test_optimals_words_say_it_ends_proven_optimal_or_with_its_gap_and_that_its_budget_is_work(capsys):
    from packing_core.packing.options import TIME_LIMIT_HELP

    info = STRATEGY_INFO["optimal"]
    assert "proven optimal" in info and "the best plan found with its gap" in info and "budget of work" in info
    assert "proven optimal" in TIME_LIMIT_HELP and "gap" in TIME_LIMIT_HELP and "counted in work" in TIME_LIMIT_HELP
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert " ".join(TIME_LIMIT_HELP.split()) in shown and "stops sooner" not in shown
