"""Work on the figure, in a real Chromium at 1024 x 768: a document picked in a step's figure (a click on it) or in
the picker under it is framed in every figure of that step, and the link carries it.

A frame is a plotly shape named ``highlight`` (``packing_lab.viz.highlight``); the tests read each figure's layout.
"""
import re
from urllib.parse import parse_qs, urlsplit

import pytest

from tests._support import AppPage

pytestmark = [pytest.mark.browser, pytest.mark.viewport(width=1024, height=768)]

# per figure of the open step (the page where it has no steps): its title and how many frames it draws
FRAMES_JS = """() => {
  const main = document.querySelector("[data-testid='stMain']");
  const panels = [...main.querySelectorAll("[role='tabpanel']")].filter(p => !p.hidden && p.offsetParent);
  const root = panels.length ? panels[0] : main;
  return [...root.querySelectorAll(".js-plotly-plot")].filter(p => p.getBoundingClientRect().height > 0)
    .map(p => [(p.querySelector(".gtitle") || {textContent: ""}).textContent,
               ((p.layout || {}).shapes || []).filter(s => s.name === "highlight").length]);
}"""


def _params(url: str) -> dict:
    return {k: v[-1] for k, v in parse_qs(urlsplit(url).query).items()}


@pytest.fixture
def app(browser, streamlit_server, artifacts_dir):
    ctx = browser.new_context(viewport={"width": 1024, "height": 768})
    ctx.set_default_timeout(120_000)
    page = AppPage(ctx.new_page(), streamlit_server, artifacts_dir / "screenshots")
    page.page.on("pageerror", lambda exc: page.js_errors.append(str(exc)))
    yield page
    ctx.close()


def _frames(app) -> list:
    app.page.wait_for_timeout(600)
    return app.page.evaluate(FRAMES_JS)


def _pick(app, label: str) -> None:
    """Click the picker's pill ``label`` (the first pill reads "document 0")."""
    with app.rerun():
        app.page.get_by_role("radiogroup", name=re.compile("^Pick out a document")).get_by_role(
            "radio", name=label, exact=True).first.click()


# Where on the screen a document of a figure of the open step is: a point of its trace named "pick"
# (``pick_markers``), or the middle of a bar; and the document it stands for.
POINT_JS = """([figure, point]) => {
  const main = document.querySelector("[data-testid='stMain']");
  const panels = [...main.querySelectorAll("[role='tabpanel']")].filter(p => !p.hidden && p.offsetParent);
  const root = panels.length ? panels[0] : main;
  const gd = [...root.querySelectorAll(".js-plotly-plot")].filter(p => p.getBoundingClientRect().height > 0)[figure];
  const t = gd._fullData.find(t => t.name === "pick") || gd._fullData.find(t => t.type === "bar");
  const i = Math.min(point, t.x.length - 1);
  const x = t.type === "bar" ? t.base[i] + t.x[i] / 2 : t.x[i];
  const xa = gd._fullLayout[t.xaxis.replace("x", "xaxis")], ya = gd._fullLayout[t.yaxis.replace("y", "yaxis")];
  gd.scrollIntoView({block: "center"});
  const r = gd.getBoundingClientRect();
  const doc = Array.isArray(t.customdata[i]) ? t.customdata[i][0] : t.customdata[i];
  return {x: r.left + xa._offset + xa.d2p(x), y: r.top + ya._offset + ya.d2p(t.y[i]), doc: String(doc)};
}"""


def _click_pick_point(app, figure: int = 0, point: int = 1) -> str:
    """Click a document in a figure of the open step, as a teacher does; the document it is."""
    app.page.evaluate(POINT_JS, [figure, point])
    app.page.wait_for_timeout(400)                      # scrolled into view: measure again where it now is
    at = app.page.evaluate(POINT_JS, [figure, point])
    with app.rerun():
        app.page.mouse.click(at["x"], at["y"])
    return at["doc"]


def test_a_document_picked_on_masks_and_labels_is_framed_in_every_figure_of_every_step(app):
    app.open("masks_and_labels")
    _pick(app, "1")
    assert _params(app.page.url).get("doc") == "1"
    for step in ("The mask", "Positions", "Targets and loss", "Break it, check it"):
        app.step(step)
        frames = _frames(app)
        assert frames and all(n > 0 for _, n in frames), (step, frames)
    app.screenshot("highlight-masks-and-labels-1024")
    app.assert_healthy()


def test_a_click_on_a_document_in_the_mask_frames_it_everywhere(app):
    app.open("masks_and_labels")
    assert all(n == 0 for _, n in _frames(app))
    doc = _click_pick_point(app, point=1)                                    # document 1's block on the diagonal
    assert doc == "1" and _params(app.page.url).get("doc") == "1", app.page.url
    assert all(n > 0 for _, n in _frames(app))
    app.step("Positions")
    assert all(n > 0 for _, n in _frames(app))
    app.assert_healthy()


def test_a_document_clicked_in_padded_vs_packed_rows_is_framed_and_named(app):
    app.open("padded_vs_packed")
    doc = _click_pick_point(app, point=2)                                    # a piece in the rows
    assert _params(app.page.url).get("doc") == doc, app.page.url
    assert any(n > 0 for _, n in _frames(app))
    assert re.search(rf"Document {doc}: [\d,]+ tokens, in rows? ", app.text())
    app.assert_healthy()


def test_a_document_picked_in_watch_it_pack_is_framed_as_it_is_placed(app):
    app.open("watch_it_pack?strategy=ffd&shown=13")
    doc = _click_pick_point(app, point=3)                                    # a placed piece (a bar)
    assert _params(app.page.url).get("doc") == doc, app.page.url
    assert _frames(app)[0][1] >= 1
    plan_line = app.main.get_by_text(re.compile(r"^The plan \(documents per row\):"))
    assert plan_line.locator("strong").inner_text() == doc                    # bold in the rows' line too
    _pick(app, "document 0")
    assert _params(app.page.url).get("doc") == "0" and _frames(app)[0][1] >= 1
    app.screenshot("highlight-watch-it-pack-1024")
    app.assert_healthy()
