"""Watch it pack in a real Chromium: Play runs every packer to its end, and the rows on screen are make_plan's."""
import re

import pytest

from app_pages import _content
from packing_core.packing import TRACE_STRATEGIES, make_plan

pytestmark = pytest.mark.browser

PLAYED_MS = 60_000    # 13 placements at one per 0.8 s, on a busy machine


def _rows_of(plan) -> str:
    b = plan.row_bounds()
    return " · ".join(f"row {r}: {', '.join(map(str, plan.piece_doc[b[r]:b[r + 1]].tolist()))}"
                      for r in range(plan.n_rows))


def test_play_runs_every_packer_to_make_plans_rows_and_then_stops(app_page):
    app_page.open("watch_it_pack")
    app_page.page.set_viewport_size({"width": 1024, "height": 768})
    n = len(_content.WATCH_LENGTHS)
    for strategy in TRACE_STRATEGIES:
        if app_page.control("radiogroup", "Packer").get_by_role("radio", name=strategy).is_checked() is False:
            app_page.radio("Packer", strategy)
        assert f"{n} pieces wait" in app_page.text()
        app_page.page.get_by_role("button", name="Play", exact=True).click()
        plan_line = app_page.main.get_by_text(re.compile(r"^The plan \(documents per row\):"))
        plan_line.wait_for(state="visible", timeout=PLAYED_MS)
        app_page.page.get_by_role("button", name="Play", exact=True).wait_for(timeout=PLAYED_MS)   # it stopped
        app_page.wait()
        expected = make_plan(_content.WATCH_LENGTHS, _content.WATCH_CONTEXT, strategy)
        assert plan_line.inner_text() == f"The plan (documents per row): {_rows_of(expected)}."
        assert f"Step {n} of {n}:" in app_page.text()
        assert f"needs {expected.n_rows} rows" in app_page.text()
        assert app_page.slider_value("Placements shown") == str(n)
        app_page.screenshot(f"watch-it-pack-{strategy}-1024")
    app_page.assert_healthy()
