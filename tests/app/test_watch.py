"""Watch it pack: each packer stepped through on the page ends on make_plan's rows, with each move's rule."""
import re

import pytest

from app_pages import _content
from packing_core.packing import TRACE_STRATEGIES, make_plan, plan_trace
from tests._support import assert_clean, markdown, open_page

EXAMPLE = (_content.WATCH_LENGTHS, _content.WATCH_CONTEXT)


def _rows_of(plan) -> str:
    """make_plan's rows as the page lists them: documents in slot order, row by row."""
    b = plan.row_bounds()
    return " · ".join(f"row {r}: {', '.join(map(str, plan.piece_doc[b[r]:b[r + 1]].tolist()))}"
                      for r in range(plan.n_rows))


def _button(at, label):
    return next(b for b in at.button if b.label == label)


def _caption(at, start: str) -> str:
    return next(c.value for c in at.caption if c.value.startswith(start))


def test_the_example_set_tells_every_packer_apart_and_the_lp_proves_its_rows():
    rows = {s: make_plan(*EXAMPLE, s) for s in TRACE_STRATEGIES}
    n = {s: p.n_rows for s, p in rows.items()}
    assert n["next-fit"] > n["bfd"] > n["ffd"] == n["optimal"]      # the page's comment and its "Done" line
    assert rows["optimal"].certificate.gap_rows == 0
    assert 12 <= len(_content.WATCH_LENGTHS) <= 20


@pytest.mark.parametrize("strategy", TRACE_STRATEGIES)
def test_stepping_through_a_packer_ends_on_make_plans_rows(strategy):
    at = open_page("watch_it_pack", **{"watch_it_pack.strategy": strategy})
    trace = plan_trace(*EXAMPLE, strategy)
    assert f"**{len(trace.steps)} pieces wait**" in markdown(at)
    for k, step in enumerate(trace.steps, 1):
        _button(at, "Step").click().run()
        assert f"**Step {k} of {len(trace.steps)}: document {step.doc}, {step.length} tokens, goes to row " \
               f"{step.row}.**" in markdown(at)
    assert_clean(at)
    assert _caption(at, "The plan (documents per row):") == \
        f"The plan (documents per row): {_rows_of(make_plan(*EXAMPLE, strategy))}."
    done = re.search(r"\*\*Done: \S+ needs (\d+) rows\.\*\*", markdown(at))
    assert int(done.group(1)) == make_plan(*EXAMPLE, strategy).n_rows


def test_back_start_and_the_slider_scrub_and_a_new_packer_starts_over():
    at = open_page("watch_it_pack")
    at.slider(key="w_watch_it_pack.shown").set_value(5).run()
    assert "**Step 5 of 13:" in markdown(at)
    _button(at, "Back").click().run()
    assert "**Step 4 of 13:" in markdown(at)
    _button(at, "Start").click().run()
    assert "**13 pieces wait**" in markdown(at)
    at.slider(key="w_watch_it_pack.shown").set_value(7).run()
    at.radio(key="v_watch_it_pack.strategy").set_value("next-fit").run()
    assert "**13 pieces wait**" in markdown(at) and "in the dataset's order" in markdown(at)
    assert_clean(at)


def test_play_starts_a_timer_that_places_one_more_document_and_pause_stops_it():
    at = open_page("watch_it_pack")
    _button(at, "Play").click().run()
    assert at.session_state["watch_it_pack.playing"] is True
    assert "**Step 1 of 13:" in markdown(at)                # the run that starts the timer shows the first move
    assert [b.label for b in at.button if b.label in ("Play", "Pause")] == ["Pause"]
    _button(at, "Pause").click().run()
    assert at.session_state["watch_it_pack.playing"] is False
    assert "**Step 1 of 13:" in markdown(at)
    assert_clean(at)


def test_a_draw_from_the_dataset_steps_through_at_the_sidebars_context():
    at = open_page("watch_it_pack", **{"watch_it_pack.documents": "draw", "context": 256})
    assert "at context 256 (the sidebar's)" in markdown(at)
    at.slider(key="w_watch_it_pack.shown").set_value(at.slider(key="w_watch_it_pack.shown").max).run()
    assert "**Done: bfd needs" in markdown(at)
    _button(at, "Draw again").click().run()
    assert "pieces wait**" in markdown(at) and at.session_state["watch_it_pack.draw"] == 2   # a new set starts over
    assert_clean(at)
