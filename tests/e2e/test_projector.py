"""A projector's 1024 x 768: nothing a class must read is cut, and each step fits about two screens.

Checked in a real Chromium at that size, page by page and step by step (every tab of a page
with steps, clicked): no metric value or label, toggle, radio or button label, tab, tab list or
expander title is clipped (an element that hides overflow and whose ``scrollWidth`` exceeds its
``clientWidth``); no table's columns scroll sideways; every plotly title, subplot title, axis
title, legend entry and bar label lies inside its figure, no two subplot titles overlap and the figure's
title overlaps none; every caption and every word of a figure reads at 4.5:1 contrast or more. Each
step of a page with steps is at most two screens tall plus the page's header (its title and lesson
box). The step's first figure (a plotly chart, a table or an image) starts on the first screen, above 768 px: the
lesson text and the inputs fold or come after it. A screenshot of each page and step lands in
``artifacts/screenshots/projector-*.png``; the measured heights in ``artifacts/projector-heights.json``, where each
step's first figure starts in ``artifacts/figure-first.json``.
"""
import json
import re
import time
from dataclasses import dataclass, field

import pytest

from app_pages._content import PAGES as SPECS
from tests._support import AppPage

pytestmark = [pytest.mark.browser, pytest.mark.viewport(width=1024, height=768)]
SIZE = {"width": 1024, "height": 768}

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
    "tab": "[data-testid='stTab'] *",
    "tab list": "[role='tablist']",
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
    const texts = [...plot.querySelectorAll(".gtitle, .g-xtitle text, .g-ytitle text, .annotation-text, .legendtext, .bartext")];
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
    // the figure's title too: a wrapped title once ran into the first panel's title
    const titles = [...plot.querySelectorAll(".gtitle, .annotation-text")].map(t => [t.textContent, t.getBoundingClientRect()]);
    for (let a = 0; a < titles.length; a++) for (let b = a + 1; b < titles.length; b++) {
      const [ta, ra] = titles[a], [tb, rb] = titles[b];
      const meet = ra.left < rb.right - 1 && rb.left < ra.right - 1 && ra.top < rb.bottom - 1 && rb.top < ra.bottom - 1;
      if (ra.width && rb.width && meet)
        out.push(`${name}: titles "${ta.slice(0, 40)}" and "${tb.slice(0, 40)}" overlap`);
    }
  });
  return out;
}"""

# A dataframe is drawn on a canvas (glide-data-grid), so its cells cannot be measured as text; its
# scroller can. A scroller wider than its box means the class must scroll sideways to reach a column.
TABLE_JS = """() => {
  const out = [];
  document.querySelectorAll("[data-testid='stMain'] [data-testid='stDataFrame']").forEach((table, i) => {
    if (!table.offsetParent || table.closest("details:not([open])")) return;   // in a closed tab or expander
    const scroller = table.querySelector(".dvn-scroller");
    if (!scroller) { out.push(`table ${i + 1}: no scroller found (has the data grid changed?)`); return; }
    const heads = [...table.querySelectorAll("th")].map(th => th.textContent.trim()).filter(Boolean);
    if (scroller.scrollWidth > scroller.clientWidth + 1)
      out.push(`table ${i + 1} (${heads.slice(0, 4).join(", ")}): columns scroll sideways ` +
               `(${scroller.scrollWidth}px in ${scroller.clientWidth}px)`);
  });
  return out;
}"""

# Streamlit scrolls inside its main container, not the document (document.scrollingElement stays
# 768 px tall), so a step's height is the main container's scrollHeight with that tab open.
HEIGHT_JS = """() => {
  const main = document.querySelector("[data-testid='stMain']");
  main.scrollTo(0, 0);
  const tabs = main.querySelector("[role='tablist']");
  return {page: main.scrollHeight, header: tabs ? Math.round(tabs.getBoundingClientRect().bottom) : 0};
}"""
SCREEN_PX = SIZE["height"]
# The header every step repeats: the title, the lesson box and the tab bar, 350-450 px at 1024 (the
# lesson box's two sentences wrap to 4-6 lines beside the open sidebar).
HEADER_PX = 450
STEP_PX = 2 * SCREEN_PX + HEADER_PX


# Where the open step's first figure starts on the page (the main container scrolled to its top), and what it is.
FIGURE_TOP_JS = """() => {
  const main = document.querySelector("[data-testid='stMain']");
  main.scrollTo(0, 0);
  const panels = [...main.querySelectorAll("[role='tabpanel']")].filter(p => !p.hidden && p.offsetParent);
  const root = panels.length ? panels[0] : main;
  const kinds = "[data-testid='stPlotlyChart'], [data-testid='stDataFrame'], [data-testid='stTable'], [data-testid='stImage']";
  const first = [...root.querySelectorAll(kinds)].find(f => f.getBoundingClientRect().height > 0
                                                          && !f.closest("details:not([open])"));
  if (!first) return {top: null, what: "no figure"};
  const title = first.querySelector(".gtitle");
  return {top: Math.round(first.getBoundingClientRect().top),
          what: title ? title.textContent.slice(0, 70) : first.dataset.testid};
}"""


@dataclass
class Visit:
    """One page's tour: what was cut, how tall each step is (page name -> step -> px), where its figure starts."""

    problems: list = field(default_factory=list)
    heights: dict = field(default_factory=dict)
    unhealthy: str = ""
    contrast: list = field(default_factory=list)   # (step, "caption" or "plot", ratio, text)
    figures: dict = field(default_factory=dict)    # step -> {"top": px or None, "what": its title}


