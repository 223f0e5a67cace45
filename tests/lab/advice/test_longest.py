"""The longest documents: their share of Σ len², max_seqlen per batch and the positions trained, against
per-token brute force."""
import numpy as np
import pytest

from packing_core import make_plan
from packing_core.data import synthetic_lengths
from packing_lab.advice import longest_share, trained_positions


@pytest.mark.parametrize("seed", range(4))
def test_the_longest_pieces_shares_match_a_sort_of_the_pieces(seed):
    lengths = synthetic_lengths("long-tailed", n=500, seed=seed)
    plan = make_plan(lengths, 1024, "bfd")
    share = longest_share(plan, rows_per_batch=8)
    pieces = np.sort(plan.piece_len)[::-1].astype(np.float64)
    for top, tokens, cells in zip(share.top, share.top_tokens, share.top_cells):
        k = max(1, int(np.ceil(top * len(pieces))))
        assert tokens == pytest.approx(pieces[:k].sum() / pieces.sum())
        assert cells == pytest.approx((pieces[:k] ** 2).sum() / (pieces ** 2).sum())
        assert cells > tokens                       # the squares concentrate in the longest
    for b in range(len(share.batch_max_seqlen)):
        in_batch = plan.piece_len[plan.piece_row // 8 == b]
        assert share.batch_max_seqlen[b] == in_batch.max()


def test_trained_positions_count_every_token_once_at_its_position():
    lengths = [3, 700, 40, 512, 90, 1]
    plan = make_plan(lengths, 512, "bfd")
    t = trained_positions(plan, bins=8)
    reset = np.concatenate([np.arange(n) for n in plan.piece_len])
    per_row = np.bincount(plan.piece_row, weights=plan.piece_len).astype(int)
    along = np.concatenate([np.arange(n) for n in per_row])
    assert t.reset.tolist() == np.histogram(reset, bins=t.edges)[0].tolist()
    assert t.continuous.tolist() == np.histogram(along, bins=t.edges)[0].tolist()
    assert t.reset.sum() == t.continuous.sum() == sum(plan.piece_len)


def test_with_resets_the_large_positions_of_the_tickets_are_trained_by_few_documents():
    plan = make_plan(synthetic_lengths("support-tickets", n=5000, seed=0), 2048, "bfd")
    t = trained_positions(plan)
    half = len(t.edges) // 2
    assert t.reset[half:].sum() < 0.01 * t.reset.sum() < t.continuous[half:].sum()
    assert "only the documents longer than 1,024 tokens teach those positions" in t.sentence
