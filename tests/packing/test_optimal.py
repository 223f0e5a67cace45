"""The optimal strategy: column generation, rounding and a dive, with a certificate, from counts and from lengths,
within a budget of work."""
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.optimal_gap import triplets
from packing_core.packing import make_plan, optimal_from_counts, plan_from_counts
from packing_core.packing.optimal import solve_optimal

ROOT = Path(__file__).resolve().parents[2]
WIKIPEDIA = ROOT / "benchmarks" / "data" / "wikipedia_512_hist.txt"


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


def test_a_tight_budget_returns_the_best_plan_so_far_with_its_gap_and_says_what_stopped_it():
    rng = np.random.default_rng(1)     # bfd is 57 rows above L2 here; column generation needs seconds
    sizes = np.sort(rng.choice(np.arange(1, 4097), 3000, replace=False))
    n = rng.integers(1, 50, len(sizes))
    t = time.perf_counter()
    s = solve_optimal(sizes, n, 4096, time_limit=0.5)
    assert time.perf_counter() - t < 3      # the start (bfd and the bounds) may outlast a tiny budget, not hang
    c = s.certificate
    assert c.rows >= c.bound.rows and c.gap_rows == c.rows - c.bound.rows
    assert c.gap_rows > 0 and not c.converged and c.stopped_by in ("work", "time")
    assert c.status.startswith(f"gap {c.gap_rows} rows after ") and c.status.endswith(": the best plan found")
    assert "0.5 s" in c.status and c.status in c.sentence()


def test_falkenauers_triplets_are_closed_and_proven_optimal():
    # rows of three pieces that fill 1,000 exactly: the LP bound is n / 3, and rounding the LP alone
    # leaves a row over on these instances; the dive finds the n / 3 rows
    for n, seed in ((60, 0), (120, 0), (120, 1)):
        lengths = triplets(n, seed)
        c = optimal_from_counts(dict(zip(*np.unique(lengths, return_counts=True))), 1000).certificate
        assert (c.rows, c.bound.rows, c.gap_rows) == (n // 3, n // 3, 0), (n, seed, c.sentence())
        assert c.status == "optimal (proven)" and c.stopped_by == ""


def test_a_gap_left_is_reported_as_the_best_plan_found_with_what_stopped_the_search():
    lengths = triplets(501, 0)
    c = optimal_from_counts(dict(zip(*np.unique(lengths, return_counts=True))), 1000, time_limit=0.2).certificate
    assert c.gap_rows > 0 and c.bound.rows == 167
    words = {"work": "after its 0.2 s budget", "time": "after the 0.2 s time limit, before its work budget"}
    assert c.status == f"gap {c.gap_rows:,} row{'s' if c.gap_rows > 1 else ''} {words[c.stopped_by]}" \
        + (" (this plan depends on the machine's speed)" if c.stopped_by == "time" else "") + ": the best plan found"
    assert c.sentence().startswith(f"{c.rows} rows: {c.status} (L2 bound 167)")


def test_the_plan_is_a_function_of_the_histogram_and_the_limit_not_of_the_clock(monkeypatch):
    # a work budget a tenth of the clock's: the work stops the search long before the clock could,
    # even on a loaded machine; two runs then give the same plan and the same certificate
    from packing_core.packing import master

    monkeypatch.setattr(master, "WORK_PER_SECOND", master.WORK_PER_SECOND // 10)
    counts = dict(zip(*np.unique(triplets(501, 2), return_counts=True)))
    first, second = (optimal_from_counts(counts, 1000, time_limit=2) for _ in range(2))
    assert first.certificate.stopped_by == "work" and first.certificate.gap_rows > 0
    assert first.certificate.to_dict() == second.certificate.to_dict()
    assert all(np.array_equal(getattr(first.patterns, f), getattr(second.patterns, f))
               for f in ("group", "size", "copies", "offset", "n_rows"))


def test_the_certificate_dict_carries_no_time_unless_asked():
    c = optimal_from_counts({66: 1, 16: 3, 28: 3}, 100).certificate
    assert "seconds" not in c.to_dict() and c.to_dict(timings=True)["seconds"] == c.seconds
    assert c.to_dict()["status"] == "optimal (proven)" and c.to_dict()["work"] == c.work > 0


def test_a_half_second_limit_is_kept_to_within_one_step():
    # the start (bfd and the bounds) takes milliseconds here: the rest is steps checked against the clock
    for lengths in (triplets(501, 0), triplets(249, 1)):
        counts = dict(zip(*np.unique(lengths, return_counts=True)))
        t = time.perf_counter()
        c = optimal_from_counts(counts, 1000, time_limit=0.5).certificate
        assert time.perf_counter() - t <= 0.5 + 0.05 and c.seconds <= 0.5


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


def test_two_reports_of_the_same_lengths_with_optimal_are_byte_identical(tmp_path):
    # the certificate's time stays out of the JSON, and the plan is the work budget's, not the clock's
    lengths = ",".join(map(str, triplets(60, 0)))
    argv = [sys.executable, "-m", "packing_core", "report", "--lengths", lengths, "--context", "1000",
            "--strategy", "optimal", "--format", "json"]
    runs = [subprocess.run(argv, capture_output=True, timeout=120, cwd=tmp_path,
                           env={**os.environ, "PYTHONPATH": str(ROOT)}) for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs[0].stderr.decode()[-2000:]
    assert runs[0].stdout == runs[1].stdout
    (entry,) = json.loads(runs[0].stdout)["strategies"]
    assert entry["certificate"]["status"] == "optimal (proven)" and "seconds" not in entry["certificate"]


def test_a_half_second_plan_limit_is_written_as_half_a_second_in_the_one_error_line(tmp_path):
    argv = [sys.executable, "-m", "packing_core", "report", "--lengths", "10,20,30", "--strategy", "optimal",
            "--time-limit", "1"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": str(ROOT), "PACKING_LAB_MAX_PLAN_SECONDS": "0.5"})
    assert r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith("error: ") and "above 0 and at most 0.5, got 1.0; try 0.5 " in r.stderr
