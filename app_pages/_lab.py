"""What every page shares: the sidebar settings, cached calls into packing_core, safe text and errors.

Settings are declared once with their defaults (``SHARED`` for the sidebar's, ``page_settings``
for a page's own) and live under plain ``st.session_state`` keys: the setting's name for a shared
one (``context``, ``dataset``), ``page.setting`` for a page's. A widget gets its own key
(``w_<key>``) and copies its value back on change, so a setting survives pages that do not draw
its widget (Streamlit clears widget keys there).
"""
from __future__ import annotations

import logging
import os
import re
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st

import packing_core as pc
from app_pages import _content
from packing_core import InputError, make_plan
from packing_core.analysis import (
    KEY_TITLES,
    cheatsheet_html,
    column_help,
    length_histogram,
    length_stats,
    profile_sample,
    strategy_frame,
)
from packing_core.data import list_sources
from packing_core.models import PRETRAINED
from packing_core.packing import STRATEGIES

log = logging.getLogger("packing_lab")

CONTEXTS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
DEFAULT_CONTEXT = pc.DEFAULT_CONTEXT      # the lab's one default context, shared with the CLI
DEFAULT_DATASET = "support-tickets"
UPLOAD = "uploaded file"


# ---------------------------------------------------------------- state
def _copy(key: str) -> None:
    st.session_state[key] = st.session_state["w_" + key]


def bind(key: str, default):
    """Widget kwargs bound to the plain session key ``key``; the plain key wins at creation.

    ``st.slider("x", 0, 9, **bind("x", 3))``: no ``value=`` argument, the state holds it.
    """
    ss = st.session_state
    if key not in ss:
        ss[key] = default
    wkey = "w_" + key
    written = ss.setdefault("_bound", {})  # what bind last put into each widget
    if wkey in ss and key in written and ss[wkey] != written[key]:
        ss[key] = ss[wkey]      # the user moved the widget (even if no callback ran)
    elif wkey not in ss or ss[wkey] != ss[key]:
        ss[wkey] = ss[key]      # first visit, a page that cleared the widget, or a programmatic change
    written[key] = ss[key]
    return {"key": wkey, "on_change": _copy, "args": (key,)}


def setting(key: str, default):
    """The current value of a setting, initialising it if no page has set it yet."""
    return st.session_state.setdefault(key, default)


@dataclass(frozen=True)
class PageSettings:
    """A page's settings, declared once with their defaults; session keys are ``page.setting``.

    ``S = page_settings("leakage_lab", mask="on")`` then ``st.radio(..., **S.bind("mask"))``;
    the session key is ``"leakage_lab.mask"`` and its widget's ``"w_leakage_lab.mask"``.
    """

    page: str         # "" for the shared settings of the sidebar: their keys are the setting's name
    defaults: dict

    def key(self, name: str) -> str:
        return f"{self.page}.{name}" if self.page else name

    def bind(self, name: str) -> dict:
        return bind(self.key(name), self.defaults[name])

    def get(self, name: str):
        return setting(self.key(name), self.defaults[name])


def page_settings(page: str, **defaults) -> PageSettings:
    return PageSettings(page, defaults)


# the sidebar's settings, read by every page: SHARED.get("context")
SHARED = page_settings("", context=DEFAULT_CONTEXT, dataset=DEFAULT_DATASET)


# ---------------------------------------------------------------- text and errors
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:])")


def esc(text) -> str:
    """Markdown-safe text: ``esc("a_b *c*") == r"a\\_b \\*c\\*"``; user text never renders as markup."""
    return _MD_SPECIAL.sub(r"\\\1", str(text))


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
        st.stop()
    except Exception as e:  # noqa: BLE001  (no traceback may reach the page)
        log.exception("unexpected error while trying to %s", action)
        st.error(f"Could not {esc(action)}: an unexpected {type(e).__name__} occurred. "
                 "Try other settings; the details are in the server log.")
        st.stop()


FAULT_ENV = "PACKING_LAB_TEST_FAULT"   # test-only: a page title whose run raises, to check the error contract
UNEXPECTED = ("Something went wrong on this page ({kind}); it was logged on the server. "
              "Try other settings, or another page.")


