"""The classroom's app-side promises: the sidebar says whether the server is warm; 'Train both' reads the cache."""
import importlib
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

W = importlib.import_module("packing_lab.demos.warm")   # the module (the package's name `warm` is its function)

APP = str(Path(__file__).resolve().parents[2] / "app.py")
TIMEOUT = 180   # the first run imports torch


def sidebar_text(at: AppTest) -> str:
    return " ".join(c.value for c in at.sidebar.caption)


def test_the_sidebar_says_cold_and_names_the_warm_command_on_an_empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PACKING_LAB_CACHE", str(tmp_path))
    monkeypatch.setattr(W, "_memo", {})
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert not at.exception
    assert "Server cold" in sidebar_text(at) and "packing-lab warm" in sidebar_text(at)


def test_train_both_shows_a_pair_from_the_cache_without_training(tmp_path, monkeypatch):
    """Once the pair is cached (as warm leaves it), the click trains nothing and shows both runs."""
    monkeypatch.setenv("PACKING_LAB_CACHE", str(tmp_path))
    on, off = (W._from_dict({"mask": m, "seed": 0, "steps": 60, "same_topic": 0.9, "losses": [2.0] * 60,
                             "train_loss": loss, "packed_loss": 1.2, "alone_loss": alone, "visible_loss": 1.1,
                             "drift_share": 0.5, "drift_cases": 10, "seconds": 1.0})
               for m, loss, alone in (("on", 1.25, 1.20), ("off", 1.05, 1.30)))
    monkeypatch.setattr(W, "_memo", {(0, "related"): (on, off)})
    monkeypatch.setattr(W, "train_demo", lambda *a, **k: pytest.fail("trained instead of reading the cache"))
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.switch_page("app_pages/leakage_lab.py")
    at.run()
    at.button(key="leakage_lab.train").click().run()
    assert not at.exception
    values = {m.label: m.value for m in at.metric}
    assert values["Train loss, mask off"] == "1.050" and values["Loss alone, mask off"] == "1.300"
