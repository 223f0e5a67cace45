"""Benchmark: time padded against packed attention on this machine, beside the FLOP-ratio bound."""
import numpy as np
import streamlit as st
import torch

from app_pages import _content
from app_pages._data import strategy_table
from app_pages._layout import figure, guard, lesson, terms_help
from app_pages._progress import progress
from app_pages._state import CONTEXTS, SHARED, choice, page_settings, sources
from app_pages._text import esc
from packing_core import InputError
from packing_core.analysis import BOUND_LABELS, CONVENTION_NOTE, benchmark_bounds, halved_bound
from packing_core.attention import available_backends
from packing_core.data import synthetic_lengths
from packing_lab.advice import kernel_footprints
from packing_lab.bench import PACKED_BACKENDS, busy_warning, describe_breakdown, run_benchmark
from packing_lab.demos import BREAKDOWN_LIMIT_S, benchmark_estimate, breakdown_estimate, docs_within, load_warning
from packing_lab.viz import benchmark_figure, tile_figure

DOCS, HEADS, REPEATS = (32, 64, 128, 256, 512, 1024, 2048), (1, 2, 4, 8, 16), (1, 2, 3, 5)
LESSON_CONTEXT = _content.WORKED_CONTEXT   # the lesson's rows: a run takes seconds, not minutes
# flex is off until asked for: on a CPU its first call compiles a kernel for 15-40 s
S = page_settings("benchmark", bench_context=choice(LESSON_CONTEXT, CONTEXTS), docs=choice(128, DOCS),
                  heads=choice(8, HEADS), repeats=choice(3, REPEATS), flex=False)
TILE_EXAMPLE = 16   # documents drawn in the tile figure: enough to see the pattern, few enough to read it

st.title("Benchmark")
lesson(__file__)
shown = st.container()   # the figure first: what each kernel computes, or the measured throughput (filled below)
st.markdown(
    "The padded baseline is SDPA with is_causal over padded rows: a padded causal kernel, which computes the pads. "
    "Packed, one call per document (`segments`) or a varlen kernel fed `cu_seqlens` computes one small square "
    "per document; FlexAttention (`flex`) skips only whole empty tiles, so it computes every tile a document "
    "touches; a materialised block-diagonal mask still computes every cell of each row. (Against an unpadding "
    "kernel, padding would pay only the small squares too, and packing would buy only the slot ratio.) Each "
    "backend has its own FLOP bound; here you measure how much of it this machine actually gets."
)
st.caption(CONVENTION_NOTE + " The padded, segments, varlen and dense bounds below are counted in full squares, so "
           "they fit this CPU at contexts up to 512; flex's by its causal tiles. On a GPU, or on longer rows, read the "
           "dense and flex bounds at half.", help=terms_help("full squares"))

dataset = SHARED.get("dataset")
if sources().get(dataset) is None or not sources()[dataset].synthetic:
    st.caption(f"The benchmark draws lengths from a synthetic dataset; {dataset} is not one, "
               "so it uses support-tickets.")
    dataset = "support-tickets"

busy = st.container()   # a run's progress shows here, above its settings, scrolled into view
context = st.select_slider("Context (tokens per row) of the benchmark", options=CONTEXTS, **S.bind("bench_context"),
                           help=f"The lesson's {LESSON_CONTEXT} unless you pick another: the time grows with its "
                                "square. The sidebar's context is not used here.")
sidebar = SHARED.get("context")
st.caption(f"The benchmark runs at context {context}, set here (the lesson's is {LESSON_CONTEXT}); it does not follow "
           f"the sidebar's context" + (f" ({sidebar}), at which every padded row would cost {(sidebar / context) ** 2:.3g} "
                                       "times as much." if sidebar != context else "."))
c1, c2, c3, c4, c5 = st.columns(5)
docs = c1.select_slider("Documents", options=DOCS, **S.bind("docs"))
heads = c2.select_slider("Heads", options=HEADS, **S.bind("heads"))
repeats = c3.select_slider("Repeats", options=REPEATS, **S.bind("repeats"),
                           help="rounds, interleaved; the table shows the best, the median and the worst")
devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
device = c4.radio("Device", devices, horizontal=True, key=S.key("device"),
                  help="cuda appears when a GPU is present; varlen runs only there")
flex_here = "flex" in available_backends(device)
with_flex = c5.checkbox("Time flex", disabled=not flex_here, **S.bind("flex"),
                        help="FlexAttention compiles a kernel on its first run in this server (15-40 s here)"
                        if flex_here else "FlexAttention cannot run here (no compiler for its kernel)")


@st.cache_data(show_spinner="Counting the tiles each kernel computes...", max_entries=16)
def _footprints(dataset: str, n: int, context: int, tiles: tuple):
    return kernel_footprints(synthetic_lengths(dataset, n=n), context, tiles=tiles)


with guard("plan the benchmark's documents"):
    lengths = synthetic_lengths(dataset, n=docs)
    rows = strategy_table(lengths, context, strategies=("pad", "bfd"))
    flex_cells = {f.kernel: f for f in _footprints(dataset, docs, context, (128, 64))}
