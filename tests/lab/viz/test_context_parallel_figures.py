"""The context-parallel figures draw the split, the ring and the balance they are given, nothing else."""
import numpy as np

from packing_core.batch.packed import PackedBatch
from packing_core.packing.strategies import make_plan
from packing_core.parallel.balance import cp_balance
from packing_core.parallel.ring import ring_steps
from packing_core.parallel.split import split_batch
from packing_lab.viz import cp_balance_figure, cp_cut_figure, ring_steps_figure


def split_of(cp=2, scheme="zigzag-document"):
    return split_batch(PackedBatch.from_documents([[1] * 7, [2] * 5], 16, "next-fit"), cp, scheme)


def test_the_cut_colours_each_slot_by_its_document_and_the_rank_that_holds_it():
    s = split_of()
    fig = cp_cut_figure(s)
    docs, ranks = fig.data[0], fig.data[1]
    assert np.asarray(docs.customdata)[0].tolist() == s.piece_ids[0].tolist()
    owner = np.asarray(ranks.z)[0]
    assert owner.tolist() == [0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0]
    assert "2 pads added" not in fig.layout.title.text and "4 pads added" in fig.layout.title.text


def test_the_ring_draws_one_panel_per_rank_and_step_with_its_mask():
    s = split_of(4, "contiguous")
    steps = ring_steps(s)
    fig = ring_steps_figure(steps, 4)
    assert len(fig.data) == 16
    first = next(st for st in steps if st.rank == 0 and st.step == 0)
    assert np.asarray(fig.data[0].z).tolist() == first.mask.astype(float).tolist()
    assert "rank 2 ← 1: earlier rank" in " ".join(a.text.replace("<br>", " ") for a in fig.layout.annotations)


def test_a_ring_of_eight_shows_its_first_four_ranks_and_says_so():
    fig = ring_steps_figure(ring_steps(split_of(8)), 8)
    assert len(fig.data) == 16 and "the first 4 ranks and steps" in fig.layout.title.text.replace("<br>", " ")


def test_the_balance_bars_are_each_ranks_share_per_scheme():
    bal = cp_balance(make_plan([16], 16, "bfd"), 4)
    fig = cp_balance_figure(bal)
    assert [t.name.split(" ")[0] for t in fig.data] == ["contiguous", "zigzag-row", "zigzag-document"]
    assert list(fig.data[0].y) == bal[0].shares.tolist() and sum(fig.data[2].y) == 1
