"""The numbers the pages show: stats, the strategy table, the advice, examples, naive targets, planted bugs."""
import numpy as np
import pytest
import torch

import packing_core as pc
from app_pages import _content
from packing_core import STRATEGIES, InputError, PackedBatch, check_batch, make_plan
from packing_core.analysis import (
    MODEL_SHAPES,
    attention_cells,
    benchmark_bounds,
    end_to_end,
    length_histogram,
    length_stats,
    outlier_lengths,
    sample_lengths,
)
from packing_core.analysis import tables as tables_mod
from packing_core.analysis.costs import COST_FORMULA, training_flops
from packing_core.analysis.tables import attention_cost, bimodality
from packing_core.attention import packed_attention
from packing_core.batch import IGNORE_INDEX
from packing_core.check.rules import RULES
from packing_core.data import synthetic_lengths
from packing_core.packing.registry import PACKING_STRATEGIES
from packing_lab.advice import alone_vs_packed_attention, row_cu_seqlens
from packing_lab.zoo import BREAKS, broken_batch, loss_vs_answers, naive_targets

WORKED = _content.WORKED_LENGTHS


def test_length_stats_count_the_documents_over_the_context_and_their_extra_tokens():
    s = length_stats([120, 90, 300], 256)
    assert (s.count, s.tokens, s.max, s.p50) == (3, 510, 300, 120.0)
    assert s.mean == pytest.approx(170.0)
    assert (s.over_context, s.tokens_over) == (1, 44)
    assert s.share_over == pytest.approx(1 / 3)


def test_length_stats_refuse_empty_lengths():
    with pytest.raises(ValueError, match="no lengths"):
        length_stats([], 512)


def test_histogram_counts_every_document_once_and_clips_the_tail_into_the_last_bin():
    x = np.array([10] * 50 + [20] * 49 + [5000])
    h = length_histogram(x, 32, bins=10)
    assert h.counts.sum() == len(x)
    assert h.clipped == 1 and h.counts[-1] >= 1
    assert h.edges[-1] < 5000 and h.context == 32


def test_histogram_of_200k_tickets_is_a_few_dozen_numbers():
    h = length_histogram(synthetic_lengths("support-tickets"), 512, bins=60)
    assert len(h.counts) == 60 and h.counts.sum() == 200_000


def test_strategy_table_measures_ratios_against_padding_to_the_context():
    rows = {r.strategy: r for r in pc.strategy_table(WORKED, 512)}
    assert list(rows) == list(STRATEGIES)
    assert rows["pad"].attention_ratio == 1.0 and rows["pad"].slot_ratio == 1.0
    assert rows["concat-cut"].slot_ratio == 4.0
    assert rows["pad"].attention_cost == 8 * 512**2
    assert not hasattr(rows["pad"], "attention_speedup")    # a FLOP ratio is not a speed-up


def test_the_worked_example_pays_three_different_bills():
    rows = {r.strategy: r for r in pc.strategy_table(WORKED, 512)}
    bfd = rows["bfd"]
    assert bfd.slot_ratio == 4.0                                   # the linear layers
    assert bfd.attention_cost == 166_350 and bfd.attention_ratio == pytest.approx(12.607, abs=1e-3)
    assert bfd.dense_mask_cost == 2 * 512**2 and bfd.dense_mask_ratio == 4.0   # a dense mask skips nothing
    # concat-cut splits document 3 (300 + 40 ... cut at 512): the cut shrinks its squares
    assert rows["concat-cut"].docs_split == 1 and rows["concat-cut"].attention_cost == 166_198
    assert rows["bucket"].dense_mask_cost == rows["bucket"].attention_cost   # padding has no mask to skip


def test_on_the_tickets_a_dense_mask_is_worth_no_more_than_the_slots_and_concat_cut_buys_its_ratio_by_splitting():
    rows = {r.strategy: r for r in pc.strategy_table(synthetic_lengths("support-tickets"), 512)}
    bfd, cut = rows["bfd"], rows["concat-cut"]
    assert round(bfd.attention_ratio, 1) == 13.1 and round(bfd.dense_mask_ratio, 2) == round(bfd.slot_ratio, 2) == 4.52
    assert round(cut.attention_ratio, 1) == 15.6 and cut.docs_split == 43_805 and bfd.docs_split == 1_269
    assert rows["bucket"].attention_ratio > bfd.dense_mask_ratio   # bucketing beats packing with a dense mask


