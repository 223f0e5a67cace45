"""What the lab says, checked finding by finding against the fourth independent read of every page.

Each finding's test quotes the old words or numbers (they must be gone) and checks the new ones against
the library's numbers or the installed library's code, so a page and its test cannot drift apart together.
"""
import functools

import numpy as np
import pytest

import packing_core as pc
from app_pages import _content
from packing_core.analysis import costs
from packing_core.analysis.balance_report import step_balance, step_verdict
from packing_core.analysis.tables import strategy_table
from packing_core.analysis.trainer_advice import trainer_settings
from packing_core.attention.varlen_grid import varlen_grid
from packing_core.check.rules import RULES
from packing_core.cli import main
from packing_core.packing.guarantees import GUARANTEES
from packing_lab.advice import (
    cheatsheet_markdown,
    guarantee_sentence,
    longest_share,
    micro_batch_masks,
    mixture_orders,
    mixture_sentence,
    padding_free_example,
    parse_layout,
    step_loss_weights,
)
from packing_lab.zoo import ZOO
from tests._support import assert_clean, cli_said, findings_shown, metric, no_exception, open_page
from tests._support import page_text as text

WORKED = _content.WORKED_LENGTHS


def cli(*argv) -> str:
    return cli_said(main, *argv)


@functools.cache
def explorer():
    at = open_page("dataset_explorer")
    assert_clean(at)
    return at


# ---------------------------------------------------------------- W1: a step, not an epoch
def test_W1_the_balance_step_deals_one_optimizer_step_and_says_an_epoch_total_is_even():
    at = explorer()
    said = text(at)
    assert "the verdict counts the whole step" not in said
    assert "changes the slowest rank's attention cost by less than 1 %" not in said
    assert "44,589 rows over 8 ranks x 4 micro-batches" not in said
    tickets = pc.load_lengths("support-tickets")
    sb = step_balance(pc.make_plan(tickets, 512, "bfd"), 8, 4, 1)
    s = sb.by_attention
    assert metric(at, "A step's max/mean, as dealt") == f"{s.before_imbalance:.2f}"
    assert metric(at, "Balanced by attention") == f"{s.after_imbalance:.2f}"
    assert metric(at, "The epoch's total, as dealt") == f"{s.epoch_imbalance:.2f}"
    verdict = step_verdict(sb)
    assert verdict[0].upper() + verdict[1:] in said
    assert f"a cut of {s.cut:.1%}".replace("%", " %") in verdict and s.cut > 0.15   # the review measured 24.6 %
    assert "Summed over the epoch the ranks come out even" in verdict and s.epoch_imbalance < 1.02


def test_U1_the_step_cost_comparison_reads_one_way():
    said = text(explorer())
    assert "as much as balancing by the step's cost" not in said
    sb = step_balance(pc.make_plan([512, 128, 128, 128, 128, 512, 128, 128, 128, 128] * 4, 512, "next-fit"), 2, 2)
    by_attention, by_step = sb.step_cuts
    assert (by_step <= by_attention + 5e-5) == ("does no better" in step_verdict(sb))


# ---------------------------------------------------------------- M1: padding-free on sdpa
@functools.cache
def check_your_setup() -> str:
    return text(open_page("check_your_setup"))


def test_M1_padding_free_says_the_row_is_the_whole_batch_with_the_cost_models_numbers():
    said = check_your_setup()
    assert "correct, but they pay for the row's full square or block grid" not in said
    assert "in transformers 5.x sdpa/eager isolate the flattened documents too, because TRL passes" not in said
    pf = padding_free_example()
    rows = pc.make_plan([128] * 32, 512, "bfd")
    assert (pf.flat_cells, pf.dense_cells, pf.document_cells) == (
        costs.padding_free_cells(rows, 8), costs.attention_cells(rows, "dense"), costs.attention_cells(rows, "varlen"))
    assert pf.sentence in said and f"{pf.flat_cells:,} cells: 8x" in pf.sentence
    assert "attn_implementation='flash_attention_2'" in said


