"""Why packing: the worked example (22.2 % against 88.9 %) and the support-tickets case."""
import numpy as np
import streamlit as st

from app_pages import _content
from app_pages._lab import figure, guard, length_summary, lesson, plan, source_lengths, strategy_table
from packing_core import DELTA_COLOURS, plan_strip, row_cu_seqlens, slot_use_figure

st.title("Why packing")
lesson("Why packing")
st.markdown(
    "A training batch is a rectangle: every row has the same number of slots. "
    "Short samples leave the rest of their row empty, and those **pads** still go through "
    "every layer. Packing puts several samples in one row instead."
)

# ---------------------------------------------------------------- the worked example
lengths, ctx = _content.WORKED_LENGTHS, _content.WORKED_CONTEXT
with guard("plan the worked example"):
    padded = plan(lengths, ctx, "pad")
    packed = plan(lengths, ctx, "concat-cut")
pm, km = padded.metrics(), packed.metrics()

st.subheader(f"Eight samples, {pm.real_tokens} real tokens, context {ctx}")
st.markdown(f"Lengths: {', '.join(map(str, lengths))}. Each colour is one document; grey is padding.")
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
figure(plan_strip(packed, title="concat-cut: one stream, cut every 512 tokens", max_cols=512),
       key="strip_packed")

bounds = packed.boundaries
per_row = row_cu_seqlens(packed)
st.markdown(
    f"**Where does each document start?** In the stream, at the running sum of the lengths: "
    f"`cumsum([0, {', '.join(map(str, lengths))}])` = `{bounds.tolist()}`. The stream is cut at "
    f"{ctx}, so document 3 starts at {bounds[3]} and spills into row 1 (the violet tick marks the cut). "
    "A varlen kernel reads one set of offsets per row, each starting at 0 and ending at the row's "
    "tokens: " + "; ".join(f"row {r}: `{cu}`" for r, cu in enumerate(per_row)) + ". "
    "The piece of document 3 in row 1 is a document of its own there: it cannot see its start."
)

# ---------------------------------------------------------------- the realistic case
st.subheader("The realistic case: 200,000 support tickets")
st.caption("From here on the packer is bfd, not concat-cut: bfd fills rows almost as well and never cuts a "
           "document, while concat-cut would cut tens of thousands of tickets in two.")
with guard("compute the support-tickets case"):
    tickets = source_lengths("support-tickets")
    stats, _ = length_summary(tickets, ctx)  # cached, and shared with the dataset explorer
    rows = strategy_table(tickets, ctx, strategies=("pad", "bfd"))
pad_row, bfd_row = rows
pad_share = pad_row.pad_tokens / pad_row.slots
c1, c2, c3, c4 = st.columns(4)
c1.metric("Tickets", f"{stats.count:,}")
c2.metric("Mean length", f"{stats.mean:.0f} tokens")
c3.metric(f"Pads when padded to {ctx}", f"{pad_share:.1%}", help="pad_tokens / slots")
c4.metric("Packed (bfd): utilisation", f"{bfd_row.utilisation:.1%}",
          delta=f"{pad_row.rows / bfd_row.rows:.1f}x fewer rows", delta_color=DELTA_COLOURS["fixed"])
quarters = {0.25: "a quarter", 0.5: "half", 0.75: "three quarters", 1.0: "all"}
st.markdown(
    f"Padded to {ctx}, about **{quarters.get(np.round(pad_share * 4) / 4, f'{pad_share:.0%}')}** "
    f"of every batch is pads: the GPU spends "
    f"{pad_share:.0%} of its work on nothing. The loss curve looks perfectly normal all the same, "
    "because pads are left out of the loss: only the throughput tells."
)
figure(slot_use_figure(rows, title="Slots of the whole dataset: real tokens and pads"), key="slots")

# ---------------------------------------------------------------- the trade-off
st.subheader("The trade-off, in three lines")
st.markdown(
    "- **Packing wins on throughput:** almost every slot holds a real token.\n"
    "- **Bucketing wins on safety:** batching samples of similar length removes most pads "
    "and needs no change to the attention mask.\n"
    "- **Utilisation measures waste, not quality:** a packed batch with a wrong mask is just as "
    "full, and silently trains on the wrong thing (see *Masks and labels* and the *Leakage lab*)."
)