def test_end_to_end_flops_follow_the_slot_ratio_on_a_7b_shape_and_show_the_formula():
    rows = pc.strategy_table(WORKED, 512)
    big = {e.strategy: e for e in end_to_end(rows, "7B")}
    small = {e.strategy: e for e in end_to_end(rows, "SmolLM2-135M")}
    assert big["pad"].attention_share == pytest.approx(0.0195, abs=1e-4)   # 2 % of a 7B's FLOPs at 512
    assert big["bfd"].ratio == pytest.approx(4.054, abs=1e-3)              # near the slot ratio 4.0, far from 12.6
    assert big["bfd"].ratio_dense_mask == pytest.approx(4.0)
    assert small["pad"].attention_share == pytest.approx(0.1163, abs=1e-4)
    assert small["bfd"].ratio == pytest.approx(4.345, abs=1e-3)
    shape = MODEL_SHAPES["SmolLM2-135M"]
    assert (shape.n_layer, shape.d_model, shape.params) == (30, 576, 134_515_008)   # its config, counted
    assert training_flops(512, 512**2, shape) == 6 * 134_515_008 * 512 + 12 * 30 * 576 * 512**2
    assert "6·N·slots + 12·n_layer·d_model·A" in COST_FORMULA
    with pytest.raises(ValueError, match="unknown model shape 'GPT-9'"):
        end_to_end(rows, "GPT-9")


def test_attention_cells_name_the_kernel_and_refuse_an_unknown_one():
    m = make_plan(WORKED, 512, "bfd").metrics()
    assert attention_cells(m) == sum(n * n for n in WORKED)
    assert attention_cells(m, "dense-mask") == 2 * 512**2
    with pytest.raises(ValueError, match="kernel must be"):
        attention_cells(m, "magic")


def test_benchmark_bounds_measure_dense_against_its_rows_and_segments_against_the_squares():
    from types import SimpleNamespace
    result = SimpleNamespace(flop_ratio=13.1, backends={"segments": None, "dense": None},
                             plans=SimpleNamespace(pad=SimpleNamespace(rows=128), bfd=SimpleNamespace(rows=27)))
    bounds = benchmark_bounds(result)
    assert bounds == {"segments": 13.1, "dense": pytest.approx(128 / 27)}


def test_each_row_has_its_own_cu_seqlens_restarting_at_zero():
    plan = make_plan(WORKED, 512, "concat-cut")
    assert row_cu_seqlens(plan) == [[0, 120, 210, 510, 512], [0, 38, 93, 123, 333, 398]]


def test_attention_cost_is_a_square_per_document_when_packed_and_per_row_when_padded():
    for s in STRATEGIES:
        m = make_plan(WORKED, 512, s).metrics()
        expected = m.attention_cost_packed if s in PACKING_STRATEGIES else m.attention_cost_padded
        assert attention_cost(m) == expected
    bfd = make_plan(WORKED, 512, "bfd").metrics()
    assert attention_cost(bfd) == sum(n * n for n in WORKED)


def test_strategy_table_computes_the_pad_baseline_even_when_not_asked_for():
    rows = pc.strategy_table(WORKED, 512, strategies=("bfd",))
    assert [r.strategy for r in rows] == ["bfd"]
    assert rows[0].slot_ratio == 4.0


def _advice(lengths, context, kind):
    return pc.recommend(length_stats(lengths, context), pc.strategy_table(lengths, context), kind)


def test_recommend_bucketing_first_and_packing_for_the_long_run_when_packing_saves_much_more():
    advice = _advice(synthetic_lengths("support-tickets", n=20_000), 512, "pretraining")
    assert advice.startswith("First run: bucket.") and "Long run: pack with" in advice and "cu_seqlens" in advice
    assert "Keep the buckets wide" in advice and "padding-free path finds documents" in advice


def test_recommend_says_bucketing_shines_on_the_bimodal_set_and_not_on_one_bell():
    def advice(name):
        x = synthetic_lengths(name)
        return pc.recommend(length_stats(x, 512), pc.strategy_table(x, 512), "pretraining", lengths=x)
    assert "two modes: bucketing does well" in advice("bimodal")
    assert "two modes" not in advice("support-tickets")
    assert bimodality(synthetic_lengths("bimodal")) > tables_mod.BIMODAL > bimodality(
        synthetic_lengths("support-tickets"))


