"""Data-parallel balance: every row once, equal micro-batches, and less imbalance after."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from packing_core.data.lengths import synthetic_lengths
from packing_core.packing.balance import balance_rows, row_loads
from packing_core.packing.strategies import make_plan


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(1, 600), min_size=1, max_size=300), st.integers(1, 8), st.integers(1, 4),
       st.sampled_from(["bfd", "next-fit", "pad"]))
def test_every_row_lands_once_and_every_rank_gets_the_same_micro_batches(lengths, ranks, micro, strategy):
    plan = make_plan(lengths, 512, strategy)
    if plan.n_rows < ranks * micro:
        with pytest.raises(ValueError, match="cannot fill"):
            balance_rows(plan, ranks, micro)
        return
    report = balance_rows(plan, ranks, micro)
    tokens, cost = row_loads(plan)
    for split in (report.before, report.after):
        assert len(split.rank) == len(split.micro_batch) == plan.n_rows      # one place per row
        cells = np.bincount(split.rank * micro + split.micro_batch, minlength=ranks * micro)
        assert len(cells) == ranks * micro and (cells >= 1).all()            # R x M micro-batches, none empty
        assert cells.max() - cells.min() <= 1                                 # equal rows, up to one
        assert split.rank_tokens.sum() == tokens.sum() and split.rank_attention.sum() == cost.sum()


def test_balancing_by_attention_lowers_the_imbalance_on_long_tailed_data():
    plan = make_plan(synthetic_lengths("long-tailed", n=20_000), 2048, "next-fit")
    report = balance_rows(plan, ranks=8, micro_batches=4)
    assert report.before.attention_imbalance > 1.05
    assert report.after.attention_imbalance < report.before.attention_imbalance
    assert report.after.attention_imbalance < 1.01


def test_padded_rows_cost_their_full_width():
    plan = make_plan([10, 20, 30, 40], 64, "pad")
    tokens, cost = row_loads(plan)
    assert tokens.tolist() == [10, 20, 30, 40] and cost.tolist() == [64 * 64] * 4


def test_balance_prints_each_rank_before_and_after():
    import io

    from packing_core.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = main(["balance", "--synthetic", "long-tailed", "--context", "2048", "--strategy", "next-fit",
                 "--ranks", "4", "--micro-batches", "2"], out, err)
    text = out.getvalue()
    assert code == 0, err.getvalue()
    assert "over 4 ranks x 2 micro-batches" in text
    assert sum(line.split()[0] in "0123" for line in text.splitlines() if line.split()) == 4
    assert "max/mean: tokens" in text and "attention" in text
