"""Figure builders, checked on the figure's data: trace types, colour codes, one colour per document."""
import numpy as np
import pytest
import torch

import packing_core as pc
from app_pages import _content
from packing_core import PackedBatch, make_plan, verify_model
from packing_core.analysis import length_histogram
from packing_core.attention import block_causal_mask
from packing_core.attention.masks import allowed
from packing_lab.bench import run_benchmark
from packing_lab.viz import (
    ALERT_COLOUR,
    PAD_COLOUR,
    PALETTE,
    benchmark_figure,
    doc_colour,
    layout_figure,
    length_histogram_figure,
    logit_diff_figure,
    mask_figure,
    plan_grid,
    plan_strip,
    slot_use_figure,
    strategy_figure,
    targets_figure,
)
from packing_lab.viz.rows import Track, token_labels, tracks_figure
from packing_lab.viz.style import ALERT, EMPTY, PAD, colour_codes, downsample_codes
from packing_lab.zoo import naive_targets

WORKED = _content.WORKED_LENGTHS


def _heatmap(fig, i=0):
    h = [t for t in fig.data if t.type == "heatmap"][i]
    return np.asarray(h.z)


def _row_batch(width=64, instruction=False):
    d = _content.row_documents(width, instruction)
    return PackedBatch.from_documents(d.documents, width, "next-fit", prompt_lengths=d.prompt_lengths)


# ---------------------------------------------------------------- colours
def test_a_document_keeps_its_colour_and_pads_are_grey():
    assert doc_colour(3) == doc_colour(3 + len(PALETTE)) == PALETTE[3]
    assert doc_colour(-1) == PAD_COLOUR
    assert colour_codes([0, 1, 1 + len(PALETTE), -1]).tolist() == [0, 1, 1, PAD]


def test_neighbouring_documents_get_colours_a_reader_can_tell_apart():
    def rgb(hex_colour):
        return np.array([int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)])

    for d in range(3 * len(PALETTE)):
        a, b = rgb(doc_colour(d)), rgb(doc_colour(d + 1))
        assert np.abs(a - b).sum() > 60, (d, doc_colour(d), doc_colour(d + 1))
        assert np.abs(a - rgb(PAD_COLOUR)).sum() > 60      # never mistaken for a pad


# ---------------------------------------------------------------- plan strips
def test_worked_example_strip_is_one_heatmap_coloured_by_document_with_pads_grey():
    plan = make_plan(WORKED, 512, "concat-cut")
    z = _heatmap(plan_strip(plan))
    assert z.shape == (2, 512)
    assert (z[0, :120] == 0).all() and (z[0, 120:210] == 1).all() and (z[0, 510:] == 3).all()
    assert (z[1, :38] == 3).all()                       # document 3 continues in row 1
    assert (z[1, 398:] == PAD).all() and (z == PAD).sum() == 114


def test_strip_ticks_mark_each_document_end_and_the_split_in_red():
    fig = plan_strip(make_plan(WORKED, 512, "concat-cut"))
    ends = next(t for t in fig.data if t.name == "document ends")
    cut = next(t for t in fig.data if t.name == "document split here")
    assert len(ends.x) == 8 and list(cut.x) == [511.5] and list(cut.y) == [0]
    assert sorted(np.asarray(ends.x) + 0.5) == sorted([120, 210, 510, 38, 93, 123, 333, 398])


def test_slots_past_a_rows_width_are_outside_the_row_not_pads():
    plan = make_plan([50, 10, 300, 20], 512, "pad-longest", batch_size=2)
    rows, doc, _ = plan_grid(plan)
    assert doc.shape == (4, 300)
    assert (doc[0, 50:] == EMPTY).all() and (doc[1, 10:50] == PAD).all()
    assert (_heatmap(plan_strip(plan))[0, 50:] == EMPTY).all()


