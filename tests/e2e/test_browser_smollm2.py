"""The lab's headline on a real pretrained model, in a real browser: SmolLM2's verdict in the Leakage lab.

On a fresh machine this is the first thing that broke (a missing install step); the test
picks SmolLM2, runs it with the mask on and off, and reads the verdicts the page shows.
"""
import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow_model]


def test_leakage_lab_gives_smollm2_verdicts_with_the_mask_on_and_off(app_page):
    app_page.open("leakage_lab")
    app_page.select("Scenario", "Advanced: set every switch yourself")   # the free grid, unfolded
    app_page.select("Model", "SmolLM2-135M-Instruct (pretrained, Q4_1 weights dequantised)")
    app_page.toggle("Skip predictions")
    assert any("Verdict: EQUIVALENT" in s for s in app_page.alerts("success")), app_page.text()[:2000]
    app_page.radio("Attention mask", "off")
    assert any("Verdict: NOT EQUIVALENT" in w for w in app_page.alerts("warning")), app_page.text()[:2000]
    app_page.assert_healthy()
    app_page.screenshot("leakage-lab-smollm2-mask-off")
