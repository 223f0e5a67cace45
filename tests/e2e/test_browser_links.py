"""Every view is its link, in a real Chromium at a projector's 1024 x 768: the address follows each declared setting
and the step as they change, on every page; a copied link opens that view in a fresh browser, answered gates
included; ``controls=hidden`` keeps what the step's lesson needs.

The round trip walks ``PAGES`` and their steps (a page or step added later is covered without an edit here): in one
browser the step is opened, any prediction in view is answered, and the address is opened in a second browser,
which must show the same step, the same widget values, the same headings, figure titles and boxes.
"""
import re
from urllib.parse import parse_qs, urlsplit

import pytest

from app_pages import _content
from app_pages._content import PAGES
from tests._support import AppPage

pytestmark = [pytest.mark.browser, pytest.mark.viewport(width=1024, height=768)]
SIZE = {"width": 1024, "height": 768}
PREDICTION = "Your prediction"

# What a class sees of a view: the open step, every widget's value, the headings, figure titles and boxes of the
# open step (the page itself where it has no steps). The lesson box is left out: opening it is the teacher's click.
VIEW_JS = """() => {
  const main = document.querySelector("[data-testid='stMain']");
  const panels = [...main.querySelectorAll("[role='tabpanel']")].filter(p => !p.hidden && p.offsetParent);
  const root = panels.length ? panels[0] : main;
  const shown = el => el.getBoundingClientRect().height > 0 && !el.closest("[data-testid='stExpander'] details:not([open])")
                      && !el.closest(".pl-lesson");
  const text = el => el.innerText.trim().replace(/\\s+/g, " ");
  const tab = main.querySelector("[role='tab'][aria-selected='true']");
  const widgets = [];
  main.querySelectorAll("[role='slider']").forEach(s => widgets.push(["slider", s.getAttribute("aria-valuetext")]));
  main.querySelectorAll("[role='radiogroup']").forEach(g => {
    const on = [...g.querySelectorAll("input[type='radio']")].find(r => r.checked);
    widgets.push(["radio", g.getAttribute("aria-label"), on ? text(on.closest("label")) : null]);
  });
  main.querySelectorAll("input[type='checkbox']").forEach(c => widgets.push(["checkbox", text(c.closest("label")), c.checked]));
  main.querySelectorAll("[data-baseweb='select']").forEach(s => widgets.push(["select", text(s)]));
  main.querySelectorAll("textarea, input[type='text'], input[type='number']").forEach(t => widgets.push(["text", t.value]));
  return {
    step: tab ? text(tab) : "",
    widgets,
    headings: [...root.querySelectorAll("h1, h2, h3")].filter(shown).map(text),
    figures: [...root.querySelectorAll(".js-plotly-plot")].filter(shown)
               .map(p => (p.querySelector(".gtitle") || {textContent: "(untitled)"}).textContent),
    boxes: [...root.querySelectorAll("[data-testid^='stAlertContent']")].filter(shown)
             .map(a => [a.dataset.testid, text(a).slice(0, 160)])
             .filter(([kind, said]) => !/busy|load average/i.test(said)),
  };
}"""


def _params(url: str) -> dict:
    return {k: v[-1] for k, v in parse_qs(urlsplit(url).query).items()}


def _browser(browser, streamlit_server, artifacts_dir, **context) -> tuple[object, AppPage]:
    ctx = browser.new_context(viewport=SIZE, **context)
    ctx.set_default_timeout(120_000)
    app = AppPage(ctx.new_page(), streamlit_server, artifacts_dir / "screenshots")
    app.page.on("pageerror", lambda exc: app.js_errors.append(str(exc)))
    return ctx, app


def _answer_predictions(app: AppPage) -> None:
    """Answer every prediction in view with its first option, as a class would before the reveal."""
    for group in app.page.get_by_role("radiogroup", name=re.compile("^" + PREDICTION)).all():
        if group.is_visible() and not any(r.is_checked() for r in group.get_by_role("radio").all()):
            with app.rerun():
                group.locator("label").first.click()


def _open_step(app: AppPage, n: int, name: str) -> None:
    if app.page.locator("[role='tab'][aria-selected='true']").inner_text().strip() != f"{n} · {name}":
        with app.rerun():
            app.page.get_by_role("tab", name=re.compile(rf"^{n} · ")).click()
    app.page.wait_for_timeout(400)


def _view(app: AppPage) -> dict:
    app.page.wait_for_timeout(300)
    return app.page.evaluate(VIEW_JS)


def _opened_elsewhere(browser, streamlit_server, artifacts_dir, link: str) -> tuple[dict, dict]:
    """The view a fresh browser shows for ``link``, and the address it ends on."""
    ctx, other = _browser(browser, streamlit_server, artifacts_dir)
    try:
        other.page.goto(link, wait_until="domcontentloaded")
        other.wait()
        seen = _view(other)
        other.assert_healthy()
        return seen, _params(other.page.url)
    finally:
        ctx.close()


STEPS = [(p.name, n, name) for p in PAGES for n, name in (enumerate(p.steps, 1) if p.steps else [(0, "")])]


