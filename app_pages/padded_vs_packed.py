"""Padded vs packed: edit the lengths, pick a strategy, watch the rows, the waste and the attention cost."""
import streamlit as st

from app_pages import _content
from app_pages._data import (
    current_lengths,
    dataset_label,
    over_page_budget,
    plan,
    strategy_dataframe,
    strategy_table,
    within_page_budget,
)
from app_pages._layout import cached_figure, document_picker, figure, guard, lesson, steps, terms_help
from app_pages._state import SHARED, choice, number, page_settings, text
from app_pages._text import esc, stop
from packing_core import STRATEGIES
from packing_core.analysis import (
    CONVENTION_NOTE,
    HALVES,
    MODEL_SHAPES,
    attention_cells,
    end_to_end,
    outlier_lengths,
    plan_bound,
    sample_lengths,
)
from packing_core.attention import DEFAULT_TILE
from packing_core.data import parse_lengths
from packing_core.packing import OVERLONG_POLICIES, STRATEGY_INFO
from packing_lab.advice import (
    micro_batch_masks,
    mixture_orders,
    mixture_sentence,
    padding_free_example,
    row_order,
)
from packing_lab.viz import bills_figure, mixture_figure, plan_strip, row_order_figure, strategy_figure

WORKED = ", ".join(map(str, _content.WORKED_LENGTHS))
MAX_ROWS = 24
FLEX_TILE = DEFAULT_TILE    # FlexAttention's default tile, as the Benchmark counts it
MASK_CONTEXTS = (512, 1024, 2048, 4096, 8192, 16384, 32768)
S = page_settings("padded_vs_packed", lengths=text(WORKED, parse_lengths), draw_n=number(32, 1, 4096),
                  strategy=choice("concat-cut", lambda: tuple(STRATEGIES)), overlong=choice("split", OVERLONG_POLICIES),
                  batch=number(32, 1, 4096), buckets=number(8, 1, 64), sort=False, shuffle=False,
                  model_shape=choice("SmolLM2-135M", tuple(MODEL_SHAPES)), mask_context=choice(8192, MASK_CONTEXTS),
                  mask_rows=number(8, 1, 64), first_row=number(0, 0, 10**7), doc=number(None, 0, 10**7))
PADDING_FREE = padding_free_example()


@st.cache_data(show_spinner="Packing the built-in mixture...", max_entries=8)
def mixtures(context: int):
    """The built-in mixture's bfd rows at ``context``, per batch by source: in the plan's order and shuffled."""
    return mixture_orders(context)


@st.cache_data(show_spinner=False, max_entries=16)
def mask_table(lengths, context: int, rows: int):
    """What each kernel builds for the first ``rows`` bfd rows of the sidebar's dataset at ``context``."""
    return micro_batch_masks(lengths, context, rows)


st.title("Padded vs packed")
top = st.container()   # the lesson box, filled once the page knows its numbers (its question quotes them)
# one tab per idea, named as the teacher says them (_content.PAGES); every tab runs (all cached)
rows_step, bills_step, every_step, outlier_step, order_step = steps(__file__)


def _draw() -> None:
    """Replace the lengths by a random batch of the sidebar's dataset (a new one each click)."""
    st.session_state["draws"] = st.session_state.get("draws", 0) + 1
    _, lengths = current_lengths()
    drawn = sample_lengths(lengths, int(st.session_state[S.key("draw_n")]), seed=st.session_state["draws"])
    st.session_state[S.key("lengths")] = ", ".join(map(str, drawn))


