"""What a click costs the server: figures built once per distinct arguments, no full collection per run.

The class benchmark (benchmarks/concurrent_users.py --class) measures the effect; these
check the two mechanisms it relies on.
"""
import tomllib

import numpy as np

from app_pages import _layout
from tests._support import ROOT


def test_a_figure_is_built_once_per_distinct_arguments_and_shared():
    built = []

    def builder(values, title=None):
        built.append((tuple(values), title))
        return {"values": list(values), "title": title}

    first = _layout.cached_figure(builder, np.array([1, 2]), title="row")
    again = _layout.cached_figure(builder, np.array([1, 2]), title="row")
    other = _layout.cached_figure(builder, np.array([1, 3]), title="row")
    retitled = _layout.cached_figure(builder, np.array([1, 2]), title="another")
    assert first is again and other["values"] == [1, 3] and retitled["title"] == "another"
    assert built == [((1, 2), "row"), ((1, 3), "row"), ((1, 2), "another")]


def test_streamlit_runs_no_full_garbage_collection_after_every_script_run():
    """gc.collect(2) walks every object of a process holding torch and SmolLM2 (0.4 s, GIL held)."""
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["runner"]["postScriptGC"] is False