@pytest.mark.parametrize("page, n, name", STEPS, ids=[f"{p}-{n}" for p, n, _ in STEPS])
def test_every_step_of_every_page_opens_from_its_own_link_as_it_was(browser, streamlit_server, artifacts_dir,
                                                                   page, n, name):
    ctx, app = _browser(browser, streamlit_server, artifacts_dir)
    try:
        app.open("" if page == PAGES[0].name else page)
        _answer_predictions(app)
        if n:
            _open_step(app, n, name)
            _answer_predictions(app)
        seen, link = _view(app), app.page.url
        app.assert_healthy()
    finally:
        ctx.close()
    if n > 1:
        assert _params(link).get("step") == str(n), link
    again, address = _opened_elsewhere(browser, streamlit_server, artifacts_dir, link)
    assert again == seen
    assert address == _params(link)                    # and the link stays the link


def test_a_copied_link_to_a_later_step_of_why_packing_opens_it_answered(browser, streamlit_server, artifacts_dir):
    """The teacher predicted, set 128 rows per step in step 4 and copied the link: the class sees step 4, not a gate."""
    ctx, app = _browser(browser, streamlit_server, artifacts_dir)
    ctx.grant_permissions(["clipboard-read", "clipboard-write"])
    try:
        app.open()
        app.radio(PREDICTION, "4,096 slots")
        _open_step(app, 4, "Schedule")
        box = app.control("spinbutton", "Rows per optimizer step")
        box.fill("128")
        with app.rerun():
            box.press("Enter")
        app.page.get_by_role("button", name="Copy link to this view").click()
        app.page.get_by_text("copied").wait_for()
        copied = app.page.evaluate("navigator.clipboard.readText()")
        seen = _view(app)
    finally:
        ctx.close()
    assert _params(copied)["step"] == "4" and _params(copied)["rows_per_step"] == "128"
    for link in (copied, copied + "&controls=hidden"):
        ctx, other = _browser(browser, streamlit_server, artifacts_dir)
        try:
            other.page.goto(link, wait_until="domcontentloaded")
            other.wait()
            assert "Make a prediction" not in other.text(), link
            assert other.metric("Steps per epoch"), link
            if "controls" not in link:
                assert _view(other) == seen
            other.assert_healthy()
        finally:
            ctx.close()


def _placed(app: AppPage) -> str:
    return app.page.locator(".js-plotly-plot .gtitle").first.text_content()


def test_watch_it_packs_address_follows_the_packer_and_the_step_and_its_link_opens_that_view(
        browser, streamlit_server, artifacts_dir):
    n = len(_content.WATCH_LENGTHS)
    ctx, app = _browser(browser, streamlit_server, artifacts_dir)
    ctx.grant_permissions(["clipboard-read", "clipboard-write"])
    try:
        app.open("watch_it_pack")
        app.radio("Packer", "next-fit")
        app.page.get_by_role("button", name="Play", exact=True).click()          # an earlier Play, to its end
        app.main.get_by_text(re.compile(r"^The plan \(documents per row\):")).wait_for(timeout=90_000)
        app.page.get_by_role("button", name="Play", exact=True).wait_for(timeout=30_000)
        app.wait()
        app.radio("Packer", "ffd")
        assert _params(app.page.url).get("strategy") == "ffd" and "shown" not in _params(app.page.url)
        for _ in range(7):
            app.click("Step")
        assert _placed(app).startswith(f"ffd: 7 of {n} placed")
        assert {k: v for k, v in _params(app.page.url).items() if k in ("strategy", "shown")} == \
            {"strategy": "ffd", "shown": "7"}, app.page.url
        app.page.get_by_role("button", name="Copy link to this view").click()
        app.page.get_by_text("copied").wait_for()
        copied = app.page.evaluate("navigator.clipboard.readText()")
        assert copied == app.page.url
        app.assert_healthy()
    finally:
        ctx.close()
    ctx, other = _browser(browser, streamlit_server, artifacts_dir)
    try:
        other.page.goto(copied, wait_until="domcontentloaded")
        other.wait()
        assert _placed(other).startswith(f"ffd: 7 of {n} placed")
        assert f"Step 7 of {n}:" in other.text()
        assert other.control("radiogroup", "Packer").get_by_role("radio", name="ffd").is_checked()
        other.assert_healthy()
    finally:
        ctx.close()


def test_a_hand_written_watch_it_pack_link_opens_at_its_packer_and_step(browser, streamlit_server, artifacts_dir):
    n = len(_content.WATCH_LENGTHS)
    ctx, app = _browser(browser, streamlit_server, artifacts_dir)
    try:
        app.open("watch_it_pack?strategy=ffd&shown=5")
        assert _placed(app).startswith(f"ffd: 5 of {n} placed")
        assert _params(app.page.url) == {"strategy": "ffd", "shown": "5"}
        app.assert_healthy()
    finally:
        ctx.close()


def test_a_focused_watch_it_pack_screen_keeps_the_packer_choice(browser, streamlit_server, artifacts_dir):
    """Comparing the packers is the page's lesson: ``controls=hidden`` hides the settings, never the packer."""
    ctx, app = _browser(browser, streamlit_server, artifacts_dir)
    try:
        app.open("watch_it_pack?controls=hidden")
        packer = app.control("radiogroup", "Packer")
        assert packer.is_visible()
        app.radio("Packer", "optimal")
        assert _placed(app).startswith("optimal: 0 of")
        assert _params(app.page.url) == {"strategy": "optimal", "controls": "hidden"}
        app.assert_healthy()
    finally:
        ctx.close()
