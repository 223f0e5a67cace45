"""The cheatsheet downloads from the sidebar of any page, as the library writes it, without a rerun."""
import pytest

from packing_lab.advice import cheatsheet_html

pytestmark = pytest.mark.browser


def test_the_sidebar_downloads_the_one_page_cheatsheet(app_page, tmp_path):
    app_page.open("bug_zoo")
    button = app_page.page.get_by_test_id("stSidebar").get_by_role("button", name="Cheatsheet: the invariants")
    with app_page.page.expect_download() as download:
        button.click()
    path = tmp_path / "sheet.html"
    download.value.save_as(path)
    assert download.value.suggested_filename == "packing-lab-cheatsheet.html"
    assert path.read_text(encoding="utf-8") == cheatsheet_html()
    app_page.assert_healthy()
