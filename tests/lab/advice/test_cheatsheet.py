"""The one-page cheatsheet: every fact carries words of the library object that states it, and it fits a page."""
import importlib
import inspect
import re

import pytest

from packing_core.check.rules import RULES, Rule
from packing_lab.advice.cheatsheet import CHEATSHEET_FINDINGS, cheatsheet_facts, cheatsheet_html, cheatsheet_markdown

# A page of A4 or Letter at the sheet's 9.2 pt in two columns holds about 6,000 characters of text; the browser test
# below prints it. Stay well inside, so a font or a browser that sets text wider still fits.
TEXT_BUDGET = 5_000
FACT_BUDGET = 24


def _source_text(source: str) -> str:
    """The words of the library object ``module:name`` (a rule's title and fix, a constant's value, else its code)."""
    module, _, name = source.partition(":")
    obj = importlib.import_module(module)
    m = re.fullmatch(r"(\w+)\[(\w+)\]", name)
    if m:
        obj = getattr(obj, m.group(1))[m.group(2)]
    elif name:
        obj = getattr(obj, name)
    if isinstance(obj, Rule):
        return f"{obj.title} {obj.fix}"
    if isinstance(obj, dict):
        return " ".join(f"{r.title} {r.fix}" for r in obj.values())
    if isinstance(obj, (str, int, float)):
        return str(obj)
    return inspect.getsource(obj)


@pytest.mark.parametrize("fact", cheatsheet_facts(), ids=lambda f: f.source)
def test_each_fact_carries_words_of_the_library_object_it_names(fact):
    assert fact.quote and fact.quote in _source_text(fact.source), f"{fact.quote!r} is not in {fact.source}"
    assert fact.quote in fact.text or fact.quote in " ".join(fact.picture)


def test_each_pasted_trl_call_names_the_first_release_that_has_all_its_settings():
    # read from the releases' code (settings_releases.json): padding_free 0.16.1, packing_strategy 0.19.1,
    # 'bfd' 0.20.0, 'bfd_split' 1.0.0; a call needs the newest of its settings
    text = cheatsheet_markdown()
    assert "packing_strategy='bfd', max_length=2048, padding_free=True)` (TRL ≥ 0.20.0)" in text
    assert "packing_strategy='bfd_split', max_length=2048, padding_free=True)` (TRL ≥ 1.0.0)" in text


def test_the_sheet_names_every_error_the_check_can_find():
    text = cheatsheet_markdown()
    for r in RULES.values():
        if r.severity == "error" or r.name in CHEATSHEET_FINDINGS:
            assert r.title in text, r.name
    for name in CHEATSHEET_FINDINGS:
        assert RULES[name].fix in text


def test_the_sheet_stays_within_one_pages_budget():
    facts = cheatsheet_facts()
    text = " ".join(f.text + " " + " ".join(f.picture) for f in facts)
    assert len(facts) <= FACT_BUDGET and len(text) <= TEXT_BUDGET, (len(facts), len(text))
    md = cheatsheet_markdown()
    assert len(md.splitlines()) <= 60 and md.startswith("# Packing Lab: the invariants on one page")


def test_the_html_escapes_the_facts_and_keeps_their_marks():
    page = cheatsheet_html()
    assert "j &lt;= i and segment[i] == segment[j]" in page and "j <= i" not in page
    assert "<b>Documents read each other</b>" in page and "<code>[0, 120, 210, 510]</code>" in page
    assert page.count("<section>") == len({f.section for f in cheatsheet_facts()})
    assert "i=3  . . . 1 ." in page            # the mask picture, in a fixed-width block


@pytest.mark.browser
@pytest.mark.parametrize("paper", ["A4", "Letter"])
def test_the_html_prints_on_one_page(browser, tmp_path, paper):
    path = tmp_path / "cheatsheet.html"
    path.write_text(cheatsheet_html(), encoding="utf-8")
    page = browser.new_page()
    try:
        page.goto(path.as_uri())
        pdf = page.pdf(format=paper)
    finally:
        page.close()
    assert pdf.count(b"/Type /Page") - pdf.count(b"/Type /Pages") == 1
