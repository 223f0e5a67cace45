"""Dataset explorer: a length histogram, the summary numbers, every strategy, and a recommendation.

One uploader takes the user's data (data files, the shards of one corpus, or a length
profile written by ``scan``); once it is analysed, every section describes it until the
sidebar switches back to a built-in dataset.
"""
import streamlit as st

from app_pages._lab import (
    SHARED,
    UPLOAD,
    cached_figure,
    choice,
    current_lengths,
    dataset_kind,
    dataset_label,
    esc,
    figure,
    guard,
    length_summary,
    lesson,
    number,
    page_settings,
    recommendation,
    sources,
    steps,
    strategy_dataframe,
    strategy_table,
)
from app_pages._your_data import (
    balance_of,
    profile_plans,
    profile_summary,
    upload_form,
)
from packing_core.analysis import PURPOSES, balance_verdict, basis_note, headline, loss_masked, order_basis, order_effects
from packing_core.packing import OVERLONG_POLICIES
from packing_core.viz import balance_figure, length_histogram_figure, strategy_figure

S = page_settings("dataset_explorer", overlong=choice("split", OVERLONG_POLICIES), ranks=number(8, 1, 1024),
                  micro_batches=number(4, 1, 256))

st.title("Dataset explorer")
lesson(__file__)
upload_form()

# ---------------------------------------------------------------- the dataset
context = SHARED.get("context")
name = SHARED.get("dataset")
yours = name == UPLOAD
with guard(f"load {dataset_label(name)}"):
    if yours:
        upload = st.session_state["upload"]
        profile = upload["profile"]
        stats, hist = profile_summary(upload["digest"], profile, context)
    else:
        name, lengths = current_lengths()
        stats, hist = length_summary(lengths, context)

st.subheader(f"{esc(dataset_label(name))} at context {context}")

o1, o2 = st.columns(2)
overlong = o1.radio("Documents longer than the context", OVERLONG_POLICIES, horizontal=True,
                    **S.bind("overlong"))
kind = o2.radio("What is this data?", PURPOSES, horizontal=True, key=f"dataset_explorer.kind_{name}",
                index=PURPOSES.index(dataset_kind(name)),
                help="instruction data (prompt + answer) must not be split; plain text may be")
with guard("compare the strategies"):
    if yours:
        plans, rows, head = profile_plans(upload["digest"], profile, context, overlong)
    else:
        rows = strategy_table(lengths, context, overlong=overlong)
        plans, head = None, headline(rows)
    sample = current_lengths()[1]      # your data: its one seeded sample (analysis.profile_sample)
    advice = recommendation(stats, rows, kind, sample)

# The header above the steps stays short, so that their tabs start on a projector's first screen.
lengths_step, strategies_step, advice_step, balance_step = steps(__file__)
with lengths_step:
    st.caption(esc(upload["caption"] if yours else sources()[name].description))
    st.markdown("How much padding a dataset causes depends on its length distribution against the context. "
                "The built-in support tickets are short with a long tail: most rows would be mostly pads. "
                "Pick another dataset in the sidebar, or open *Use your own data* above, and see which "
                "strategy fits.")
    with st.container(border=True):
        st.markdown(f"### {esc(head.sentence[0].upper() + head.sentence[1:])}")
        st.caption("Padding means every document padded to the context. " + (
            "Trained tokens per slot: the tokens in the loss that one slot of compute carries, so a step of "
            "the same size trains that many times more." if head.measure != "utilisation" else
            "Utilisation: real tokens / slots; every token of pretraining data is trained."))
    m = st.columns(7 if yours and loss_masked(profile) else 6)
    m[0].metric("Documents", f"{stats.count:,}")
    m[1].metric("Mean", f"{stats.mean:.0f}")
    m[2].metric("Median (p50)", f"{stats.p50:.0f}")
    m[3].metric("p95", f"{stats.p95:.0f}")
    m[4].metric("Longest", f"{stats.max:,}")
    m[5].metric("Over the context", f"{stats.share_over:.1%}", help=f"{stats.over_context:,} documents")
    if len(m) == 7:
        m[6].metric("Tokens in the loss", f"{profile.loss_share:.1%}",
                    help="chat: the assistant turns; prompt/completion: the completion; plain text: every token")
    figure(cached_figure(length_histogram_figure, hist, title="Tokens per document (violet: longer than the context)"),
           key=S.key("hist"))

with strategies_step:
    st.subheader("Every strategy on this dataset")
    figure(cached_figure(strategy_figure, rows), key=S.key("strategies"))
    strategy_dataframe(rows, plans)
    if yours:
        st.caption(esc(basis_note()))
    st.markdown("**Order effects.** " + esc(order_effects(rows, order_basis(plans))))

with advice_step:
    st.subheader("What to choose, and why")
    st.info(f"**Recommendation.** {advice}")

with balance_step:
    st.subheader("Data-parallel balance")
    st.markdown("A step waits for the slowest rank, and attention costs the sum of len\u00b2, so equal tokens "
                "are not equal time. The bfd rows dealt as a distributed sampler deals them, then balanced by "
                "attention cost.")
    b1, b2 = st.columns(2)
    ranks = b1.number_input("Ranks", 1, 1024, **S.bind("ranks"))
    micro = b2.number_input("Micro-batches per rank", 1, 256, **S.bind("micro_batches"))
    with guard("balance the rows"):
        key = upload["digest"] if yours else name
        report = balance_of(key, sample, context, int(ranks), int(micro))
    basis = f"a sample of {len(sample):,} documents" if yours and len(sample) < stats.count else \
        f"all {len(sample):,} documents"
    if report.note:
        st.caption(esc(report.note))
    figure(cached_figure(balance_figure, report, title=f"bfd rows of {basis}, {report.rows:,} rows over {report.ranks} ranks "
                             f"x {report.micro_batches} micro-batches"), key=S.key("balance"))
    verdict = balance_verdict(report)
    st.markdown(f"**{esc(verdict[0].upper() + verdict[1:])}.**")
