"""Progress in view: a bar with its estimate and elapsed seconds while a block runs, and the top of the view, where
a cold server's one-time waits (SmolLM2's conversion, its tokenizer's extraction) show theirs."""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager

import streamlit as st
from streamlit.runtime.scriptrunner import add_script_run_ctx, get_script_run_ctx

from app_pages._layout import scroll_here


def time_left(share: float, spent: float, estimate: float | None) -> float | None:
    """Seconds left of a run ``share`` done after ``spent`` seconds: the estimate early, the measured pace as the
    work goes. A slow first stage once made the time left jump (23 s, then 107, 78, 23, 9 s); this moves smoothly
    from the one to the other. Without an estimate, the pace alone, once 5 % is done.

    >>> time_left(0.05, 5.0, 23.0), time_left(0.5, 15.0, 23.0), time_left(1.0, 30.0, 23.0)
    (21.8, 11.5, 0.0)
    >>> time_left(0.01, 1.0, None) is None
    True
    """
    if estimate is not None:
        projected = spent / share if share > 0 else estimate
        return round(max((1 - share) * estimate + share * projected - spent, 1.0 if share < 1 else 0.0), 1)
    return round(spent / share * (1 - share), 1) if share >= 0.05 else None


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
        left = time_left(share, spent, estimate.seconds if estimate is not None else None)
        rest = f", about {left:.0f} s left" if left is not None else ""
        bar.progress(share, text=f"{what} ({spent:.0f} s so far{rest})")

    try:
        yield update
    finally:
        box.empty()




# ---------------------------------------------------------------- a wait that reports no progress of its own
TICK_S = 0.5


def open_top() -> None:
    """The top of the main area, made on every run before the page (``app.py``): where a wait the page did not
    expect (a cold cache) shows its bar."""
    st.session_state["_top_slot"] = st.container()


def top():
    """The top of the view: ``open_top``'s slot, or here (a fragment cannot write outside itself)."""
    ctx = get_script_run_ctx()
    slot = st.session_state.get("_top_slot")
    if slot is None or (ctx is not None and getattr(ctx, "current_fragment_id", None)):
        return st.container()
    return slot


@contextmanager
def waiting(where, what: str, estimate):
    """A bar at ``where``, scrolled into view, while the block runs a wait that reports no progress (a conversion):
    the seconds so far against ``estimate`` (a ``packing_lab.demos.Estimate``, which says whether it was measured
    here or is a first-run guess). Yields the seconds spent so far (a function).

    The bar is drawn by a thread that carries the run's context, as ``_startup.first_open`` draws its own; the
    block keeps the run's thread, so the cached calls inside it behave as anywhere else.
    """
    box = where.empty()
    with box.container():
        scroll_here("waiting", time.monotonic(), block="center")
        bar = st.progress(0.0, text=f"{what}: starting, {estimate.about()} in all ({estimate.basis})")
    start, done, lock = time.monotonic(), threading.Event(), threading.Lock()

    def spent() -> float:
        return time.monotonic() - start

    def tick() -> None:
        while not done.wait(TICK_S):
            with lock:
                if done.is_set():
                    return
                s = spent()
                past = s > estimate.seconds
                said = (f"past the estimate of {estimate.about()}" if past else f"{estimate.about()} in all")
                bar.progress(min(s / max(estimate.seconds, 1.0), 0.97),
                             text=f"{what}: {s:.0f} s so far, {said} ({estimate.basis})")

    thread = threading.Thread(target=tick, name="wait bar", daemon=True)
    add_script_run_ctx(thread)
    thread.start()
    try:
        yield spent
    finally:
        with lock:
            done.set()
            box.empty()