def test_M1_the_trl_settings_to_paste_load_flash_attention_for_padding_free():
    from trl import SFTConfig

    trl = trainer_settings(2048, "instruction")[0]
    assert "on anyway with bfd: one flat row, positions restart" not in trl.code
    cpu = functools.partial(SFTConfig, use_cpu=True)                          # bf16 needs a GPU; this machine has none
    args = eval(trl.code.split("args = ", 1)[1], {"SFTConfig": cpu})          # the very text a user pastes
    assert args.padding_free and args.model_init_kwargs == {"attn_implementation": "flash_attention_2"}
    sheet = cheatsheet_markdown()
    assert "Settings (TRL, rows of 2,048; padding-free needs FlashAttention 2/3)" in sheet


# ---------------------------------------------------------------- I1: flex is counted by its causal tiles
def test_I1_flex_is_counted_by_the_tiles_it_computes_not_in_full_squares():
    assert "Every attention ratio the lab shows is counted in full squares" not in _content.GLOSSARY["full squares"]
    assert "FlexAttention by the tiles it really computes (on or below the diagonal)" in _content.GLOSSARY["full squares"]
    assert "FlexAttention is counted by the tiles it really computes" in costs.CONVENTION_NOTE
    bench = text(open_page("benchmark"))
    assert "The bounds below are counted that way" not in bench and "flex's by its causal tiles" in bench
    cut = pc.make_plan(WORKED, 512, "concat-cut")
    full = (-(-910 // 128)) ** 2 * 128 ** 2                        # every tile of the 8 x 8 grid, whole
    assert costs.attention_cells(cut, "flex") == 262_144 < full     # 16 causal tiles, not full squares


# ---------------------------------------------------------------- I4: flex with a padding mask
def test_I4_flex_with_a_padding_mask_pays_its_tiles_not_the_sum_of_squares():
    said = text(open_page("padded_vs_packed"))
    assert "or Flex with a padding mask), padding also pays only Σ len²" not in said
    pad = pc.make_plan(WORKED, 512, "pad")
    k = -(-np.array(WORKED) // 128)
    assert costs.attention_cells(pad, "flex") == int((k * (k + 1) // 2).sum()) * 128 ** 2 > sum(n * n for n in WORKED)
    assert f"Flex with a padding mask pays the 128-token tiles each sample touches, " \
           f"{costs.attention_cells(pad, 'flex'):,} cells" in said


# ---------------------------------------------------------------- I3: a mean per example, over the whole step
def test_I3_a_mean_per_example_is_packing_free_only_over_the_whole_step():
    said = check_your_setup()
    assert "that changes the objective, but not with the packing." not in said
    assert "and not with the packing only if taken over the whole step" in said
    # the Bug zoo's calculator: averaged per micro-batch, one document of four weighs 0.5, the others 1/6 each
    w = step_loss_weights(parse_layout("1 || 1 1 1"), 2, 1, "document-micro")
    assert sorted(np.round(w.weights, 3).tolist()) == [0.167, 0.167, 0.167, 0.5]


# ---------------------------------------------------------------- the mask's memory at long context
def test_a_materialised_masks_memory_is_shown_beside_varlen_and_flex_on_live_numbers():
    at = open_page("padded_vs_packed")
    said = text(at)
    mb = micro_batch_masks(pc.load_lengths("support-tickets"), 8192, 8)
    assert mb.sentence in said and "67,108,864 entries (64 MiB)" in mb.sentence      # 8,192² booleans
    table = next(d.value for d in at.dataframe if "what it builds" in d.value.columns)
    assert list(table["cells computed"]) == [k.cells for k in mb.kernels]
    assert table["MiB"].iloc[0] < 1e-3 < 1 < table["MiB"].iloc[2]                    # varlen's bytes, sdpa's MiB


# ---------------------------------------------------------------- M2: what this machine's run shows
def test_M2_the_tolerance_sentence_says_what_this_run_measured():
    at = open_page("leakage_lab")
    at.checkbox(key="w_leakage_lab.skip").check().run()
    rep = pc.verify_model("tiny-rope", backend="dense")                      # the default scenario's run
    said = " ".join(c.value for c in at.caption).replace("\\", "")
    assert rep.tolerance_reason in said
    if rep.max_abs_diff == 0.0:        # the review's machine: every backend exact, and the page says so
        assert "agree bitwise on this machine" in rep.tolerance_reason
    else:
        assert f"differ by up to {rep.max_abs_diff:.1e}, in the last bits" in rep.tolerance_reason
    assert "Bitwise equality is not expected" not in said
    for backend in ("dense", "segments"):
        assert "--backend dense shows the last-bit differences" not in cli("verify", "--model", "tiny-rope",
                                                                          "--backend", backend)


def test_M2_zero_differences_are_said_to_be_bitwise_whatever_the_backend():
    """On a machine where the masked keys contribute exact zeros (the review's), the sentence must not promise noise."""
    from packing_core.verify.equivalence import measured_note

    assert "agree bitwise" in measured_note([0.0, 0.0, 0.0], 4e-4)
    assert "differ by up to 1.2e-06" in measured_note([1.2e-6, 0.0], 4e-4)
    assert measured_note([2.0, 0.0], 4e-4) == ""                              # a leak: the verdict says it


# ---------------------------------------------------------------- M3: what the two checks under the verdict read
@pytest.mark.parametrize("break_, instruction", [("continuous-positions", False), ("prompts-cut-from-attention", True)])
def test_M3_the_checks_under_a_planted_fault_say_what_they_read(break_, instruction):
    at = open_page("masks_and_labels")
    at.toggle(key="w_masks_and_labels.instruction").set_value(instruction).run()
    at.selectbox(key="w_masks_and_labels.break_").set_value(break_).run()
    no_exception(at)                       # a planted fault's error finding is a red card, on purpose
    assert all(kind == "error" for name, kind in findings_shown(at).items() if name == "documents_share_attention")
    said = text(at)
    assert "as they do whenever the mask is right" not in said
    assert "every document's output matches its alone run (max" not in said or \
        "reading the batch as a varlen kernel fed its cu_seqlens: every document's output matches" in said
    assert "this check does not read the attention mask" in said
    if break_ == "continuous-positions":       # sdpa reads position_ids: the page says the layer's view is not sdpa's
        assert "sdpa reads this batch differently (step 1 shows both)" in said


# ---------------------------------------------------------------- I2: the signal a mixer reads is its kernel's
def test_I2_the_boundary_signal_follows_the_kernel_family_not_the_layer_kind():
    assert "(`seq_idx` for the convolution, `cu_seqlens` for the recurrence)" not in _content.LEAKAGE_MIXERS
    assert "`seq_idx` for causal-conv1d and Mamba-2's scan" in _content.LEAKAGE_MIXERS
    assert "`cu_seqlens` for flash-linear-attention's convolutions and recurrences" in _content.LEAKAGE_MIXERS
    conv = next(b for b in ZOO if b.name == "short-conv-bleeds")
    assert "only when its kernel (causal-conv1d) reads seq_idx" not in conv.what
    assert "cu_seqlens for flash-linear-attention's ShortConvolution" in conv.what
    assert any("cu_seqlens reached ShortConvolution" in r for b in ZOO for r in b.reported)   # the zoo's own citation
    assert "cu_seq_lens for flash-linear-attention's ShortConvolution" in RULES["convolution_reads_previous_document"].fix


# ---------------------------------------------------------------- I5, I6: the explorer's longest documents and cap
def test_I5_max_seqlen_sizes_the_grid_and_the_work_is_the_sum_of_squares():
    said = text(explorer())
    assert "launches its blocks for max_seqlen in every document of the batch" not in said
    share = longest_share(pc.make_plan(pc.load_lengths("support-tickets"), 512, "bfd"))
    assert share.sentence in said
    assert "blocks past a short document's end exit at once); the work is Σ len²" in share.sentence


def test_I6_torch_compile_recompiles_and_cuda_graphs_replay():
    said = text(explorer())
    assert "`torch.compile` and CUDA graphs replay kernels recorded for fixed shapes" not in said
    assert "CUDA graphs replay kernels recorded for fixed shapes and addresses" in said
    assert "`torch.compile` specialises on shapes and on `max_seqlen` (a Python int) and recompiles" in said


# ---------------------------------------------------------------- I7: the offsets of queries and of keys
def test_I7_a_varlen_call_takes_offsets_for_queries_and_for_keys():
    import inspect

    from torch.nn.attention.varlen import varlen_attn

    at = open_page("why_packing")
    at.checkbox(key="w_why_packing.skip").check().run()
    said = text(at)
    assert "takes one `cu_seqlens` for the whole batch" not in said
    params = inspect.signature(varlen_attn).parameters
    assert {"cu_seq_q", "cu_seq_k"} <= set(params)                    # torch's names, from the installed torch
    assert "(`cu_seq_q`, `cu_seq_k` in `torch.nn.attention.varlen.varlen_attn`; `cu_seqlens_q`" in said


# ---------------------------------------------------------------- U2, U3
def test_U2_bucketing_says_what_a_look_alike_batch_does_to_the_gradient():
    said = text(open_page("padded_vs_packed"))
    assert "the gradient inside a batch stays correlated" not in said
    assert "each batch still holds look-alike samples, so its gradient is a less representative estimate" in said


def test_U3_l1_is_a_bound_for_every_plan_reachable_only_by_cutting():
    out = cli("report", "--lengths", ",".join(["300"] * 10), "--context", "512")
    assert "(tokens / context: only by cutting documents)" not in out
    assert "L1 6 (tokens / context: a bound for every plan, reachable only by cutting documents)" in out
    assert "(tokens / context: only by cutting documents)" not in text(explorer())


# ---------------------------------------------------------------- max_seqlen correctness, where the finding is taught
def test_an_understated_max_seqlen_is_planted_checked_and_priced_in_flash_attns_blocks():
    at = open_page("masks_and_labels")
    at.selectbox(key="w_masks_and_labels.break_").set_value("max-seqlen-too-small").run()
    assert_clean(at)
    said = text(at)
    worked = pc.packing.cu_seqlens_from_lengths(WORKED)
    short = varlen_grid(worked, sorted(WORKED)[-2])
    assert short.skipped_tokens == 300 - 256 and short.sentence in said        # the 300-token sample's last 44
    assert "choose `flash_attention_2` or `varlen` above to see the check's `max_length_too_small`" in said
    at.selectbox(key="w_masks_and_labels.attn").set_value("flash_attention_2").run()
    assert any("(`max_length_too_small`, error)" in e.value for e in at.error)     # a red card, its fix first
    assert not any("max_length_too_small" in w.value for w in at.warning)


# ---------------------------------------------------------------- the greedy packers' guarantees
def test_the_recommendation_sets_the_guarantees_beside_the_measured_gaps():
    said = text(explorer())
    rows = strategy_table(pc.load_lengths("support-tickets"), 512)
    sentence = guarantee_sentence(rows)
    assert sentence in said
    by = {r.strategy: r.rows for r in rows}
    bound = by["optimal"]                                                   # the LP proves it here
    assert f"bfd {by['bfd']:,} (+{by['bfd'] - bound:,}, allows {GUARANTEES['bfd'].allows(bound):,})" in sentence
    assert f"its guarantee allows {2 * bound:,}" in sentence                 # next-fit: 2·OPT
    assert f"optimal can win back at most {by['bfd'] - bound:,} rows" in sentence


# ---------------------------------------------------------------- source mixture under offline bfd
def test_batch_order_shows_the_mixture_of_sources_before_and_after_shuffling_rows():
    at = open_page("padded_vs_packed")
    said = text(at)
    before, after = mixture_orders(512)
    assert mixture_sentence(before, after) in said
    assert before.mean_drift > 2 * after.mean_drift
    titles = [getattr(c.proto, "spec", "") for c in at.get("plotly_chart")]
    assert any("Each batch's tokens by source" in t for t in titles)
