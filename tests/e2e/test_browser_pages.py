"""Every page in a real Chromium: the numbers the lab teaches, after real clicks.

Each test gets a fresh browser context (a new Streamlit session) on the one server of the
test session, so tests do not depend on each other's order. Full-page screenshots land in
``artifacts/screenshots/``.
"""
import re

import pytest

pytestmark = pytest.mark.browser


def test_every_page_renders_from_the_sidebar_without_an_exception(app_page):
    app_page.open()
    links = app_page.page.get_by_test_id("stSidebarNavLink")
    labels = [t.strip() for t in links.locator("[data-testid='stMarkdownContainer']").all_inner_texts()]
    assert len(labels) >= 6, f"expected six pages in the sidebar, found {labels}"
    for label in labels:
        with app_page.rerun():
            links.filter(has_text=label).first.click()
        heading = app_page.main.locator("h1").first.inner_text()
        assert heading.strip(), f"page {label!r} has no title"
        app_page.assert_healthy()
        app_page.screenshot("page-" + label.lower().replace(" ", "-"))


def test_why_packing_shows_22_2_against_88_9_percent(app_page):
    app_page.open()
    assert "Make a prediction to see the answer" in app_page.text()   # the answer waits for a guess
    app_page.toggle("Skip predictions")
    assert app_page.metric("Padded to the context") == "22.2%"
    assert app_page.metric("Concatenated and cut") == "88.9%"
    assert "4x fewer slots" in app_page.text()
    app_page.assert_healthy()


def test_padded_vs_packed_strategy_and_context_move_the_utilisation(app_page):
    app_page.open("padded_vs_packed")
    app_page.select("Strategy", "pad")
    assert (app_page.metric("Slots"), app_page.metric("Utilisation")) == ("4,096", "22.2%")
    app_page.slider_keys("Context length", "ArrowRight")       # 512 -> 1024
    assert app_page.slider_value("Context length") == "1024"
    assert (app_page.metric("Slots"), app_page.metric("Utilisation")) == ("8,192", "11.1%")
    app_page.select("Strategy", "concat-cut")
    assert app_page.metric("Utilisation") == "88.9%"           # 910 / 1,024 at any context
    app_page.assert_healthy()
    app_page.screenshot("padded-vs-packed-concat-cut-1024")


def test_padded_vs_packed_refuses_junk_lengths_in_one_escaped_line_and_recovers(app_page):
    app_page.open("padded_vs_packed")
    app_page.fill("Document lengths", "120, ninety, <b id=injected>300</b>")
    errors = app_page.alerts("error")
    assert len(errors) == 1 and "ninety" in errors[0], errors
    assert app_page.page.locator("#injected").count() == 0      # shown as text, not as HTML
    app_page.assert_healthy()
    app_page.click("Reset")
    assert app_page.alerts("error") == []
    assert app_page.metric("Utilisation") == "88.9%"


def test_masks_and_labels_check_catches_a_planted_bug(app_page):
    app_page.open("masks_and_labels")
    app_page.step("Break it, check it")    # the checks' step; the controls above serve every step
    assert any("SOUND" in s for s in app_page.alerts("success"))
    app_page.select("Break it", "row-cu-seqlens")
    assert any("segments_disagree_with_cu_seqlens" in e for e in app_page.alerts("error")), app_page.alerts("error")
    app_page.toggle("Instruction tuning")
    app_page.select("Break it", "prompts-in-the-loss")
    said = " ".join(app_page.alerts("error"))                    # an error finding is red
    shown = re.search(r"Loss positions: (\d+), answer targets \([^)]*\): (\d+)", said)
    assert shown and shown[1] != shown[2], said                  # prompts trained: more loss than answers
    app_page.assert_healthy()
    app_page.screenshot("masks-and-labels-prompts-in-the-loss")


def test_dataset_explorer_follows_the_sidebar_dataset(app_page):
    app_page.open("dataset_explorer")
    assert (app_page.metric("Documents"), app_page.metric("Mean")) == ("200,000", "114")
    app_page.select("Dataset", "bimodal")
    assert app_page.metric("Documents") == "100,000"
    assert any("Recommendation" in s for s in app_page.alerts("info"))
    app_page.radio("Documents longer than the context", "drop")
    app_page.assert_healthy()
    app_page.screenshot("dataset-explorer-bimodal")


def test_leakage_lab_mask_off_breaks_equivalence_and_rope_forgives_continuous_positions(app_page):
    app_page.open("leakage_lab")
    assert any("Make a prediction" in s for s in app_page.alerts("info"))
    app_page.radio("Your prediction", "They stay the same")
    assert any(s.startswith("Right") for s in app_page.alerts("success")), app_page.alerts("success")
    assert any("Verdict: EQUIVALENT" in s for s in app_page.alerts("success"))
    app_page.toggle("Skip predictions")
    app_page.select("Scenario", "Advanced: set every switch yourself")   # the free grid, unfolded
    app_page.radio("Attention mask", "off")
    assert any("Verdict: NOT EQUIVALENT" in w for w in app_page.alerts("warning"))
    app_page.radio("Attention mask", "on")
    app_page.radio("Position ids", "continuous")
    assert any("Verdict: EQUIVALENT" in s for s in app_page.alerts("success"))   # RoPE: only offsets matter
    app_page.select("Model", "tiny model, learned absolute positions")
    assert any("Verdict: NOT EQUIVALENT" in w for w in app_page.alerts("warning"))
    app_page.assert_healthy()
    app_page.screenshot("leakage-lab-absolute-continuous")


def test_benchmark_runs_a_small_case_and_shows_the_table(app_page):
    app_page.open("benchmark")
    app_page.slider_keys("Documents", "Home")   # 32 documents: seconds on a CPU
    app_page.slider_keys("Repeats", "Home")
    app_page.click("Run the benchmark")
    table = app_page.main.get_by_test_id("stDataFrame")
    assert table.count() == 1
    assert app_page.alerts("error") == []
    app_page.assert_healthy()
    app_page.screenshot("benchmark-32-documents")
