"""Why packing: predict, then see the worked example (22.2 % against 88.9 %) and the support-tickets case."""
import numpy as np
import streamlit as st

from app_pages import _content
from app_pages._lab import (
    figure,
    guard,
    length_summary,
    lesson,
    page_settings,
    plan,
    scroll_here,
    source_lengths,
    steps,
    stop,
    strategy_table,
    terms_help,
)
from packing_core.analysis import batch_cu_seqlens, row_cu_seqlens
from packing_core.viz import DELTA_COLOURS, plan_strip, slot_use_figure

S = page_settings("why_packing", skip=False)

st.title("Why packing")
lesson(__file__)
st.markdown(
    "A training batch is a rectangle: every row has the same number of "
    "slots. Short samples leave the rest of their row empty, and those "
    "**pads** still go through every layer. Packing puts several samples in one row instead.",
    help=terms_help('slot', 'pad'),
)

# one tab per idea, named as the teacher says them (_content.PAGES)
pad_or_pack, starts, real, trade = steps(__file__)

# ---------------------------------------------------------------- the worked example
lengths, ctx = _content.WORKED_LENGTHS, _content.WORKED_CONTEXT
with guard("plan the worked example"):
    padded = plan(lengths, ctx, "pad")
    packed = plan(lengths, ctx, "concat-cut")
pm, km = padded.metrics(), packed.metrics()