def problems(app_page) -> list[str]:
    app_page.page.wait_for_timeout(500)   # let plotly lay the figures out at this width
    return (app_page.page.evaluate(CLIPPED_JS) + app_page.page.evaluate(FIGURE_JS)
            + app_page.page.evaluate(TABLE_JS))


def answer_predictions(app_page) -> None:
    """Show what the class sees once it has answered: every prediction in view gets its first option (a page or
    step added later is answered the same way, by its "Your prediction" radio)."""
    for group in app_page.page.get_by_role("radiogroup", name=re.compile("^Your prediction")).all():
        if group.is_visible() and not any(r.is_checked() for r in group.get_by_role("radio").all()):
            with app_page.rerun():
                group.locator("label").first.click()


@pytest.fixture(scope="module")
def tour(browser, streamlit_server, artifacts_dir) -> dict:
    """Every page at 1024 x 768, every step of it clicked: one browser visit shared by the tests below."""
    context = browser.new_context(viewport=SIZE)
    context.set_default_timeout(60_000)
    app_page = AppPage(context.new_page(), streamlit_server, artifacts_dir / "screenshots")
    app_page.page.on("pageerror", lambda exc: app_page.js_errors.append(str(exc)))
    visits = {}
    try:
        for i, spec in enumerate(SPECS):
            visit = visits[spec.name] = Visit()
            app_page.log_start = streamlit_server.log_path.stat().st_size
            app_page.open("" if i == 0 else spec.name)   # the first page lives at the root
            for n, step in enumerate(spec.steps or ("",), 1):
                if step:
                    app_page.step(step)
                answer_predictions(app_page)
                visit.figures[step or spec.title] = app_page.page.evaluate(FIGURE_TOP_JS)
                visit.problems += [f"{step or spec.title}: {p}" for p in problems(app_page)]
                measured = app_page.page.evaluate(CONTRAST_JS)
                visit.contrast += [(step or spec.title, kind, ratio, text) for kind in ("captions", "plot")
                                   for ratio, text in measured[kind]]
                visit.heights[step or spec.title] = app_page.page.evaluate(HEIGHT_JS)
                app_page.screenshot(f"projector-{spec.name.replace('_', '-')}" + (f"-{n}" if step else ""))
            try:
                app_page.assert_healthy()
            except AssertionError as e:
                visit.unhealthy = str(e)
    finally:
        context.close()
    (artifacts_dir / "projector-heights.json").write_text(
        json.dumps({name: v.heights for name, v in visits.items()}, indent=1))
    (artifacts_dir / "figure-first.json").write_text(
        json.dumps({name: v.figures for name, v in visits.items()}, indent=1))
    return visits