def run_safely(page, *steps) -> None:
    """Run the sidebar and the page; an unexpected exception becomes one line, its traceback goes to the log.

    ``st.stop()`` and reruns are not exceptions (Streamlit raises them as ``BaseException``) and pass.
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
    except Exception as e:  # noqa: BLE001  (the last line of defence: no traceback may reach the page)
        log.exception("unexpected error on the page %r", title)
        st.error(UNEXPECTED.format(kind=type(e).__name__))


def lesson(page: str, **values) -> None:
    """The teacher's lines at the top of a page: its place in the 60-minute lesson (and how many
    steps it has), one sentence to read out, and one question to ask the class (from its ``_content.PageSpec``).

    ``page`` is the page's ``__file__`` (or its title): ``lesson(__file__)``. ``values`` fill the
    ``{name}`` fields of those texts with the page's live numbers.
    """
    spec = _content.page(page)
    order = _content.PAGES.index(spec)
    say, ask = (text.format(**values) if values else text for text in (spec.say, spec.ask))
    parts = f", in {len(spec.steps)} steps" if spec.steps else ""
    with st.container(border=True):
        st.markdown(f"**Lesson, page {order + 1} of {len(_content.PAGES)} (about {spec.minutes} minutes{parts}).** "
                    f"{say}\n\n"
                    f"**Ask the class:** {ask}")


def steps(page: str) -> list:
    """The page's steps as tabs, numbered, in the order its ``PageSpec.steps`` names them:
    ``mask, positions = steps(__file__)``. One idea per tab, each about two projector screens
    (tests/e2e/test_projector.py measures them). Plain tabs: every tab runs on each rerun, so the
    tests see every step, and a click on a tab costs no rerun; expensive work stays cached or behind
    a button.
    """
    spec = _content.page(page)
    if not spec.steps:
        raise KeyError(f"{spec.title} has no steps: name them in its PageSpec in _content.PAGES")
    return st.tabs([step_label(i, name) for i, name in enumerate(spec.steps, 1)])


def step_label(number: int, name: str) -> str:
    """A tab's label: ``step_label(2, "Positions") == "2 · Positions"`` (what the teacher says: "step 2")."""
    return f"{number} · {name}"


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


def figure(fig, key: str | None = None) -> None:
    st.plotly_chart(fig, width="stretch", key=key, config={"displaylogo": False})


