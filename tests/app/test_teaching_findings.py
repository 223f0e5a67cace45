"""What the lab says, checked finding by finding against the fourth independent read of every page.

Each finding's test quotes the old words or numbers (they must be gone) and checks the new ones against
the library's numbers or the installed library's code, so a page and its test cannot drift apart together.
"""
import contextlib
import functools
import io

import numpy as np

import packing_core as pc
from app_pages import _content
from packing_core.analysis import costs
from packing_core.analysis.balance_report import step_balance, step_verdict
from packing_core.analysis.trainer_advice import trainer_settings
from packing_core.cli import main
from packing_lab.advice import (
    cheatsheet_markdown,
    micro_batch_masks,
    padding_free_example,
    parse_layout,
    step_loss_weights,
)
from tests._support import assert_clean, metric, open_page

WORKED = _content.WORKED_LENGTHS


def text(at) -> str:
    said = [m.value for m in at.markdown] + [c.value for c in at.caption]
    said += [x.value for x in [*at.success, *at.info, *at.warning]]
    return "\n".join(said).replace("\\", "")


def cli(*argv) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):   # --help prints and exits
        main(list(argv), out=out, err=out)
    return out.getvalue()


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
    assert pf.sentence in said and f"{pf.flat_cells:,} cells, 8x" in pf.sentence
    assert "attn_implementation='flash_attention_2'" in said


def test_M1_the_trl_settings_to_paste_load_flash_attention_for_padding_free():
    from trl import SFTConfig

    trl = trainer_settings(2048, "instruction")[0]
    assert "on anyway with bfd: one flat row, positions restart" not in trl.code
    cpu = functools.partial(SFTConfig, use_cpu=True)                          # bf16 needs a GPU; this machine has none
    args = eval(trl.code.split("args = ", 1)[1], {"SFTConfig": cpu})          # the very text a user pastes
    assert args.padding_free and args.model_init_kwargs == {"attn_implementation": "flash_attention_2"}
    sheet = cheatsheet_markdown()
    assert "padding-free on sdpa or eager pays a (batch tokens)² mask" in sheet


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
    assert "if the examples are counted over the whole step" in said
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
