"""docs/limits.md names every limit of ``packing_core._validate.LIMITS``, and the rules its settings are read by."""
import os
import re
from pathlib import Path

from packing_core._validate import LIMIT_CEILING, LIMITS, MAX_RUN_ROW_TOKENS, SECONDS_CEILING

DOC = (Path(__file__).resolve().parents[1] / "docs" / "limits.md").read_text()


def test_every_limit_has_a_row_in_a_table():
    missing = [name for name in LIMITS if not re.search(rf"^\|[^|\n]*`{name}`", DOC, re.M)]
    assert missing == []


def test_the_model_runs_row_gives_the_limits_value():
    if os.environ.get("PACKING_LAB_MAX_RUN_ROW_TOKENS"):      # raised here by an operator: not the default
        return
    row = re.search(r"^\| `MAX_RUN_ROW_TOKENS`.*$", DOC, re.M).group()
    assert f"{MAX_RUN_ROW_TOKENS:,} tokens per row under sdpa" in row


def test_the_ceilings_of_a_setting_are_the_ones_the_code_applies():
    text = " ".join(DOC.split())
    assert f"at most {LIMIT_CEILING:,} (2^40) for a count or a size" in text
    assert f"at most {SECONDS_CEILING:,.0f} seconds (a day) for a time limit" in text
