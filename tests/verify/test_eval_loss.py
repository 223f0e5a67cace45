"""Evaluation under packing: a document's loss packed equals its loss alone exactly when the mask is right."""
import pytest

from app_pages._content import row_documents
from packing_core import PackedBatch
from packing_core.verify import eval_loss_packed_vs_alone
from packing_lab.zoo import BREAKS, broken_batch


def built(instruction: bool) -> PackedBatch:
    d = row_documents(64, instruction)
    return PackedBatch.from_documents(d.documents, 64, "next-fit", prompt_lengths=d.prompt_lengths)


@pytest.mark.parametrize("instruction", [False, True])
def test_packed_and_alone_evaluation_agree_only_when_nothing_is_broken(instruction):
    good = built(instruction)
    sound = eval_loss_packed_vs_alone(good)
    assert sound.agree and sound.max_abs_diff <= 1e-5
    # faults in what is read or trained move the loss; a position shift under RoPE with the mask right does not,
    # and neither do faults the tiny model's varlen reading cannot see (a key mask) or that leave the
    # document's own positions (pads in the loss: the pads are not a document)
    moves = {"row-cu-seqlens", "row-shifted-targets", "prompts-in-the-loss"}
    for how in BREAKS:
        if how.startswith("prompts") and not instruction:
            continue
        e = eval_loss_packed_vs_alone(broken_batch(good, how), good)
        assert e.agree == (how not in moves), how
        if not e.agree:
            assert e.max_abs_diff > 100 * e.tolerance and "not measuring" in e.sentence


def test_each_piece_of_a_split_document_is_judged_against_that_piece_alone():
    batch = PackedBatch.from_documents([[65, 66, 67, 68, 69, 70, 71, 72, 73, 74]], 6, "concat-cut")
    e = eval_loss_packed_vs_alone(batch)
    assert len(e.packed) == 2 and e.agree          # each piece against that piece alone: the same computation
