"""Packing Lab: the entry point. It routes to the pages and draws the shared sidebar.

Run with ``streamlit run app.py``. The lab's logic lives in ``packing_core``; each page
in ``app_pages/`` is a thin file: widgets -> a call into packing_core -> a figure. (Not
``pages/``: Streamlit runs a folder of that name as an old-style multipage app, page by
page without this entry point, on the first request of a fresh server.)
"""
import os

import streamlit as st

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing downloads at run time

from app_pages._lab import sidebar  # noqa: E402
from packing_core import use_lab_threads, warm_status  # noqa: E402

use_lab_threads()   # one torch thread per call: why, and the measurements, in packing_core/experiments/warm.py

st.set_page_config(page_title="Packing Lab", page_icon=":material/view_week:", layout="wide")
# A projector's 1024 x 768: metric labels wrap instead of ending in "...", and values shrink with
# the window instead of being cut (tests/e2e/test_projector.py checks every page at that size).
st.html("""<style>
[data-testid="stMetricLabel"], [data-testid="stMetricLabel"] * { white-space: normal !important;
  overflow: visible !important; text-overflow: clip !important; }
[data-testid="stMetricValue"], [data-testid="stMetricValue"] * { font-size: clamp(1.3rem, 2.6vw, 2.25rem) !important;
  overflow: visible !important; text-overflow: clip !important; white-space: nowrap; }
</style>""")

# The order of a 60-minute lesson (app_pages/_content.LESSON_PLAN): waste, costs, correctness, leaks, policy, speed.
PAGES = [
    st.Page("app_pages/why_packing.py", title="Why packing", icon=":material/lightbulb:", default=True),
    st.Page("app_pages/padded_vs_packed.py", title="Padded vs packed", icon=":material/view_week:"),
    st.Page("app_pages/masks_and_labels.py", title="Masks and labels", icon=":material/grid_on:"),
    st.Page("app_pages/leakage_lab.py", title="Leakage lab", icon=":material/science:"),
    st.Page("app_pages/bug_zoo.py", title="Bug zoo", icon=":material/bug_report:"),
    st.Page("app_pages/dataset_explorer.py", title="Dataset explorer", icon=":material/bar_chart:"),
    st.Page("app_pages/benchmark.py", title="Benchmark", icon=":material/speed:"),
]

page = st.navigation(PAGES)
sidebar()
st.sidebar.caption(warm_status().line)   # is the server ready for a class? (files only: instant)
page.run()