with pad_or_pack:
    st.subheader(f"{len(lengths)} samples, {pm.real_tokens} real tokens, context {ctx}")
    st.markdown(f"Lengths: {', '.join(map(str, lengths))}. Padding gives each sample a row of its own, {ctx} slots "
                "wide.")

    # ------------------------------------------------------------ predict before the answer
    st.markdown(f"**Predict:** padded to {ctx}, one sample per row, how many slots do these {pm.real_tokens} "
                "tokens take?")
    options = sorted({pm.real_tokens, km.slots, pm.slots // 2, pm.slots})   # the answer among plausible guesses
    guess = st.radio("Your prediction", options, index=None, horizontal=True, key="why_packing.guess",
                     format_func=lambda n: f"{n:,} slots", label_visibility="collapsed")
    reveal = st.checkbox("Skip predictions and always show the answers (self-study)", **S.bind("skip"))
if guess is None and not reveal:
    pad_or_pack.info("Make a prediction to see the answer.")
    for later in (starts, real, trade):
        later.info("Make a prediction in step 1 first: this step builds on its answer.")
    stop()

with pad_or_pack:
    if guess is not None:
        (st.success if guess == pm.slots else st.info)(
            f"{'Right' if guess == pm.slots else 'Not this time'}: {pm.rows} rows x {ctx} = {pm.slots:,} slots "
            f"for {pm.real_tokens} real tokens.")
        scroll_here("why_packing.answer", guess)   # the answer in view on a projector, not below the fold

    st.markdown("Each colour is one document; grey is padding.")
    left, right = st.columns(2, gap="large")
    with left:
        st.metric("Padded to the context: utilisation", f"{pm.utilisation:.1%}",
                  help="real tokens / slots")
        st.caption(f"{pm.rows} rows x {ctx} = {pm.slots:,} slots, of which {pm.pad_tokens:,} are pads.")
    with right:
        st.metric("Concatenated and cut into full rows", f"{km.utilisation:.1%}",
                  delta=f"{pm.slots / km.slots:.0f}x fewer slots", delta_color=DELTA_COLOURS["fixed"])
        st.caption(f"{km.rows} rows x {ctx} = {km.slots:,} slots, of which {km.pad_tokens:,} are pads.")
    # the two strips one above the other, each the page's width: wide cells and a whole legend at 1024 px
    figure(plan_strip(padded, title="pad: one sample per row", max_cols=512), key="strip_pad")
    figure(plan_strip(packed, title=f"concat-cut: one stream, cut every {ctx} tokens", max_cols=512),
           key="strip_packed")

# ---------------------------------------------------------------- where each document starts
bounds = packed.boundaries
per_row = row_cu_seqlens(packed)
flat = batch_cu_seqlens(packed)
split = int(np.searchsorted(bounds, ctx, side="right")) - 1   # the document that crosses the first row edge
with starts:
    st.markdown(
        f"**Where does each document start?** In the stream, at the running sum of the lengths: "
        f"`cumsum([0, {', '.join(map(str, lengths))}])` = `{bounds.tolist()}`. The stream is cut at "
        f"{ctx}, so document {split} starts at {bounds[split]} and spills into row 1 (the violet tick in step 1 "
        "marks the cut).",
    )
    st.markdown(
        f"A varlen kernel (`torch.nn.attention.varlen.varlen_attn`, `flash_attn_varlen_func`) takes one "
        f"`cu_seqlens` for the whole batch, flattened row after row: the running sum with a "
        f"cut added at each row edge, here `{flat}`. Within each row the same boundaries read "
        + " and ".join(f"`{cu}`" for cu in per_row) + ".",
        help=terms_help('varlen', 'cu_seqlens'),
    )
    st.markdown(f"The piece of document {split} in row 1 is a document of its own there: it cannot see its start.")

# ---------------------------------------------------------------- the realistic case
with guard("compute the support-tickets case"):
    tickets = source_lengths("support-tickets")
    stats, _ = length_summary(tickets, ctx)  # cached, and shared with the dataset explorer
    rows = strategy_table(tickets, ctx, strategies=("pad", "bfd", "concat-cut"))
pad_row, bfd_row, cut_row = rows
pad_share = pad_row.pad_tokens / pad_row.slots
quarters = {0.25: "a quarter", 0.5: "half", 0.75: "three quarters", 1.0: "all"}
with real:
    st.subheader(f"The realistic case: {stats.count:,} support tickets")
    st.markdown(
        f"From here on the packer is bfd, not concat-cut. bfd fills rows almost as well and cuts only "
        f"the {bfd_row.docs_split:,} tickets ({bfd_row.docs_split / stats.count:.1%}) longer than {ctx}; concat-cut "
        f"would cut {cut_row.docs_split:,}.",
        help=terms_help('bfd'),
    )
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("Tickets", f"{stats.count:,}")
    c2.metric("Mean length", f"{stats.mean:.0f} tokens")
    c3.metric(f"Pads when padded to {ctx}", f"{pad_share:.1%}", help="pad_tokens / slots")
    c4.metric("Packed (bfd): utilisation", f"{bfd_row.utilisation:.1%}",
              delta=f"{pad_row.rows / bfd_row.rows:.1f}x fewer rows", delta_color=DELTA_COLOURS["fixed"])
    st.markdown(
        f"Padded to {ctx}, about **{quarters.get(np.round(pad_share * 4) / 4, f'{pad_share:.0%}')}** "
        f"of every batch is pads: the GPU spends "
        f"{pad_share:.0%} of its work on nothing. The loss curve looks perfectly normal all the same, "
        "because pads are left out of the loss: only the throughput tells."
    )
    figure(slot_use_figure(rows[:2], title="Slots of the whole dataset: real tokens and pads"), key="slots")

# ---------------------------------------------------------------- the trade-off
with trade:
    st.subheader("The trade-off, in three lines")
    st.markdown(
        "- **Packing wins on throughput:** almost every slot holds a real token.\n"
        "- **Bucketing wins on safety, at a price:** batching samples of similar length "
        "removes most pads and needs no change to the attention mask. But every batch is then a run of look-alikes, "
        "so the gradient inside a batch is correlated: shuffle within buckets and keep them wide (see *Padded vs "
        "packed*).\n"
        "- **Utilisation measures waste, not quality:** a packed batch with a wrong mask "
        "is just as full, and silently trains on the wrong thing (see *Masks and labels* and the *Leakage lab*).",
        help=terms_help('bucketing', 'utilisation'),
    )
