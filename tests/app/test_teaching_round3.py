"""What the lab says, round 3: one test per finding of the teaching review, and one per teacher's item.

Each finding's test quotes the old words (they must be gone) and checks the new ones against the
library's numbers or the installed library's code, so a page and its test cannot drift apart together.
"""
import functools
import inspect
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

import packing_core as pc
from app_pages import _content
from packing_core import make_plan
from packing_core.analysis import (
    CONVENTION_NOTE,
    HALVES,
    MODEL_SHAPES,
    attention_cells,
    describe_padding,
    end_to_end,
    length_stats,
    step_balance,
    step_verdict,
)
from packing_core.analysis.costs import ATTENTION_KERNELS, CONVENTION, FULL, tiled_cells
from packing_core.analysis.tables import strategy_table
from packing_core.attention.masks import block_causal_mask
from packing_core.check.rules import RULES
from packing_core.data import load_lengths
from packing_core.packing.balance import row_loads
from packing_core.verify import eval_loss_packed_vs_alone
from packing_lab.advice import (
    PRESETS,
    compare_schedules,
    longest_share,
    pair_gradient,
    parse_layout,
    step_loss_weights,
    trained_positions,
)
from packing_lab.cli import main
from packing_lab.zoo import BREAKS, ZOO, broken_batch, zoo_entry
from tests._support import assert_clean, cli_said, findings_shown, no_exception, open_page
from tests._support import page_text as text

ROOT = Path(__file__).parents[2]
WORKED = _content.WORKED_LENGTHS


def cli(*argv) -> str:
    return cli_said(main, *argv)


@functools.cache
def bucket_demo():
    """The training demo Why packing runs (tens of seconds on two cores: once per test session)."""
    from packing_lab.demos import bucket_loss_demo
    return bucket_loss_demo()


def page_lengths(name: str) -> np.ndarray:
    """The lengths the pages read for a built-in dataset (the sidebar's tokenizer: auto)."""
    return pc.load_lengths(name, tokenizer=pc.load_tokenizer("auto"))


def why_packing():
    at = open_page("why_packing")
    at.checkbox(key="w_why_packing.skip").check().run()
    assert_clean(at)
    return at


# ---------------------------------------------------------------- one cost model (M1, M6, I6)
def test_M1_causal_halves_count_exactly_the_cells_a_causal_mask_allows():
    cut, pad = make_plan(WORKED, 512, "concat-cut"), make_plan(WORKED, 512, "pad")
    cu = torch.as_tensor(np.concatenate([[0], np.cumsum(cut.piece_len)]))
    assert attention_cells(cut, "varlen", convention=HALVES) == int(block_causal_mask(cu).sum())
    assert attention_cells(cut, "varlen", convention=FULL) == sum(int(n) ** 2 for n in cut.piece_len) == 166_198
    assert attention_cells(pad, "padded", convention=HALVES) == 8 * 512 * 513 // 2
    # a materialised mask and FlexAttention's tiles are the same under either count
    for kernel in ("dense", "flex"):
        assert attention_cells(cut, kernel, convention=HALVES) == attention_cells(cut, kernel, convention=FULL)


def test_M1_each_kernel_says_what_it_computes_and_whether_it_skips_the_upper_half():
    assert CONVENTION == FULL and set(ATTENTION_KERNELS) >= {"padded", "unpadded", "varlen", "segments", "flex", "dense"}
    for k in ATTENTION_KERNELS.values():
        assert k.title and k.computes and k.skips_upper_half and k.bound and k.layout in ("padded", "packed")
    assert ATTENTION_KERNELS["dense"].skips_upper_half.startswith("no")
    assert "512" in ATTENTION_KERNELS["padded"].skips_upper_half and "GPU" in ATTENTION_KERNELS["padded"].skips_upper_half
    assert "window_size=(-1, 0)" in ATTENTION_KERNELS["varlen"].skips_upper_half     # causal only when asked (W2)


