"""Dataset explorer: a length histogram, the summary numbers, every strategy, and a recommendation."""
import hashlib

import streamlit as st

import packing_core as pc
from app_pages._lab import (
    SHARED,
    UPLOAD,
    current_lengths,
    dataset_kind,
    dataset_label,
    esc,
    figure,
    guard,
    length_summary,
    lesson,
    page_settings,
    pretrained_status,
    sources,
    strategy_dataframe,
    strategy_table,
)
from app_pages._profiles import profile_section
from packing_core import OVERLONG_POLICIES, describe_columns, length_histogram_figure, lengths_from_file, strategy_figure

FILE_TYPES = ["csv", "tsv", "jsonl", "json", "ndjson", "parquet", "txt"]
KINDS = ("pretraining", "instruction")
S = page_settings("dataset_explorer", overlong="split")

st.title("Dataset explorer")
lesson(__file__)
st.markdown(
    "How much padding a dataset causes depends on its length distribution against the context. "
    "The built-in support tickets are short with a long tail: most rows would be mostly pads. "
    "Pick another dataset in the sidebar, or upload your own file below, and see which "
    "strategy fits."
)


@st.cache_data(show_spinner="Reading the file...", max_entries=8)
def file_lengths(digest: str, name: str, _data: bytes, column: str | None, tokenizer: str):
    """Lengths of an uploaded file, keyed by its content hash (``_data`` is not hashed again)."""
    import io
    buf = io.BytesIO(_data)
    buf.name = name
    tok = None
    if tokenizer == "SmolLM2":
        from packing_core import PRETRAINED, load_tokenizer
        tok = load_tokenizer(PRETRAINED)
    return lengths_from_file(buf, column=column, tokenizer=tok)


def _use_file() -> None:
    """Read the uploaded file and make it the sidebar's dataset (a button callback)."""
    up = st.session_state.get("w_upload")
    st.session_state.pop("upload_error", None)
    if up is None:
        st.session_state["upload_error"] = "choose a file first"
        return
    data = up.getvalue()
    column = st.session_state.get("w_upload_column")
    try:
        lengths = file_lengths(hashlib.sha1(data).hexdigest(), up.name, data, column,
                               st.session_state.get("w_upload_tok", "bytes"))
    except ValueError as e:
        st.session_state["upload_error"] = str(e)
        return
    except Exception as e:  # noqa: BLE001  (no traceback may reach the page)
        st.session_state["upload_error"] = f"an unexpected {type(e).__name__} while reading {up.name}"
        return
    st.session_state["upload"] = {"name": up.name, "lengths": lengths,
                                  "kind": st.session_state.get("w_upload_kind", "pretraining")}
    st.session_state["dataset"] = UPLOAD


with st.expander("Use your own file (CSV, TSV, JSONL, Parquet or TXT)", expanded="upload" not in st.session_state):
    st.caption("One document per row (per line for TXT). Pick a column of token counts, or a text "
               "column to tokenise. The file stays in this session; nothing is stored.")
    try:  # one analysis may not take the server from the rest of the class
        _budget = pc.read_budget()
        st.caption(f"Limits per analysis: {_budget.rows:,} rows, {_budget.bytes / 2**20:,.0f} MiB read or decoded, "
                   f"{_budget.seconds:g} s (the server's PACKING_LAB_MAX_ROWS, _BYTES, _SECONDS).")
    except ValueError as e:
        st.error(f"The server's read budget is misconfigured: {esc(e)}")
    # a new file starts clean: an error about the previous one would mislead
    up = st.file_uploader("File", type=FILE_TYPES, key="w_upload",
                          on_change=lambda: st.session_state.pop("upload_error", None))
    if up is not None:
        try:
            columns = describe_columns(up)
        except ValueError as e:
            columns = []
            st.error(f"Could not read the file: {esc(e)}")
        if columns:
            u1, u2, u3 = st.columns(3)
            # a picker of 400,000 columns would freeze the tab: the first 1,000 are enough to choose from
            u1.selectbox("Column", columns[:1000], key="w_upload_column",
                         help="a column of integers is read as lengths; a text column is tokenised")
            smol, _ = pretrained_status()  # the real tokenizer ships with the pretrained model
            u2.radio("Tokenizer for text", ["bytes", "SmolLM2"] if smol else ["bytes"], key="w_upload_tok",
                     horizontal=True, help="bytes: one token per UTF-8 byte (no vocabulary needed)")
            u3.radio("What is this data?", KINDS, key="w_upload_kind", horizontal=True)
            st.button("Analyse this file", on_click=_use_file, type="primary")
    if "upload_error" in st.session_state:
        st.error(f"Could not use the file: {esc(st.session_state['upload_error'])}")

# ---------------------------------------------------------------- the dataset
context = SHARED.get("context")
name = SHARED.get("dataset")
with guard(f"load {dataset_label(name)}"):
    name, lengths = current_lengths()
    stats, hist = length_summary(lengths, context)

st.subheader(f"{esc(dataset_label(name))} at context {context}")
if name != UPLOAD:
    st.caption(esc(sources()[name].description))
m = st.columns(6)
m[0].metric("Documents", f"{stats.count:,}")
m[1].metric("Mean", f"{stats.mean:.0f}")
m[2].metric("Median (p50)", f"{stats.p50:.0f}")
m[3].metric("p95", f"{stats.p95:.0f}")
m[4].metric("Longest", f"{stats.max:,}")
m[5].metric("Over the context", f"{stats.share_over:.1%}", help=f"{stats.over_context:,} documents")
figure(length_histogram_figure(hist, title="Tokens per document (red: longer than the context)"), key=S.key("hist"))

# ---------------------------------------------------------------- strategies
st.subheader("Every strategy on this dataset")
o1, o2 = st.columns(2)
overlong = o1.radio("Documents longer than the context", OVERLONG_POLICIES, horizontal=True,
                    **S.bind("overlong"))
kind = o2.radio("What is this data?", KINDS, horizontal=True, key=f"dataset_explorer.kind_{name}",
                index=KINDS.index(dataset_kind(name)),
                help="instruction data (prompt + answer) must not be split; plain text may be")
with guard("compare the strategies"):
    rows = strategy_table(lengths, context, overlong=overlong)
    advice = pc.recommend(stats, rows, kind, lengths=lengths)
st.info(f"**Recommendation.** {advice}")
figure(strategy_figure(rows), key=S.key("strategies"))
strategy_dataframe(rows)

# ---------------------------------------------------------------- a corpus of any size, as a profile
profile_section(context, overlong)