flop_ratio = rows[1].attention_ratio  # pad's attention cells / bfd's Σ len²: what run_benchmark calls flop_ratio
flex128, flex64 = flex_cells["flex, 128-token tiles"], flex_cells["flex, 64-token tiles"]
st.markdown(
    f"**Before running:** {docs} documents of {dataset} at context {context}, in full squares. Padded (SDPA with "
    "is_causal, pads computed): "
    f"{rows[0].rows} rows x {context}² = {rows[0].attention_cost:,} cells. Packed by bfd into {rows[1].rows} rows: "
    f"`segments` and `varlen` compute Σ len² = {rows[1].attention_cost:,}, a bound of **{flop_ratio:.1f}x** "
    f"(about the same on a GPU); "
    f"`flex` in 128-token tiles computes {BOUND_LABELS['flex'].replace('tile²', '128²')} = {flex128.cells:,}, "
    f"a bound of **{flex128.ratio:.1f}x** ({halved_bound(flex128.ratio, 'flex'):.1f}x on a GPU); "
    f"`dense` computes {rows[1].rows} x {context}² = {rows[1].dense_mask_cost:,}, a bound of "
    f"**{rows[1].dense_mask_ratio:.1f}x** ({halved_bound(rows[1].dense_mask_ratio, 'dense'):.1f}x on a GPU)."
)
mean_len = float(np.mean(lengths))
st.markdown(
    f"**Short documents in big tiles.** These documents average {mean_len:.0f} tokens. A 128-token tile is "
    "wider than most of them, so nearly every tile holds the edge of two or three documents and must be "
    "computed, masked cells and all: flex computes "
    f"{flex128.cells / rows[1].attention_cost:.1f}x the cells of the documents' own squares in 128-token tiles, "
    f"{flex64.cells / rows[1].attention_cost:.1f}x in 64-token tiles. Smaller tiles skip more, but each tile "
    "costs the kernel more per cell, so the benchmark below tells which wins here."
)


chosen = [b for b in PACKED_BACKENDS if b in available_backends(device) and (b != "flex" or with_flex)]


# the rate under it is measured again after a minute
@st.cache_data(show_spinner="Timing a few attention calls on this machine...", ttl=60, max_entries=64)
def _estimate(what: str, **settings):
    return (benchmark_estimate if what == "run" else breakdown_estimate)(**settings)


with guard("estimate the benchmark's time"):
    estimate = _estimate("run", docs=docs, context=context, heads=heads, repeats=repeats, backends=tuple(chosen),
                         dataset=dataset)
busy_now = load_warning()
if busy_now:
    st.warning(busy_now)
run_now = st.button("Run the benchmark", type="primary", help=estimate.basis)
st.caption(f"**Run the benchmark** takes {estimate.about()} with these settings ({esc(estimate.basis)}).")
if run_now:
    with guard("run the benchmark"), progress(busy, estimate) as update:
        try:
            st.session_state[S.key("result")] = run_benchmark(
                docs=docs, context=context, heads=heads, head_dim=64, repeats=repeats, device=device,
                dataset=dataset, backends=chosen, progress=update)
            st.session_state.pop(S.key("error"), None)
        except InputError as e:
            st.session_state[S.key("error")] = str(e)

if S.key("error") in st.session_state:
    st.error(f"Could not run the benchmark: {esc(st.session_state[S.key('error')])}")
result = st.session_state.get(S.key("result"))
views = ["the tiles each kernel computes", "measured throughput"]
with shown:
    view = st.radio("Figure", views if result is not None else views[:1], horizontal=True,
                    index=1 if result is not None else 0, key=S.key(f"view_{result is not None}"))
if view == views[0]:
    with shown, guard("draw the tiles each kernel computes"):
        figure(tile_figure(_footprints(dataset, min(docs, TILE_EXAMPLE), context, (128, 64)),
                           title=f"What each kernel computes for the first {min(docs, TILE_EXAMPLE)} documents, "
                                 "every panel at one scale"),
               key=S.key("tiles"))
        st.caption("Full squares, as every bound here: padded SDPA's grey upper triangles are what torch's CPU kernel "
                   "computes at 512 tokens and below. A GPU causal kernel skips them, as flex skips its upper tiles.")
if result is None:
    st.info(f"Press the button: {estimate.about()} with these settings.")