def test_M1_the_three_bills_state_the_convention_and_give_the_gpu_reading():
    said = text(open_page("padded_vs_packed"))
    assert "A causal kernel pays about half of each square on both sides" not in said
    assert CONVENTION_NOTE in said and "A counts full squares, the lab's one convention" in said
    cut, pad = make_plan(WORKED, 512, "concat-cut"), make_plan(WORKED, 512, "pad")
    half = attention_cells(pad, convention=HALVES)
    gpu = {k: half / attention_cells(cut, k, convention=HALVES) for k in ("varlen", "flex", "dense")}
    assert (f"Here, on a GPU: varlen {gpu['varlen']:.1f}x, FlexAttention {gpu['flex']:.1f}x, "
            f"a dense mask {gpu['dense']:.1f}x.") in said
    assert f"{gpu['dense']:.1f}" == "2.0"                        # the review's "4.0x -> about 2x"
    bench = text(open_page("benchmark"))
    assert "so it pays a full square per row" not in bench
    assert CONVENTION_NOTE in bench and "in full squares" in bench and "x on a GPU)" in bench


def test_M6_the_cli_table_names_the_pages_columns_and_its_convention():
    table = cli("report", "--lengths", ",".join(map(str, WORKED)), "--context", "512")
    assert "attn block" not in table and "attn dense" not in table
    head = next(line for line in table.splitlines() if line.startswith("strategy "))
    assert re.split(r"\s{2,}", head)[-5:] == ["slot ratio", "attn cells", "attn ratio", "dense cells", "dense ratio"]
    assert "attn cells (attention cells)" in table and "Cells are counted in full squares" in table
    pad = next(line for line in table.splitlines() if line.startswith("pad "))
    assert "2.097e+06" in pad and "1.664e+05" not in pad        # padding pays its rows' squares, not Σ len²


def test_I6_flexattention_is_counted_in_tiles_not_somewhat_more():
    said = text(open_page("padded_vs_packed"))
    assert "FlexAttention, which skips only whole masked tiles, computes somewhat more" not in said
    cut = make_plan(WORKED, 512, "concat-cut")
    flex = tiled_cells(cut, 128)
    assert f"{flex:,} cells ({flex / 166_198:.1f}x Σ len² here)" in said


# ---------------------------------------------------------------- M2: the balance counts the step
def test_M2_the_balance_verdict_counts_the_linear_layers_for_the_chosen_shape():
    at = open_page("dataset_explorer", dataset="gsm8k", context=2048)
    said = text(at)
    assert "cuts the slowest rank's work by" not in said
    assert "attention costs the sum of len², so equal tokens are not equal time" not in said
    lengths = page_lengths("gsm8k")
    sb = step_balance(make_plan(lengths, 2048, "bfd"), 8, 4, shape="SmolLM2-135M")
    # each step's slowest rank, recomputed from the rows' tokens and cells with the per-token formula
    shape = MODEL_SHAPES["SmolLM2-135M"]
    tokens, cells = (np.asarray(x, dtype=float) for x in row_loads(make_plan(lengths, 2048, "bfd")))
    per_row = 6 * shape.params * tokens + 12 * shape.n_layer * shape.d_model * cells
    s = sb.by_attention
    for split, slowest in zip(("before", "after"), sb.slowest[:2]):
        by_rank = np.zeros((s.steps, s.ranks))
        np.add.at(by_rank, (np.arange(s.steps)[:, None], getattr(s, split)), per_row[s.rows])
        assert slowest == pytest.approx(float(by_rank.max(axis=1).sum()))
    verdict = step_verdict(sb)
    assert verdict[0].upper() + verdict[1:] in said
    assert "balance by the step's cost" in verdict and sb.attention_share < 0.5


