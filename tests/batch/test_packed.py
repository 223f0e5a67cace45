"""PackedBatch and the invariant checker, as specifications."""
import dataclasses
import re

import numpy as np
import pytest
import torch

from packing_core import PackedBatch, check_batch, check_hf_batch, make_plan
from packing_core.attention.masks import allowed
from packing_core.batch import IGNORE_INDEX, segment_layout
from packing_core.check.rules import RULES
from packing_lab.zoo import broken_batch


def _batch(**kw):
    docs = kw.pop("docs", [[11, 12, 13], [21, 22]])
    return PackedBatch.from_documents(docs, kw.pop("context", 6), kw.pop("strategy", "next-fit"), **kw)


def test_segment_layout_restarts_positions_at_every_document():
    lay = segment_layout([3, 2])
    assert lay.document_ids.tolist() == [0, 0, 0, 1, 1]
    assert lay.position_ids.tolist() == [0, 1, 2, 0, 1]
    assert lay.cu_seqlens.tolist() == [0, 3, 5]


def test_two_documents_in_one_row_match_the_docstring_picture():
    b = _batch()
    assert b.input_ids.tolist() == [[11, 12, 13, 21, 22, 0]]
    assert b.piece_ids.tolist() == [[0, 0, 0, 1, 1, -1]]
    assert b.position_ids.tolist() == [[0, 1, 2, 0, 1, 0]]
    assert b.targets.tolist() == [[12, 13, -100, 22, -100, -100]]
    assert b.loss_mask.tolist() == [[True, True, False, True, False, False]]
    assert b.cu_seqlens.dtype == torch.int32 and b.cu_seqlens.tolist() == [0, 3, 5]
    assert b.max_seqlen == 3


def test_continuous_positions_count_across_the_row():
    b = _batch(positions="continuous")
    assert b.position_ids.tolist()[0][:5] == [0, 1, 2, 3, 4]


def test_prompt_tokens_leave_the_loss_but_stay_in_attention():
    b = _batch(prompt_lengths=[2, 0])
    assert b.targets.tolist() == [[-100, 13, -100, 22, -100, -100]]
    assert b.piece_ids.tolist()[0][:2] == [0, 0]          # still attended
    assert bool(allowed(b.piece_ids[0])[2, 0]) and bool(allowed(b.piece_ids[0])[2, 1])


def test_eos_option_appends_a_trained_end_token_to_each_document():
    b = _batch(eos_id=2, context=8)
    assert b.input_ids.tolist()[0][:7] == [11, 12, 13, 2, 21, 22, 2]
    assert b.targets.tolist()[0][2] == 2    # last real token now predicts EOS
    assert b.targets.tolist()[0][3] == IGNORE_INDEX


def test_the_mask_rule_on_a_rows_pieces_is_block_diagonal_causal_and_pads_read_nothing():
    m = allowed(_batch().piece_ids[0]).int().tolist()
    assert m == [
        [1, 0, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0],
        [1, 1, 1, 0, 0, 0],
        [0, 0, 0, 1, 0, 0],
        [0, 0, 0, 1, 1, 0],
        [0, 0, 0, 0, 0, 0],
    ]


def test_split_document_continues_in_a_new_row_with_positions_from_zero():
    b = PackedBatch.from_documents([list(range(1, 11))], 4, "bfd")
    assert b.input_ids.tolist() == [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 0, 0]]
    assert b.position_ids.tolist()[1] == [0, 1, 2, 3]
    assert check_batch(b).findings == ()


def test_flat_removes_pads_and_keeps_row_boundaries():
    b = PackedBatch.from_documents([[1, 2, 3], [4, 5], [6, 7, 8]], 5, "next-fit")
    f = b.flat()
    assert f.input_ids.tolist() == [1, 2, 3, 4, 5, 6, 7, 8]
    assert f.cu_seqlens.tolist() == [0, 3, 5, 8]
    assert f.row_offsets.tolist() == [0, 5, 8]


def test_to_hf_matches_data_collator_with_flattening():
    hf = _batch(prompt_lengths=[1, 0]).to_hf()
    assert hf["input_ids"].tolist() == [[11, 12, 13, 21, 22]]
    assert hf["position_ids"].tolist() == [[0, 1, 2, 0, 1]]
    # unshifted; -100 at each document's first token and on prompt tokens
    assert hf["labels"].tolist() == [[-100, 12, 13, -100, 22]]
    assert hf["cu_seq_lens_q"].dtype == torch.int32 and hf["cu_seq_lens_k"].tolist() == [0, 3, 5]
    assert hf["max_length_q"] == hf["max_length_k"] == 3


def test_a_sound_batch_from_random_documents_has_no_violation():
    rng = np.random.default_rng(0)
    docs = [rng.integers(1, 100, rng.integers(1, 300)).tolist() for _ in range(40)]
    prompts = [int(rng.integers(0, len(d))) for d in docs]
    for strategy in ("pad", "pad-longest", "concat-cut", "bfd"):
        b = PackedBatch.from_documents(docs, 256, strategy, prompt_lengths=prompts)
        assert check_batch(b).findings == (), strategy


def _names(batch):
    return set(check_batch(batch).names)


def test_checker_names_continuous_positions():
    assert "positions_do_not_restart" in _names(_batch(positions="continuous"))


def test_checker_names_a_target_that_crosses_a_document_edge():
    b = _batch()
    t = b.targets.clone()
    t[0, 2] = 21  # last token of doc 0 trained to predict doc 1's first token
    lm = b.loss_mask.clone()
    lm[0, 2] = True
    names = _names(dataclasses.replace(b, targets=t, loss_mask=lm))
    assert "label_crosses_boundary" in names and "loss_count_mismatch" in names