else:
    cfg, machine = result.config, result.machine
    st.caption(f"{cfg.docs} documents of {cfg.dataset}, context {cfg.context}, {cfg.heads} heads x "
               f"{cfg.head_dim}, {cfg.dtype}, on {machine.device} ({machine.device_name}, "
               f"{machine.torch_threads} threads), torch {machine.torch}. Both layouts get q, k "
               "and v token-major, as a model's projection leaves them.")
    warning = busy_warning(machine)
    if warning:
        st.warning(warning)
    load = machine.load_before, machine.load_after
    if all(load):
        st.caption(f"Load average (1 minute) {load[0][0]:.2f} before the run and {load[1][0]:.2f} after, on "
                   f"{machine.cpus} CPUs; the run's own threads count in the second.")
    bounds = benchmark_bounds(result)
    if view == views[1]:
        with shown:
            figure(benchmark_figure(result, title="Attention throughput (higher is better)"), key=S.key("fig"))
    timings = [result.padded] + list(result.backends.values())
    st.dataframe({
        "layout": ["padded"] + list(result.backends),
        "seconds": [t.seconds for t in timings],
        "median s": [t.median for t in timings],
        "worst s": [t.worst for t in timings],
        "tokens/s": [round(t.tokens_per_s) for t in timings],
        "speed-up": [1.0] + [round(r.speedup, 2) for r in result.backends.values()],
        "its FLOP bound": ["1.0x"] + [f"{bounds[b]:.1f}x" for b in result.backends],
        "what the bound counts": [BOUND_LABELS["padded"]] + [r.bound or BOUND_LABELS.get(b, "")
                                                             for b, r in result.backends.items()],
        "share of its bound": ["baseline"] + [f"{r.speedup / bounds[b]:.0%}" for b, r in result.backends.items()],
    }, hide_index=True)
    st.caption(f"seconds: the best of {cfg.repeats} interleaved rounds, beside the median and the worst; "
               "a wide spread means other work shared the machine.")
    flex = result.backends.get("flex")
    if flex is not None and flex.block_mask_seconds is not None:
        compiled = (f"its first call compiled the kernel in {flex.compile_seconds:.1f} s"
                    if flex.compile_seconds else "its kernel was already compiled in this server")
        st.markdown(f"`flex` ({flex.tile}-token tiles): building the block mask from `cu_seqlens` took "
                    f"{flex.block_mask_seconds * 1e3:.1f} ms, {flex.block_mask_seconds / flex.seconds:.1%} of one "
                    f"call; {compiled}.")
    st.markdown(
        "Each backend is measured against the work it really does: `dense` against rows x context², "
        "because its materialised mask computes the masked cells too; `segments` and `varlen` against "
        "Σ len², because they skip them; `flex` against the tiles it touches x tile². Many small attention "
        "calls cost more per FLOP than one big one, so time follows FLOPs only roughly. A FLOP bound is what "
        "the arithmetic alone predicts: measured speed-ups usually fall short of it, but it is not a hard "
        "ceiling (a padded baseline that moves more memory per FLOP can lose by more)."
    )

st.subheader("Where segments' CPU time goes")
st.markdown(
    "The FLOP ratio counts arithmetic only. A short document does less arithmetic per byte of "
    "q, k and v than a long padded row, so on a CPU reading the inputs weighs more on packing. "
    "This run times the same per-document calls four ways, each adding one cost to the last."
)
broken_down = st.container()   # the breakdown's progress: at the top of its section
with guard("estimate the breakdown's time"):
    def breakdown_of(n: int):
        return _estimate("breakdown", docs=n, context=context, heads=heads, repeats=repeats, dataset=dataset)
    fits = docs_within(BREAKDOWN_LIMIT_S, [n for n in DOCS if n <= docs], breakdown_of)
if fits is None:
    st.info(f"At context {context} even {DOCS[0]} documents take {breakdown_of(DOCS[0]).about()} to break down, "
            f"past the minute a class waits: choose a shorter context above to run it.")
else:
    if fits < docs:
        st.caption(f"The breakdown times {fits} of the {docs} documents: all {docs} would take "
                   f"{breakdown_of(docs).about()}, past the minute a class waits.")
    if busy_now:
        st.caption("On a busy machine some rounds slow more than others, so the stages may not fall in order and "
                   "the breakdown may be unable to say where the time goes; it says so when that happens.")
    plan_b = breakdown_of(fits)
    if st.button("Break down the segments backend", key=S.key("breakdown_run"), help=plan_b.basis):
        with guard("break down the segments backend"), progress(broken_down, plan_b) as update:
            from packing_lab.bench import segments_breakdown
            st.session_state[S.key("breakdown")] = segments_breakdown(
                docs=fits, context=context, heads=heads, head_dim=64, repeats=repeats,
                dataset=dataset, progress=update)
    st.caption(f"**Break down** takes {plan_b.about()} ({esc(plan_b.basis)}).")
breakdown = st.session_state.get(S.key("breakdown"))
if breakdown is not None:
    stages = breakdown.stages
    labels = {
        "kernel_cached": "kernel only, each document's inputs already in the core's cache",
        "kernel_cold": "kernel only, on the real packed q, k, v",
        "copy_out": "plus copying each output into the result",
        "backend": "the whole backend: plus a fresh result tensor",
    }
    c = breakdown.config
    st.caption(f"{c.docs} documents of {c.dataset}, {c.heads} heads x {c.head_dim}, "
               f"float32 on CPU; padded takes {breakdown.padded_seconds:.3f} s, FLOP ratio "
               f"{breakdown.flop_ratio:.1f}x.")
    st.dataframe({
        "stage": [labels[name] for name in stages],
        "seconds": [round(r.seconds, 4) for r in stages.values()],
        "speed-up over padded": [round(r.speedup, 2) for r in stages.values()],
        "share of the FLOP ratio": [f"{r.of_flop_ratio:.0%}" for r in stages.values()],
    }, hide_index=True)
    st.markdown(describe_breakdown(breakdown))