def test_M2_attention_alone_is_recommended_only_where_it_is_most_of_the_step():
    plan = make_plan([8192, 2048, 2048, 2048, 2048, 8192, 1024] * 4, 8192, "bfd")
    heavy = step_balance(plan, 2, shape="SmolLM2-135M")
    light = step_balance(plan, 2, shape="7B")
    assert heavy.attention_share > 0.5 > light.attention_share
    assert "balancing by attention cost is the right call" in step_verdict(heavy)
    assert "balance by the step's cost" in step_verdict(light)
    js = json.loads(cli("balance", "--lengths", "512,128,128,128,128,512,128,128,128,128", "--context", "512",
                        "--ranks", "2", "--strategy", "next-fit", "--format", "json"))
    assert js["step"]["verdict"] == step_verdict(step_balance(make_plan(
        [512, 128, 128, 128, 128, 512, 128, 128, 128, 128], 512, "next-fit"), 2))


# ---------------------------------------------------------------- misleading
def test_M3_shuffling_orders_batches_it_does_not_mix_them():
    advice = open_page("dataset_explorer").info[0].value
    assert "shuffle the batches, so no batch is a run of look-alikes" not in advice
    assert "so each batch is a fair draw from its bucket, and shuffle the batch order" in advice


def test_M5_the_correct_scenario_shows_the_tolerance_at_work():
    at = open_page("leakage_lab")
    at.checkbox(key="w_leakage_lab.skip").check().run()
    assert _content.SCENARIOS["correct"][1]["attention"] == "dense"
    diffs = [float(x) for x in at.dataframe[0].value["max |Δlogit|"]]
    rep = pc.verify_model("tiny-rope", backend="dense")
    assert max(diffs) == pytest.approx(rep.max_abs_diff, rel=1e-2, abs=1e-12)
    assert max(diffs) < rep.tolerance / 10                             # last-bit noise at most, far under the tolerance
    seg = cli("verify", "--model", "tiny-rope")
    assert "exactly 0: segments runs each document in its own call" in seg
    assert "so with its mask on the match is exact here" in pc.verify_model("tiny-rope").tolerance_reason


def test_M7_the_right_panel_says_what_the_chosen_implementation_reads():
    at = open_page("masks_and_labels")
    assert "**Right**, the block-diagonal causal mask:" not in text(at)
    assert "what sdpa reads in this batch: here the block-diagonal causal mask" in text(at)
    at.selectbox(key="w_masks_and_labels.attn").set_value("causal_only").run()
    assert "what causal_only reads in this batch: here **not** the block-diagonal causal mask" in text(at)


def test_M9_reproduced_bugs_were_reported_and_planted_faults_are_classic_mistakes():
    say, _ = _content.TEACHER["Bug zoo"]
    assert "Every bug here was reported in a real project." not in say
    assert "the planted faults are classic mistakes shown in a small batch" in say
    page = text(open_page("bug_zoo"))
    assert "Packing bugs that reached users of real projects" not in page
    assert "reached users" not in cli("--help") and "classic faults planted" in cli("--help")
    assert "sibling bug" in " ".join(zoo_entry("continuous-positions").reported)
    assert all(not b.reported for b in ZOO if b.planted and b.name != "row-shifted-targets"
               and b.name != "continuous-positions")


def test_M10_caught_by_says_how_each_bug_is_caught():
    refused = zoo_entry("positions-not-padded")
    assert refused.caught_words == "the batch check refuses mismatched shapes (exit 2)"
    with pytest.raises(pc.InputError, match="position_ids has shape"):
        pc.check_hf_batch({"input_ids": [[1, 2, 3, 4]], "position_ids": [[0, 1, 2]]})   # the refusal, real
    assert zoo_entry("loss-per-row").caught_words.startswith("no batch check: read your loss code")
    page = text(open_page("bug_zoo"))
    assert "no static finding: only a model run shows it" not in page
    assert refused.caught_words in page and zoo_entry("loss-per-row").caught_words in page


@pytest.mark.parametrize("dataset,context", [("support-tickets", 512), ("support-tickets", 128), ("gsm8k", 128)])
def test_M11_the_lengths_sentence_is_computed_from_the_data(dataset, context):
    said = text(open_page("dataset_explorer", dataset=dataset, context=context))
    assert "most rows would be mostly pads" not in said
    lengths = page_lengths(dataset)
    rows = strategy_table(lengths, context)
    pad = next(r for r in rows if r.strategy == "pad")
    assert f"Padded to {context}, {pad.pad_tokens / pad.slots:.1%} of this dataset's slots are pads" in said
    assert describe_padding(length_stats(lengths, context), rows, lengths) in said