# ---------------------------------------------------------------- controls
with rows_step:
    # the figure first: the strategy beside the step's title, then the rows; the numbers, the documents and the
    # options under them (filled below, once the plan is made)
    head, pick = st.columns([3, 2], vertical_alignment="bottom")
    strategy = pick.selectbox("Strategy", tuple(STRATEGIES), **S.bind("strategy"))   # the registry now
    title_slot, strip_slot, numbers_slot = head.empty(), st.container(), st.container()
    st.caption(STRATEGY_INFO[strategy])
    st.markdown(
        f"The page opens on the {len(_content.WORKED_LENGTHS)} samples of the first page, laid out by one strategy. "
        "Padding strategies give each sample its own row; packing strategies fill rows with several "
        "samples. Edit the lengths, draw a random batch from the dataset, or change the strategy, "
        "and watch the rows, the pads and the attention cost move."
    )
    left, right = st.columns([3, 2], gap="large")
    with left:
        st.text_area("Document lengths (tokens), separated by commas or spaces", height=90,
                     **S.bind("lengths"))
    with right:
        overlong = st.radio("Documents longer than the context", OVERLONG_POLICIES, horizontal=True,
                            **S.bind("overlong"))
    # the draw row spans the page: at a projector's 1024 pixels its button label fits whole
    c1, c2, c3 = st.columns([1, 3, 1], vertical_alignment="bottom")
    c1.number_input("How many", min_value=1, max_value=4096, step=8, **S.bind("draw_n"))
    c2.button(f"Draw at random from {esc(dataset_label(SHARED.get('dataset')))}",
              on_click=_draw, width="stretch")
    c3.button("Reset", on_click=lambda: st.session_state.update({S.key("lengths"): WORKED}),
              width="stretch")

    batched = strategy in ("pad-longest", "bucket")
    with st.expander("Batching options (pad-longest, bucket) and shuffling", expanded=batched):
        b1, b2, b3, b4 = st.columns(4)
        batch_size = b1.number_input("Batch size (rows)", min_value=1, max_value=4096, disabled=not batched,
                                     **S.bind("batch"))
        buckets = b2.number_input("Buckets", min_value=1, max_value=64, disabled=strategy != "bucket",
                                  **S.bind("buckets"))
        sort = b3.checkbox("Sort by length first", disabled=strategy != "pad-longest", **S.bind("sort"))
        shuffle = b4.checkbox("Shuffle packed rows", **S.bind("shuffle"))
        st.caption("ffd and bfd place the longest documents first, so their rows come out "
                   "sorted by what they hold; shuffling the rows restores a random order. Bucketing shuffles "
                   "inside each bucket and then the batches.", help=terms_help('ffd', 'bfd'))

    context = SHARED.get("context")
    with guard("read the lengths"):
        lengths = tuple(parse_lengths(st.session_state[S.key("lengths")]).tolist())
    kwargs = dict(overlong=overlong, batch_size=int(batch_size), buckets=int(buckets), shuffle=shuffle, seed=0)
    with guard(f"plan these documents at context {context}"):
        within_page_budget(lengths, context, overlong)
        p = plan(lengths, context, strategy, sort=sort, **kwargs)
        pad = plan(lengths, context, "pad", **kwargs)
m, pm = p.metrics(), pad.metrics()
cost, pad_cost = attention_cells(m), attention_cells(pm)      # each plan's own kernel, full squares
dense_cost = attention_cells(m, "dense")

# ---------------------------------------------------------------- the rows, and their numbers
title_slot.subheader(f"{strategy} at context {context} (change it in the sidebar)")
with strip_slot:
    first = 0
    if m.rows > MAX_ROWS:
        if S.get("first_row") >= m.rows:
            st.session_state[S.key("first_row")] = 0
        first = st.slider("First row shown", 0, m.rows - 1, step=1, **S.bind("first_row"))
    picked = S.get("doc")    # a document clicked in the rows, or picked under them: framed in every row it sits in
    figure(plan_strip(p, first_row=first, max_rows=MAX_ROWS, highlight=picked, pickable=True,
                      title=f"rows {first} to {min(m.rows, first + MAX_ROWS) - 1} of {m.rows}"),
           key=S.key("strip"), pick=(S, "doc"))
    picked = document_picker(S, "doc", len(lengths), label="Pick out a document (or click it in the rows)")
    if picked is not None:
        mine = p.piece_doc == picked
        where = sorted(set(p.piece_row[mine].tolist()))
        st.caption(f"Document {picked}: {lengths[picked]:,} tokens, "
                   + (f"in row{'s' if len(where) > 1 else ''} {', '.join(map(str, where))}"
                      + (" (split at a row edge)" if len(where) > 1 else "") if where else
                      "in no row (dropped by the over-long policy)") + ".")
    st.caption("Each colour is one document, grey is padding, white is outside a row. A black tick ends "
               "a document; a violet tick marks a document split at a row edge.")
