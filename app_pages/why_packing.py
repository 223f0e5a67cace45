"""Why packing: predict, then see the worked example (22.2 % against 88.9 %) and the support-tickets case."""
import numpy as np
import streamlit as st

from app_pages import _content
from app_pages._data import length_summary, plan, source_lengths, strategy_table
from app_pages._layout import figure, guard, lesson, prediction, scroll_here, steps, terms_help
from app_pages._state import choice, number, page_settings
from app_pages._text import stop
from packing_lab.advice import batch_cu_seqlens, compare_schedules, row_cu_seqlens
from packing_lab.viz import DELTA_COLOURS, bucket_loss_figure, plan_strip, schedule_figure, slot_use_figure

lengths, ctx = _content.WORKED_LENGTHS, _content.WORKED_CONTEXT
with guard("plan the worked example"):
    padded = plan(lengths, ctx, "pad")
    packed = plan(lengths, ctx, "concat-cut")
pm, km = padded.metrics(), packed.metrics()
GUESSES = tuple(sorted({pm.real_tokens, km.slots, pm.slots // 2, pm.slots}))   # the answer among plausible guesses
# the class's prediction is part of the view: a link to a later step carries it, and opens that step answered
S = page_settings("why_packing", skip=False, rows_per_step=number(64, 1, 4096), warmup=number(500, 0, 100_000),
                  guess=choice(None, GUESSES))

st.title("Why packing")
lesson(__file__)
st.markdown(
    "A training batch is a rectangle: every row has the same number of "
    "slots. Short samples leave the rest of their row empty, and those "
    "**pads** still go through every layer. Packing puts several samples in one row instead.",
    help=terms_help('slot', 'pad'),
)

# one tab per idea, named as the teacher says them (_content.PAGES)
pad_or_pack, starts, real, schedule_step, trade = steps(__file__)

# ---------------------------------------------------------------- the worked example
with pad_or_pack:
    st.subheader(f"{len(lengths)} samples, {pm.real_tokens} real tokens, context {ctx}")
    # ------------------------------------------------------------ predict before the answer (one short paragraph:
    # the answer and its two strips then start on a projector's first screen)
    st.markdown(f"Lengths: {', '.join(map(str, lengths))}. Padding gives each sample a row of its own, {ctx} slots "
                f"wide. **Predict:** padded to {ctx}, one sample per row, how many slots do these {pm.real_tokens} "
                "tokens take?")
    guess = prediction(S, GUESSES, format_func=lambda n: f"{n:,} slots")
    reveal = st.checkbox("Skip predictions and always show the answers (self-study)", **S.bind("skip"))
if guess is None and not reveal:
    pad_or_pack.info("Make a prediction to see the answer.")
    for later in (starts, real, schedule_step, trade):
        later.info("Make a prediction in step 1 first: this step builds on its answer.")
    stop()

with pad_or_pack:
    if guess is not None:
        (st.success if guess == pm.slots else st.info)(
            f"{'Right' if guess == pm.slots else 'Not this time'}: {pm.rows} rows x {ctx} = {pm.slots:,} slots "
            f"for {pm.real_tokens} real tokens.")
        scroll_here("why_packing.answer", guess)   # the answer in view on a projector, not below the fold

    # the two strips one above the other, each the page's width: wide cells and a whole legend at 1024 px
    figure(plan_strip(padded, title="pad: one sample per row", max_cols=512), key="strip_pad")
    figure(plan_strip(packed, title=f"concat-cut: one stream, cut every {ctx} tokens", max_cols=512),
           key="strip_packed")
    st.caption("Each colour is one document; grey is padding.")
    left, right = st.columns(2, gap="large")
    with left:
        st.metric("Padded to the context: utilisation", f"{pm.utilisation:.1%}",
                  help="real tokens / slots")
        st.caption(f"{pm.rows} rows x {ctx} = {pm.slots:,} slots, of which {pm.pad_tokens:,} are pads.")
    with right:
        st.metric("Concatenated and cut into full rows", f"{km.utilisation:.1%}",
                  delta=f"{pm.slots / km.slots:.0f}x fewer slots", delta_color=DELTA_COLOURS["fixed"])
        st.caption(f"{km.rows} rows x {ctx} = {km.slots:,} slots, of which {km.pad_tokens:,} are pads.")

# ---------------------------------------------------------------- where each document starts
bounds = packed.boundaries
per_row = row_cu_seqlens(packed)
flat = batch_cu_seqlens(packed)
split = int(np.searchsorted(bounds, ctx, side="right")) - 1   # the document that crosses the first row edge
with starts:
    # the stream and its cut, drawn here (the step's idea is where each document starts, and the cut)
    figure(plan_strip(packed, title=f"Each document starts at the running sum of the lengths; the stream is cut "
                                    f"at {ctx}", max_cols=512), key=S.key("starts"))
    st.markdown(
        f"**Where does each document start?** In the stream, at the running sum of the lengths: "
        f"`cumsum([0, {', '.join(map(str, lengths))}])` = `{bounds.tolist()}`. The stream is cut at "
        f"{ctx}, so document {split} starts at {bounds[split]} and spills into row 1 (the violet tick above "
        "marks the cut).",
    )
    st.markdown(
        f"A varlen kernel takes the offsets of the queries and of the keys over the whole batch, flattened row "
        f"after row (`cu_seq_q`, `cu_seq_k` in `torch.nn.attention.varlen.varlen_attn`; `cu_seqlens_q`, "
        f"`cu_seqlens_k` in `flash_attn_varlen_func`; one tensor twice for self-attention): the running sum with a "
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
    figure(slot_use_figure(rows[:2], title="Slots of the whole dataset: real tokens and pads"), key="slots")
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("Tickets", f"{stats.count:,}")
    c2.metric("Mean length", f"{stats.mean:.0f} tokens")
    c3.metric(f"Pads when padded to {ctx}", f"{pad_share:.1%}", help="pad_tokens / slots")
    c4.metric("Packed (bfd): utilisation", f"{bfd_row.utilisation:.1%}",
              delta=f"{pad_row.rows / bfd_row.rows:.1f}x fewer rows", delta_color=DELTA_COLOURS["fixed"])
    st.markdown(
        f"Padded to {ctx}, about **{quarters.get(np.round(pad_share * 4) / 4, f'{pad_share:.0%}')}** "
        f"of every batch is pads: {pad_share:.0%} of the slots, and so about {pad_share:.0%} of the linear layers' "
        "work, is spent on pads (attention's share depends on the kernel; see *Padded vs packed*). The loss curve "
        "looks perfectly normal all the same, "
        "because pads are left out of the loss: only the throughput tells."
    )

# ---------------------------------------------------------------- the schedule
with schedule_step:
    st.subheader("Packing changes the schedule, not only the speed")
    st.markdown(
        f"A trainer takes a fixed number of rows per optimizer step. Packed by bfd, the {stats.count:,} tickets fill "
        f"{bfd_row.rows:,} rows instead of {pad_row.rows:,}: each row carries {pad_row.rows / bfd_row.rows:.1f}x the "
        "real tokens. Keep the rows per step, and every number counted in steps changes meaning.")
    chart = st.container()    # the figure first, its inputs under it
    c1, c2 = st.columns(2)
    rows_per_step = c1.number_input("Rows per optimizer step (batch x accumulation x ranks)", 1, 4096, step=8,
                                    **S.bind("rows_per_step"))
    warmup = c2.number_input("Warmup (optimizer steps)", 0, 100_000, step=50, **S.bind("warmup"))
    with guard("compare the schedules"):
        plan_sched = compare_schedules(pad_row.metrics, bfd_row.metrics, int(rows_per_step), int(warmup))
    p_s, k_s = plan_sched.padded, plan_sched.packed
    m1, m2, m3 = st.columns(3)
    m1.metric("Steps per epoch", f"{k_s.steps_per_epoch:,}", delta=f"padded: {p_s.steps_per_epoch:,}",
              delta_color="off")
    m2.metric("Real tokens per step", f"{k_s.tokens_per_step:,.0f}", delta=f"padded: {p_s.tokens_per_step:,.0f}",
              delta_color="off")
    m3.metric("Warmup, share of the epoch", f"{k_s.warmup_share:.0%}", delta=f"padded: {p_s.warmup_share:.0%}",
              delta_color="off")
    st.markdown(plan_sched.sentence)
    with chart:
        figure(schedule_figure(plan_sched, title="Learning rate against the real tokens trained, the same warmup "
                                                 "and decay in steps"), key=S.key("schedule"))

# ---------------------------------------------------------------- the trade-off
with trade:
    st.subheader("The trade-off, in three lines")
    st.markdown(
        "- **Packing wins on throughput:** almost every slot holds a real token.\n"
        "- **Bucketing wins on safety, at a price:** batching samples of similar length "
        "removes most pads and needs no change to the attention mask. But every batch then comes from one bucket: "
        "its samples look alike, and its loss and token count swing with the bucket it came from. Shuffle within "
        "buckets and keep them wide (see *Padded vs packed*).\n"
        "- **Utilisation measures waste, not quality:** a packed batch with a wrong mask "
        "is just as full, and silently trains on the wrong thing (see *Masks and labels* and the *Leakage lab*).",
        help=terms_help('bucketing', 'utilisation'),
    )


# ---------------------------------------------------------------- bucketing's visible symptom
@st.cache_data(show_spinner="Training the tiny model twice (about 15 s on a busy CPU)...", max_entries=2)
def bucket_demo(seed: int = 0):
    from packing_lab.demos import bucket_loss_demo
    return bucket_loss_demo(seed=seed)


with trade:
    st.markdown("**Bucketing's visible symptom: the loss swings with the bucket.**")
    st.markdown(
        "Each bucketed batch holds documents of one length range, and a batch's loss is a mean over its tokens. "
        "Short documents have a larger share of hard first tokens, so the logged loss rises and falls with the "
        "bucket each batch comes from, while random batches give a smooth curve. The tiny model trains twice on "
        "the same topic documents (BOS, then 3 to 9 tokens), from the same weights: once in random batches, once "
        "in four length buckets dealt in a shuffled order.")
    if st.button("Train both runs", key=S.key("bucket_go")):
        st.session_state[S.key("bucket_shown")] = True
    if st.session_state.get(S.key("bucket_shown")):
        with guard("train the bucketing demo"):
            demo = bucket_demo()
        figure(bucket_loss_figure(demo, title="Training loss per step: random batches against length buckets"),
               key=S.key("bucket_loss"))
        st.markdown(demo.sentence + " Keep the buckets wide and shuffle the batch order; read a bucketed loss "
                    "curve through a moving average over several buckets' worth of steps.")
