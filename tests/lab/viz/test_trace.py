"""The step-through's figure: the rows after the first k placements, the last one outlined, the frame fixed."""
import pytest

from packing_core import InputError
from packing_core.packing import plan_trace
from packing_lab.viz import REFERENCE_COLOUR, doc_colour, trace_figure


def test_the_figure_draws_the_placed_pieces_where_the_trace_put_them_and_outlines_the_last():
    trace = plan_trace([5, 7, 2, 3], 10, "bfd")
    fig = trace_figure(trace, 3)
    (bars,) = fig.data
    assert list(bars.y) == [0, 1, 0] and list(bars.base) == [0, 0, 7] and list(bars.x) == [7, 5, 3]
    assert list(bars.marker.color) == [doc_colour(d) for d in (1, 0, 3)]
    assert list(bars.marker.line.color)[-1] == REFERENCE_COLOUR and list(bars.marker.line.color)[0] != REFERENCE_COLOUR
    assert len(fig.layout.shapes) == 2                         # two rows open, each framed at the context
    assert tuple(fig.layout.yaxis.range) == (1.5, -0.5) and tuple(fig.layout.xaxis.range) == (0, 10)


def test_before_the_first_step_nothing_is_placed_but_every_row_has_its_place():
    trace = plan_trace([5, 7, 2, 3], 10, "bfd")
    fig = trace_figure(trace, 0)
    assert fig.data == () and fig.layout.shapes == ()
    assert list(fig.layout.yaxis.ticktext) == ["row 0", "row 1"]    # the final rows: the picture never jumps
    assert fig.layout.height == trace_figure(trace, 4).layout.height


def test_a_step_outside_the_trace_is_refused_with_its_range():
    with pytest.raises(InputError, match=r"steps 0\.\.4"):
        trace_figure(plan_trace([5, 7, 2, 3], 10, "bfd"), 5)
