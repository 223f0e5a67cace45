"""The Dataset explorer's profile section: a corpus of any size as counts per length.

Upload a profile written by ``python -m packing_core scan`` (instant: nothing is
tokenised), or scan a few files here with a progress bar. Then every strategy from the
counts, what supervised training buys per slot, and the data-parallel balance.
"""
import hashlib
import tempfile
from pathlib import Path

import streamlit as st

import packing_core as pc
from app_pages._lab import esc, figure, guard

PROFILE = "dataset_explorer.profile"        # session key: the LengthProfile in use
SHARD_TYPES = ["csv", "tsv", "jsonl", "json", "ndjson", "gz", "parquet", "txt", "arrow"]


@st.cache_data(show_spinner=False, max_entries=8)
def _load(digest: str, _data: bytes):
    return pc.LengthProfile.load(_data)


@st.cache_data(show_spinner="Planning from the counts...", max_entries=16)
def _table(digest: str, _profile, context: int, overlong: str):
    return pc.profile_table(_profile, context, overlong=overlong)


@st.cache_data(show_spinner="Balancing the rows...", max_entries=16)
def _balance(digest: str, _profile, context: int, ranks: int, micro: int):
    plan = pc.make_plan(_profile.sample(200_000, 0), context, "bfd")
    return pc.balance_rows(plan, ranks, micro)


def _digest(profile) -> str:
    return hashlib.sha1(repr(profile.to_dict()).encode()).hexdigest()


def _scan_here() -> None:
    files = st.session_state.get("w_scan_files") or []
    if not files:
        st.error("Choose one or more data files first.")
        return
    tokenizer = st.session_state.get("w_scan_tok", "bytes")
    kind = st.session_state.get("w_scan_kind", "detect")
    bar = st.progress(0.0, text="Starting the scan...")
    with guard("scan the files"), tempfile.TemporaryDirectory() as folder:
        for f in files:
            (Path(folder) / Path(f.name).name).write_bytes(f.getvalue())
        profile = pc.scan([folder], lambda: pc.load_tokenizer(tokenizer), kind=None if kind == "detect" else kind,
                          workers=0, progress=lambda p: bar.progress(p.shards_done / p.shards_total, text=p.line()))
    bar.progress(1.0, text=f"Scanned {profile.documents:,} documents in {profile.scan_seconds:.1f} s")
    st.session_state[PROFILE] = profile


def profile_section(context: int, overlong: str) -> None:
    st.subheader("Your corpus as a length profile")
    st.markdown(
        "A profile holds only how many documents have each length (and, for chat or prompt/completion "
        "data, how many of their tokens are trained). Write one for a corpus of any size with "
        "`python -m packing_core scan DATA --out profile.json`, then upload it here: nothing is tokenised again.")
    up = st.file_uploader("Length profile (JSON)", type=["json"], key="w_profile")
    if up is not None:
        data = up.getvalue()
        with guard(f"read the profile {up.name}"):
            st.session_state[PROFILE] = _load(hashlib.sha1(data).hexdigest(), data)
    with st.expander("Or scan files here (small corpora; the command line scans shards on many workers)"):
        st.file_uploader("Data files: text, prompt + completion, or messages", type=SHARD_TYPES,
                         accept_multiple_files=True, key="w_scan_files")
        c1, c2 = st.columns(2)
        c1.selectbox("Tokenizer", pc.tokenizer_choices(), key="w_scan_tok",
                     help="smollm2, bytes, or a folder listed in $PACKING_LAB_TOKENIZERS")
        c2.selectbox("Kind", ["detect", *pc.RECORD_KINDS], key="w_scan_kind")
        if st.button("Scan these files"):
            _scan_here()
    profile = st.session_state.get(PROFILE)
    if profile is None:
        return
    digest = _digest(profile)
    st.caption(esc(f"{profile.kind} data, tokenizer {profile.tokenizer}, {len(profile.sources):,} sources"))
    m = st.columns(4)
    m[0].metric("Documents", f"{profile.documents:,}")
    m[1].metric("Tokens", f"{profile.tokens:,}")
    m[2].metric("Tokens in the loss", f"{profile.loss_share:.1%}",
                help="chat: the assistant turns; prompt/completion: the completion; plain text: every token")
    m[3].metric("Over the context", f"{int(profile.counts[profile.lengths > context].sum()):,}")
    with guard("plan the profile"):
        plans = _table(digest, profile, context, overlong)
    st.table([{"strategy": p.strategy, "basis": p.basis, "rows": f"{p.metrics.rows:,}",
               "utilisation": f"{p.metrics.utilisation:.1%}", "x lower bound": f"{p.metrics.rows_over_lower_bound:.3f}",
               "trained tokens per slot": f"{p.trained_per_slot:.3f}"} for p in plans])
    st.caption("pad, bucket, concat-cut, ffd and bfd are planned from the counts alone; next-fit and "
               "pad-longest depend on document order and run on a seeded random order of a sample. "
               "Trained tokens per slot is what one slot of compute buys in supervised fine-tuning.")

    st.markdown("**Data-parallel balance.** A step waits for the slowest rank, and attention costs the "
                "sum of len\u00b2, so equal tokens are not equal time.")
    b1, b2 = st.columns(2)
    ranks = b1.number_input("Ranks", 1, 1024, 8, key="dataset_explorer.ranks")
    micro = b2.number_input("Micro-batches per rank", 1, 256, 4, key="dataset_explorer.micro_batches")
    with guard("balance the rows"):
        report = _balance(digest, profile, context, int(ranks), int(micro))
    figure(pc.balance_figure(report, title=f"bfd rows of a sample, {report.rows:,} rows over {report.ranks} ranks "
                             f"x {report.micro_batches} micro-batches"), key="dataset_explorer.balance")
