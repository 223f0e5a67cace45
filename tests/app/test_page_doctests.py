"""The doctests of the pages' helper modules: pytest collects doctests from ``packing_core`` only
(importing a page would run it), so the helpers' examples run here."""
import doctest
import importlib

import pytest

HELPERS = ("app_pages._content", "app_pages._data", "app_pages._progress", "app_pages._state",
           "app_pages._your_data")


@pytest.mark.parametrize("name", HELPERS)
def test_the_helpers_examples_hold(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no examples: drop it from HELPERS"
    assert result.failed == 0