with numbers_slot:
    n1, n2, n3 = st.columns(3)   # two rows of three: every label whole at a projector's 1024 pixels
    n4, n5, n6 = st.columns(3)
    bound = plan_bound(p)
    n1.metric("Rows", f"{m.rows:,}", help=f"the proven lower bound for {strategy}: {bound.name} {bound.rows:,} rows "
                                         f"({bound.what})")
    n2.metric("Slots", f"{m.slots:,}", help="rows x their width: the positions the GPU computes")
    n3.metric("Utilisation", f"{m.utilisation:.1%}", help="real tokens / slots")
    n4.metric("Pads", f"{m.pad_tokens:,}")
    n5.metric("Tokens lost", f"{m.tokens_lost:,}", help="truncated or dropped by the over-long policy")
    n6.metric("Attention FLOP ratio", f"{pad_cost / cost:.1f}x",
              help="attention cells of padding every sample to the context, run by a padded causal kernel that "
                   "computes the pads (SDPA with is_causal) / this plan's under its own kernel (an unpadding varlen "
                   "kernel when packed), in full squares. A count of arithmetic, not a measured speed-up.")

with bills_step:
    unpadded = attention_cells(pm, "unpadded")   # the padded batch under an unpadding kernel: one square per sample
    st.subheader(f"Three bills: {strategy} against padding to {context}")
    bills = {"linear layers (slots)": (pm.slots, m.slots),
             "attention, its own kernel (cells)": (pad_cost, cost),
             "attention, a dense mask (cells)": (pad_cost, dense_cost)}
    figure(bills_figure(bills, title=f"{strategy}'s three bills, as a share of padding every sample to {context}"),
           key=S.key("bills"))
    st.markdown(
        f"**Three bills, three ratios.** The linear layers (most of a model's FLOPs) pay per "
        f"slot: {pm.slots:,} padded against {m.slots:,} here, **{pm.slots / m.slots:.1f}x** fewer. "
        f"Attention grows with the square of the row. Padded to the context and run by a padded causal kernel "
        f"(SDPA with is_causal), which computes the pads, it costs rows x context² = "
        f"{pm.rows:,} x {context}² = {pad_cost:,} cells.",
        help=terms_help('slot', 'sdpa', 'full squares'),
    )
    if p.packed:
        flex = attention_cells(p, "flex", tile=FLEX_TILE)
        st.markdown(
            f"Packed, an unpadding varlen kernel fed `cu_seqlens` (or one call per document) computes one square "
            f"per document, Σ len² = {cost:,}: **{pad_cost / cost:.1f}x** fewer. FlexAttention computes every "
            f"{FLEX_TILE}-token tile on or below the diagonal that a document touches, {flex:,} cells "
            f"({flex / cost:.1f}x Σ len² here): **{pad_cost / flex:.1f}x** fewer. A materialised block-diagonal "
            f"mask skips nothing: it computes every cell of each row, Σ width² = {dense_cost:,}, only "
            f"**{pad_cost / dense_cost:.1f}x** fewer.",
            help=terms_help('varlen', 'FlexAttention', 'block-diagonal mask'),
        )
        flex_pad = attention_cells(pad, "flex", tile=FLEX_TILE)   # a padding mask: each sample's tiles from 0
        half = attention_cells(pm, convention=HALVES)    # the padded baseline on a GPU: lower halves only
        # folded: the step stays within two projector screens (tests/e2e/test_projector.py)
        with st.expander("Against a padded batch whose kernel drops the pads, and on a GPU"):
            st.markdown(
                f"Against a padded batch run by an unpadding kernel, padding pays less: FlashAttention given an "
                f"`attention_mask` drops the pads and pays Σ len² = {unpadded:,}, so attention saves only "
                f"{unpadded / cost:.1f}x and what packing buys is the slot ratio, **{pm.slots / m.slots:.1f}x**; "
                f"Flex with a padding mask pays the {FLEX_TILE}-token tiles each sample touches, {flex_pad:,} cells.",
                help=terms_help('FlashAttention'),
            )
            st.caption(f"{CONVENTION_NOTE} Here, on a GPU: varlen "
                       f"{half / attention_cells(m, convention=HALVES):.1f}x, FlexAttention {half / flex:.1f}x, "
                       f"a dense mask {half / dense_cost:.1f}x.")
        with st.expander("Memory too: what a materialised mask holds at long context"):
            e1, e2 = st.columns(2)
            at = e1.select_slider("Context of the micro-batch", MASK_CONTEXTS, **S.bind("mask_context"))
            per_device = e2.number_input("Rows per micro-batch", 1, 64, **S.bind("mask_rows"))
            with guard("count what each kernel builds"):
                masks = mask_table(current_lengths()[1], int(at), int(per_device))
            st.markdown(esc(masks.sentence))
            st.dataframe(masks.table(), hide_index=True, width="stretch",
                         column_config={"MiB": st.column_config.NumberColumn(format="%.4g"),
                                        "cells computed": st.column_config.NumberColumn(format="localized")})
            st.caption(f"The first {masks.rows} bfd rows of {esc(dataset_label(SHARED.get('dataset')))} at "
                       f"{masks.context:,}, bf16 for eager's mask. {esc(PADDING_FREE.sentence)}")
    elif strategy == "pad":
        st.markdown(f"This plan pads every row to the context: it is the baseline (**{pad_cost / cost:.1f}x**).")
    else:
        st.markdown(f"This plan pads each row to its batch's longest sample: Σ width² = {cost:,}, "
                    f"**{pad_cost / cost:.1f}x** fewer, with no mask to change.")

