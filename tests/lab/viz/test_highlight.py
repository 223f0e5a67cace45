"""A document picked out in a figure: framed where its tokens are, in every figure kind a step draws, and a click on
it can select it (a point whose customdata is the document)."""
import numpy as np

from packing_core import PackedBatch, make_plan
from packing_core.packing import plan_trace
from packing_lab.viz import layout_figure, mask_figure, plan_strip, trace_figure
from packing_lab.viz.highlight import HIGHLIGHT

WORKED = np.array([120, 90, 300, 40, 55, 30, 210, 65])


def frames(fig) -> list[tuple[float, float, float, float]]:
    return [(s.x0, s.x1, s.y0, s.y1) for s in fig.layout.shapes if s.name == HIGHLIGHT]


def picks(fig) -> list[int]:
    return [d for t in fig.data if t.name == "pick" for d in t.customdata]


def test_a_strip_frames_each_piece_of_the_picked_document_and_nothing_else():
    plan = make_plan(WORKED, 512, "concat-cut")      # document 3 (40 tokens, from 510) is cut at the row edge
    assert frames(plan_strip(plan, highlight=3)) == [(509.5, 511.5, -0.5, 0.5), (-0.5, 37.5, 0.5, 1.5)]
    assert frames(plan_strip(plan, highlight=2)) == [(209.5, 509.5, -0.5, 0.5)]
    assert frames(plan_strip(plan)) == [] and frames(plan_strip(plan, highlight=99)) == []


def test_a_pickable_strip_offers_one_point_per_piece_shown():
    plan = make_plan(WORKED, 512, "concat-cut")
    assert sorted(picks(plan_strip(plan, pickable=True))) == sorted(plan.piece_doc.tolist())
    assert picks(plan_strip(plan)) == []


def test_a_mask_frames_the_documents_block_and_its_query_band_in_every_panel():
    doc = np.array([0, 0, 0, 1, 1, -1])
    m = np.tril(np.ones((6, 6), bool))
    fig = mask_figure({"a": m, "b": m}, doc, np.array([0, 1, 2, 0, 1, 0]), highlight=1, pickable=True)
    assert frames(fig) == [(2.5, 4.5, 2.5, 4.5), (-0.5, 5.5, 2.5, 4.5)] * 2
    assert picks(fig) == [0, 1, 0, 1]


def test_a_step_through_frames_only_the_pieces_placed_so_far():
    trace = plan_trace((387, 198, 61, 38, 246, 407, 377, 78, 118, 79, 210, 51, 256), 512, "ffd")
    placed = {s.doc for s in trace.steps[:3]}
    first = trace.steps[0].doc
    assert len(frames(trace_figure(trace, 3, highlight=first))) == 1
    later = next(s.doc for s in trace.steps if s.doc not in placed)
    assert frames(trace_figure(trace, 3, highlight=later)) == []
    assert len(frames(trace_figure(trace, len(trace.steps), highlight=later))) == 1


def test_a_rows_tracks_are_framed_across_every_track():
    batch = PackedBatch.from_documents([[5, 6, 7], [8, 9]], 8, "next-fit")
    fig = layout_figure(batch, 0, highlight=1, pickable=True)
    assert frames(fig) == [(2.5, 4.5, -0.5, 2.5)] and picks(fig) == [0, 1]