# ---------------------------------------------------------------- stale
def test_S1_trl_passes_cu_seq_lens_which_flash_attention_reads_directly():
    from trl.trainer import sft_trainer
    source = inspect.getsource(sft_trainer.DataCollatorForLanguageModeling)
    assert 'output["cu_seq_lens_q"] = output["cu_seq_lens_k"] = cu_seq_lens' in source
    said = " ".join(w for _, w in _content.FRAMEWORK)
    assert "passes no attention mask so that FlashAttention reads `position_ids`" not in said
    assert "`cu_seq_lens_q/k` and `max_length_q/k`, which FlashAttention reads directly" in said


def test_S2_the_measurements_give_the_fixed_runs_range():
    figures = (ROOT / "docs" / "measurements.md").read_text()
    assert "change; fixed 3.7e-5)" not in figures and "fixed below 1e-4, 3.7e-5 to 6.7e-5 across runs" in figures


# ---------------------------------------------------------------- imprecise
def test_I1_the_pad_share_is_the_linear_layers_work():
    said = text(why_packing())
    assert "of its work on nothing" not in said
    rows = strategy_table(load_lengths("support-tickets"), 512, strategies=("pad",))
    share = rows[0].pad_tokens / rows[0].slots
    assert f"{share:.0%} of the slots, and so about {share:.0%} of the linear layers' work" in said


def test_I2_sdpa_also_takes_nested_jagged_tensors():
    from torch.nested._internal import sdpa
    assert callable(sdpa.jagged_scaled_dot_product_attention)
    assert "never cu_seqlens" not in _content.GLOSSARY["sdpa"] and "nested jagged tensors" in _content.GLOSSARY["sdpa"]


def test_I3_scaled_rope_reads_the_largest_position_in_the_batch():
    from transformers import modeling_rope_utils
    source = inspect.getsource(modeling_rope_utils.dynamic_rope_update)
    assert "seq_len = torch.max(position_ids) + 1" in source and "max_seq_len_cached" in source
    for said in (_content.LEAKAGE_WHY, RULES["positions_do_not_restart"].fix):
        assert "largest position in the row" not in said and "largest position in the batch" in said


def test_I4_positions_start_at_the_models_first_position():
    advice = open_page("dataset_explorer", context=8192, dataset="long-tailed").info[0].value
    assert "positions at 0 (transformers' padding-free path" not in advice
    assert "the model's first position (0 for Llama-style models" in advice


def test_I5_bfd_order_is_a_length_curriculum():
    said = text(open_page("padded_vs_packed"))
    assert "every batch is a run of similar samples, and gradients inside it are correlated" not in said
    assert "the epoch becomes a length curriculum (long documents first, short last)" in said


def test_I7_flash_attention_reads_cu_seq_lens_only_with_max_length():
    from transformers import modeling_flash_attention_utils as fa
    assert ("all(x is not None for x in (cu_seq_lens_q, cu_seq_lens_k, max_length_q, max_length_k))"
            in inspect.getsource(fa))
    said = text(open_page("check_your_setup"))
    assert "optionally `cu_seq_lens_q/k`)," not in said and "optionally `cu_seq_lens_q/k` with `max_length_q/k`" in said


def test_I8_the_planted_cu_seqlens_is_one_span_over_the_whole_batch():
    good = pc.PackedBatch.from_documents([[1, 2, 3], [4, 5], [6, 7, 8, 9]], 5, "next-fit")
    planted = broken_batch(good, "row-cu-seqlens")
    assert planted.cu_seqlens.tolist() == [0, int(good.valid.sum())]         # one span, every row end to end
    assert "marks whole rows" not in BREAKS["row-cu-seqlens"]
    assert "marks the whole batch (its rows laid end to end) as one document" in BREAKS["row-cu-seqlens"]


