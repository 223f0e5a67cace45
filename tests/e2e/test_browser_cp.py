"""The Context parallel page at a projector's 1024 x 768, in a real Chromium: its prediction gates the answer,
and each step, answered, fits two screens plus the page's header (the measure of ``test_projector.py``)."""
import json

import pytest

from app_pages._content import page
from tests.e2e.test_projector import FIGURE_JS, HEIGHT_JS, SCREEN_PX, STEP_PX, problems

pytestmark = [pytest.mark.browser, pytest.mark.viewport(width=1024, height=768)]
SPEC = page("context_parallel")


def test_the_answer_waits_for_a_prediction(app_page):
    app_page.open("context_parallel")
    assert "Make a prediction to see the answer." in app_page.text()
    assert app_page.page.locator("[data-testid='stMain'] .js-plotly-plot").count() == 0
    app_page.radio("Your prediction", "The last rank")
    assert "Right: the last rank computes 228 (query, key) pairs" in app_page.text()
    app_page.assert_healthy()


def test_each_step_fits_two_screens_at_1024_by_768_with_nothing_cut(app_page, artifacts_dir):
    app_page.open("context_parallel")
    app_page.radio("Your prediction", "The last rank")
    app_page.radio("CP (ranks)", "4")                  # the taller ring: 4 x 4 steps
    heights, found = {}, []
    for n, step in enumerate(SPEC.steps, 1):
        app_page.step(step)
        found += [f"{step}: {p}" for p in problems(app_page)]
        heights[step] = app_page.page.evaluate(HEIGHT_JS)
        app_page.screenshot(f"projector-context-parallel-{n}")
    (artifacts_dir / "projector-heights-context-parallel.json").write_text(json.dumps(heights, indent=1))
    assert found == [] and app_page.page.evaluate(FIGURE_JS) == []
    tall = {step: h["page"] for step, h in heights.items() if h["page"] > STEP_PX}
    assert tall == {}, f"steps taller than two screens plus the header ({STEP_PX} px): {tall}"
    assert all(h["header"] < SCREEN_PX for h in heights.values()), heights
    app_page.assert_healthy()
