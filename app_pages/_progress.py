"""Progress in view: a bar with its estimate and elapsed seconds while a block runs."""
from __future__ import annotations

import time
from contextlib import contextmanager

import streamlit as st

from app_pages._layout import scroll_here


@contextmanager
def progress(where, estimate=None):
    """A progress bar at ``where`` (the top of its step), scrolled into view, saying what runs, how long it has
    run and about how long is left: from the work done so far once there is some, before that from ``estimate``
    (a ``packing_lab.demos.Estimate``). Yields ``update(share, text)``; the bar goes when the block ends.
    """
    # A placeholder, not a container: a container's .empty() adds an empty element inside it and the finished bar
    # stayed, greyed but readable ("Training the tiny model...") through the next click's run.
    box = where.empty()
    with box.container():
        scroll_here("progress", time.monotonic(), block="center")
        bar = st.progress(0.0, text="Starting" + (f": {estimate.about()} in all" if estimate is not None else ""))
    start = time.monotonic()

    def update(share: float, what: str) -> None:
        share = min(max(float(share), 0.0), 1.0)
        spent = time.monotonic() - start
        if share >= 0.05:
            left = spent / share * (1 - share)
        elif estimate is not None:
            left = max(estimate.seconds - spent, 1.0)
        else:
            left = None
        rest = f", about {left:.0f} s left" if left is not None else ""
        bar.progress(share, text=f"{what} ({spent:.0f} s so far{rest})")

    try:
        yield update
    finally:
        box.empty()


