"""The bug zoo's figures draw the reproduction's own numbers, in the roles' colours."""
from functools import cache

import numpy as np
import pytest

from packing_core.models import pretrained_status
from packing_lab.viz import zoo_figures
from packing_lab.viz.style import ALERT_COLOUR, FIXED_COLOUR, LEAK, LEAK_COLOUR, ROLES
from packing_lab.viz.zoo import DIFFERS
from packing_lab.zoo import plant_bug, planted, reproduce_bug
from tests._support import skip_or_fail

TINY = ("sliding-window-crosses", "continuous-absolute-positions", "loss-per-row")   # no SmolLM2
PLANTED = tuple(b.name for b in planted.BUGS)


@cache
def result(name):
    return plant_bug(name) if name in PLANTED else reproduce_bug(name)


def trace(fig, name):
    return next(t for t in fig.data if t.name == name)


def track_row(fig, track):
    """The colour codes and labels of one track of a tracks figure (its first trace, a heatmap)."""
    heat = fig.data[0]
    i = list(heat.y).index(track)
    return np.asarray(heat.z[i]), np.asarray(heat.customdata[i])


def cross_document(mask, doc):
    real = (doc[:, None] >= 0) & (doc[None, :] >= 0)
    return mask & real & (doc[:, None] != doc[None, :])


@pytest.mark.parametrize("name", TINY + PLANTED)
def test_each_reproduction_draws_one_figure_per_part_it_carries(name):
    r = result(name)
    figs = zoo_figures(r)
    assert r.drawn and list(figs) == list(r.drawn)


@pytest.mark.parametrize("name", ["sliding-window-crosses", "continuous-absolute-positions"])
def test_the_logit_figure_draws_the_measured_diffs_broken_over_the_tolerance_and_fixed_under_it(name):
    r = result(name)
    fig = zoo_figures(r)["logits"]
    broken, fixed = trace(fig, "broken"), trace(fig, "fixed")
    drawn_broken = np.array([c[0] for c in broken.customdata], dtype=float)
    drawn_fixed = np.array([c[0] for c in fixed.customdata], dtype=float)
    np.testing.assert_array_equal(drawn_broken, r.broken_token_diffs)
    np.testing.assert_array_equal(drawn_fixed, r.fixed_token_diffs)
    assert drawn_broken.max() == pytest.approx(r.broken_max_abs_diff) and drawn_broken.max() > r.tolerance
    assert drawn_fixed.max() == pytest.approx(r.fixed_max_abs_diff, abs=1e-12) and drawn_fixed.max() <= r.tolerance
    assert min(broken.y) == pytest.approx(r.tolerance / 1000)        # exact zeros sit on the floor
    assert fixed.line.color == FIXED_COLOUR


def test_a_leak_is_drawn_in_the_leak_colour_and_wrong_positions_in_the_alert_colour():
    assert trace(zoo_figures(result("sliding-window-crosses"))["logits"], "broken").line.color == LEAK_COLOUR
    assert trace(zoo_figures(result("continuous-absolute-positions"))["logits"], "broken").line.color == ALERT_COLOUR
    assert trace(zoo_figures(result("loss-per-row"))["weights"], "broken").marker.color == ALERT_COLOUR


@pytest.mark.parametrize("name", ["sliding-window-crosses", "row-cu-seqlens", "prompts-cut-from-attention"])
def test_the_mask_figure_marks_as_leaks_exactly_the_cross_document_reads_of_the_reproduction(name):
    r = result(name)
    fig = zoo_figures(r)["mask"]
    broken_z, fixed_z = (np.asarray(t.z) for t in fig.data[:2])
    doc = np.asarray(r.document_ids)
    assert ((broken_z == LEAK) == cross_document(r.broken_mask, doc)).all()
    assert not (fixed_z == LEAK).any() and not cross_document(r.fixed_mask, doc).any()
    assert ((fixed_z >= 0) == r.fixed_mask).all()      # every cell read in the fix is drawn read


