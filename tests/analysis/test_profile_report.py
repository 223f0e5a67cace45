"""The profile's report: one JSON shape, a headline that answers the question, plain names, a balance verdict."""
import numpy as np
import pytest

from packing_core.analysis.balance_report import balance_verdict, format_balance, slowest_rank_cut
from packing_core.analysis.profile_report import (
    REPORT_VERSION,
    format_profile_report,
    headline,
    order_effects,
    profile_headline,
    profile_histogram,
    profile_rows,
    profile_stats,
    profile_table,
    report_dict,
)
from packing_core.analysis.stats import length_histogram, length_stats
from packing_core.analysis.tables import strategy_table
from packing_core.data.profile import LengthProfile
from packing_core.packing.balance import balance_rows
from packing_core.packing.strategies import make_plan

SFT = LengthProfile.from_counts({60: 4000, 200: 2000, 450: 500}, {60: 80_000, 200: 160_000, 450: 50_000},
                                kind="prompt-completion")
TEXT = LengthProfile.from_counts({60: 4000, 200: 2000, 450: 500}, kind="text")


def test_the_loss_masked_headline_compares_trained_tokens_per_slot_with_padding():
    plans = profile_table(SFT, 512)
    by = {p.strategy: p for p in plans}
    head = profile_headline(SFT, plans)
    assert head.measure == "trained tokens per slot" and head.best in ("bfd", "ffd")
    assert head.best_value == by[head.best].trained_per_slot and head.padding_value == by["pad"].trained_per_slot
    assert head.ratio == pytest.approx(head.best_value / head.padding_value)
    longest = by["pad-longest"].trained_per_slot          # a sampled plan: the order of the documents matters
    assert head.pad_longest_value == longest and head.pad_longest_ratio == pytest.approx(head.best_value / longest)
    assert head.sentence == (f"trained tokens per slot: {head.best} {head.best_value:.3f} vs {longest:.3f} padded "
                             f"to each batch's longest, {head.pad_longest_ratio:.1f}x more training per step "
                             f"({head.ratio:.1f}x against padding to the context, {head.padding_value:.3f})")


def test_the_headline_leads_with_what_a_trainer_that_does_not_pack_does():
    """Padding each batch to its longest is far better than padding to the context, so the honest gain is smaller."""
    lengths = [60] * 300 + [200] * 150 + [1800] * 10
    rows = strategy_table(lengths, 2048)
    by = {r.strategy: r for r in rows}
    head = headline(rows)
    assert head.pad_longest_value == by["pad-longest"].utilisation
    assert 1 < head.pad_longest_ratio < head.ratio                           # pad-longest beats padding to 2048
    assert head.pad_longest_ratio == pytest.approx(by["pad-longest"].slots / by[head.best].slots)
    assert head.sentence.index("padded to each batch's longest") < head.sentence.index("against padding to the context")
    without = headline([r for r in rows if r.strategy != "pad-longest"])      # no such row: the old comparison
    assert without.pad_longest_value is None and "vs padding to the context" in without.sentence


def test_the_pretraining_headline_is_utilisation_and_slots():
    plans = profile_table(TEXT, 512)
    head = profile_headline(TEXT, plans)
    by = {p.strategy: p.metrics for p in plans}
    assert head.measure == "utilisation"
    assert head.ratio == pytest.approx(by[head.best].utilisation / by["pad"].utilisation)
    assert head.ratio == pytest.approx(by["pad"].slots / by[head.best].slots)   # same tokens: fewer slots
    assert "fewer slots for the same tokens" in head.sentence


def test_concat_cut_never_wins_the_headline_because_it_cuts_documents():
    rows = strategy_table([300, 250, 200, 150, 100], 512)
    assert max(rows, key=lambda r: r.utilisation).strategy == "concat-cut"
    assert headline(rows).best != "concat-cut"


def test_report_dict_has_one_versioned_shape_with_the_plans_and_no_counts():
    plans = profile_table(SFT, 512)
    d = report_dict(SFT, plans, 512)
    assert d["report_version"] == REPORT_VERSION == 2
    assert set(d) == {"report_version", "context", "max_docs_per_row", "profile", "loss_share", "headline", "bounds",
                      "optimal_gap", "cap_price", "strategies"}
    assert "counts" not in d["profile"] and d["profile"]["documents"] == SFT.documents
    assert [s["strategy"] for s in d["strategies"]] == [p.strategy for p in plans]
    assert d["headline"]["sentence"] == profile_headline(SFT, plans).sentence
    for entry in d["strategies"]:     # version 2: every plan names its bound; L1 is no longer "the" lower bound
        assert "lower_bound_rows" not in entry and "rows_over_lower_bound" not in entry
        assert entry["bound"] == ("L1" if entry["strategy"] == "concat-cut" else entry["bound"])
        assert entry["bound_rows"] == entry["bounds"][entry["bound"].lower()]
        assert entry["rows"] >= entry["bound_rows"] and entry["rows_over_bound"] == entry["rows"] / entry["bound_rows"]


