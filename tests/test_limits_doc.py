"""docs/limits.md names every limit of ``packing_core._validate.LIMITS`` with the value it has by default."""
import os
import re
from pathlib import Path

from packing_core._validate import LIMIT_CEILING, LIMITS, SECONDS_CEILING

DOC = (Path(__file__).resolve().parents[1] / "docs" / "limits.md").read_text()


def test_every_limit_is_in_the_table_with_its_value():
    for name, value in LIMITS.items():
        if os.environ.get(f"PACKING_LAB_{name}"):      # raised here by an operator: not the documented default
            continue
        shown = f"{value:g}" if isinstance(value, float) else f"{value:,}"
        assert re.search(rf"^\| `{name}` \| {re.escape(shown)} \|", DOC, re.M), name


def test_the_ceilings_of_a_setting_are_the_ones_the_code_applies():
    assert f"at most {LIMIT_CEILING:,} (2^40)" in DOC
    assert f"at most {SECONDS_CEILING:,.0f} seconds (a day)" in DOC