def test_a_window_over_documents_reads_across_and_cutting_prompts_reads_less():
    window = result("sliding-window-crosses")
    assert cross_document(window.broken_mask, window.document_ids).sum() > 0
    cut = result("prompts-cut-from-attention")
    assert cut.broken_mask.sum() < cut.fixed_mask.sum() and not cross_document(cut.broken_mask, cut.document_ids).any()


@pytest.mark.parametrize("name", ["row-shifted-targets", "pads-in-the-loss", "prompts-in-the-loss"])
def test_the_targets_figure_circles_the_targets_that_differ_and_reds_those_across_an_edge(name):
    r = result(name)
    fig = zoo_figures(r)["targets"]
    circles = trace(fig, DIFFERS)
    np.testing.assert_array_equal(circles.x, np.flatnonzero(r.broken_targets != r.fixed_targets))
    assert circles.marker.color == ALERT_COLOUR
    codes, _ = track_row(fig, "target (broken)")
    doc = np.asarray(r.document_ids)
    crosses = (r.broken_targets != -100) & (np.r_[doc[1:], -2] != doc) & (doc >= 0) & (np.r_[doc[1:], -2] >= 0)
    np.testing.assert_array_equal(codes == LEAK, crosses)
    assert (crosses.sum() == 1) == (name == "row-shifted-targets")   # only the row shift crosses an edge
    fixed_codes, _ = track_row(fig, "target (fixed)")
    assert not (fixed_codes == LEAK).any()


@pytest.mark.parametrize("name", ["continuous-positions", "continuous-absolute-positions"])
def test_the_positions_figure_draws_both_position_tracks_and_circles_where_they_differ(name):
    r = result(name)
    fig = zoo_figures(r)["positions"]
    _, broken = track_row(fig, "position_ids (broken)")
    _, fixed = track_row(fig, "position_ids (fixed)")
    assert broken.tolist() == [str(p) for p in r.broken_position_ids]
    assert fixed.tolist() == [str(p) for p in r.fixed_position_ids]
    np.testing.assert_array_equal(trace(fig, DIFFERS).x, np.flatnonzero(r.broken_position_ids != r.fixed_position_ids))


def test_the_weights_figure_draws_the_measured_gradient_shares():
    r = result("loss-per-row")
    fig = zoo_figures(r)["weights"]
    np.testing.assert_allclose(trace(fig, "broken").y, r.broken_weights)
    np.testing.assert_allclose(trace(fig, "fixed").y, r.fixed_weights)
    assert trace(fig, "broken").y[0] == pytest.approx(0.5) and trace(fig, "fixed").marker.color == FIXED_COLOUR
    assert list(trace(fig, "broken").x) == list(r.weight_labels)


def test_every_colour_a_zoo_figure_names_is_a_roles_colour():
    roles = set(ROLES.values())
    for name in ("sliding-window-crosses", "loss-per-row", "row-shifted-targets"):
        for fig in zoo_figures(result(name)).values():
            for t in fig.data:
                colour = (t.line.color if t.type == "scatter" and t.mode and "lines" in t.mode
                          else getattr(t.marker, "color", None) if t.type in ("scatter", "bar") else None)
                if t.type == "scatter" and list(t.x) == [None] and t.name.startswith("reads its own"):
                    # the mask's legend swatch for "its own document" shows document 0's colour
                    continue
                if colour is not None:
                    assert colour in roles, (name, t.name, colour)


def test_positions_left_unpadded_draw_none_where_a_token_has_no_position_on_smollm2():
    """The one SmolLM2 reproduction here: 8 pads get input_ids and labels but no position_ids."""
    if not pretrained_status()[0]:
        skip_or_fail("SmolLM2 is not installed")
    r = reproduce_bug("positions-not-padded")
    fig = zoo_figures(r)["positions"]
    _, broken = track_row(fig, "position_ids (broken)")
    missing = len(r.fixed_position_ids) - len(r.broken_position_ids)
    assert missing == 8 and broken.tolist()[-missing:] == ["none"] * missing
    assert list(trace(fig, DIFFERS).x) == list(range(len(r.broken_position_ids), len(r.fixed_position_ids)))
    assert f"{len(r.fixed_position_ids)} input_ids, {len(r.broken_position_ids)} position_ids" in r.symptom