@pytest.mark.parametrize("page", [p.name for p in SPECS])
def test_nothing_a_class_reads_is_cut_at_1024_by_768(tour, page):
    assert tour[page].unhealthy == ""
    assert tour[page].problems == [], "\n".join(tour[page].problems)


@pytest.mark.parametrize("page", [p.name for p in SPECS if p.steps])
def test_each_step_fits_about_two_screens_at_1024_by_768(tour, page):
    heights = tour[page].heights
    assert list(heights) == list(next(p for p in SPECS if p.name == page).steps)   # every step was opened
    tall = {step: h["page"] for step, h in heights.items() if h["page"] > STEP_PX}
    assert tall == {}, f"steps taller than two screens plus the header ({STEP_PX} px): {tall}"
    assert all(h["header"] < SCREEN_PX for h in heights.values()), heights    # each step starts on screen one


@pytest.mark.parametrize("page", [p.name for p in SPECS])
def test_each_steps_first_figure_starts_on_the_first_screen_at_1024_by_768(tour, page):
    figures = tour[page].figures
    spec = next(p for p in SPECS if p.name == page)
    assert list(figures) == list(spec.steps or (spec.title,))               # every step was measured
    print(f"{page}: " + "; ".join(f"{step}: {f['top']} px ({f['what']})" for step, f in figures.items()))
    late = {step: f for step, f in figures.items() if f["top"] is not None and f["top"] >= SCREEN_PX}
    assert late == {}, f"the first figure starts below the first {SCREEN_PX} px: {late}"


def test_the_training_demo_reads_at_1024_by_768(app_page):
    app_page.open("leakage_lab")
    app_page.step("Train with the mask off")
    app_page.click("Train both")
    assert app_page.metric("Train loss, mask off")       # the step stays open through the rerun
    found = problems(app_page)
    trained = app_page.page.evaluate(HEIGHT_JS)
    app_page.screenshot("projector-leakage-lab-trained")
    print(f"the training step, trained: {trained}")   # docs/measurements.md's figures; -s shows it
    app_page.assert_healthy()
    assert found == [], "\n".join(found)
    assert trained["page"] <= STEP_PX, f"the trained step is {trained['page']} px, over {STEP_PX}"


@pytest.mark.slow_model
def test_the_smollm2_reveal_fits_about_two_screens_at_1024_by_768(app_page):
    """The heaviest step: a pretrained model's reveal (its texts, changed predictions and words fold away)."""
    app_page.open("leakage_lab")
    app_page.select("Scenario", "transformers' own sdpa attention, use_cache left on (SmolLM2)")
    app_page.radio("Your prediction", "They change")
    assert any("Verdict: NOT EQUIVALENT" in w for w in app_page.alerts("warning")), app_page.text()[:2000]
    found = problems(app_page)
    revealed = app_page.page.evaluate(HEIGHT_JS)
    app_page.screenshot("projector-leakage-lab-smollm2")
    print(f"the SmolLM2 reveal: {revealed}")
    app_page.assert_healthy()
    assert found == [], "\n".join(found)
    assert revealed["page"] <= STEP_PX, f"the SmolLM2 reveal is {revealed['page']} px, over {STEP_PX}"


