"""How a page is laid out and fails: safe text, the error contract, the lesson box, numbered steps,
where the eye is (scrolling), the glossary and the cheatsheet, and figures (cached per server)."""
from __future__ import annotations

import os
from contextlib import contextmanager

import streamlit as st

from app_pages import _content
from app_pages._links import end_view
from app_pages._state import _step_key, log, step_label
from app_pages._text import PageStop, esc, stop
from packing_core import InputError
from packing_lab.advice import cheatsheet_html


def release_memory() -> None:
    """Hand freed heap back to the system (glibc's ``malloc_trim``): the server runs each session's script in a
    thread of its own, whose malloc arena would otherwise keep the peak of a large analysis for good."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):    # not glibc: nothing to trim
        pass


@contextmanager
def guard(action: str):
    """Turn a failure inside the block into one ``st.error`` line and stop the page.

    ``ValueError`` from packing_core already says what is wrong and how to fix it; anything
    else is a bug: a short message on the page, the traceback in the server log.
    """
    try:
        yield
    except InputError as e:
        st.error(f"Could not {esc(action)}: {esc(e)}")
        stop()
    except Exception as e:  # noqa: BLE001  (no traceback may reach the page)
        log.exception("unexpected error while trying to %s", action)
        st.error(f"Could not {esc(action)}: an unexpected {type(e).__name__} occurred. "
                 "Try other settings; the details are in the server log.")
        stop()


FAULT_ENV = "PACKING_LAB_TEST_FAULT"   # test-only: a page title whose run raises, to check the error contract
UNEXPECTED = ("Something went wrong on this page ({kind}); it was logged on the server. "
              "Try other settings, or another page.")


def run_safely(page, *steps) -> None:
    """Run the sidebar and the page; an unexpected exception becomes one line, its traceback goes to the log.

    ``stop()`` ends the page quietly; reruns are not exceptions (Streamlit raises them as ``BaseException``) and
    pass. Pages end early with ``stop()``, never ``st.stop()``.
    No message text is shown: it may hold a server path. ``page`` is the ``st.Page`` being run.
    """
    # Outside a Streamlit run (a spawned scan worker re-imports the main script that AppTest left in
    # sys.modules) a Page has no title yet: that must not stop the import.
    try:
        title = page.title
    except AttributeError:
        title = "the page"
    try:
        if os.environ.get(FAULT_ENV) == title:
            raise RuntimeError(f"planted fault for the error-contract test ({FAULT_ENV}={title})")
        for step in steps:
            step()
    except PageStop:
        pass
    except Exception as e:  # noqa: BLE001  (the last line of defence: no traceback may reach the page)
        log.exception("unexpected error on the page %r", title)
        st.error(UNEXPECTED.format(kind=type(e).__name__))
    finally:   # also after st.stop(): the URL follows the view whatever the page did
        try:
            name = _content.page(title).name
        except KeyError:
            name = ""
        try:
            end_view(name)
        except Exception:  # noqa: BLE001  (a view that cannot be written must not hide the page)
            log.exception("could not write the view of %r into the URL", title)
        release_memory()     # what a large analysis freed goes back to the system, not to this run's thread


def lesson(page: str, **values) -> None:
    """The teacher's lines at the top of a page: its place in the 60-minute lesson (and how many
    steps it has), one sentence to read out, and one question to ask the class (from its ``_content.PageSpec``).

    ``page`` is the page's ``__file__`` (or its title): ``lesson(__file__)``. ``values`` fill the
    ``{name}`` fields of those texts with the page's live numbers. The box is folded, one line, so that
    the step's figure starts on a projector's first screen (tests/e2e/test_projector.py measures it); the
    teacher opens it with a click, and it folds again once the class moves to another step. Under it, one
    line says what an opening link held that the page could not use.
    """
    spec = _content.page(page)
    order = _content.PAGES.index(spec)
    say, ask = (text.format(**values) if values else text for text in (spec.say, spec.ask))
    parts = f", in {len(spec.steps)} steps" if spec.steps else ""
    key = f"{spec.name}.lesson_open"
    ss = st.session_state
    if ss.get("_controls_hidden"):
        ss[key] = False
    ss.setdefault(key, False)
    with st.expander(f"Lesson, page {order + 1} of {len(_content.PAGES)}: {spec.title}, about {spec.minutes} minutes",
                     key=key, on_change="rerun", icon=":material/school:"):
        st.markdown(f"**Lesson, page {order + 1} of {len(_content.PAGES)} (about {spec.minutes} minutes{parts}).** "
                    f"{say}\n\n"
                    f"**Ask the class:** {ask}")
    ss["_note_slot"] = st.empty()






def _read(page: str) -> None:
    """The class moved past the lesson box: fold it."""
    st.session_state[f"{page}.lesson_open"] = False


def _go_to_step(page: str, label: str) -> None:
    """The "next step" button: open that step, fold the lesson box, and bring the tabs into view."""
    ss = st.session_state
    ss[_step_key(page)] = label
    _read(page)
    ss["_scroll_to_tabs"] = ss.get("_scroll_to_tabs", 0) + 1


def steps(page: str) -> list:
    """The page's steps as tabs, numbered, in the order its ``PageSpec.steps`` names them:
    ``mask, positions = steps(__file__)``. One idea per tab, each about two projector screens
    (tests/e2e/test_projector.py measures them). Every tab runs on each rerun, so the tests see every
    step, and expensive work stays cached or behind a button. The open step is the view's ``step``
    (a link opens it); each step ends with a button to the next one, and the last with a link to
    the next page.
    """
    spec = _content.page(page)
    if not spec.steps:
        raise KeyError(f"{spec.title} has no steps: name them in its PageSpec in _content.PAGES")
    labels = [step_label(i, name) for i, name in enumerate(spec.steps, 1)]
    key = _step_key(spec.name)
    if st.session_state.get(key) not in labels:
        st.session_state[key] = labels[0]
    request = st.session_state.get("_scroll_to_tabs", 0)
    if request:
        scroll_here("tabs", request, block="start")
    tabs = st.tabs(labels, key=key, on_change=_read, args=(spec.name,))
    bodies = []
    order = _content.PAGES.index(spec)
    for i, tab in enumerate(tabs):
        body, foot = tab.container(), tab.container()
        bodies.append(body)
        if i + 1 < len(labels):
            foot.button(f"Next: step {labels[i + 1]}", key=f"{spec.name}.next_{i + 1}", icon=":material/arrow_forward:",
                        on_click=_go_to_step, args=(spec.name, labels[i + 1]))
        elif order + 1 < len(_content.PAGES):
            following = _content.PAGES[order + 1]
            foot.page_link(following.path, label=f"Next page: {following.title}", icon=":material/arrow_forward:")
    return bodies




# ---------------------------------------------------------------- where the eye is
def scroll_here(name: str, token, block: str = "nearest") -> None:
    """Bring this spot of the page into view when ``token`` changes (a new answer, a run starting).

    A script in the page (``st.html``; literal text only, never data) runs each time its element
    mounts: two literal twins alternate, so a changed ``token`` always mounts a new one, and an
    unchanged one stays put and scrolls nothing. ``block``: "nearest" (scroll as little as needed:
    an answer just above the fold), "start" (the tabs) or "center" (a progress bar).
    """
    ss = st.session_state
    seen = ss.setdefault("_scrolls", {})
    last, count = seen.get(name, (None, 0))
    if token != last:
        count += 1
        seen[name] = (token, count)
    twin = count % 2
    # the twins differ only in a class name; app.py's style takes their element out of the page's flow
    if block == "nearest" and twin:
        st.html('<div class="pl-anchor pl-a"></div><script>(() => { const a = document.currentScript.previousElementSibling;'
                ' setTimeout(() => a.scrollIntoView({block: "nearest", behavior: "smooth"}), 250); })();</script>',
                unsafe_allow_javascript=True)
    elif block == "nearest":
        st.html('<div class="pl-anchor pl-b"></div><script>(() => { const a = document.currentScript.previousElementSibling;'
                ' setTimeout(() => a.scrollIntoView({block: "nearest", behavior: "smooth"}), 250); })();</script>',
                unsafe_allow_javascript=True)
    elif block == "start" and twin:
        st.html('<div class="pl-anchor pl-a"></div><script>(() => { const a = document.currentScript.previousElementSibling;'
                ' setTimeout(() => a.scrollIntoView({block: "start", behavior: "smooth"}), 250); })();</script>',
                unsafe_allow_javascript=True)
    elif block == "start":
        st.html('<div class="pl-anchor pl-b"></div><script>(() => { const a = document.currentScript.previousElementSibling;'
                ' setTimeout(() => a.scrollIntoView({block: "start", behavior: "smooth"}), 250); })();</script>',
                unsafe_allow_javascript=True)
    elif twin:
        st.html('<div class="pl-anchor pl-a"></div><script>(() => { const a = document.currentScript.previousElementSibling;'
                ' setTimeout(() => a.scrollIntoView({block: "center", behavior: "smooth"}), 50); })();</script>',
                unsafe_allow_javascript=True)
    else:
        st.html('<div class="pl-anchor pl-b"></div><script>(() => { const a = document.currentScript.previousElementSibling;'
                ' setTimeout(() => a.scrollIntoView({block: "center", behavior: "smooth"}), 50); })();</script>',
                unsafe_allow_javascript=True)


def terms_help(*words: str) -> str:
    """The plain-language meaning of ``words`` (``_content.GLOSSARY``), for the ``help=`` tooltip of the
    paragraph that first uses them: ``st.markdown(text, help=terms_help("bfd"))``.

    A tooltip, not inline HTML: raw HTML on a page may come only from string literals.
    """
    return "\n\n".join(f"**{word}**: {_content.GLOSSARY[word]}" for word in words)


def glossary() -> None:
    """Every term the lab uses, in plain words: an expander in the shared sidebar, so on every page."""
    with st.expander("Glossary: the words in plain language"):
        st.markdown("\n".join(f"- **{esc(word)}**: {esc(meaning)}" for word, meaning in _content.GLOSSARY.items()))


@st.cache_resource(show_spinner=False)
def _cheatsheet() -> str:
    return cheatsheet_html()


def cheatsheet_download() -> None:
    """The invariants on one printable page (``analysis.cheatsheet``), from the shared sidebar: a download, no rerun."""
    st.download_button("Cheatsheet: the invariants on one page", _cheatsheet(), file_name="packing-lab-cheatsheet.html",
                       mime="text/html", on_click="ignore", icon=":material/download:",
                       help="An HTML page that prints on one A4 or Letter page: the mask rule, cu_seqlens, positions, "
                            "targets, what a check finds with its fix, and the TRL settings. Made from the lab's own "
                            "findings table and worked examples.")


def figure(fig, key: str | None = None, pick=None) -> None:
    """A figure the width of its column. ``pick=(settings, name)``: a click on a document in it (a point whose
    ``customdata`` is the document, ``packing_lab.viz.highlight.pick_markers``, or a bar's first value) sets the
    page's setting ``name`` to that document, and every figure of the step frames it (``document_picker``)."""
    if pick is None:
        st.plotly_chart(fig, width="stretch", key=key, config={"displaylogo": False})
        return
    settings, name = pick

    def picked() -> None:
        points = st.session_state[key]["selection"]["points"]
        for point in points:
            doc = point.get("customdata")
            doc = doc[0] if isinstance(doc, list) and doc else doc
            if isinstance(doc, (int, float)):
                st.session_state[settings.key(name)] = int(doc)
                return

    st.plotly_chart(fig, width="stretch", key=key, config={"displaylogo": False}, on_select=picked,
                    selection_mode="points")


def prediction(settings, options, name: str = "guess", **radio):
    """The class's prediction before a reveal: a radio with no answer until one is picked, bound to the page's declared
    setting ``name`` (``choice(None, options)``), so a link carries the answer and opens a later step answered, and
    the focused screen (``controls=hidden``) keeps it. ``radio``: more of ``st.radio``'s arguments (``format_func``).
    """
    return st.radio("Your prediction", options, horizontal=True, label_visibility="collapsed", **radio,
                    **settings.bind(name, lesson=True))


PILLS_UP_TO = 24   # documents a row of pills offers; more get a number box


def document_picker(settings, name: str, count: int, label: str = "Pick out a document in every figure of this step"):
    """The document the step's figures frame (``packing_lab.viz.highlight``), or None: a lesson control (it stays on
    the focused screen) bound to the page's declared setting ``name`` (``number(None, 0, N)``), so a link carries it.

    Pills for a row of a few documents, a number box for more; a document the figures no longer hold is dropped.
    """
    key = settings.key(name)
    if st.session_state.get(key) is not None and not 0 <= st.session_state[key] < count:
        st.session_state[key] = None
    bound = settings.bind(name, lesson=True)
    if count <= PILLS_UP_TO:
        return st.pills(label, list(range(count)), format_func=lambda d: f"document {d}" if d == 0 else str(d),
                        **bound)
    return st.number_input(label + f" (0 to {count - 1}; empty: none)", min_value=0, max_value=count - 1,
                           step=1, placeholder="none", **bound)


def cached_figure(builder, *args, **kwargs):
    """``builder(*args, **kwargs)`` from ``packing_lab.viz``, built once per distinct arguments for the server.

    A rerun otherwise rebuilds every figure of the page, and plotly's figure objects are slow
    to build (a logit-diff figure about 15 ms, most of a warm click's own work once Streamlit's
    post-run garbage collection is off). Arguments are hashed by content (arrays, dataclasses),
    so equal settings share one figure; the figure is shared, never changed after it is built
    (``st.plotly_chart`` reads it through ``to_dict``), so no copy is made.
    ``figure(cached_figure(logit_diff_figure, diffs, cu, tol, title="..."), key=...)``.
    """
    return _built_figure(f"{builder.__module__}.{builder.__qualname__}", builder, args, kwargs)


@st.cache_resource(show_spinner=False, max_entries=256)
def _built_figure(name: str, _builder, args: tuple, kwargs: dict):
    return _builder(*args, **kwargs)


