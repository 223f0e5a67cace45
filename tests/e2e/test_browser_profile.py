"""The Dataset explorer reads an uploaded length profile through its one uploader: strategies, loss share, balance."""
import json

import pytest

from packing_core.data.profile import LengthProfile, SourceCount

pytestmark = pytest.mark.browser


def test_an_uploaded_profile_shows_the_strategy_table_and_the_balance(app_page, tmp_path):
    profile = LengthProfile.from_counts({60: 40_000, 200: 20_000, 450: 5_000}, {60: 800_000, 200: 1_600_000, 450: 500_000},
                                        kind="prompt-completion", tokenizer="smollm2",
                                        sources=(SourceCount("train.jsonl", 65_000),))
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(profile.to_dict()))
    app_page.open("dataset_explorer")
    app_page.upload(str(path))
    app_page.click("Analyse this file")
    assert app_page.metric("Tokens in the loss") == f"{profile.loss_share:.1%}"
    text = app_page.text()
    assert "Trained tokens per slot: bfd" in text and "more training per step" in text
    charts = app_page.page.locator("[data-testid='stMain'] [data-testid='stPlotlyChart']:visible")
    assert charts.count() == 1                                          # the histogram
    app_page.step("Every strategy")
    # 65,000 documents are fewer than the sample: the order-dependent strategies run on all of them, shuffled
    assert "Measured on all 65,000 documents in a random order (seed 0)" in app_page.text()
    assert charts.count() == 1                                          # the strategies
    app_page.step("Balance")
    assert "slowest rank" in app_page.text() and charts.count() == 1   # the balance (the longest documents folded)
    app_page.assert_healthy()
    app_page.screenshot("dataset-explorer-profile")