def test_your_data_reads_at_1024_by_768_in_every_step(app_page, tmp_path):
    """An engineer's profile: its strategy table adds trained tokens per slot, and still fits."""
    from packing_core.data.profile import LengthProfile

    profile = LengthProfile.from_counts({60: 40_000, 200: 20_000, 450: 5_000},
                                        {60: 800_000, 200: 1_600_000, 450: 500_000}, kind="prompt-completion")
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(profile.to_dict()))
    app_page.open("dataset_explorer")
    app_page.upload(str(path))
    app_page.click("Analyse this file")
    assert "Trained tokens per slot: bfd" in app_page.text()   # the profile is the page's subject
    found, heights = [], {}
    for step in next(p for p in SPECS if p.name == "dataset_explorer").steps:
        app_page.step(step)
        found += [f"{step}: {p}" for p in problems(app_page)]
        heights[step] = app_page.page.evaluate(HEIGHT_JS)["page"]
    app_page.screenshot("projector-dataset-explorer-your-data")
    print(f"your data, by step: {heights}")
    app_page.assert_healthy()
    assert found == [], "\n".join(found)
    assert max(heights.values()) <= STEP_PX, heights


@pytest.mark.parametrize("bug", ["continuous-absolute-positions", "row-cu-seqlens"])
def test_a_bug_zoo_reproduction_reads_at_1024_by_768(app_page, bug):
    """A reproduction's figures (a tiny model's logit diffs; a planted fault's mask): titles, labels inside."""
    from packing_lab.zoo import zoo_entry

    entry = zoo_entry(bug)
    app_page.open("bug_zoo")
    if entry.planted:
        app_page.step("Planted faults")
    box = app_page.page.get_by_test_id("stExpander").filter(has_text=entry.title).first
    button = box.get_by_role("button", name="Plant it" if entry.planted else "Reproduce", exact=True)
    app_page.unfold(button, entry.title)        # opened, and settled: a click during the animation is lost
    with app_page.rerun():
        button.click()
    charts = box.locator("[data-testid='stPlotlyChart']")
    charts.first.wait_for(state="visible")
    found = problems(app_page)
    app_page.screenshot(f"projector-bug-zoo-{bug}")
    app_page.assert_healthy()
    assert charts.count() >= 1 and found == [], "\n".join(found)


# Contrast as a class sees it, computed in the page: each caption's colour (its alpha and every ancestor's
# opacity applied) over the first background behind it, and each plotly word (tick, axis title, figure and
# panel titles, legend, labels on the plot) over its figure's paper. WCAG 2's formula; 4.5:1 is AA for text.
CONTRAST_JS = """() => {
  const rgba = s => { const m = s.match(/[\\d.]+/g).map(Number); return [m[0], m[1], m[2], m.length > 3 ? m[3] : 1]; };
  const lum = ([r, g, b]) => { const f = c => { c /= 255; return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
  const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
  const over = ([r, g, b, a], bg) => [r * a + bg[0] * (1 - a), g * a + bg[1] * (1 - a), b * a + bg[2] * (1 - a)];
  const behind = el => { for (let e = el; e; e = e.parentElement) { const c = rgba(getComputedStyle(e).backgroundColor);
    if (c[3] > 0.5) return c; } return [255, 255, 255, 1]; };
  const opacity = el => { let o = 1;
    for (let e = el; e; e = e.parentElement) o *= Number(getComputedStyle(e).opacity); return o; };
  const seen = el => { const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0 && el.textContent.trim(); };
  const out = {captions: [], plot: []};
  document.querySelectorAll("[data-testid='stMain'] [data-testid='stCaptionContainer']").forEach(el => {
    if (!seen(el) || el.closest("[class*='st-key-stale_']")) return;   // a stale result is dimmed on purpose
    const fg = rgba(getComputedStyle(el).color); fg[3] *= opacity(el);
    const bg = behind(el);
    out.captions.push([ratio(over(fg, bg), bg), el.textContent.trim().slice(0, 40)]);
  });
  document.querySelectorAll("[data-testid='stMain'] .js-plotly-plot").forEach(plot => {
    const paper = rgba(getComputedStyle(plot.querySelector(".main-svg")).backgroundColor || "rgb(255,255,255)");
    const bg = paper[3] > 0.5 ? paper : behind(plot);
    plot.querySelectorAll(".xtick text, .ytick text, .g-xtitle text, .g-ytitle text, .gtitle, .annotation-text, .legendtext")
      .forEach(t => { if (!seen(t)) return;
        const cs = getComputedStyle(t); const fg = rgba(cs.fill); fg[3] *= Number(cs.fillOpacity || 1) * opacity(t);
        out.plot.push([ratio(over(fg, bg), bg), t.textContent.trim().slice(0, 40)]); });
  });
  return out;
}"""
CONTRAST_GOAL = 4.5


