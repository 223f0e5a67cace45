"""No dead time on a cold server, in a real Chromium: a fresh server with an empty cache (``PACKING_LAB_CACHE`` in a
temporary folder), as a newcomer gets it.

- The first prediction of Why packing loads no tokenizer (its datasets are synthetic): no extraction runs behind it.
- A real dataset's first read extracts SmolLM2's tokenizer under a bar at the top of the view that counts the
  seconds against a first-run guess, said so, and the time is kept for the next estimate.
- (slow_model) The first SmolLM2 scenario converts the model under the same kind of bar at the top of its step.
"""
import json
import re
import time

import pytest

from packing_core._settings import SMOLLM2_CACHE_DIRS

pytestmark = pytest.mark.browser

BAR = "[data-testid='stMain'] [data-testid='stProgress']"


def _bars_while_running(app, seconds: float = 300.0) -> list[tuple[str, float, float]]:
    """(text, top, seconds since the click) of every progress bar the page shows until its run ends."""
    seen, texts, ran, start = [], set(), False, time.monotonic()
    while time.monotonic() - start < seconds:
        for bar in app.page.locator(BAR).all():
            try:
                text, box = bar.inner_text(), bar.bounding_box()
            except Exception:  # noqa: BLE001  (the bar went between the two reads)
                continue
            if text and box and text not in texts:
                texts.add(text)
                seen.append((text, box["y"], time.monotonic() - start))
        state = app.page.locator("[data-testid='stApp']").get_attribute("data-test-script-state")
        ran |= state == "running"
        if ran and state == "notRunning":
            break
        app.page.wait_for_timeout(150)
    return seen


@pytest.fixture
def cold_app(own_app, tmp_path, monkeypatch, require_smollm2):
    monkeypatch.setenv("PACKING_LAB_CACHE", str(tmp_path / "cache"))
    app = own_app("cold")
    app.page.set_viewport_size({"width": 1024, "height": 768})
    return app, tmp_path / "cache"


def test_the_first_prediction_on_a_cold_server_extracts_no_tokenizer(cold_app):
    app, cache = cold_app
    app.open()
    app.radio("Your prediction", "2,048 slots")
    assert any(a.startswith("Not this time") for a in app.alerts("info"))
    assert not any((cache / d).exists() for d in SMOLLM2_CACHE_DIRS)      # nothing extracted behind the answer
    app.assert_healthy()


def test_a_real_datasets_first_read_shows_the_tokenizers_extraction_with_its_seconds_at_the_top(cold_app):
    app, cache = cold_app
    app.open()
    app.page.goto(f"{app.base_url}/dataset_explorer?dataset=gsm8k", wait_until="commit")
    bars = _bars_while_running(app)
    app.wait()
    extracting = [(t, top, s) for t, top, s in bars if t.startswith("Extracting SmolLM2's tokenizer")]
    assert extracting, bars
    ticking = [t for t, _, _ in extracting if re.search(r": \d+ s so far", t)]
    assert ticking and "a first-run guess" in ticking[-1], extracting
    assert all(0 <= top < 768 for _, top, _ in extracting), extracting        # in view on a projector
    assert app.page.locator(BAR).count() == 0                               # and gone once done
    assert json.loads((cache / "timings.json").read_text())["tokenizer"]     # timed, for the next estimate
    assert "gsm8k" in app.text()
    print("cold tokenizer extraction, bar texts:", [(t[:90], round(s, 1)) for t, _, s in extracting])
    app.assert_healthy()


@pytest.mark.slow_model
def test_the_first_smollm2_scenario_on_a_cold_server_shows_the_conversion_with_its_seconds_at_the_top(cold_app):
    app, cache = cold_app
    app.open("leakage_lab")
    app.select("Scenario", "transformers' own sdpa attention, use_cache left on (SmolLM2)")
    app.control("radiogroup", "Your prediction").get_by_text("They change", exact=True).click()
    bars = _bars_while_running(app, seconds=600)
    app.wait()
    converting = [(t, top, s) for t, top, s in bars if t.startswith("Converting SmolLM2")]
    assert converting, bars
    ticking = [t for t, _, _ in converting if re.search(r": \d+ s so far", t)]
    assert ticking and "a first-run guess" in ticking[-1], converting
    assert all(0 <= top < 768 for _, top, _ in converting), converting
    assert any("Verdict: NOT EQUIVALENT" in w for w in app.alerts("warning"))
    assert json.loads((cache / "timings.json").read_text())["convert"]
    print("cold conversion, bar texts:", [(t[:90], round(s, 1)) for t, _, s in converting])
    app.assert_healthy()
