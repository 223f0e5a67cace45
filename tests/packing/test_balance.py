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


def test_balance_prints_each_rank_of_the_first_step_before_and_after():
    import io

    from packing_core.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = main(["balance", "--synthetic", "long-tailed", "--context", "2048", "--strategy", "next-fit",
                 "--ranks", "4", "--micro-batches", "2"], out, err)
    text = out.getvalue()
    assert code == 0, err.getvalue()
    assert "step 1 of" in text and "over 4 ranks x 2 micro-batches x 1 row" in text
    assert sum(line.split()[0] in "0123" for line in text.splitlines() if line.split()) == 4
    assert "max/mean: tokens" in text and "attention" in text


# ---------------------------------------------------------------- one optimizer step at a time
def _by_hand(plan, ranks, micro, per_micro, seed):
    """Each step's attention max/mean and slowest rank as a sampler deals it, with plain loops."""
    _, cost = row_loads(plan)
    order = np.random.default_rng(seed).permutation(plan.n_rows)
    n = ranks * micro * per_micro
    ratios, slowest = [], []
    for s in range(plan.n_rows // n):
        load = [0.0] * ranks
        for i, row in enumerate(order[s * n:(s + 1) * n]):
            load[i % ranks] += float(cost[row])
        ratios.append(max(load) / (sum(load) / ranks))
        slowest.append(max(load))
    return np.array(ratios), np.array(slowest)


def test_a_step_holds_ranks_x_micro_batches_x_rows_each_row_once_equal_rows_per_rank():
    from packing_core.packing.balance import balance_steps

    plan = make_plan(synthetic_lengths("support-tickets", n=3_000), 512, "bfd")
    s = balance_steps(plan, 4, 2, 3, seed=1)
    assert s.rows.shape == (plan.n_rows // 24, 24) and s.left_over == plan.n_rows % 24
    assert len(np.unique(s.rows)) == s.rows.size                                # no row twice
    for split in (s.before, s.after):
        counts = np.stack([np.bincount(r, minlength=4) for r in split])
        assert (counts == 6).all()                                              # 2 x 3 rows per rank, each step


def test_each_step_is_balanced_on_its_own_and_the_epoch_total_hides_the_imbalance():
    """The whole epoch dealt as one step is even by the law of large numbers; the steps a rank waits in are not."""
    from packing_core.packing.balance import balance_steps

    plan = make_plan(synthetic_lengths("support-tickets"), 512, "bfd")
    s = balance_steps(plan, 8, 4, 1, seed=0)
    ratios, slowest = _by_hand(plan, 8, 4, 1, seed=0)
    assert s.steps == len(ratios) and s.before_imbalance == pytest.approx(ratios.mean())
    after = s.rank_loads(s.attention, "after").max(axis=1)
    assert s.cut == pytest.approx(float((1 - after / slowest).mean()))
    assert s.before_imbalance > 1.3 and s.cut > 0.15                     # a real step is far from even
    assert s.epoch_imbalance < 1.02                                      # its epoch total is not
    assert balance_rows(plan, 8, 4).before.attention_imbalance < 1.001   # all rows as one step: even


def test_rows_in_the_plans_order_make_look_alike_steps():
    from packing_core.packing.balance import balance_steps

    plan = make_plan(synthetic_lengths("support-tickets", n=20_000), 512, "bfd")
    assert balance_steps(plan, 8, 4, shuffle=False).before_imbalance < 1.01 < balance_steps(plan, 8, 4).before_imbalance


def test_too_few_rows_for_one_step_are_refused_or_fitted_and_said_so():
    from packing_core.packing.balance import balance_steps

    plan = make_plan([300, 400, 500, 450, 350], 512, "bfd")     # five rows
    with pytest.raises(ValueError, match="cannot fill one step"):
        balance_steps(plan, 2, 2, 2)
    s = balance_steps(plan, 2, 2, 2, fit=True)
    assert (s.ranks, s.micro_batches, s.rows_per_micro_batch, s.steps) == (2, 2, 1, 1)
    assert "cannot fill one step of 2 ranks x 2 micro-batches x 2 rows: shown on 2 x 2 x 1 row" in s.note