@pytest.mark.parametrize("page", [p.name for p in SPECS])
def test_captions_and_plot_text_read_at_four_and_a_half_to_one_or_more(tour, page):
    low = [f"{where}: {kind} {text!r} at {ratio:.2f}:1" for where, kind, ratio, text in tour[page].contrast
           if ratio < CONTRAST_GOAL]
    assert tour[page].contrast, "nothing measured: no caption or figure text was found"
    assert low == [], "\n".join(low)


ANSWER = re.compile(r"^(Right|Not this time)")


@pytest.mark.parametrize("page, option", [("why_packing", "4,096 slots"), ("leakage_lab", "They change")])
def test_the_answer_to_a_prediction_comes_into_view(app_page, page, option):
    """Once it sat at y = 790 of a 768-pixel projector: the class saw nothing change."""
    app_page.open(page)
    app_page.radio("Your prediction", option)
    answer = app_page.main.locator("[data-testid='stAlert']").filter(has_text=ANSWER).first
    answer.wait_for()
    app_page.page.wait_for_timeout(1200)                    # the page scrolls smoothly to it
    box = answer.bounding_box()
    assert box and 0 <= box["y"] and box["y"] + box["height"] <= SIZE["height"], box
    app_page.screenshot(f"projector-{page.replace('_', '-')}-answer")
    app_page.assert_healthy()


PROGRESS_IN_VIEW_JS = """() => [...document.querySelectorAll("[data-testid='stMain'] [data-testid='stProgress']")]
  .some(el => { const r = el.getBoundingClientRect(); return r.height > 0 && r.top >= 0 && r.bottom <= innerHeight; })"""


def test_training_runs_only_on_its_button_and_shows_its_progress_in_view(app_page):
    """A new seed or the other neighbours once trained at once (22 s), its progress bar below the fold."""
    from packing_lab.demos import cached_pair

    seed = next(s for s in range(500 + int(time.time()) % 400, 1000) if cached_pair(s, "independent") is None)
    app_page.open("leakage_lab?step=3")
    app_page.click("Train both")                                           # the lesson's seed: cached, at once
    box = app_page.control("spinbutton", "Seed")
    box.fill(str(seed))
    with app_page.rerun():
        box.press("Enter")
    app_page.radio("Neighbouring documents", "1 in 8 (shuffled)")
    assert "Training the tiny model" not in app_page.text()
    assert any(w.startswith("Stale") for w in app_page.alerts("warning")), app_page.alerts("warning")
    assert cached_pair(seed, "independent") is None                         # nothing trained
    seen = False
    with app_page.rerun(timeout_ms=300_000):
        app_page.page.get_by_role("button", name="Train both", exact=True).click()
        deadline = time.monotonic() + 300
        while not seen and time.monotonic() < deadline:
            seen = app_page.page.evaluate(PROGRESS_IN_VIEW_JS)
            app_page.page.wait_for_timeout(150)
    assert seen, "the training's progress bar never showed inside the 768-pixel window"
    assert app_page.metric("Train loss, mask off") and not any(w.startswith("Stale") for w in app_page.alerts("warning"))
    app_page.assert_healthy()
