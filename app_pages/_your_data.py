"""The Dataset explorer's one uploader, and the cached calls that plan the user's data.

Data files (one file, or the shards of one corpus) and length profiles go through the same
uploader; the kind and the tokenizer are chosen beside it. ``Analyse`` turns the upload into a
LengthProfile with ``profile_from_upload`` (the path ``report FILE`` takes) and keeps it in
session state under ``upload``, so it survives other pages until the sidebar switches back.
"""
from __future__ import annotations

import functools
import hashlib
import shlex
import time

import streamlit as st

import packing_core as pc
from app_pages._data import PAGE_TIME_LIMIT, pretrained_status
from app_pages._state import UPLOAD, log
from app_pages._text import esc
from packing_core.analysis import (
    CAP_LADDER,
    describe_profile,
    profile_headline,
    profile_histogram,
    profile_rows,
    profile_stats,
    profile_table,
    step_balance,
    stream_price,
)
from packing_core.data import (
    INPUT_SUFFIXES,
    RECORD_KINDS,
    describe_columns,
    looks_like_profile,
    profile_from_upload,
    purpose_of,
    read_budget,
)
from packing_core.models import AUTO_TOKENIZER, PRETRAINED, tokenizer_choices

DETECT = "detect"
LARGE_UPLOAD_BYTES = 20 * 2**20    # over this, the page offers the command line's scan beside the button
MIN_TIMED_READ_S = 0.5             # a read this short (a cache hit, a tiny file) says nothing about the rate
_RATES: dict[str, float] = {}      # bytes a second of this server's last timed read, by tokenizer
ANY_COLUMN = "(detected from the kind)"


def _tokenizers() -> list[str]:
    """auto first (chat data works as it comes), then bytes, SmolLM2 when installed, and the configured folders."""
    smol, _ = pretrained_status()
    return [AUTO_TOKENIZER, "bytes"] + [t for t in tokenizer_choices() if t != "bytes" and (t != PRETRAINED or smol)]


def _auto_resolves_to() -> str:
    """What ``auto`` loads here: the SmolLM2 tokenizer when its model is installed, else bytes."""
    smol, _ = pretrained_status()
    return PRETRAINED if smol else "bytes"


@st.cache_data(show_spinner="Reading your data...", max_entries=8)
def _profile(digest: str, _files: tuple, tokenizer: str, kind: str | None, column: str | None):
    """The upload as a profile, keyed by the content hash and the choices (``_files`` is not hashed again)."""
    return profile_from_upload(list(_files), functools.partial(pc.load_tokenizer, tokenizer), kind=kind,
                                  column=column, budget=read_budget())


@st.cache_data(show_spinner=False, max_entries=16)
def profile_summary(digest: str, _profile, context: int):
    return profile_stats(_profile, context), profile_histogram(_profile, context)


@st.cache_data(show_spinner="Planning from the counts...", max_entries=16)
def profile_plans(digest: str, _profile, context: int, overlong: str):
    """(plans, strategy rows, headline) of the user's profile."""
    plans = profile_table(_profile, context, overlong=overlong, time_limit=PAGE_TIME_LIMIT)
    return plans, profile_rows(plans), profile_headline(_profile, plans)


@st.cache_data(show_spinner="Balancing the rows...", max_entries=16)
def balance_of(key: str, _lengths, context: int, ranks: int, micro: int, per_micro: int = 1,
               shape: str = "SmolLM2-135M"):
    """The balance of each optimizer step of the bfd rows of ``_lengths`` (keyed by ``key``) for a model shape:
    too few rows for one step are shown on a step they fill, and the report says so (as ``python -m
    packing_core balance`` does)."""
    return step_balance(pc.make_plan(_lengths, context, "bfd"), ranks, micro, per_micro, shape=shape, fit=True)


def caps_within(context: int) -> tuple[int, ...]:
    """The caps of ``CAP_LADDER`` a row of ``context`` slots can hold (a cap above the context is refused).

    >>> caps_within(16), caps_within(512)[-1]
    ((1, 2, 4, 8, 16), 64)
    """
    return tuple(cap for cap in CAP_LADDER if cap <= context)


@st.cache_data(show_spinner="Pricing the cap...", max_entries=16)
def cap_prices_of(key: str, _data, context: int, overlong: str):
    """bfd's rows with each cap of ``caps_within(context)`` and without (``_data``: lengths, or a profile's counts).

    Lengths are planned from their counts: the same rows as from the lengths, in milliseconds."""
    counts = _data if hasattr(_data, "counts") else pc.LengthProfile.from_lengths(_data)
    return pc.packing.cap_prices(counts, context, "bfd", caps_within(context), overlong=overlong)


@st.cache_data(show_spinner="Packing a stream...", max_entries=16)
def stream_of(key: str, _lengths, context: int, overlong: str, order: str, whole: float):
    """The stream packer against its buffer size and TRL's window, on the first documents of ``_lengths``."""
    return stream_price(_lengths, context, overlong=overlong, order=order, whole_utilisation=whole)


