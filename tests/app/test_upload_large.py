"""A large upload: an estimate before the click from this server's measured rate, and the scan command instead."""
import shlex

import pytest

from app_pages import _your_data
from tests._support import assert_clean, open_page

CSV = b"length\n" + b"300\n" * 10          # 37 bytes: "large" only under a lowered threshold


def infos(at) -> str:
    return "\n".join(i.value for i in at.info)


@pytest.fixture
def small_threshold(monkeypatch):
    monkeypatch.setattr(_your_data, "LARGE_UPLOAD_BYTES", 16)
    monkeypatch.setattr(_your_data, "_RATES", {})


def test_a_file_over_the_threshold_gets_the_exact_scan_command_and_no_estimate_before_any_read(small_threshold):
    at = open_page("dataset_explorer")
    at.file_uploader(key="w_upload").set_value(("my lengths.csv", CSV, "text/csv")).run()
    assert_clean(at)
    text = infos(at)
    command = "python -m packing_core scan 'my lengths.csv' --tokenizer auto --out profile.json"
    assert command in text and shlex.split(command)[4] == "my lengths.csv"
    assert "not timed a read" in text


def test_the_estimate_comes_from_the_last_timed_read_and_names_the_budget_it_would_pass(small_threshold, monkeypatch):
    budget = _your_data.read_budget().seconds
    _your_data._RATES["auto"] = len(CSV) / (2 * budget)       # a rate that needs twice the budget for this file
    at = open_page("dataset_explorer")
    at.file_uploader(key="w_upload").set_value(("big.csv", CSV, "text/csv")).run()
    text = infos(at)
    assert f"about {2 * budget:,.0f} s, over the page's budget of {budget:g} s, so it would be refused" in text
    _your_data._RATES["auto"] = len(CSV) / (budget / 4)
    at.file_uploader(key="w_upload").set_value(("big.csv", CSV, "text/csv")).run()
    assert f"about {budget / 4:,.0f} s, within the page's budget" in infos(at)


def test_a_small_file_gets_no_advice_and_a_slow_read_is_timed_for_the_next_estimate(monkeypatch):
    monkeypatch.setattr(_your_data, "_RATES", {})
    monkeypatch.setattr(_your_data, "MIN_TIMED_READ_S", 0.0)       # every read counts, however short
    at = open_page("dataset_explorer")
    at.file_uploader(key="w_upload").set_value(("ten.csv", CSV, "text/csv")).run()
    assert "scan" not in infos(at)                                  # 37 bytes: far under 20 MB
    at.button[0].click().run()
    assert_clean(at)
    assert _your_data._RATES["auto"] > 0
    assert "documents a second" in at.session_state["upload"]["caption"]


def test_the_rate_in_words_divides_documents_by_seconds():
    assert _your_data.read_rate(3_000, 1.5) == "; read in 1.5 s, 2,000 documents a second"