def cached_figure(builder, *args, **kwargs):
    """``builder(*args, **kwargs)`` from ``packing_core.viz``, built once per distinct arguments for the server.

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


# ---------------------------------------------------------------- datasets
@st.cache_resource(show_spinner=False)
def sources() -> dict:
    """name -> SourceInfo for every built-in source (available or not)."""
    return {s.name: s for s in list_sources()}


@st.cache_data(show_spinner="Reading the dataset...", max_entries=8)
def source_lengths(name: str) -> np.ndarray:
    return pc.load_lengths(name, tokenizer=pc.load_tokenizer("auto"))


@st.cache_resource(show_spinner=False)
def model_status(name: str) -> tuple[bool, str]:
    """(available, message) for a registered model; the pretrained one imports transformers on first use."""
    try:
        return pc.model_spec(name).available()
    except ImportError as e:
        return False, f"transformers is not importable ({e}): pip install -r requirements.txt"


def pretrained_status() -> tuple[bool, str]:
    """(available, message) for SmolLM2 and its tokenizer."""
    return model_status(PRETRAINED)


def dataset_names() -> list[str]:
    names = [n for n, s in sources().items() if s.available]
    if "upload" in st.session_state:
        names.append(UPLOAD)
    return names


def dataset_label(name: str) -> str:
    if name == UPLOAD:
        return f"uploaded: {st.session_state['upload']['name']}"
    return name


def dataset_purpose(name: str) -> str:
    """'instruction' or 'pretraining' (``packing_core.data.PURPOSES``): how over-long documents should be handled."""
    if name == UPLOAD:
        return st.session_state["upload"]["purpose"]
    return sources()[name].purpose


def current_lengths() -> tuple[str, np.ndarray]:
    """(name, lengths) of the dataset chosen in the sidebar."""
    name = SHARED.get("dataset")
    if name == UPLOAD:   # counts, not documents: other pages draw from a seeded sample of them
        return name, _upload_sample(st.session_state["upload"]["digest"], st.session_state["upload"]["profile"])
    return name, source_lengths(name)


@st.cache_data(show_spinner=False, max_entries=4)
def _upload_sample(digest: str, _profile) -> np.ndarray:
    return profile_sample(_profile)


def sidebar() -> None:
    """The shared settings, drawn on every page."""
    with st.sidebar:
        st.subheader("Shared settings")
        st.select_slider("Context length (tokens per row)", options=CONTEXTS, **SHARED.bind("context"),
                         help="The longest row: packers fill rows of this length; padding strategies pad to it "
                              "(pad) or to each batch's longest sample (pad-longest, bucket).")
        names = dataset_names()
        if SHARED.get("dataset") not in names:
            st.session_state[SHARED.key("dataset")] = DEFAULT_DATASET
        # The options are fixed names and there is no format_func: a label that changes between runs
        # (a second upload) made Streamlit look up a value it no longer had (KeyError 'uploaded: ...').
        st.selectbox("Dataset", names, **SHARED.bind("dataset"),
                     help="Used by the explorer, the random draw and the benchmark.")
        name = st.session_state["dataset"]
        if name == UPLOAD:
            st.caption(f"Your data: {esc(st.session_state['upload']['caption'])}")
        else:
            st.caption(esc(sources()[name].description))
        missing = [s for s in sources().values() if not s.available]
        for s in missing:
            st.caption(f"Not available: {esc(s.name)}: {esc(s.reason)}")
        glossary()
        cheatsheet_download()


# ---------------------------------------------------------------- cached core calls
@st.cache_data(show_spinner=False, max_entries=64)
def plan(lengths: tuple, context: int, strategy: str, **kwargs):
    return make_plan(np.asarray(lengths, dtype=np.int64), context, strategy, **kwargs)


# optimal's budget on a page (the command line's default is 5 s): a page answers in about a second or
# two on first use, then from the cache; optimal stops sooner once its plan is proven optimal.
PAGE_TIME_LIMIT = 2.0


def strategy_table(lengths: np.ndarray, context: int, **kwargs) -> list:
    """Every registered strategy on ``lengths`` (cached). The names are part of the cache key, so a
    strategy registered after a first call is never missing from a cached table. ``optimal`` gets
    ``PAGE_TIME_LIMIT`` unless the page passes its own ``time_limit``."""
    kwargs.setdefault("strategies", tuple(STRATEGIES))
    kwargs.setdefault("time_limit", PAGE_TIME_LIMIT)
    return _strategy_table(lengths, context, **kwargs)


@st.cache_data(show_spinner="Comparing every strategy...", max_entries=32)
def _strategy_table(lengths: np.ndarray, context: int, **kwargs) -> list:
    return pc.strategy_table(lengths, context, **kwargs)


@st.cache_data(show_spinner=False, max_entries=32)
def recommendation(stats, rows: list, kind: str, lengths) -> str:
    """``pc.recommend`` (about 20 ms on 200,000 lengths), once per dataset, context and kind."""
    return pc.recommend(stats, rows, kind, lengths=lengths)


@st.cache_data(show_spinner=False, max_entries=16)
def length_summary(lengths: np.ndarray, context: int):
    return length_stats(lengths, context), length_histogram(lengths, context)


def strategy_dataframe(rows, plans=None) -> None:
    """The side-by-side table of every strategy (``analysis.strategy_frame``: the columns the CLI's table has);
    with a profile's ``plans``, also their basis and trained tokens per slot."""
    df = pd.DataFrame(strategy_frame(rows, plans))
    # A projector shows about 560 px of table beside the sidebar: the columns a class compares come
    # first, in a table that fits; every column waits in the expander below it.
    key = [*KEY_TITLES, "trained tokens per slot" if plans is not None else "pads"]
    config = {title: st.column_config.NumberColumn(format=fmt, help=help or None) if fmt
              else st.column_config.Column(help=help) for title, (fmt, help) in column_help(plans).items()}
    st.dataframe(df[key], hide_index=True, width="stretch", column_config=config)
    with st.expander("Every column: slots, pads, costs and FLOP ratios"):
        st.dataframe(df, hide_index=True, width="stretch", column_config=config)
