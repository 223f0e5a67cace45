"""A cold server's waits: each estimate is what this server measured, or a first-run guess that says so."""
import json

import pytest

from packing_lab.demos import cold
from packing_lab.demos.estimate import cold_estimate


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PACKING_LAB_CACHE", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("what", list(cold.WAITS))
def test_an_empty_cache_gives_a_first_run_guess_that_says_so(empty_cache, what):
    estimate = cold_estimate(what)
    assert estimate.seconds == cold.WAITS[what][1]
    assert estimate.basis.startswith("a first-run guess") and cold.WAITS[what][2] in estimate.basis


def test_a_recorded_wait_becomes_the_next_estimate(empty_cache):
    for seconds in (101.0, 70.0, 80.0, 90.0):
        cold.record_cold("convert", seconds)
    estimate = cold_estimate("convert")
    assert estimate.seconds == 80.0                                   # the median of the last three
    assert estimate.basis == "measured on this server: 70 s, 80 s, 90 s"
    assert json.loads((empty_cache / "timings.json").read_text()) == {"convert": [101.0, 70.0, 80.0, 90.0]}
    assert cold_estimate("tokenizer").basis.startswith("a first-run guess")   # each wait its own


def test_only_the_last_few_measurements_are_kept(empty_cache):
    for k in range(cold.KEPT + 3):
        cold.record_cold("tokenizer", float(k))
    assert cold.measured()["tokenizer"] == [float(k) for k in range(3, cold.KEPT + 3)]


def test_a_damaged_timings_file_is_no_measurement(empty_cache):
    (empty_cache / "timings.json").write_text("{not json")
    assert cold.measured() == {} and cold_estimate("convert").basis.startswith("a first-run guess")
    (empty_cache / "timings.json").write_text(json.dumps({"convert": ["x", 12], "other": [1]}))
    assert cold.measured() == {"convert": [12.0]}


def test_the_tokenizer_counts_as_extracted_once_its_folder_is_in_the_cache(empty_cache, monkeypatch):
    import packing_core.models.pretrained as P

    monkeypatch.setattr(P, "_gguf_folder", lambda: empty_cache)          # a GGUF file to extract it from
    assert not cold.tokenizer_extracted()
    (empty_cache / cold.SMOLLM2_CACHE_DIRS[1]).mkdir()
    assert cold.tokenizer_extracted()
    monkeypatch.setattr(P, "_gguf_folder", lambda: None)                  # nothing to extract: no wait either
    (empty_cache / cold.SMOLLM2_CACHE_DIRS[1]).rmdir()
    assert cold.tokenizer_extracted()
