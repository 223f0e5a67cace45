"""Dataset explorer: a length histogram, the summary numbers, every strategy against its proven lower
bound, a recommendation, and what a trainer's limits cost (a cap per row, a stream).

One uploader takes the user's data (data files, the shards of one corpus, or a length
profile written by ``scan``); once it is analysed, every section describes it until the
sidebar switches back to a built-in dataset.
"""
import streamlit as st

from app_pages._data import (
    current_lengths,
    dataset_label,
    dataset_purpose,
    length_summary,
    over_page_budget,
    recommendation,
    strategy_dataframe,
    strategy_table,
)
from app_pages._layout import cached_figure, figure, guard, lesson, steps
from app_pages._state import SHARED, UPLOAD, choice, number, page_settings, sources
from app_pages._text import esc
from app_pages._your_data import (
    balance_of,
    cap_prices_of,
    caps_within,
    profile_plans,
    profile_summary,
    stream_of,
    upload_form,
)
from packing_core.analysis import (
    CAP_LADDER,
    FRAMEWORKS,
    MODEL_SHAPES,
    STREAM_SAMPLE,
    basis_note,
    cap_sentence,
    describe_padding,
    headline,
    loss_masked,
    order_basis,
    order_effects,
    recommended_settings,
    step_verdict,
    table_notes,
)
from packing_core.data import PURPOSES
from packing_core.packing import OVERLONG_POLICIES, TRL_WINDOW, PlanOptions
from packing_lab.advice import bounds_example, guarantee_sentence, longest_share, static_example, trained_positions
from packing_lab.viz import (
    DELTA_COLOURS,
    balance_figure,
    buffer_curve_figure,
    length_histogram_figure,
    max_seqlen_figure,
    positions_figure,
    strategy_figure,
)

S = page_settings("dataset_explorer", overlong=choice("split", OVERLONG_POLICIES), ranks=number(8, 1, 1024),
                  micro_batches=number(4, 1, 256), rows_per_micro=number(1, 1, 64),
                  trainer=choice(FRAMEWORKS[0], FRAMEWORKS), cap=choice(8, CAP_LADDER),
                  model_shape=choice("SmolLM2-135M", tuple(MODEL_SHAPES)))

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
purpose = o2.radio("What is this data?", PURPOSES, horizontal=True, key=f"dataset_explorer.kind_{name}",
                   index=PURPOSES.index(dataset_purpose(name)),
                   help="instruction data (prompt + answer) must not be split; plain text may be")
with guard("compare the strategies"):
    if yours:
        plans, rows, head = profile_plans(upload["digest"], profile, context, overlong)
    else:
        rows = strategy_table(lengths, context, overlong=overlong)
        plans, head = None, headline(rows)
    sample = current_lengths()[1]      # your data: its one seeded sample (analysis.profile_sample)
    advice = recommendation(stats, rows, purpose, sample)

# The header above the steps stays short, so that their tabs start on a projector's first screen.
lengths_step, strategies_step, advice_step, balance_step, limits_step = steps(__file__)
with lengths_step:
    st.caption(esc(upload["caption"] if yours else sources()[name].description))
    figure(cached_figure(length_histogram_figure, hist, title="Tokens per document (violet: longer than the context)"),
           key=S.key("hist"))
    st.markdown("How much padding a dataset causes depends on its length distribution against the context. "
                + esc(describe_padding(stats, rows, sample)) + " Pick another dataset or context in the sidebar, or "
                "open *Use your own data* above, and see which strategy fits.")
    with st.container(border=True):
        st.markdown(f"### {esc(head.sentence[0].upper() + head.sentence[1:])}")
        order = "a seeded random order" if yours else "the data's order"
        st.caption(f"Padded to each batch's longest: batches of {PlanOptions().batch_size} documents in {order}, "
                   "each padded to its longest sample, as a trainer that does not pack does (dynamic padding). "
                   "In brackets, every document padded to the context. " + (
            "Trained tokens per slot: the tokens in the loss that one slot of compute carries, so a step of "
            "the same size trains that many times more." if head.measure != "utilisation" else
            "Utilisation: real tokens / slots; every token of pretraining data is trained."))
    # seven metrics in two rows: seven in one row broke "Documents" mid-word at a projector's 1024 px
    m = st.columns(4) + st.columns(3) if yours and loss_masked(profile) else st.columns(6)
    m[0].metric("Documents", f"{stats.count:,}")
    m[1].metric("Mean", f"{stats.mean:.0f}")
    m[2].metric("Median (p50)", f"{stats.p50:.0f}")
    m[3].metric("p95", f"{stats.p95:.0f}")
    m[4].metric("Longest", f"{stats.max:,}")
    m[5].metric("Over the context", f"{stats.share_over:.1%}", help=f"{stats.over_context:,} documents")
    if len(m) == 7:
        m[6].metric("Tokens in the loss", f"{profile.loss_share:.1%}",
                    help="chat: the assistant turns; prompt/completion: the completion; plain text: every token")