def test_wide_rows_are_downsampled_and_the_window_starts_at_first_row():
    plan = make_plan(np.full(400, 700), 2048, "bfd")
    fig = plan_strip(plan, first_row=10, max_rows=5, max_cols=512)
    h = fig.data[0]
    assert np.asarray(h.z).shape == (5, 512) and np.asarray(h.x)[1] == 4
    assert list(np.asarray(h.y)) == list(range(10, 15))


def test_strip_refuses_a_row_the_plan_does_not_have():
    with pytest.raises(ValueError, match="first_row 9"):
        plan_strip(make_plan(WORKED, 512, "bfd"), first_row=9)


# ---------------------------------------------------------------- masks
def _masks(batch):
    n = int(batch.valid[0].sum())
    w = batch.input_ids.shape[1]
    return {"causal": block_causal_mask(torch.tensor([0, n]), total=w).numpy(),
            "block": allowed(batch.piece_ids[0]).numpy()}


def test_causal_mask_shows_leaks_in_red_and_the_block_diagonal_mask_shows_none():
    b = _row_batch(64)
    doc = b.document_ids[0].numpy()
    fig = mask_figure(_masks(b), doc, b.position_ids[0].numpy())
    causal, block = _heatmap(fig, 0), _heatmap(fig, 1)
    i, j = np.meshgrid(np.arange(64), np.arange(64), indexing="ij")
    cross = (j < i) & (doc[i] != doc[j]) & (doc[i] >= 0) & (doc[j] >= 0)
    assert ((causal == ALERT) == cross).all() and cross.any()
    assert not (block == ALERT).any()


def test_a_mask_cell_takes_its_documents_colour_in_every_view():
    b = _row_batch(64)
    doc = b.document_ids[0].numpy()
    block = _heatmap(mask_figure(_masks(b), doc, b.position_ids[0].numpy()), 1)
    strip = _heatmap(plan_strip(b.plan))[0]
    for d in np.unique(doc[doc >= 0]):
        k = int(np.nonzero(doc == d)[0][-1])          # the document's last token attends to itself
        assert block[k, k] == strip[k] == d % len(PALETTE)


def test_mask_hover_names_query_and_key_document_and_position():
    b = _row_batch(64)
    fig = mask_figure(_masks(b), b.document_ids[0].numpy(), b.position_ids[0].numpy())
    h = fig.data[0]
    assert "query token" in h.hovertemplate and "key token" in h.hovertemplate
    custom = np.asarray(h.customdata)
    assert custom.shape == (64, 64, 4)
    assert custom[30, 5].tolist() == [b.document_ids[0, 30], b.position_ids[0, 30],
                                      b.document_ids[0, 5], b.position_ids[0, 5]]


def test_masks_of_2048_tokens_are_downsampled():
    b = _row_batch(2048)
    fig = mask_figure(_masks(b), b.document_ids[0].numpy(), b.position_ids[0].numpy(), max_side=128)
    assert _heatmap(fig).shape == (128, 128)


def test_downsampling_keeps_every_leak_visible():
    assert downsample_codes(np.array([0, ALERT, 1, 1, 2]), 2).tolist() == [ALERT, 1, 2]
    grid = np.zeros((4, 4), int)
    grid[3, 0] = ALERT
    assert downsample_codes(grid, 2, axes=(0, 1)).tolist() == [[0, 0], [ALERT, 0]]


