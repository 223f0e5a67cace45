"""A projector's 1024 x 768: nothing a class must read is cut, on every page.

Checked in a real Chromium at that size, page by page: no metric value or label, toggle,
radio or button label, tab or expander title is clipped (an element that hides overflow and
whose ``scrollWidth`` exceeds its ``clientWidth``); every plotly title, subplot title, axis
title and legend entry lies inside its figure, and no two subplot titles overlap. A
screenshot of each page lands in ``artifacts/screenshots/projector-*.png``.
"""
import pytest

pytestmark = [pytest.mark.browser, pytest.mark.viewport(width=1024, height=768)]

# Elements a class reads, and what to call them in a failure.
CLIPPED_JS = """() => {
  const targets = {
    "metric value": "[data-testid='stMetricValue'], [data-testid='stMetricValue'] *",
    "metric label": "[data-testid='stMetricLabel'], [data-testid='stMetricLabel'] *",
    "metric delta": "[data-testid='stMetricDelta'] *",
    "widget label": "[data-testid='stWidgetLabel'] *",
    "radio option": "[data-testid='stRadio'] label *",
    "checkbox or toggle": "[data-testid='stCheckbox'] label *, [data-testid='stToggle'] label *",
    "button": "[data-testid='stBaseButton-primary'] *, [data-testid='stBaseButton-secondary'] *",
    "tab": "[data-baseweb='tab'] *",
    "expander title": "[data-testid='stExpander'] summary *",
    "selected option": "[data-baseweb='select'] [title], [data-baseweb='select'] div[value]",
  };
  const out = [];
  for (const [kind, sel] of Object.entries(targets)) {
    for (const el of document.querySelectorAll("[data-testid='stMain'] " + sel.split(", ").join(", [data-testid='stMain'] "))) {
      if (!el.offsetParent && getComputedStyle(el).position !== "fixed") continue;   // not rendered
      const cs = getComputedStyle(el);
      const hides = cs.overflow !== "visible" || cs.overflowX !== "visible" || cs.textOverflow === "ellipsis";
      if (hides && el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0 && el.innerText.trim())
        out.push(`${kind}: "${el.innerText.trim().slice(0, 80)}" (${el.scrollWidth}px in ${el.clientWidth}px)`);
    }
  }
  return [...new Set(out)];
}"""

FIGURE_JS = """() => {
  const out = [];
  const inside = (r, box) => r.left >= box.left - 2 && r.right <= box.right + 2
                             && r.top >= box.top - 2 && r.bottom <= box.bottom + 2;
  document.querySelectorAll("[data-testid='stMain'] .js-plotly-plot").forEach((plot, i) => {
    const box = plot.getBoundingClientRect();
    const name = (plot.querySelector(".gtitle") || {}).textContent || `figure ${i + 1}`;
    const texts = [...plot.querySelectorAll(".gtitle, .g-xtitle text, .g-ytitle text, .annotation-text, .legendtext")];
    for (const t of texts) {
      const r = t.getBoundingClientRect();
      if (r.width && !inside(r, box)) out.push(`${name}: "${t.textContent.slice(0, 60)}" runs outside the figure`);
    }
    const legend = plot.querySelector(".legend");
    if (legend) {
      const lr = legend.getBoundingClientRect();
      for (const t of plot.querySelectorAll(".g-xtitle text, .xtick text")) {
        const r = t.getBoundingClientRect();
        if (r.width && lr.width && r.left < lr.right && lr.left < r.right && r.top < lr.bottom && lr.top < r.bottom) {
          out.push(`${name}: the legend covers the x axis ("${t.textContent.slice(0, 30)}")`);
          break;
        }
      }
    }
    const titles = [...plot.querySelectorAll(".annotation-text")].map(t => [t.textContent, t.getBoundingClientRect()]);
    for (let a = 0; a < titles.length; a++) for (let b = a + 1; b < titles.length; b++) {
      const [ta, ra] = titles[a], [tb, rb] = titles[b];
      const meet = ra.left < rb.right - 1 && rb.left < ra.right - 1 && ra.top < rb.bottom - 1 && rb.top < ra.bottom - 1;
      if (ra.width && rb.width && meet)
        out.push(`${name}: titles "${ta.slice(0, 40)}" and "${tb.slice(0, 40)}" overlap`);
    }
  });
  return out;
}"""

PAGES = ("why_packing", "padded_vs_packed", "masks_and_labels", "leakage_lab", "bug_zoo", "dataset_explorer",
         "benchmark")


def problems(app_page) -> list[str]:
    app_page.page.wait_for_timeout(500)   # let plotly lay the figures out at this width
    return app_page.page.evaluate(CLIPPED_JS) + app_page.page.evaluate(FIGURE_JS)


@pytest.mark.parametrize("page", PAGES)
def test_nothing_a_class_reads_is_cut_at_1024_by_768(app_page, page):
    app_page.open("" if page == "why_packing" else page)   # the first page lives at the root
    if page == "leakage_lab":    # the results appear once the class has predicted
        app_page.radio("Your prediction", "They change")
    found = problems(app_page)
    app_page.screenshot(f"projector-{page.replace('_', '-')}")
    app_page.assert_healthy()
    assert found == [], "\n".join(found)


def test_the_training_demo_reads_at_1024_by_768(app_page):
    app_page.open("leakage_lab")
    app_page.click("Train both")
    assert app_page.metric("Train loss, mask off")
    found = problems(app_page)
    app_page.screenshot("projector-leakage-lab-trained")
    app_page.assert_healthy()
    assert found == [], "\n".join(found)
