"""The class benchmark's protocol client (benchmarks/_st_client.py) against the real app.

It speaks Streamlit's websocket protocol to the test session's server (a free port, started
headless as the browser tests start it) and must read what a browser shows: the numbers a
page computes, and the new number after a click. Expected values come from the library, not
from the page, so a client that read a stale element, the wrong page or the wrong widget fails.
"""
from __future__ import annotations

import asyncio
import importlib.util
import sys

import pytest

from packing_core import load_lengths
from tests._support import ROOT, SCRIPT_RUN_MS


def _client_module():
    spec = importlib.util.spec_from_file_location("_st_client", ROOT / "benchmarks" / "_st_client.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("_st_client", module)   # its dataclass looks itself up there
    spec.loader.exec_module(module)
    return module


st_client = _client_module()


def run_session(url: str, steps):
    """Connect, run ``await steps(session)``, close; the result of ``steps``."""
    async def go():
        async with st_client.ProtocolSession(url, timeout_s=SCRIPT_RUN_MS / 1000) as session:
            return await steps(session)
    # A browser test earlier in the session leaves Playwright's event loop running in this thread,
    # where asyncio.run() refuses to start another: the session gets a thread and a loop of its own.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, go()).result()


def documents(name: str) -> str:
    return f"{len(load_lengths(name)):,}"


def longest(name: str) -> str:
    return f"{int(load_lengths(name).max()):,}"


def test_the_client_reads_the_document_count_and_the_new_one_after_choosing_a_dataset(streamlit_server):
    async def steps(s):
        await s.open("dataset_explorer")
        before = s.metric("Documents"), s.metric("Longest")
        await s.select("Dataset", "bimodal")
        return before, (s.metric("Documents"), s.metric("Longest")), s.exceptions() + s.alerts("error")

    before, after, problems = run_session(streamlit_server.url, steps)
    assert before == (documents("support-tickets"), longest("support-tickets"))
    assert after == (documents("bimodal"), longest("bimodal"))
    assert before != after and problems == []


def test_a_click_inside_a_fragment_changes_the_verdict_the_client_reads(streamlit_server):
    async def steps(s):
        await s.open("leakage_lab")
        asked = s.alerts("info")
        await s.checkbox("Skip predictions", True)          # a widget inside the page's st.fragment
        on = [a for a in s.alerts() if a.startswith("Verdict:")]
        await s.radio("Attention mask", "off")
        off = [a for a in s.alerts() if a.startswith("Verdict:")]
        return asked, on, off, s.widget("button", "Train both")

    asked, on, off, outside = run_session(streamlit_server.url, steps)
    assert "Make a prediction to see the result." in asked
    assert len(on) == 1 and on[0].startswith("Verdict: EQUIVALENT.")
    assert len(off) == 1 and off[0].startswith("Verdict: NOT EQUIVALENT.")   # the old verdict is gone
    assert outside.fragment_id == ""   # a fragment run keeps the rest of the page


def test_going_to_another_page_leaves_none_of_the_first_page(streamlit_server):
    async def went(s):
        await s.open("leakage_lab")
        await s.goto("dataset_explorer")
        return s.text(), s.metric("Documents"), s.page_hash == s.pages["dataset_explorer"]

    async def opened(s):
        await s.open("dataset_explorer")
        return s.text()

    text, count, on_page = run_session(streamlit_server.url, went)
    assert on_page and count == documents("support-tickets")
    assert "Leakage lab" not in text and "Dataset explorer" in text
    assert text == run_session(streamlit_server.url, opened)   # what a fresh tab on that page shows


def test_the_client_refuses_a_widget_or_option_the_page_does_not_have(streamlit_server):
    async def missing_option(s):
        await s.open("dataset_explorer")
        await s.select("Dataset", "no-such-dataset")

    async def missing_metric(s):
        await s.open("dataset_explorer")
        s.metric("Tokens per second")

    with pytest.raises(st_client.ProtocolError, match="has no option 'no-such-dataset'"):
        run_session(streamlit_server.url, missing_option)
    with pytest.raises(st_client.ProtocolError, match="no metric 'Tokens per second'"):
        run_session(streamlit_server.url, missing_metric)


def test_the_client_records_a_runs_progress_bar_and_its_text(tmp_path):
    """A run that draws a bar: the client says when the first one came and what it said; a run without, None."""
    from benchmarks._server import start_streamlit

    script = tmp_path / "bar.py"
    script.write_text("import time\nimport streamlit as st\n"
                      "if st.checkbox('Work'):\n"
                      "    bar = st.progress(0.0, text='Training the tiny model: step 1 of 2')\n"
                      "    time.sleep(0.5)\n"
                      "    bar.progress(1.0, text='Training the tiny model: step 2 of 2')\n"
                      "    time.sleep(0.5)\n"   # Streamlit replaces a queued delta that a newer one at its place overtakes
                      "    bar.empty()\n"
                      "st.write('done')\n")
    server = start_streamlit(tmp_path / "bar.log", script=str(script))
    try:
        async def steps(s):
            await s.open("")
            quiet = s.last_progress_s, list(s.last_progress_texts)
            seconds = await s.checkbox("Work", True)
            return quiet, (seconds, s.last_progress_s, list(s.last_progress_texts))

        quiet, (seconds, first, texts) = run_session(server.url, steps)
    finally:
        server.stop()
    assert quiet == (None, [])
    assert first is not None and 0 <= first < seconds and seconds >= 1.0
    assert texts == ["Training the tiny model: step 1 of 2", "Training the tiny model: step 2 of 2"]