def test_I9_pads_at_position_zero_cost_sequences_not_kernel_calls():
    what = zoo_entry("pads-at-position-zero").what
    assert "costly in kernel calls" not in what and "a few extra one-token sequences per row in the same varlen call" in what


def test_I10_pads_in_the_loss_train_the_model_to_emit_pads():
    good = pc.PackedBatch.from_documents([[65, 66, 67], [68, 69]], 8, "next-fit")
    planted = broken_batch(good, "pads-in-the-loss")
    trained_pads = planted.loss_mask & ~planted.valid
    assert trained_pads.any() and (planted.targets[trained_pads] == planted.pad_id).all()
    assert "so the real tokens' gradient shrinks" not in BREAKS["pads-in-the-loss"]
    assert "the model is trained to emit pads" in BREAKS["pads-in-the-loss"]


def test_I11_the_context_is_the_longest_row():
    at = open_page("why_packing")
    help_ = next(s.help for s in at.sidebar.select_slider if s.label.startswith("Context length"))
    assert help_ != "The row length every strategy packs or pads to."
    assert "each batch's longest sample (pad-longest, bucket)" in help_


def test_U1_plain_text_trains_every_next_token_not_answers():
    at = open_page("masks_and_labels")
    shown = at.success[0].value
    assert "loss positions = answer targets: " not in shown
    assert "loss positions = trainable targets (every next token of the same document):" in shown
    at.toggle(key="w_masks_and_labels.instruction").set_value(True).run()
    assert "answer targets (with instruction tuning only the answers are trained)" in at.success[0].value


def test_U2_an_all_ones_mask_is_not_called_padded():
    batch = {"input_ids": [[5, 6, 7, 8]], "position_ids": [[0, 1, 0, 1]], "attention_mask": [[1, 1, 1, 1]]}
    checked = pc.check_hf_batch(batch)
    assert checked.format == "padded" and checked.format_words == "batch with a 2D attention_mask (all ones: no pads)"
    at = open_page("check_your_setup")
    at.file_uploader(key="check_your_setup.batch_file").set_value(
        ("ones.json", json.dumps(batch).encode(), "application/json")).run()
    no_exception(at)
    said = "\n".join(m.value for m in at.markdown)
    assert "**padded** batch" not in said and "**batch with a 2D attention_mask (all ones: no pads)**" in said
    assert checked.format_table().startswith("batch with a 2D attention_mask (all ones: no pads): 1 row(s)")


# ---------------------------------------------------------------- what a teacher expects (§3)
def test_the_schedule_step_shows_the_tickets_schedule_from_the_plans():
    at = why_packing()
    lengths = load_lengths("support-tickets")
    c = compare_schedules(make_plan(lengths, 512, "pad").metrics(), make_plan(lengths, 512, "bfd").metrics(), 64, 500)
    shown = {m.label: (m.value, m.delta) for m in at.metric}
    assert shown["Steps per epoch"] == (f"{c.packed.steps_per_epoch:,}", f"padded: {c.padded.steps_per_epoch:,}")
    assert shown["Real tokens per step"][0] == f"{c.packed.tokens_per_step:,.0f}"
    assert shown["Warmup, share of the epoch"][0] == f"{c.packed.warmup_share:.0%}" == "72%"
    assert c.sentence in text(at) and "4.5x the tokens per step" in c.sentence


def test_the_calculator_shows_the_three_presets_numbers():
    at = open_page("bug_zoo")
    said = text(at)
    assert "its gradient is **+0.025**; unpacked it is **-0.0125**" in said
    assert at.dataframe[-1].value["weight"].tolist() == ["0.5000", "0.1667", "0.1667", "0.1667"]
    at.selectbox(key="w_bug_zoo.preset").set_value("divided-twice").run()
    assert "The weights sum to 0.25, not 1" in text(at)
    at.selectbox(key="w_bug_zoo.preset").set_value("loss-per-row").run()
    assert at.dataframe[-1].value["weight"].tolist() == ["0.5000", "0.2500", "0.2500"]
    at.selectbox(key="w_bug_zoo.rule").set_value("token-global").run()
    assert "weighs the same packed or unpacked" in text(at)