def _key() -> str:
    """The uploader's widget key: a fresh one after each analysed upload, so the next starts empty."""
    generation = st.session_state.get("upload_generation", 0)
    return "w_upload" if generation == 0 else f"w_upload_{generation}"


def _picked() -> None:
    """The uploader changed: the files just added are the selection (a browser adds to a multi-file uploader)."""
    st.session_state.pop("upload_error", None)   # a new file starts clean: an error about the previous one would mislead
    ups = st.session_state.get(_key()) or []
    before = set(st.session_state.get("upload_ids", ()))
    new = [u.file_id for u in ups if u.file_id not in before]
    st.session_state["upload_ids"] = [u.file_id for u in ups]
    st.session_state["upload_picked"] = new or [u.file_id for u in ups]


def _selection() -> list:
    ups = st.session_state.get(_key()) or []
    picked = set(st.session_state.get("upload_picked", ()))
    return [u for u in ups if u.file_id in picked] or list(ups)


def _use_upload() -> None:
    """Read the upload and make it the sidebar's dataset (a button callback): a second upload replaces the first."""
    ups = _selection()
    st.session_state.pop("upload_error", None)
    if not ups:
        st.session_state["upload_error"] = "choose a file first"
        return
    files = tuple((u.name, u.getvalue()) for u in ups)
    tokenizer = st.session_state.get("w_upload_tok", AUTO_TOKENIZER)
    kind = st.session_state.get("w_upload_kind", DETECT)
    column = st.session_state.get("w_upload_column", ANY_COLUMN)
    kind, column = (None if kind == DETECT else kind), (None if column in (None, ANY_COLUMN) else column)
    h = hashlib.sha1(repr((tokenizer, kind, column)).encode())
    for name, data in files:
        h.update(name.encode("utf-8", "replace") + b"\0" + hashlib.sha1(data).digest())
    digest = h.hexdigest()
    names = [repr(str(n))[1:-1] for n, _ in files]   # control characters escaped, as every message shows names
    started = time.perf_counter()
    try:
        profile = _profile(digest, files, tokenizer, kind, column)
    except pc.InputError as e:
        st.session_state["upload_error"] = str(e)
        return
    except Exception as e:  # noqa: BLE001  (no traceback may reach the page)
        log.exception("unexpected error while reading an upload")
        st.session_state["upload_error"] = (f"an unexpected {type(e).__name__} while reading {names[0]}; "
                                            "it was logged on the server")
        return
    seconds = time.perf_counter() - started
    size = sum(len(d) for _, d in files)
    if seconds >= MIN_TIMED_READ_S and not looks_like_profile(files[0][1]):
        _RATES[tokenizer] = size / seconds
    shown = names[0] if len(names) == 1 else f"{len(names)} files ({names[0]}, ...)"
    st.session_state["upload"] = {"name": names[0] if len(names) == 1 else f"{names[0]} and {len(names) - 1} more",
                                  "profile": profile, "digest": digest,
                                  "caption": f"{shown}: {describe_profile(profile)}" + read_rate(profile.documents, seconds),
                                  "purpose": purpose_of(profile.kind)}
    st.session_state["dataset"] = UPLOAD
    # a new upload starts with its own "What is this data?" answer, not the previous file's
    st.session_state.pop(f"dataset_explorer.kind_{UPLOAD}", None)
    st.session_state["upload_generation"] = st.session_state.get("upload_generation", 0) + 1
    for k in ("upload_ids", "upload_picked", "w_upload_column"):
        st.session_state.pop(k, None)


def _clear_error() -> None:
    st.session_state.pop("upload_error", None)   # a new file starts clean: an error about the previous one would mislead