# ---------------------------------------------------------------- all strategies
with every_step:
    st.subheader("Every strategy on these lengths")
    with guard("compare the strategies"):
        rows = strategy_table(lengths, context, **kwargs)
    figure(strategy_figure(rows), key=S.key("strategies"))
    strategy_dataframe(rows)
    split = {r.strategy: r.docs_split for r in rows}.get("concat-cut", 0)
    if split:
        st.caption(f"concat-cut tops the attention ratio because it cuts {split:,} document(s) into shorter "
                   "pieces: the split is what buys that figure, and every cut loses context.")

# the whole training step: drawn under the three bills, it needs every strategy's table
with bills_step:
    st.subheader("End to end: what a training step costs")
    shape_name = st.radio("Model shape", list(MODEL_SHAPES), horizontal=True,
                          format_func=lambda k: MODEL_SHAPES[k].name, **S.bind("model_shape"))
    shape = MODEL_SHAPES[shape_name]
    e2e = end_to_end(rows, shape)
    with st.expander("How a training step's FLOPs are counted"):   # folded: the step stays two projector screens
        st.latex(r"\text{FLOPs} = 6\,N \cdot \text{slots} + 12\,n_\text{layer}\,d_\text{model} \cdot A")
        st.caption(f"{shape.name}: N = {shape.params:,.0f} parameters, n_layer = {shape.n_layer}, d_model = "
                   f"{shape.d_model}, {shape.n_heads} heads, vocabulary {shape.vocab:,} (from {shape.source}). "
                   "The standard estimate of training FLOPs (forward and backward) per token is "
                   "6N + 12·n_layer·d_model·T, T the length of the row (or document) it sits in. Summed over the plan, "
                   "A counts full squares, the lab's one convention: Σ len² with an unpadding varlen kernel, Σ width² "
                   "with a padded causal kernel (pads computed) or a dense mask. On a GPU the causal kernels pay about "
                   "half of A while a dense mask pays all of it, so there the dense column falls further behind.")
    st.dataframe({
        "strategy": [e.strategy for e in e2e],
        "training FLOPs": [f"{e.flops:.3g}" for e in e2e],
        "attention share": [f"{e.attention_share:.1%}" for e in e2e],
        "end-to-end ratio": [f"{e.ratio:.2f}x" for e in e2e],
        "with a dense mask": [f"{e.ratio_dense_mask:.2f}x" for e in e2e],
    }, hide_index=True, width="stretch")
    pad_share = {e.strategy: e.attention_share for e in e2e}.get("pad")
    if pad_share is not None:
        st.markdown(
            f"Padded to {context}, attention is **{pad_share:.1%}** of {esc(shape.name)}'s FLOPs. The linear "
            "layers dominate, so end to end packing saves about its slot ratio, not its attention ratio. "
            "Attention weighs more in small models and long rows.")

ref = strategy if p.packed else "bfd"   # the question is about packing: a padded plan asks it of bfd
with top:
    lesson(__file__, attention_ratio={r.strategy: r.attention_ratio for r in rows}[ref],
           step_ratio={e.strategy: e.ratio for e in e2e}[ref])