def test_checker_names_pads_in_the_loss():
    b = _batch()
    t = b.targets.clone()
    t[0, 5] = 0
    assert "pad_in_loss" in _names(dataclasses.replace(b, targets=t))


def test_checker_names_a_broken_cu_seqlens():
    b = _batch()
    assert "cu_seqlens_not_monotone" in _names(dataclasses.replace(b, cu_seqlens=torch.tensor([0, 3, 3, 5], dtype=torch.int32)))
    assert "cu_seqlens_wrong_total" in _names(dataclasses.replace(b, cu_seqlens=torch.tensor([0, 3, 6], dtype=torch.int32)))
    moved = dataclasses.replace(b, cu_seqlens=torch.tensor([0, 2, 5], dtype=torch.int32))
    assert "segments_disagree_with_cu_seqlens" in _names(moved)


def test_checker_names_prompt_tokens_cut_from_attention_as_a_pad_in_attention_or_loss_mismatch():
    b = _batch(prompt_lengths=[2, 0])
    seg = b.piece_ids.clone()
    seg[0, 5] = 1  # a pad slot claimed by document 1
    assert "pad_in_attention" in _names(dataclasses.replace(b, piece_ids=seg))


def test_checker_names_a_loss_mask_that_includes_prompt_tokens():
    b = _batch(prompt_lengths=[2, 0])
    names = _names(dataclasses.replace(b, loss_mask=b.loss_mask | torch.tensor([[True] + [False] * 5])))
    assert "loss_mask_disagrees_with_targets" in names and "loss_count_mismatch" in names


def test_checker_names_a_target_that_is_not_the_next_token():
    b = _batch()
    t = b.targets.clone()
    t[0, 0] = 99
    # to_hf() carries the targets as labels, so the trainer's view names the same fault in its own words
    assert _names(dataclasses.replace(b, targets=t)) == {"target_is_not_the_next_token", "label_is_not_the_token"}


def test_every_finding_the_checkers_can_name_is_in_the_one_table_and_every_one_is_used():
    import inspect

    from packing_core.check import batch, evidence, labels, mixers, ranks, ranks_whole, static
    from packing_core.verify import equivalence

    source = "".join(inspect.getsource(m) for m in (batch, static, labels, evidence, mixers, ranks, ranks_whole,
                                                     equivalence))
    constructed = set(re.findall(r"Finding\(\s*\"(\w+)\"", source))
    named = set(re.findall(r"\"(\w+)\"", source)) & set(RULES)    # also the names a finding picks by a condition
    assert constructed and constructed <= set(RULES), constructed - set(RULES)
    assert named == set(RULES), set(RULES) - named
    assert all(len(r.title) > 10 and len(r.fix) > 20 for r in RULES.values())


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(docs=[]), "no documents"),
        (dict(docs=[[1], []]), "document 1 is empty"),
        (dict(prompt_lengths=[3, 0]), "prompt_lengths\\[0\\]"),
        (dict(prompt_lengths=[1]), "one entry per document"),
        (dict(positions="sideways"), "sideways"),
    ],
)
def test_bad_documents_raise_value_error_naming_the_problem(kwargs, words):
    with pytest.raises(ValueError, match=words):
        _batch(**kwargs)


def test_to_hf_labels_are_the_batchs_own_targets_moved_one_token_right_in_each_row():
    b = PackedBatch.from_documents([[11, 12, 13], [21, 22], [31, 32, 33, 34]], 6, "next-fit", prompt_lengths=[1, 0, 2])
    labels = b.to_hf()["labels"][0]
    targets = b.targets[b.valid]
    row_start = torch.zeros_like(b.valid)
    row_start[:, 0] = True
    starts = row_start[b.valid]
    assert (labels[starts] == IGNORE_INDEX).all()
    assert torch.equal(labels[1:][~starts[1:]], targets[:-1][~starts[1:]])
    # HF shifts labels: what it trains at each position is exactly the batch's target there
    assert torch.equal(torch.cat([labels[1:], labels.new_tensor([IGNORE_INDEX])])[~torch.roll(starts, -1)],
                       targets[~torch.roll(starts, -1)])


def test_a_planted_row_cu_seqlens_reports_no_label_crossing_since_the_targets_are_intact():
    good = _batch(docs=[[5, 6, 7, 8, 9], [11, 12, 13], [21, 22, 23, 24], [31, 32]], context=8)
    bad = broken_batch(good, "row-cu-seqlens")
    assert torch.equal(bad.targets, good.targets)
    names = _names(bad)
    assert "label_crosses_boundary" not in names and "segments_disagree_with_cu_seqlens" in names
    crossing = broken_batch(good, "row-shifted-targets")      # a real crossing is still named
    assert "label_crosses_boundary" in set(check_batch(crossing).names)
    assert "label_crosses_boundary" in set(check_hf_batch(crossing.to_hf(), "varlen").names)


def test_row_piece_offsets_come_from_the_plan_once():
    plan = make_plan([120, 90, 300, 40, 55, 30, 210, 65], 512, "concat-cut")
    offsets = plan.row_piece_offsets()
    assert [o.tolist() for o in offsets] == [[0, 120, 210, 510, 512], [0, 38, 93, 123, 333, 398]]
    assert plan.row_piece_offsets() is offsets                       # computed once, then cached
    b = PackedBatch.from_documents([[1] * 3, [2] * 2, [3] * 4], 5, "bfd")
    assert b.row_piece_offsets is b.plan.row_piece_offsets()
    for r, o in enumerate(b.row_piece_offsets):                      # each row's pieces, from the batch's own ids
        ids = b.piece_ids[r][b.valid[r]].numpy()
        assert o.tolist() == [0, *np.flatnonzero(np.diff(ids)) + 1, len(ids)]