def test_the_longest_documents_step_measures_the_users_data():
    at = open_page("dataset_explorer")
    plan = make_plan(load_lengths("support-tickets"), 512, "bfd")
    share, trained = longest_share(plan), trained_positions(plan)
    said = text(at)
    assert share.sentence in said and trained.sentence in said
    assert share.top_cells[0] > 2 * share.top_tokens[0]        # the longest 1 % hold far more Σ len² than tokens


def test_bucketings_loss_swing_is_shown_on_the_training_demo():
    at = why_packing()
    at.button(key="why_packing.bucket_go").click().run(timeout=600)
    assert_clean(at)
    demo = bucket_demo()
    assert demo.sentence in text(at) and demo.bucketed.swing > 2 * demo.shuffled.swing
    assert any(c.proto.id.endswith("why_packing.bucket_loss") for c in at.get("plotly_chart"))


@pytest.mark.parametrize("how", ["none", "row-cu-seqlens"])
def test_evaluation_under_packing_is_shown_where_the_lab_checks(how):
    at = open_page("masks_and_labels")
    at.selectbox(key="w_masks_and_labels.break_").set_value(how).run()
    d = _content.row_documents(64)
    good = pc.PackedBatch.from_documents(d.documents, 64, "next-fit", prompt_lengths=d.prompt_lengths)
    e = eval_loss_packed_vs_alone(broken_batch(good, how), good)
    assert e.agree == (how == "none")
    assert e.sentence in text(at) and "**Evaluation under packing**, a cheap production check" in text(at)


def test_the_position_reset_histogram_on_screen_is_the_datas():
    """The explorer draws both choices' trained tokens per position, bin by bin, from the user's plan."""
    at = open_page("dataset_explorer")
    trained = trained_positions(make_plan(load_lengths("support-tickets"), 512, "bfd"))
    chart = next(c for c in at.get("plotly_chart") if c.proto.id.endswith("dataset_explorer.positions"))
    bars = {t["name"]: _plotly_values(t["y"]) for t in json.loads(chart.proto.spec)["data"]}
    assert bars["positions reset per document"] == trained.reset.tolist()
    assert bars["positions along the row (no reset)"] == trained.continuous.tolist()
    half = len(trained.reset) // 2        # the trade-off: resets starve the large positions, no reset does not
    assert trained.reset[half:].sum() < 0.1 * trained.reset.sum() < trained.continuous[half:].sum()


def _plotly_values(y) -> list:
    """A trace's values as plotly serialises them: a list, or a typed array (``{"dtype", "bdata"}``)."""
    if isinstance(y, dict):
        import base64
        return np.frombuffer(base64.b64decode(y["bdata"]), dtype=y["dtype"]).tolist()
    return list(y)


# ---------------------------------------------------------------- docs/measurements.md quotes the library's figures
def figures_paragraph(start: str) -> str:
    """The paragraph of docs/measurements.md that begins with ``start``, on one line (the file wraps its text)."""
    text = (ROOT / "docs" / "measurements.md").read_text()
    at = text.index(start)
    return " ".join(text[at:text.index("\n\n", at)].split())


def test_the_measured_three_costs_are_the_cost_models():
    said = figures_paragraph("**Three costs, not one**")
    lengths = load_lengths("support-tickets")
    rows = strategy_table(lengths, 512)
    r = {x.strategy: x for x in rows}
    bfd, cut = r["bfd"], r["concat-cut"]
    assert f"on the {len(lengths):,} support tickets at 512" in said
    assert (f"bfd needs {bfd.slot_ratio:.2f}x fewer slots" in said
            and f"{bfd.attention_ratio:.1f}x fewer attention cells with an unpadding varlen kernel" in said
            and f"and {bfd.dense_mask_ratio:.2f}x fewer with a materialised dense mask" in said)
    assert "These count full squares, the lab's one convention" in said and CONVENTION == FULL
    assert (f"Σ len² ratio stays {bfd.attention_ratio_halves:.1f}x and the dense-mask ratio halves to "
            f"{bfd.dense_mask_ratio_halves:.2f}x") in said
    e2e = {shape: {e.strategy: e for e in end_to_end(rows, shape)} for shape in ("SmolLM2-135M", "7B")}
    small, big = e2e["SmolLM2-135M"], e2e["7B"]
    assert (f"attention is {small['pad'].attention_share:.1%} of a padded step for SmolLM2-135M".replace("%", " %")
            in said and f"and {big['pad'].attention_share:.1%} for a 7B shape".replace("%", " %") in said)
    assert f"so bfd saves {small['bfd'].ratio:.2f}x and {big['bfd'].ratio:.2f}x end to end" in said
    assert f"concat-cut shows {cut.attention_ratio:.1f}x on attention only because it splits {cut.docs_split:,}" in said