TEN_OF_300 = LengthProfile.from_counts({300: 10}, kind="lengths")


def test_the_table_measures_a_whole_document_packer_against_l2_and_only_concat_cut_against_l1():
    # 3,000 tokens fill ceil(3000 / 512) = 6 rows only if cut; no two 300s share a 512 row (600 > 512): 10 rows
    plans = profile_table(TEN_OF_300, 512)
    text = format_profile_report(TEN_OF_300, plans)
    table = text.split("\n\n")[1].splitlines()      # totals and headline, then the table up to its first blank line
    header, lines = table[0].split(), {line.split()[0]: line.split() for line in table[1:]}
    assert set(lines) == {p.strategy for p in plans}
    col = header.index("bound")
    assert lines["concat-cut"][col:col + 2] == ["L1", "6"]
    for name in ("bfd", "ffd", "optimal", "pad"):
        assert lines[name][col:col + 2] in (["L2", "10"], ["LP", "10"]), name
    assert "fewest" not in text                       # no strategy is measured against a "fewest" it cannot reach
    assert ("L1 6 (tokens / context: a bound for every plan, reachable only by cutting documents), L2 10 (whole "
            "documents)") in text
    assert "bfd is already optimal: its 10 rows meet the proven lower bound (L2 10)." in text


def test_a_json_strategy_entry_carries_the_lp_bound_that_optimal_proved_for_every_plan_of_the_same_documents():
    plans = profile_table(SFT, 512)
    d = report_dict(SFT, plans, 512)
    lp = d["bounds"]["lp"]
    assert lp is not None and lp["rows"] >= d["bounds"]["l2"]["rows"] >= d["bounds"]["l1"]["rows"]
    counted = [e for e in d["strategies"] if e["basis"] == "counts"]
    assert {e["bounds"]["lp"] for e in counted} == {lp["rows"]}
    assert d["optimal_gap"]["optimal_rows"] == {e["strategy"]: e["rows"] for e in counted}["optimal"]


def test_profile_stats_and_histogram_equal_those_of_the_expanded_lengths():
    expanded = np.repeat(SFT.lengths, SFT.counts)
    assert profile_stats(SFT, 256) == length_stats(expanded, 256)
    a, b = profile_histogram(SFT, 256), length_histogram(expanded, 256)
    assert (a.counts == b.counts).all() and (a.edges == b.edges).all() and a.clipped == b.clipped


def test_profile_rows_compare_a_sampled_plan_per_token_not_per_sample():
    big = LengthProfile.from_counts({100: 300_000, 400: 100_000})
    rows = {r.strategy: r for r in profile_rows(profile_table(big, 512, sample=20_000))}
    # next-fit ran on 20,000 documents, pad on all 400,000: its slot ratio must still be near bfd's, not 20x
    assert rows["next-fit"].slot_ratio == pytest.approx(rows["bfd"].slot_ratio, rel=0.15)
    assert rows["pad"].slot_ratio == 1.0


def test_order_effects_name_the_order_measured_and_the_strategies_it_moves():
    sentence = order_effects(strategy_table([120, 90, 300, 40, 55, 30, 210, 65], 512), "the file's order")
    assert sentence.startswith("next-fit and pad-longest depend on document order. Measured on the file's order:")
    assert "bfd sorts the documents first" in sentence


def test_the_balance_section_ends_with_the_cut_of_the_slowest_ranks_attention_cost():
    plan = make_plan([512, 128, 128, 128, 128, 512, 128, 128, 128, 128], 512, "next-fit")
    report = balance_rows(plan, 2)
    before, after = report.before.rank_attention.max(), report.after.rank_attention.max()
    assert slowest_rank_cut(report) == pytest.approx(1 - after / before)
    percent = round(100 * (1 - after / before))
    # M2: attention alone is the slowest rank's attention cost, not its "work"
    assert balance_verdict(report) == f"balancing by attention cost cuts the slowest rank's attention cost by {percent} %"
    assert format_balance(report, "rows").endswith(balance_verdict(report))


def test_even_rows_get_a_verdict_that_says_so():
    report = balance_rows(make_plan([256] * 16, 512, "bfd"), 4)
    assert slowest_rank_cut(report) == 0.0 and "already even" in balance_verdict(report)