def test_row_shifted_targets_keep_their_red_cells_at_2048_tokens():
    b = _row_batch(2048)
    naive = naive_targets(b, 0)
    fig = targets_figure(b, 0, naive)
    z = _heatmap(fig)[list(fig.data[0].y).index("row-shifted target (bug)")]
    assert len(z) == 1024
    assert (z == ALERT).sum() == len(set(np.nonzero(naive.crosses)[0] // 2)) > 50


def test_mask_of_the_wrong_size_is_refused():
    b = _row_batch(64)
    with pytest.raises(ValueError, match="shape"):
        mask_figure({"x": np.ones((3, 3), bool)}, b.document_ids[0].numpy(), b.position_ids[0].numpy())


# ---------------------------------------------------------------- token tracks
def test_token_labels_show_bytes_as_characters():
    assert token_labels([72, 105, 32, 10]).tolist() == ["H", "i", "␣", "·"]


def test_tracks_show_text_at_64_tokens_and_only_colour_at_2048():
    short = tracks_figure([Track("t", np.zeros(64, int), np.array(["a"] * 64))])
    long = tracks_figure([Track("t", np.zeros(2048, int), np.array(["a"] * 2048))], max_cols=1024)
    assert short.data[0].texttemplate == "%{text}"
    assert long.data[0].texttemplate is None and np.asarray(long.data[0].z).shape == (1, 1024)


def test_tracks_of_different_lengths_are_refused():
    with pytest.raises(ValueError, match="64 tokens"):
        tracks_figure([Track("a", np.zeros(64, int), np.array(["x"] * 64)),
                       Track("b", np.zeros(3, int), np.array(["x"] * 3))])


def test_continuous_positions_turn_red_exactly_where_they_differ_from_reset():
    b = _row_batch(64)
    cont = np.arange(64)
    fig = layout_figure(b, 0, continuous_positions=cont)
    z = _heatmap(fig)
    assert list(fig.data[0].y) == ["tokens", "piece_ids", "position_ids (reset)", "position_ids (continuous)"]
    valid = b.valid[0].numpy()
    assert ((z[3] == ALERT) == (valid & (cont != b.position_ids[0].numpy()))).all()


def test_row_shifted_targets_turn_red_at_document_edges_and_batch_targets_never_do():
    b = _row_batch(64, instruction=True)
    naive = naive_targets(b, 0)
    fig = targets_figure(b, 0, naive)
    names = list(fig.data[0].y)
    z = _heatmap(fig)
    assert ((z[names.index("row-shifted target (bug)")] == ALERT) == naive.crosses).all()
    assert not (z[names.index("targets (batch)")] == ALERT).any()
    loss = z[names.index("loss_mask")]
    assert ((loss == EMPTY) == (b.valid[0].numpy() & ~b.loss_mask[0].numpy())).all()
    assert "answer tokens (A) / prompt (P)" in names


# ---------------------------------------------------------------- verification
def test_logit_differences_are_bars_on_a_log_axis_coloured_by_document():
    rep = verify_model("tiny-rope", mask="off")
    fig = logit_diff_figure(rep.token_diffs, rep.cu_seqlens, rep.tolerance)
    bar = fig.data[0]
    assert bar.type == "bar" and fig.layout.yaxis.type == "log"
    cu = rep.cu_seqlens
    assert list(bar.marker.color[cu[0]:cu[1]]) == [doc_colour(0)] * (cu[1] - cu[0])
    assert bar.marker.color[cu[1]] == doc_colour(1)
    assert min(bar.y) >= rep.tolerance / 1000                     # zeros drawn at the floor
    lines = [s for s in fig.layout.shapes]
    assert len(lines) == len(cu) - 2 + 1                          # boundaries + tolerance
    assert any(s.y0 == rep.tolerance for s in lines)


def test_logit_differences_refuse_boundaries_that_do_not_cover_the_row():
    with pytest.raises(ValueError, match="cu_seqlens"):
        logit_diff_figure(np.ones(5), [0, 3], 1e-4)


# ---------------------------------------------------------------- datasets and strategies
def test_histogram_figure_counts_every_document_and_marks_the_context():
    x = np.r_[np.full(90, 100), np.full(10, 600)]
    fig = length_histogram_figure(length_histogram(x, 512, bins=20))
    bar = fig.data[0]
    assert sum(bar.y) == 100
    over = np.asarray(bar.x) >= 512
    assert set(np.asarray(bar.marker.color)[over]) == {ALERT_COLOUR}   # an alert, not a leak
    assert fig.layout.shapes[0].x0 == 512


def test_strategy_figure_plots_utilisation_and_both_attention_flop_ratios_per_strategy():
    rows = pc.strategy_table(WORKED, 512)
    fig = strategy_figure(rows)
    bars = [t for t in fig.data if t.type == "bar"]
    assert list(bars[0].y) == [r.strategy for r in rows]
    assert list(bars[0].x) == pytest.approx([r.utilisation for r in rows])
    assert list(bars[1].x) == pytest.approx([r.attention_ratio for r in rows])
    assert list(bars[2].x) == pytest.approx([r.dense_mask_ratio for r in rows])
    cut = [r.strategy for r in rows].index("concat-cut")
    assert bars[1].text[cut].endswith("✂") and not any(t.endswith("✂") for i, t in enumerate(bars[1].text) if i != cut)
    assert bars[1].customdata[cut] == f" ({rows[cut].docs_split:,} docs split)"   # the hover says how many
    assert bars[0].marker.color[0] != bars[0].marker.color[-1]    # padding vs packing


def test_slot_use_figure_stacks_real_tokens_and_pads_to_the_slots():
    rows = pc.strategy_table(WORKED, 512, strategies=("pad", "bfd"))
    real, pads = slot_use_figure(rows).data
    assert [r + p for r, p in zip(real.x, pads.x)] == [r.slots for r in rows]
    assert list(real.x) == [910, 910]


def test_benchmark_figure_draws_each_backend_beside_its_own_flop_bound():
    result = run_benchmark(docs=16, heads=1, head_dim=16, repeats=1)
    fig = benchmark_figure(result)
    bar, bound, goal = fig.data[0], fig.data[1], fig.data[2]
    assert list(bar.x) == ["padded", *result.backends]
    assert bar.y[0] == result.padded.tokens_per_s
    padded = result.padded.tokens_per_s
    by = dict(zip(bound.x, bound.y))
    assert by["segments"] == pytest.approx(padded * result.flop_ratio)
    assert by["dense"] == pytest.approx(padded * result.plans.pad.rows / result.plans.bfd.rows)
    assert by["dense"] < by["segments"]
    assert list(goal.y) == pytest.approx([y * result.goal_factor for y in bound.y])


def test_row_order_figure_draws_one_line_per_plan_with_the_longest_piece_per_row():
    from packing_core import make_plan
    from packing_lab.advice import row_order
    from packing_lab.viz import row_order_figure

    p = make_plan([300, 20, 200, 250, 30, 10], 320, "bfd")
    fig = row_order_figure({"bfd": row_order(p)})
    assert len(fig.data) == 1 and fig.data[0].name == "bfd"
    assert list(fig.data[0].y) == [300, 250, 200]


def test_each_row_order_gets_its_own_panel_so_no_line_hides_another():
    from packing_core import make_plan
    from packing_lab.advice import row_order
    from packing_lab.viz import row_order_figure

    lengths = np.random.default_rng(0).integers(5, 300, 500)
    orders = {"bfd": row_order(make_plan(lengths, 320, "bfd")),
              "bfd + shuffle": row_order(make_plan(lengths, 320, "bfd", shuffle=True, seed=0))}
    fig = row_order_figure(orders)
    assert [t.yaxis for t in fig.data] == ["y", "y2"]                      # one panel each, bfd on top
    assert [a.text for a in fig.layout.annotations] == list(orders)
    assert tuple(fig.layout.yaxis.range) == tuple(fig.layout.yaxis2.range)  # one length scale


def test_position_ids_thin_out_to_fit_a_projectors_cells_and_characters_stay():
    b = _row_batch(64)
    fig = layout_figure(b, 0)
    names = list(fig.data[0].y)
    text = np.asarray(fig.data[0].text)
    positions = text[names.index("position_ids (reset)")]
    shown = [int(v) for v in positions if v]
    assert 0 < len(shown) < int(b.valid[0].sum()) and all(v % 3 == 0 for v in shown)   # every third at 64 tokens
    starts = (b.position_ids[0].numpy() == 0) & b.valid[0].numpy()
    assert (positions[starts] == "0").all()                                       # each document's start shows
    tokens = text[names.index("tokens")]
    assert (tokens[b.valid[0].numpy()] != "").all()                                # every character stays