with strategies_step:
    st.subheader("Every strategy on this dataset")
    figure(cached_figure(strategy_figure, rows), key=S.key("strategies"))
    strategy_dataframe(rows, plans)
    if yours:
        st.caption(esc(basis_note()))
    st.markdown("**Order effects.** " + esc(order_effects(rows, order_basis(plans))))

with advice_step:
    st.subheader("What to choose, and why")
    st.info(f"**Recommendation.** {advice}")   # it ends on how far bfd is from the proven optimum
    settings = {s.framework: s for s in recommended_settings(stats, rows, purpose)}
    trainer = st.radio("The settings to paste, for", list(settings), horizontal=True, **S.bind("trainer"))
    chosen = settings[trainer]
    st.code(chosen.code, language="python", wrap_lines=True)   # no sideways scroll at 1024 px
    st.caption(f"{esc(chosen.overlong)} Read from {esc(chosen.source)}.")
    bounds_line = table_notes(rows, plans)[0]     # the three bounds of every document
    # folded: the settings, wrapped at a projector's width, and the step stay within two screens
    with st.expander("How far from the best plan: three lower bounds, and what the greedy packers promise"):
        st.markdown("**Three lower bounds, three questions.** " + esc(bounds_example()))
        st.caption(esc(bounds_line[0].upper() + bounds_line[1:]) + ". The table's *proven lower bound* column (step "
                   "2, every column) names the one each strategy is measured against.")
        promised = guarantee_sentence(rows)
        if promised:
            st.markdown("**What the greedy packers promise, and what they do.** " + esc(promised))

with balance_step:
    st.subheader("Data-parallel balance, one optimizer step at a time")
    b1, b2, b3, b4 = st.columns([2, 2, 2, 3])
    ranks = b1.number_input("Ranks", 1, 1024, **S.bind("ranks"))
    micro = b2.number_input("Micro-batches per rank", 1, 256, **S.bind("micro_batches"))
    per_micro = b3.number_input("Rows per micro-batch", 1, 64, **S.bind("rows_per_micro"),
                                help="the per-device batch, in packed rows")
    shape_name = b4.radio("Model shape", list(MODEL_SHAPES), horizontal=True,
                          format_func=lambda k: MODEL_SHAPES[k].name, **S.bind("model_shape"))
    too_many = over_page_budget(sample, context, command="python -m packing_core balance FILE --ranks N")
    if too_many:
        st.caption(too_many)   # the lab's own words and numbers
    else:
        with guard("balance the rows"):
            key = upload["digest"] if yours else name
            steps_ = balance_of(key, sample, context, int(ranks), int(micro), int(per_micro), shape_name)
        split = steps_.by_attention
        basis = f"a sample of {len(sample):,} documents" if yours and len(sample) < stats.count else \
            f"all {len(sample):,} documents"
        if split.note:
            st.caption(esc(split.note))
        figure(cached_figure(balance_figure, split.first, title=f"Step 1 of {split.steps:,}: {split.first.rows} "
                             f"shuffled bfd rows of {basis} over {split.ranks} ranks x {split.micro_batches} "
                             f"micro-batches x {split.rows_per_micro_batch}", height=320), key=S.key("balance"))
        k1, k2, k3 = st.columns(3)
        k1.metric("A step's max/mean, as dealt", f"{split.before_imbalance:.2f}",
                  help="the slowest rank's attention cost over the mean, averaged over the steps")
        k2.metric("Balanced by attention", f"{split.after_imbalance:.2f}",
                  delta=f"slowest rank {-split.cut:.1%}", delta_color=DELTA_COLOURS["fixed"])
        k3.metric("The epoch's total, as dealt", f"{split.epoch_imbalance:.2f}",
                  help="each rank's attention summed over every step: even, whatever the deal")
        verdict = step_verdict(steps_)
        st.markdown(f"**{esc(verdict[0].upper() + verdict[1:])}.**")
    st.markdown("Ranks wait for each other once per optimizer step, at the gradient all-reduce, so what counts is "
                "how evenly each step's rows are spread. A step holds ranks x micro-batches x rows per micro-batch "
                "rows, drawn in turn from the shuffled bfd rows. A rank's cost is the linear layers' (6N per token) "
                "plus attention's (Σ len² per document), so equal tokens are not quite equal time, and how much "
                "attention weighs depends on the model and the row length. Each step is dealt as a distributed "
                "sampler deals it, then balanced on its own; the figures are averages over the epoch's steps.")

