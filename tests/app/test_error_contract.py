"""The pages' error contract, in process: an ``InputError`` is the user's to fix (one line), anything else,
a plain ``ValueError`` included, is a bug (one line on the page, its traceback in the server log)."""
import logging

from streamlit.testing.v1 import AppTest

import packing_core.analysis as analysis
from packing_core import InputError
from tests._support import ROOT


def _explorer() -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.switch_page("app_pages/dataset_explorer.py").run()
    return at


def test_a_plain_valueerror_in_a_page_is_a_bug_logged_with_its_traceback(monkeypatch, caplog):
    def broken(rows):
        raise ValueError("planted: a library bug, not the user's input")

    monkeypatch.setattr(analysis, "headline", broken)        # called inside the page's guard("compare ...")
    caplog.set_level(logging.ERROR, logger="packing_lab")
    at = _explorer()
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "an unexpected ValueError occurred" in errors[0], errors
    assert "planted" not in errors[0] and not at.exception             # the message stays in the log
    logged = [r for r in caplog.records if r.name == "packing_lab" and r.exc_info]
    assert logged and "planted: a library bug" in str(logged[0].exc_info[1])
    assert "Traceback" in caplog.text


def test_an_inputerror_in_a_page_is_one_line_for_the_user_and_logs_nothing(monkeypatch, caplog):
    def refused(rows):
        raise InputError("the lengths must be whole numbers; fix the file")

    monkeypatch.setattr(analysis, "headline", refused)
    caplog.set_level(logging.ERROR, logger="packing_lab")
    at = _explorer()
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "the lengths must be whole numbers; fix the file" in errors[0], errors
    assert not [r for r in caplog.records if r.name == "packing_lab" and r.exc_info]
