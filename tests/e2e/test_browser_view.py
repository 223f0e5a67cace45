"""A lesson you can share, in a real Chromium: a link restores a view exactly (page, step, settings), the
copy control copies it, a bad link opens the default view with one line, and a teacher can hide the controls.
"""
import re
from urllib.parse import parse_qs, urlsplit

import pytest

from app_pages._content import page
from tests._support import AppPage

pytestmark = pytest.mark.browser


def _params(url: str) -> dict:
    return {k: v[-1] for k, v in parse_qs(urlsplit(url).query).items()}


def _selected_step(app_page) -> str:
    return app_page.page.locator("[role='tab'][aria-selected='true']").inner_text().strip()


def _view(app_page) -> dict:
    """What the class sees of the Masks and labels page: its step, its settings' widgets, its verdicts."""
    return {"path": urlsplit(app_page.page.url).path, "step": _selected_step(app_page),
            "width": app_page.slider_value("Row width"),
            "break": app_page.control("combobox", "Break it").inner_text(),
            "attn": app_page.control("combobox", "Attention implementation").inner_text(),
            "alerts": app_page.alerts("warning") + app_page.alerts("success")}


def test_a_link_restores_the_view_exactly(browser, streamlit_server, artifacts_dir, app_page):
    app_page.open("masks_and_labels")
    app_page.slider_keys("Row width", "ArrowRight")                        # 64 -> 128
    app_page.select("Break it", "row-cu-seqlens")
    app_page.select("Attention implementation", "flash_attention_2")
    with app_page.rerun():                                                 # a tab that tracks its step reruns
        app_page.page.get_by_role("tab", name=re.compile(r"^4 · ")).click()
    seen = _view(app_page)
    link = app_page.page.url
    assert _params(link) == {"width": "128", "break": "row-cu-seqlens", "attn": "flash_attention_2", "step": "4"}
    assert seen["step"] == "4 · Break it, check it" and seen["width"] == "128" and seen["alerts"]
    context = browser.new_context(viewport={"width": 1400, "height": 1000})   # someone else, opening the link
    try:
        other = AppPage(context.new_page(), streamlit_server, artifacts_dir / "screenshots")
        other.page.goto(link, wait_until="domcontentloaded")
        other.wait()
        assert _view(other) == seen
        assert _params(other.page.url) == _params(link)                     # and the link stays the link
        other.assert_healthy()
        other.screenshot("view-restored-from-a-link")
    finally:
        context.close()


def test_the_copy_control_copies_the_link_of_this_view(browser, streamlit_server, artifacts_dir):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    try:
        page = AppPage(context.new_page(), streamlit_server, artifacts_dir / "screenshots")
        page.open("leakage_lab?train_seed=7&neighbours=independent")
        page.page.get_by_role("button", name="Copy link to this view").click()
        page.page.get_by_text("copied").wait_for()
        copied = page.page.evaluate("navigator.clipboard.readText()")
        assert copied == page.page.url and _params(copied) == {"train_seed": "7", "neighbours": "independent"}
        page.assert_healthy()
    finally:
        context.close()


def test_an_unknown_page_with_markup_opens_the_first_page_with_one_line_and_no_error_box(app_page):
    app_page.open("no_such_page?width=%3Cimg%20id%3Dinjected%20src%3Dx%3E&strategy=%3Cb%20id%3Dbold%3Ex%3C%2Fb%3E")
    assert app_page.main.locator("h1").first.inner_text() == "Why packing"
    lines = [a for a in app_page.alerts("info") if "Part of this link was ignored" in a]
    assert len(lines) == 1 and "no_such_page" in lines[0] and "width" in lines[0] and "strategy" in lines[0], lines
    assert app_page.page.locator("#injected, #bold").count() == 0          # shown as text, never as markup
    assert app_page.page.get_by_role("dialog").count() == 0                 # no "Page not found" box
    assert app_page.exceptions() == [] and app_page.alerts("error") == []
    assert _params(app_page.page.url) == {}
    app_page.assert_healthy()


def test_a_teacher_can_hide_the_controls_for_a_focused_screen(app_page):
    app_page.open("leakage_lab?controls=hidden&step=1")
    assert not app_page.page.get_by_test_id("stSidebar").is_visible() or \
        app_page.page.get_by_test_id("stSidebar").get_attribute("aria-expanded") == "false"
    widgets = app_page.page.locator("[data-testid='stMain'] [class*='st-key-w_']")
    assert widgets.count() > 0 and not any(w.is_visible() for w in widgets.all())   # the settings are there, hidden
    assert app_page.control("radiogroup", "Your prediction").is_visible()      # the class still predicts
    app_page.radio("Your prediction", "They stay the same")
    assert any("Verdict: EQUIVALENT" in s for s in app_page.alerts("success"))
    assert _params(app_page.page.url)["controls"] == "hidden"
    app_page.assert_healthy()


def test_each_step_ends_with_a_button_to_the_next_and_the_last_with_the_next_page(app_page):
    app_page.open("why_packing")
    app_page.toggle("Skip predictions")
    app_page.click("Next: step 2 · Where documents start")
    assert _selected_step(app_page) == "2 · Where documents start"
    assert _params(app_page.page.url).get("step") == "2"
    tabs = app_page.page.locator("[role='tablist']").first
    app_page.page.wait_for_timeout(800)                                     # the scroll to the tabs is smooth
    top = tabs.bounding_box()["y"]
    assert 0 <= top < app_page.page.viewport_size["height"], top            # the new step starts in view
    for n, name in list(enumerate(page("why_packing").steps, 1))[2:]:      # step 3 to the last, by their names
        app_page.click(f"Next: step {n} · {name}")
    with app_page.rerun():
        app_page.page.get_by_role("link", name=re.compile("Next page: Padded vs packed")).click()
    assert app_page.main.locator("h1").first.inner_text() == "Padded vs packed"
    app_page.assert_healthy()


@pytest.mark.viewport(width=1024, height=768)
def test_a_browser_that_prefers_dark_gets_the_pinned_light_theme_and_legible_figures(browser, streamlit_server,
                                                                                     artifacts_dir):
    context = browser.new_context(viewport={"width": 1024, "height": 768}, color_scheme="dark")
    try:
        page = AppPage(context.new_page(), streamlit_server, artifacts_dir / "screenshots")
        page.open("benchmark")
        page.page.locator(".js-plotly-plot").first.wait_for()
        page.page.wait_for_timeout(1000)
        background = page.page.evaluate(
            "getComputedStyle(document.querySelector(\"[data-testid='stApp']\")).backgroundColor")
        assert background == "rgb(255, 255, 255)"                  # .streamlit/config.toml pins light, with its reason
        ticks = page.page.evaluate("""() => [...document.querySelectorAll(
            '.js-plotly-plot .gtitle, .js-plotly-plot .annotation-text, .js-plotly-plot .legendtext')]
            .map(t => getComputedStyle(t).fill)""")
        assert ticks and set(ticks) <= {"rgb(38, 39, 48)"}, ticks  # the figure's own dark text, on its white paper
        page.screenshot("dark-preference-benchmark")
        page.assert_healthy()
    finally:
        context.close()
