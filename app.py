"""Packing Lab: the entry point. It routes to the pages and draws the shared sidebar.

Run with ``streamlit run app.py``. The lab's logic lives in ``packing_core``; each page
in ``app_pages/`` is a thin file: widgets -> a call into packing_core -> a figure. (Not
``pages/``: Streamlit runs a folder of that name as an old-style multipage app, page by
page without this entry point, on the first request of a fresh server.)
"""
import os

import streamlit as st

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing downloads at run time

from app_pages import _content  # noqa: E402
from app_pages._lab import run_safely, sidebar  # noqa: E402

st.set_page_config(page_title="Packing Lab", page_icon=":material/view_week:", layout="wide")

# one st.Page per PageSpec, in the order of the 60-minute lesson (app_pages/_content.PAGES)
PAGES = [st.Page(p.path, title=p.title, icon=p.icon, default=i == 0) for i, p in enumerate(_content.PAGES)]

page = st.navigation(PAGES)
# The error contract: an unexpected exception on any page is one line on the page, saying it was logged;
# the traceback goes to the server log (Streamlit's own details are off too: .streamlit/config.toml).
run_safely(page.title, sidebar, page.run)