# ---------------------------------------------------------------- one outlier
with outlier_step:
    st.subheader("The longest sample sets the width")
    short, spiked = outlier_lengths()
    with guard("plan the outlier example"):
        calm = plan(tuple(short.tolist()), 512, "pad-longest").metrics()
        stretched_plan = plan(tuple(spiked.tolist()), 512, "pad-longest")
    stretched = stretched_plan.metrics()
    st.markdown(
        f"Padding to the batch's longest sample beats padding to the context, until one sample is long. "
        f"A batch of {len(short)} samples of about {int(short.mean())} tokens is padded to "
        f"{calm.slots // calm.rows} and uses **{calm.utilisation:.1%}** of its slots. Replace one of them by "
        f"a {int(spiked.max())}-token outlier and all {len(short)} rows stretch to {int(spiked.max())}: "
        f"**{stretched.utilisation:.1%}**. The other {len(short) - 1} rows gain "
        f"{(len(short) - 1) * (int(spiked.max()) - int(short.max())):,} pads; the batch as a whole gains "
        f"{stretched.pad_tokens - calm.pad_tokens:,}, a little less, because the outlier's own row has none."
    )
    figure(plan_strip(stretched_plan, max_rows=len(short), row_height=12, show_ticks=False,
                      title=f"pad-longest, one batch of {len(short)} with a {int(spiked.max())}-token outlier"),
           key=S.key("outlier"))

# ---------------------------------------------------------------- batch composition
with order_step:
    st.subheader("Packing policy shapes batch composition")
    with guard("draw the batch-composition example"):
        sample = tuple(sample_lengths(current_lengths()[1], 2000, seed=1).tolist())
    too_many = over_page_budget(sample, context)    # three plans of them follow
    if too_many:
        st.caption(too_many)   # the lab's own words and numbers
        stop()
    with guard("plan the batch-composition example"):
        in_order = row_order(plan(sample, context, "bfd", overlong="split"))
        shuffled = row_order(plan(sample, context, "bfd", overlong="split", shuffle=True, seed=0))
        bucketed = row_order(plan(sample, context, "bucket", overlong="split", batch_size=int(batch_size),
                                     buckets=int(buckets), seed=0))
    figure(row_order_figure({"bfd": in_order, "bfd + shuffle": shuffled, "bucket": bucketed},
                            title="Longest document in each row, in the order rows are read"), key=S.key("row_order"))
    s1, s2, s3 = st.columns(3)
    s1.metric("bfd rows: neighbour correlation", f"{in_order.neighbour_correlation:.2f}",
              help="correlation between the longest documents of consecutive rows")
    s2.metric("bfd, rows shuffled", f"{shuffled.neighbour_correlation:.2f}")
    s3.metric("bucket rows", f"{bucketed.neighbour_correlation:.2f}",
              help=f"{int(buckets)} buckets, batches of {int(batch_size)} rows, shuffled inside each bucket")
    st.markdown(
        f"Best-fit decreasing places the longest documents first, so on 2,000 documents from "
        f"{esc(dataset_label(SHARED.get('dataset')))} its first batch of 32 rows holds pieces of "
        f"**{in_order.first_batch_mean:.0f}** tokens on average and its last batch **{in_order.last_batch_mean:.0f}**. "
        "Read in that order, the epoch becomes a length curriculum (long documents first, short last), and each "
        "batch's loss and token count depend on where it falls. "
        f"A shuffle stage after packing restores a random order (correlation {shuffled.neighbour_correlation:.2f}) "
        "without changing a single row."
    )
    st.markdown(
        f"Bucketing pays this price by design. Every batch comes from one bucket, so rows next to each other "
        f"look alike (correlation {bucketed.neighbour_correlation:.2f}) even though it shuffles inside each bucket "
        "and then the batches. Shuffling mixes batches across the epoch, never the rows inside one: each batch "
        "still holds look-alike samples, so its gradient is a less representative estimate of the whole data's (as "
        "if the batch were smaller). Keep the buckets wide, so each batch is a fair draw from its bucket."
    )
    with guard("plan the built-in mixture"):
        before, after = mixtures(context)
    st.markdown(f"**Sorting by length groups sources.** On the built-in mixture "
                f"({esc(', '.join(before.names))}) at context {context}. " + esc(mixture_sentence(before, after)))
    figure(cached_figure(mixture_figure, {"bfd rows in order": before, "bfd rows shuffled": after},
                         title="Each batch's tokens by source (dashed: the corpus's mixture)"), key=S.key("mixture"))