def upload_form() -> None:
    """The one uploader, with the kind and the tokenizer beside it, and the column picker once a file is chosen."""
    loaded = "upload" in st.session_state
    # Folded until used, so that the page's steps start on a projector's first screen; files picked
    # and not yet analysed keep it open, their button in view.
    pending = bool(st.session_state.get(_key()))
    with st.expander(f"Use your own data ({' '.join(INPUT_SUFFIXES)}), or a length profile (JSON)",
                     expanded=pending):
        st.caption("One data file, the shards of one corpus (select them all), or a profile written by "
                   "`python -m packing_core scan`. Records may be chat messages, prompt + completion pairs, "
                   "text, token counts (a length column) or token-id lists (input_ids). The files stay in this "
                   "session; nothing is stored. The command line reads the same: `python -m packing_core report FILE`.")
        try:  # one analysis may not take the server from the rest of the class
            budget = read_budget()
            st.caption(f"Limits per analysis: {budget.rows:,} rows, {budget.bytes / 2**20:,.0f} MiB read or decoded, "
                       f"{budget.seconds:g} s (the server's PACKING_LAB_MAX_ROWS, _BYTES, _SECONDS).")
        except pc.InputError as e:
            st.error(f"The server's read budget is misconfigured: {esc(e)}")
        u1, u2, u3 = st.columns([3, 1, 1])
        u1.file_uploader("Data files or a length profile", type=list(INPUT_SUFFIXES), accept_multiple_files=True,
                         key=_key(), on_change=_picked,
                         help="the shards of one corpus: select them all at once")
        ups = _selection()
        u2.selectbox("Kind", [DETECT, *RECORD_KINDS], key="w_upload_kind", on_change=_clear_error,
                     help="detect: from the columns (messages, prompt + completion, a length column, input_ids, text)")
        u3.selectbox(f"Tokenizer (auto: {_auto_resolves_to()})", _tokenizers(), key="w_upload_tok",
                     on_change=_clear_error,
                     help="auto: the SmolLM2 tokenizer when it is installed (with the chat template that chat data "
                          "needs), else bytes; bytes: one token per UTF-8 byte (fast, no vocabulary); smollm2: the "
                          "real tokenizer; or a folder of $PACKING_LAB_TOKENIZERS")
        if ups:
            if len(ups) == 1 and not looks_like_profile(ups[0].getvalue()):
                _column_picker(ups[0])
            advice = large_upload_advice([u.name for u in ups], sum(u.size for u in ups),
                                         st.session_state.get("w_upload_tok", AUTO_TOKENIZER),
                                         st.session_state.get("w_upload_kind", DETECT),
                                         st.session_state.get("w_upload_column", ANY_COLUMN))
            if advice:
                st.info(advice)
            st.button("Analyse this file" if len(ups) == 1 else f"Analyse these {len(ups)} files",
                          on_click=_use_upload, type="primary")
        if "upload_error" in st.session_state:
            st.error(f"Could not use the file: {esc(st.session_state['upload_error'])}")
        if loaded:
            st.caption(f"In use: {esc(st.session_state['upload']['caption'])}. Choose another dataset in the "
                       "sidebar to go back; a new upload replaces this one.")


def _column_picker(up) -> None:
    """For one data file (any registered format): its columns, read from the header alone (errors shown at once)."""
    try:
        columns = describe_columns(up)
    except pc.InputError as e:
        st.session_state["upload_error"] = str(e)
        return
    # a picker of 400,000 columns would freeze the tab: the first 1,000 are enough to choose from
    st.selectbox("Column", [ANY_COLUMN, *columns[:1000]], key="w_upload_column", on_change=_clear_error,
                 help="one column to read: integers are lengths, lists of integers are token ids, strings are text; "
                      "or let the kind pick (messages and prompt + completion read their own columns)")


def read_rate(documents: int, seconds: float) -> str:
    """What the read cost, for the caption: "; read in 2.0 s, 5,000 documents a second" (nothing for a cache hit).

    >>> read_rate(10_000, 2.0)
    '; read in 2.0 s, 5,000 documents a second'
    >>> read_rate(10, 0.01)
    ''
    """
    if seconds < MIN_TIMED_READ_S:
        return ""
    return f"; read in {seconds:.1f} s, {documents / seconds:,.0f} documents a second"


def scan_command(names: list[str], tokenizer: str, kind: str = DETECT, column: str | None = ANY_COLUMN) -> str:
    """The command line that reads the same files into a profile the uploader takes in seconds.

    >>> scan_command(["chats.jsonl"], "smollm2", "messages")
    'python -m packing_core scan chats.jsonl --tokenizer smollm2 --kind messages --out profile.json'
    >>> scan_command(["my data.csv"], "auto", DETECT, "n_tokens")
    "python -m packing_core scan 'my data.csv' --tokenizer auto --column n_tokens --out profile.json"
    """
    words = ["python", "-m", "packing_core", "scan", *names, "--tokenizer", tokenizer]
    if kind not in (None, DETECT):
        words += ["--kind", kind]
    if column not in (None, ANY_COLUMN):
        words += ["--column", column]
    return shlex.join([*words, "--out", "profile.json"])


def large_upload_advice(names: list[str], size: int, tokenizer: str, kind: str = DETECT,
                        column: str | None = ANY_COLUMN) -> str | None:
    """For files over ``LARGE_UPLOAD_BYTES``: how long reading them here should take, from this server's last
    measured rate and the page's stated time budget, and the ``scan`` command that writes a profile instead.
    None for a smaller selection or a profile."""
    if size <= LARGE_UPLOAD_BYTES:
        return None
    mib = size / 2**20
    budget = read_budget()
    rate = _RATES.get(tokenizer)
    if rate is None:
        when = (f"This server has not timed a read with the {tokenizer} tokenizer yet, so there is no estimate: "
                f"the page stops a read at its budget of {budget.seconds:g} s.")
    else:
        seconds = size / rate
        when = (f"At the {rate / 2**20:,.1f} MB a second this server's last read with the {tokenizer} tokenizer "
                f"took, it needs about {seconds:,.0f} s"
                + (f", over the page's budget of {budget.seconds:g} s, so it would be refused." if seconds > budget.seconds
                   else f", within the page's budget of {budget.seconds:g} s."))
    return (f"**{mib:,.0f} MB to read.** {when} The page shows a spinner while it reads, no bar. On the server or your "
            f"own machine, `{scan_command(names, tokenizer, kind, column)}` reads the same files in worker processes and "
            "writes a length profile of a few KB: upload that instead, and every step plans from its counts.")
