"""Packing Lab: the entry point. It routes to the pages and draws the shared sidebar.

Run with ``streamlit run app.py``. The lab's logic lives in ``packing_core``; each page
in ``app_pages/`` is a thin file: widgets -> a call into packing_core -> a figure. (Not
``pages/``: Streamlit runs a folder of that name as an old-style multipage app, page by
page without this entry point, on the first request of a fresh server.)
"""
import os

import streamlit as st

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing downloads at run time

from app_pages._startup import first_open, start_once  # noqa: E402  (the standard library and Streamlit only)

st.set_page_config(page_title="Packing Lab", page_icon=":material/view_week:", layout="wide")
start_once()   # a fresh server: a bar while torch, transformers and the lab load, before anything imports them

from app_pages import _content  # noqa: E402
from app_pages._data import sidebar  # noqa: E402
from app_pages._layout import run_safely  # noqa: E402
from app_pages._links import open_view, quiet_page_not_found  # noqa: E402
from app_pages._progress import open_top  # noqa: E402
from packing_lab.demos import use_lab_threads, warm_status  # noqa: E402

use_lab_threads()   # one torch thread per call: why, and the measurements, in packing_lab/demos/warm.py

view = open_view()   # a link: its page, step and settings (app_pages/_lab.py, "the view")
st.set_page_config(page_title="Packing Lab", page_icon=":material/view_week:", layout="wide",
                   initial_sidebar_state="collapsed" if view.hide_controls else "auto")
# A projector's 1024 x 768: metric labels wrap instead of ending in "...", and values shrink with
# the window instead of being cut (tests/e2e/test_projector.py checks every page at that size).
# Captions at 4.5:1 contrast or more (Streamlit draws them at 60 % opacity: about 3.9:1 on white).
# A scroll anchor (_layout.scroll_here) takes no room, and one scrolled to the window's bottom edge leaves 12 px
# under it (an answer that ended on the edge measured 1 px out of view); a result whose settings changed since
# it ran is dimmed;
# less space above the title (a projector has 768 px); the copy-link button looks like Streamlit's own.
st.html("""<style>
[data-testid="stMetricLabel"], [data-testid="stMetricLabel"] * { white-space: normal !important;
  overflow: visible !important; text-overflow: clip !important; }
[data-testid="stMetricValue"], [data-testid="stMetricValue"] * { font-size: clamp(1.3rem, 2.6vw, 2.25rem) !important;
  overflow: visible !important; text-overflow: clip !important; white-space: nowrap; }
[data-testid="stCaptionContainer"], [data-testid="stCaptionContainer"] * { color: #4f5260 !important; opacity: 1 !important; }
[data-testid="stElementContainer"]:has(.pl-anchor) { height: 0; min-height: 0; margin-top: -1rem; overflow: visible; }
.pl-anchor { scroll-margin-bottom: 0.75rem; }
[class*="st-key-stale_"] { opacity: 0.45; filter: grayscale(0.8); }
[data-testid="stMainBlockContainer"] { padding-top: 3.5rem; }
.pl-copy { font: inherit; font-size: 0.95rem; min-height: 2.5rem; padding: 0.25rem 0.75rem; border-radius: 0.5rem;
  border: 1px solid rgba(49, 51, 63, 0.2); background: #ffffff; color: #262730; cursor: pointer; }
.pl-copy:hover, .pl-copy:focus-visible { border-color: #ff4b4b; color: #ff4b4b; }
</style>""")
if view.hide_controls:   # controls=hidden: the teacher's focused screen shows the lesson, not the settings
    st.html("""<style>
[class*="st-key-w_"], [data-testid="stExpandSidebarButton"] { display: none !important; }
</style>""")

# one st.Page per PageSpec, in the order of the 60-minute lesson (app_pages/_content.PAGES)
PAGES = [st.Page(p.path, title=p.title, icon=p.icon, default=i == 0) for i, p in enumerate(_content.PAGES)]

quiet_page_not_found()   # a link to no page opens the first one with a line saying so, not an error box
page = st.navigation(PAGES)
# The error contract: an unexpected exception on any page is one line on the page, saying it was logged;
# the traceback goes to the server log (Streamlit's own details are off too: .streamlit/config.toml).
# The sidebar also says whether the server is ready for a class (files only: instant).
# A page's first open on this server builds what its figures share with later visits: a bar says so.


open_top()   # the top of the view: where a cold server's one-time wait shows its bar
status = []   # the sidebar's line on the server's state: said before the page runs, and again after it (a
              # conversion or a training the page ran counts)


def say_status() -> None:
    if not status:
        status.append(st.sidebar.empty())
    status[0].caption(warm_status().line)


def run_page() -> None:
    try:
        with first_open(page.title):
            page.run()
    finally:
        say_status()


run_safely(page, sidebar, say_status, run_page)
