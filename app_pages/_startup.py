"""A fresh server's first runs: a progress bar while the lab's libraries load, and on each page's first open.

Streamlit runs ``app.py`` only when a visitor connects, so the first visitor of a fresh server pays
for importing torch, transformers, torch's compiler settings and the lab itself: about 3.5 s on
the 2-core server, more under load (``benchmarks/teacher_tour.py`` measured the first open of Why
packing at 4.4 s, a blank page all along). :func:`start_once` shows those imports as a progress bar,
step by step, at the top of the page, before anything imports them; every later run finds them in
``sys.modules`` and draws nothing.

A page's first open in a server process builds what its figures share with every later visitor (cached
tables, plans, the leak runs): 1-2 s on the 2-core server after the imports. :func:`first_open` shows a
bar for it, ticking the seconds, unless the page is done within :data:`FIRST_OPEN_DELAY_S`.

This module imports only the standard library and Streamlit: it must draw its bar before torch loads.
"""
from __future__ import annotations

import importlib
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import streamlit as st
from streamlit.runtime.scriptrunner import add_script_run_ctx

# (what the bar says, the modules imported, about how long they took on the 2-core server, in s).
# The seconds only weigh the bar's steps; the order is the order the lab's pages need them in.
Step = tuple[str, tuple[str, ...], float]
STEPS: tuple[Step, ...] = (
    ("numpy and pandas", ("numpy", "pandas"), 0.35),
    ("torch", ("torch",), 1.05),
    ("plotly", ("plotly.graph_objects", "plotly.express"), 0.1),
    ("transformers", ("transformers",), 0.55),
    ("torch's compiler settings (whether FlexAttention can run here)", ("torch._inductor.config",), 0.9),
    ("the lab's pages and models", ("app_pages._data", "packing_core.models.pretrained", "app_pages._leakage_steps",
                                    "app_pages._your_data"), 0.8),
)


# what the start took on the 2-core server: 3.5 s idle, 12-26 s with other work on its cores (docs/classroom.md)
STARTUP_RANGE = "5-30 s on a busy 2-core machine"


def cold_steps(steps: Sequence[Step] = STEPS) -> list[Step]:
    """The steps with a module this process has not imported yet."""
    return [s for s in steps if any(m not in sys.modules for m in s[1])]


def start_once(steps: Sequence[Step] = STEPS) -> list[str]:
    """On a cold process, import ``steps`` under a progress bar at the top of the page; return what was imported.

    A warm process (every module already imported) draws nothing and returns ``[]``. Two visitors
    of a cold server both see the bar; Python's import lock makes the second wait for the first.
    """
    box = st.empty()     # on every run, so that a page's elements keep their places whether it was cold or not
    todo = cold_steps(steps)
    if not todo:
        return []
    total = sum(s[2] for s in todo)
    start, done, loaded = time.monotonic(), 0.0, []
    try:
        for i, (what, modules, seconds) in enumerate(todo, 1):
            with box.container():   # the lab's name above the bar: a fresh server's first visitor sees what loads
                st.title("Packing Lab")
                st.progress(min(done / total, 1.0),
                            text=f"Starting the lab on this server (once per server start: {STARTUP_RANGE}): "
                                 f"loading {what}, step {i} of {len(todo)}, {time.monotonic() - start:.0f} s so far")
                st.caption("Later visits, and every other page, open without this wait.")
            for m in modules:
                importlib.import_module(m)
            loaded.append(what)
            done += seconds
    finally:
        box.empty()
    return loaded


FIRST_OPEN_DELAY_S = 0.4    # a first open done sooner shows no bar (no flash of a bar on a fast page)
FIRST_OPEN_TICK_S = 0.5
_opened: set[str] = set()   # the pages that have had a run in this server process (two first visitors: both see the bar)


@contextmanager
def first_open(title: str) -> Iterator[None]:
    """Run a page under a bar at the top that ticks the seconds, on its first open in this process only.

    How much of the page is built is not known, so the bar fills towards 90 % as the seconds pass
    (half way at 2 s) and its text gives the seconds.

    The bar is drawn by a thread that carries the run's context, the way ``st.spinner`` draws its
    own (``streamlit/elements/spinner.py``: a ``threading.Timer`` given the run's context by
    ``add_script_run_ctx``, which enqueues the spinner from that thread): the page's script holds
    the run thread until it ends. A lock keeps the thread from drawing
    after the block has cleared the bar. The placeholder is made on every run, so the page's
    elements keep their places.
    """
    box = st.empty()
    if title in _opened:
        yield
        return
    done, lock, start = threading.Event(), threading.Lock(), time.monotonic()

    def tick() -> None:
        wait = FIRST_OPEN_DELAY_S
        while not done.wait(wait):
            with lock:
                if done.is_set():
                    return
                spent = time.monotonic() - start
                box.progress(min(spent / (spent + 2.0), 0.9),
                             text=f"Opening {title} for the first time on this server: building what its figures "
                                  f"share with every later visit ({spent:.0f} s so far)")
            wait = FIRST_OPEN_TICK_S

    thread = threading.Thread(target=tick, name="first-open bar", daemon=True)
    add_script_run_ctx(thread)
    thread.start()
    try:
        yield
    finally:   # a page that ended early (its ``stop()``, a rerun, an error) has had its first open too
        _opened.add(title)
        with lock:
            done.set()
            box.empty()
