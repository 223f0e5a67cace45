"""The datasets a page reads and the cached calls into the library: lengths, plans, strategy tables,
the page's budget of pieces, and the shared sidebar."""
from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

import packing_core as pc
from app_pages._layout import cheatsheet_download, glossary
from app_pages._links import link_box
from app_pages._progress import top, waiting
from app_pages._state import CONTEXTS, DEFAULT_DATASET, SHARED, UPLOAD, dataset_names, sources
from app_pages._text import esc
from packing_core import InputError, make_plan
from packing_core.analysis import KEY_TITLES, column_help, length_histogram, length_stats, profile_sample, strategy_frame
from packing_core.models import PRETRAINED
from packing_core.packing import STRATEGIES, piece_count


def source_lengths(name: str) -> np.ndarray:
    """Token lengths of a built-in source: a synthetic one is generated (no tokenizer to load); a real one is
    tokenised with the lab's tokenizer, which a cold cache extracts first, under a bar at the top of the view."""
    if sources()[name].synthetic:
        return _source_lengths(name, None)
    return _source_lengths(name, dataset_tokenizer())


@st.cache_data(show_spinner="Reading the dataset...", max_entries=8)
def _source_lengths(name: str, _tokenizer) -> np.ndarray:
    return pc.load_lengths(name, tokenizer=_tokenizer)


def dataset_tokenizer():
    """SmolLM2's tokenizer (bytes when it is not installed). On a cold cache its extraction from the GGUF file
    (15-35 s on the 2-core machine) shows a bar with the seconds at the top of the view, and is timed for the
    next estimate (``packing_lab.demos.cold``)."""
    from packing_lab.demos import WAITS, cold_estimate, record_cold, tokenizer_extracted

    if tokenizer_extracted():
        return pc.load_tokenizer("auto")
    with waiting(top(), WAITS["tokenizer"][0], cold_estimate("tokenizer")) as spent:
        tokenizer = pc.load_tokenizer("auto")
    record_cold("tokenizer", spent())
    return tokenizer


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
    SHARED.apply_link()
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
        link_box()
        glossary()
        cheatsheet_download()


# ---------------------------------------------------------------- cached core calls
@st.cache_data(show_spinner=False, max_entries=64)
def plan(lengths: tuple, context: int, strategy: str, **kwargs):
    return make_plan(np.asarray(lengths, dtype=np.int64), context, strategy, **kwargs)


# optimal's budget on a page (the command line's default is 5 s): a page answers in about a second or
# two on first use, then from the cache; optimal stops sooner once its plan is proven optimal.
PAGE_TIME_LIMIT = 2.0

# Pieces a page plans for one section (bfd rows to balance, a stream to pack, the longest documents, a batch's
# order): about a second and 100 MB on the 2-core VM. The library's own ceiling (MAX_SPLIT_PIECES, 4,000,000)
# fits one user on their own machine; a server that serves a class cannot give every upload that much, and a
# 19-byte file of one 10^9-token document splits into 1,953,125 pieces at context 512.
PAGE_MAX_PIECES = 500_000


def over_page_budget(lengths, context: int, overlong: str = "split", command: str = "") -> str | None:
    """Why a page does not plan ``lengths`` (one line to show), or None when they fit ``PAGE_MAX_PIECES``;
    ``command`` names the command line that measures the same thing without the page's budget.

    >>> over_page_budget([120, 90, 300], 512) is None
    True
    >>> over_page_budget([10**9], 512).startswith("Not measured on this page: these documents make 1,953,125 pieces")
    True
    """
    pieces = piece_count(lengths, context, overlong)
    if pieces <= PAGE_MAX_PIECES:
        return None
    elsewhere = f"; `{command}` measures it on your own machine" if command else ""
    return (f"Not measured on this page: these documents make {pieces:,} pieces at context {context}, more than "
            f"the {PAGE_MAX_PIECES:,} a page plans for one section. A longer context makes fewer pieces{elsewhere}.")


def within_page_budget(lengths, context: int, overlong: str = "split") -> None:
    """Refuse lengths a person typed (or a link carried) that make more than ``PAGE_MAX_PIECES`` pieces."""
    pieces = piece_count(lengths, context, overlong)
    if pieces > PAGE_MAX_PIECES:
        raise InputError(f"these lengths make {pieces:,} pieces at context {context}, more than the "
                         f"{PAGE_MAX_PIECES:,} a page plans: type shorter or fewer documents, raise the context, "
                         "or choose overlong 'truncate'")


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
def recommendation(stats, rows: list, purpose: str, lengths) -> str:
    """``pc.recommend`` (about 20 ms on 200,000 lengths), once per dataset, context and purpose."""
    return pc.recommend(stats, rows, purpose, lengths=lengths)


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