def test_recommend_bucketing_when_it_is_nearly_as_good():
    # lengths 200..299: buckets are narrow, and two documents rarely fill a row of 512
    lengths = np.random.default_rng(0).integers(200, 300, 2000)
    rows = {r.strategy: r for r in pc.strategy_table(lengths, 512)}
    assert 0 < rows["bfd"].utilisation - rows["bucket"].utilisation < tables_mod.BUCKET_IS_ENOUGH
    assert _advice(lengths, 512, "pretraining").startswith("Bucket: it already fills")


def test_recommend_bucketing_when_it_beats_every_packing():
    # every document a little over half the context: two never share a row, so packing
    # without splits leaves rows 58 % full, while buckets pad each batch to about 300
    lengths = np.random.default_rng(0).integers(290, 301, 2000)
    advice = _advice(lengths, 512, "pretraining")
    assert advice.startswith("Bucket: it fills") and "more than the best packing" in advice


def test_recommend_dropping_overlong_instruction_data_and_splitting_pretraining_text():
    lengths = np.r_[np.full(100, 100), [900, 1200]]
    assert "Drop the 2 documents" in _advice(lengths, 512, "instruction")
    assert "Split the 2 documents" in _advice(lengths, 512, "pretraining")
    assert "No document is longer" in _advice(np.full(10, 100), 512, "instruction")


def test_recommend_raising_the_context_when_most_documents_do_not_fit():
    advice = _advice(np.full(10, 100), 64, "instruction")
    assert "100% of the documents are longer than the context (64): raise the context" in advice
    assert "Drop" not in advice


def test_recommend_refuses_an_unknown_purpose():
    with pytest.raises(InputError, match="purpose must be 'instruction' or 'pretraining', got 'chat'"):
        _advice(np.full(10, 100), 512, "chat")


def test_sample_lengths_draws_from_the_dataset_reproducibly():
    x = np.array([3, 5, 7])
    a = sample_lengths(x, 20, seed=1)
    assert len(a) == 20 and set(a.tolist()) <= {3, 5, 7}
    assert np.array_equal(a, sample_lengths(x, 20, seed=1))
    with pytest.raises(ValueError, match="n must be"):
        sample_lengths(x, 0)


def test_one_outlier_stretches_every_row_of_a_pad_longest_batch():
    short, spiked = outlier_lengths(batch_size=32, outlier=500)
    assert (short != spiked).sum() == 1 and spiked.max() == 500 and short.max() < 250
    calm = make_plan(short, 512, "pad-longest").metrics()
    stretched = make_plan(spiked, 512, "pad-longest").metrics()
    assert stretched.slots == 32 * 500
    assert stretched.utilisation < calm.utilisation / 3


def test_row_documents_fill_the_row_and_mark_the_prompt_bytes():
    d = _content.row_documents(64, instruction=True)
    assert sum(map(len, d.documents)) >= 64
    for text, ids, p in zip(d.texts, d.documents, d.prompt_lengths):
        assert bytes(ids).decode() == text
        assert text[:p].startswith("Q:") and text[p:].startswith("A:")
    assert set(_content.row_documents(64).prompt_lengths) == {0}


def test_naive_targets_cross_exactly_at_the_end_of_each_document_but_the_last():
    b = PackedBatch.from_documents([[11, 12, 13], [21, 22]], 6, "next-fit")
    n = naive_targets(b, 0)
    assert n.naive.tolist() == [12, 13, 21, 22, IGNORE_INDEX, IGNORE_INDEX]
    assert n.crosses.tolist() == [False, False, True, False, False, False]
    with pytest.raises(ValueError, match="row 3"):
        naive_targets(b, 3)


def _instruction_batch():
    d = _content.row_documents(64, instruction=True)
    return PackedBatch.from_documents(d.documents, 64, "next-fit", prompt_lengths=d.prompt_lengths)


def test_loss_positions_equal_answer_targets_in_a_sound_batch_only():
    b = _instruction_batch()
    loss, answers = loss_vs_answers(b)
    assert loss == answers > 0
    loss, answers = loss_vs_answers(broken_batch(b, "prompts-in-the-loss"))
    assert loss > answers


EXPECTED = {
    "none": set(),
    "row-shifted-targets": {"label_crosses_boundary"},
    "continuous-positions": {"positions_do_not_restart"},
    "pads-in-the-loss": {"pad_in_loss"},
    "prompts-in-the-loss": {"loss_count_mismatch"},
    "prompts-cut-from-attention": set(),      # no tensor rule can see it: see the alone-vs-packed test
    "row-cu-seqlens": {"segments_disagree_with_cu_seqlens"},
    "max-seqlen-too-small": set(),              # sdpa never reads max_seqlen: flash-attn does, below
}