def test_the_measured_teacher_items_are_the_librarys_numbers():
    said = figures_paragraph("**What packing changes beyond the batch**")
    lengths = load_lengths("support-tickets")
    pad, bfd = make_plan(lengths, 512, "pad"), make_plan(lengths, 512, "bfd")
    # the schedule
    c = compare_schedules(pad.metrics(), bfd.metrics(), 64, 500)
    p, k = c.padded, c.packed
    assert (f"at 64 rows per optimizer step the tickets take {p.steps_per_epoch:,} steps per epoch padded and "
            f"{k.steps_per_epoch:,} packed by bfd, {p.tokens_per_step:,.0f} against {k.tokens_per_step:,.0f} real "
            f"tokens per step ({k.tokens_per_step / p.tokens_per_step:.1f}x); a 500-step warmup covers "
            f"{p.warmup_share:.0%} of the padded epoch and {k.warmup_share:.0%} of the packed one").replace(
                "%", " %") in said
    assert f"Hold the tokens per step ({c.hold_rows_per_step} packed rows)" in said
    # the loss weights' presets
    w = {name: step_loss_weights(parse_layout(q.layout), q.accumulation, q.ranks, q.rule, q.divided_twice)
         for name, q in PRESETS.items()}
    assert f"a 4-token document alone in its row {w['loss-per-row'].weights[0]:.3f} of the step" in said
    assert f"divided again by 4 accumulation steps sums to {w['divided-twice'].total:.2f}" in said
    assert w["split-pairs"].weights.tolist() == pytest.approx([1 / 2, 1 / 6, 1 / 6, 1 / 6])
    assert "four preference pairs split [1, 3] over two steps weigh 1/2, 1/6, 1/6, 1/6" in said
    assert (f"flips from {pair_gradient(w['split-pairs'].unpacked):.4f} to "
            f"{pair_gradient(w['split-pairs'].weights):+.3f}") in said
    # the longest documents and the positions they train
    share, trained = longest_share(bfd), trained_positions(bfd)
    assert (f"the longest 1% of the pieces hold {share.top_tokens[0]:.0%} of the tokens and "
            f"{share.top_cells[0]:.0%} of Σ len²").replace("%", " %") in said
    m = share.batch_max_seqlen
    assert f"runs from {int(m.min()):,} to {int(m.max()):,} tokens" in said
    half = len(trained.edges) // 2
    lo, total = int(trained.edges[half]), trained.reset.sum()
    assert (f"positions {lo}-{trained.context - 1} get {trained.reset[half:].sum() / total:.1%} of the trained "
            f"tokens").replace("%", " %") in said
    assert f"gives them {trained.continuous[half:].sum() / total:.0%}".replace("%", " %") in said
    # bucketing's symptom
    demo = bucket_demo()
    b, s = demo.bucketed, demo.shuffled
    assert (f"moves {b.swing:.2f} nats from step to step against {s.swing:.2f} in random batches "
            f"({b.swing / s.swing:.1f}x), correlated {demo.length_correlation:.2f}") in said
    # evaluation under packing, on the Masks and labels batch
    d = _content.row_documents(64)
    good = pc.PackedBatch.from_documents(d.documents, 64, "next-fit", prompt_lengths=d.prompt_lengths)
    e = eval_loss_packed_vs_alone(broken_batch(good, "row-cu-seqlens"), good)
    assert eval_loss_packed_vs_alone(good).agree and not e.agree
    assert f"moves by {e.max_abs_diff:.2f} nats when `cu_seqlens` covers the whole batch" in said


