"""The audit of issues 33 and 35: sentences that read the right way round when the packer loses."""
from packing_core.analysis.profile_report import headline
from packing_core.analysis.tables import strategy_table


def test_a_headline_where_padding_to_the_longest_wins_says_more_slots_never_a_fraction_fewer():
    # ten documents of 300 at 512: no two share a row, so bfd uses 10 x 512 = 5,120 slots; padding each
    # batch to its longest pads nothing (all are 300 long): 3,000 slots, 5,120 / 3,000 = 1.7x more for bfd
    sentence = headline(strategy_table([300] * 10, 512)).sentence
    assert "1.7x more slots for the same tokens" in sentence
    assert "0.6x" not in sentence and "fewer slots" not in sentence


def test_a_headline_where_bfd_wins_still_says_fewer_slots():
    # 4 x 256 and 4 x 128: bfd fills 2 rows of 2 x 256 and 1 row of 4 x 128 (3 x 512 = 1,536 slots); one batch
    # (32 documents a batch) padded to its longest is 8 x 256 = 2,048 slots: 1.3x fewer; the context, 4,096: 2.7x
    sentence = headline(strategy_table([256, 128] * 4, 512)).sentence
    assert "1.3x fewer slots for the same tokens (2.7x against padding to the context" in sentence
    assert "more slots" not in sentence