@pytest.mark.parametrize("how", list(BREAKS))
def test_check_batch_names_every_planted_bug_that_shows_in_the_tensors(how):
    found = set(check_batch(broken_batch(_instruction_batch(), how)).names)
    assert EXPECTED[how] <= found
    assert (found == set()) == (how in ("none", "prompts-cut-from-attention", "max-seqlen-too-small"))


def test_a_max_seqlen_shorter_than_a_document_is_an_error_for_flash_attention_and_nothing_for_sdpa():
    bad = broken_batch(_instruction_batch(), "max-seqlen-too-small")
    assert "max_length_too_small" in check_batch(bad, "flash_attention_2").names
    assert "max_length_too_small" not in check_batch(_instruction_batch(), "flash_attention_2").names
    assert "max_length_too_small" not in check_batch(bad).names


def test_prompts_cut_from_attention_keep_the_loss_tensors_and_only_alone_vs_packed_catches_it():
    good = _instruction_batch()
    bad = broken_batch(good, "prompts-cut-from-attention")
    for name in ("input_ids", "piece_ids", "position_ids", "targets", "loss_mask", "answer_mask", "cu_seqlens"):
        assert torch.equal(getattr(bad, name), getattr(good, name)), name
    assert check_batch(bad).findings == () and loss_vs_answers(bad) == loss_vs_answers(good)
    # the mask is what changed: an answer token no longer reads its prompt
    seg, answer = good.piece_ids[0], good.answer_mask[0]
    first_answer = int(torch.nonzero(answer & (seg == 0))[0])
    assert packed_attention(good).allowed(0)[first_answer, 0] and not packed_attention(bad).allowed(0)[first_answer, 0]
    assert alone_vs_packed_attention(good).equivalent
    check = alone_vs_packed_attention(bad)
    assert not check.equivalent and min(check.max_abs_diff[i] for i in check.differing) > 0.5


def test_alone_vs_packed_attention_sees_row_cu_seqlens_and_is_blind_to_targets_and_positions():
    good = _instruction_batch()
    assert not alone_vs_packed_attention(broken_batch(good, "row-cu-seqlens")).equivalent
    for how in ("row-shifted-targets", "continuous-positions", "pads-in-the-loss", "prompts-in-the-loss"):
        assert alone_vs_packed_attention(broken_batch(good, how)).equivalent, how


def test_continuous_positions_are_a_warning_for_varlen_and_a_leak_for_sdpa():
    bad = broken_batch(_instruction_batch(), "continuous-positions")
    varlen = check_batch(bad, "varlen")
    assert varlen.sound and {f.name for f in varlen.warnings} == {"positions_do_not_restart", "boundaries_disagree"}
    rule = RULES["positions_do_not_restart"]
    assert rule.severity == "warning" and "absolute" in rule.fix and "RoBERTa" in rule.fix
    sdpa = check_batch(bad, "sdpa")            # sdpa finds documents from the positions: none restart
    assert "documents_share_attention" in [f.name for f in sdpa.errors]
    hard = check_batch(broken_batch(_instruction_batch(), "pads-in-the-loss"))
    assert {f.severity for f in hard.findings} == {"error"}


def test_pads_in_the_loss_dilute_the_mean_over_real_targets():
    good = _instruction_batch()
    bad = broken_batch(good, "pads-in-the-loss")
    loss, answers = loss_vs_answers(bad)
    assert loss > answers   # the mean now divides by pads too: each real token's gradient share shrinks
    assert answers / loss < 0.5 and "dilute the loss" in BREAKS["pads-in-the-loss"]


def test_an_unknown_bug_is_refused():
    with pytest.raises(ValueError, match="unknown break"):
        broken_batch(_instruction_batch(), "gremlins")


def test_fit_decreasing_rows_come_out_sorted_until_shuffled():
    from packing_core import make_plan
    from packing_core.data import synthetic_lengths
    from packing_lab.advice import row_order

    lengths = sample_lengths(synthetic_lengths("support-tickets"), 2000, seed=1)
    ordered = row_order(make_plan(lengths, 512, "bfd"))
    shuffled = row_order(make_plan(lengths, 512, "bfd", shuffle=True, seed=0))
    assert ordered.neighbour_correlation > 0.9
    assert abs(shuffled.neighbour_correlation) < 0.2
    assert ordered.first_batch_mean > 2 * ordered.last_batch_mean
    assert sorted(ordered.longest.tolist()) == sorted(shuffled.longest.tolist())