# ---------------------------------------------------------------- hold the line where the review read more states
def test_no_review_quote_is_back_on_watch_it_pack_or_the_explorer_for_any_dataset_and_kind():
    """The review read the explorer on four datasets x three contexts x both kinds; test_hold_the_line reads the
    default and gsm8k at 2048. Here: every built-in dataset at 128 and 2048, pretraining and instruction, and the
    one page it leaves out (Watch it pack)."""
    from packing_core.data import list_sources
    from tests.app.test_hold_the_line import CAUSALITY_QUOTES, QUOTES, page_strings
    quotes = {**QUOTES, **CAUSALITY_QUOTES}
    said = page_strings(open_page("watch_it_pack"))
    for source in (s.name for s in list_sources() if s.available):
        for context in (128, 2048):
            at = open_page("dataset_explorer", dataset=source, context=context)
            for purpose in at.radio(key=f"dataset_explorer.kind_{source}").options:
                at.radio(key=f"dataset_explorer.kind_{source}").set_value(purpose).run()
                assert_clean(at)
                assert at.radio(key=f"dataset_explorer.kind_{source}").value == purpose
                said += page_strings(at)
    text = "\n".join(said)
    back = [f"{finding}: {q!r}" for finding, qs in quotes.items() for q in qs if q in text]
    assert not back and "Padded to 128" in text and "Padded to 2048" in text


# ---------------------------------------------------------------- W1 on the page where the review saw it
def test_W1_a_planted_row_cu_seqlens_shows_no_label_crossing_under_any_reader():
    """The planted fault replaces cu_seqlens only; the HF view's labels come from the targets, so the page names
    segments_disagree_with_cu_seqlens and no label crossing, whichever implementation reads the batch."""
    at = open_page("masks_and_labels")
    at.selectbox(key="w_masks_and_labels.break_").set_value("row-cu-seqlens").run()
    crossing = RULES["label_crosses_boundary"].title
    for reader in at.selectbox(key="w_masks_and_labels.attn").options:
        at.selectbox(key="w_masks_and_labels.attn").set_value(reader).run()
        no_exception(at)
        names = set(findings_shown(at))
        assert "label_crosses_boundary" not in names and "segments_disagree_with_cu_seqlens" in names, reader
        assert crossing not in text(at) and "train across a document edge" not in text(at), reader


def test_M1_the_glossary_names_the_one_convention_with_a_count_the_cost_model_gives():
    one = make_plan([4], 4, "bfd")
    full, half = attention_cells(one, "varlen", convention=FULL), attention_cells(one, "varlen", convention=HALVES)
    said = _content.GLOSSARY["full squares"]
    assert f"({half} cells instead of {full} for 4 tokens)" in said and (full, half) == (16, 10)
    assert "Σ len², padded rows and dense masks are counted in full squares" in said and CONVENTION == FULL
    for name in ("padded_vs_packed", "benchmark"):      # the hover where the pages first count cells
        at = open_page(name)
        tips = "\n".join(m.proto.help for m in [*at.markdown, *at.caption] if m.proto.help)
        assert f"**full squares**: {said}" in tips, name


def test_M7_a_planted_row_cu_seqlens_is_named_as_not_block_diagonal_for_a_kernel_that_reads_cu_seqlens():
    at = open_page("masks_and_labels")
    at.selectbox(key="w_masks_and_labels.attn").set_value("flash_attention_2").run()
    assert "what flash_attention_2 reads in this batch: here the block-diagonal causal mask" in text(at)
    at.selectbox(key="w_masks_and_labels.break_").set_value("row-cu-seqlens").run()
    no_exception(at)
    assert "what flash_attention_2 reads in this batch: here **not** the block-diagonal causal mask" in text(at)