with limits_step:
    st.subheader("A cap per row, and a stream")
    with guard("price the cap"):
        prices = cap_prices_of(upload["digest"] if yours else name, profile if yours else lengths, context, overlong)
    caps = caps_within(context)              # at context 16 or 32 the ladder stops at the context
    S.keep_within("cap", caps, min(S.settings["cap"].default, caps[-1]))
    c1, c2 = st.columns([3, 2], gap="medium")
    with c1:
        cap = st.select_slider("Documents per row (the cap)", caps, **S.bind("cap"),
                               help="what a static-shape kernel is compiled for; bfd honours it exactly")
        price = {p.max_docs_per_row: p for p in prices}[cap]
        st.markdown(f"**{esc(cap_sentence(price))}** A row that could take one more short document must leave "
                    "its slots empty.")
        st.caption("For example, " + esc(static_example()) + ".")
    c2.dataframe({"cap": [p.max_docs_per_row for p in prices], "bfd rows": [p.rows for p in prices],
                  "extra rows %": [100 * p.extra_share for p in prices]}, hide_index=True, width="stretch",
                 column_config={"extra rows %": st.column_config.NumberColumn(format="%.2f %%"),
                                "bfd rows": st.column_config.NumberColumn(format="localized"),
                                "cap": st.column_config.NumberColumn(help="documents per row")})
    st.markdown(
        "**A cap on documents per row.** CUDA graphs replay kernels recorded for fixed shapes and addresses; "
        "`torch.compile` specialises on shapes and on `max_seqlen` (a Python int) and recompiles when they change, "
        "or marks them dynamic after a recompile. A packed batch changes `cu_seqlens` (one entry per document, plus "
        "one) and `max_seqlen` every step. "
        "A cap of N documents a row fixes both: `cu_seqlens` padded to rows x N + 1 entries by repeating the last "
        "offset (zero-length documents, which varlen kernels skip) and `max_seqlen` set to the context, as "
        "torchtitan PR #4158 and Megatron-LM PR #4359 (32 documents by default) do. Without it each new shape "
        "records a new graph: in pytorch issue #188150 nine shapes took a 1.5x speed-up to about nothing. "
        "`python -m packing_core check` reads such a batch as sound and notes its zero-length documents.")

    st.markdown(
        "**A stream packs worse than a histogram.** A trainer that streams its data packs from a buffer, best fit "
        "among the N documents it holds: a small buffer sends rows out before a partner for their gap arrives. "
        "TRL's `trl.data_utils.pack_dataset` runs bfd inside each batch of `datasets.Dataset.map` "
        f"({TRL_WINDOW:,} examples by default), and no row mixes two batches.")
    order = "a seeded random order (a profile keeps counts, not order)" if yours else "the dataset's order"
    whole = {r.strategy: r for r in rows}["bfd"].utilisation
    too_many = over_page_budget(sample[:STREAM_SAMPLE], context, overlong)    # the documents the stream packs
    if too_many:
        st.caption(too_many)   # the lab's own words and numbers
    else:
        with guard("pack the stream"):
            stream = stream_of(upload["digest"] if yours else name, sample, context, overlong, order, whole)
        s1, s2 = st.columns([3, 2], gap="medium")
        with s1:
            figure(cached_figure(buffer_curve_figure, stream, title="Utilisation against buffer size"),
                   key=S.key("stream"))
        s2.markdown(esc(stream.sentence))

# ---------------------------------------------------------------- the longest documents
@st.cache_data(show_spinner="Planning the rows...", max_entries=16)
def longest_of(key: str, _lengths, context: int):
    """What the longest documents cost the bfd rows of ``_lengths`` (keyed by ``key``), and the positions they train."""
    import packing_core as pc
    plan = pc.make_plan(_lengths, context, "bfd")
    return longest_share(plan), trained_positions(plan)


with balance_step:     # the longest documents set each batch's max_seqlen: the same imbalance, seen per batch
    # folded: the step stays within two projector screens (tests/e2e/test_projector.py)
    with st.expander("The longest documents set a batch's attention, and the large positions"):
        too_many = over_page_budget(sample, context)
        if too_many:
            st.caption(too_many)   # the lab's own words and numbers
        else:
            with guard("measure the longest documents"):
                share, trained = longest_of(upload["digest"] if yours else name, sample, context)
            st.markdown("**Their cost.** " + esc(share.sentence))
            figure(cached_figure(max_seqlen_figure, share, title=f"max_seqlen of each batch of {share.rows_per_batch} bfd rows "
                                 "(the longest piece) beside its mean piece"), key=S.key("max_seqlen"))
            st.markdown(
                "**The positions they train.** " + esc(trained.sentence) + " That is the trade-off at long context: reset "
                "the positions per document (what the mask needs in transformers' padding-free path, and what each document "
                "sees at inference) and the largest positions get few examples; keep them counting along the row (GPT-3's "
                "concatenation, Megatron-LM's default: `--reset-position-ids` is off) and every position is trained, on "
                "positions that cross documents.")
            figure(cached_figure(positions_figure, trained, title=f"Trained tokens per position at context {context}, "
                                 "bfd rows"), key=S.key("positions"))
