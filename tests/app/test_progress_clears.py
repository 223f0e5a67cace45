"""A progress bar goes when its work ends: a finished bar left on the page reads as work still running."""
from streamlit.testing.v1 import AppTest


def _page():
    import streamlit as st

    from app_pages._progress import progress

    top = st.container()
    st.write("the step's content")
    with progress(top) as update:
        update(0.5, "Training the tiny model with the mask on: step 1 of 2")
        update(1.0, "Training the tiny model with the mask off: step 2 of 2")
    st.write("done")


def test_the_bar_is_gone_when_the_work_ends():
    at = AppTest.from_function(_page, default_timeout=60).run()
    assert not at.exception
    assert [m.value for m in at.markdown] == ["the step's content", "done"]
    assert at.get("progress") == [], at.get("progress")
