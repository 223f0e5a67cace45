"""Benchmark: time padded against packed attention on this machine, beside the FLOP-ratio bound."""
import streamlit as st
import torch

from app_pages._lab import SHARED, esc, figure, guard, lesson, page_settings, sources, strategy_table
from packing_core import benchmark_bounds, benchmark_figure, synthetic_lengths

S = page_settings("benchmark", docs=128, heads=8, repeats=2)

st.title("Benchmark")
lesson(__file__)
st.markdown(
    "The padded baseline here is SDPA with is_causal over padded rows: a kernel that computes the pads, so it pays a full "
    "square per row. Packed, a kernel that skips masked blocks (one call per document, or varlen fed "
    "`cu_seqlens`) pays one small square per document, while a materialised block-diagonal mask still "
    "computes every cell of each row. (Against an unpadding kernel, padding would pay only the small squares "
    "too, and packing would buy only the slot ratio.) Each backend has its own FLOP bound; here you measure "
    "how much of it this machine actually gets."
)

context = SHARED.get("context")
dataset = SHARED.get("dataset")
if sources().get(dataset) is None or sources()[dataset].kind != "synthetic":
    st.caption(f"The benchmark draws lengths from a synthetic dataset; {dataset} is not one, "
               "so it uses support-tickets.")
    dataset = "support-tickets"

c1, c2, c3, c4 = st.columns(4)
docs = c1.select_slider("Documents", options=(32, 64, 128, 256, 512, 1024, 2048), **S.bind("docs"))
heads = c2.select_slider("Heads", options=(1, 2, 4, 8, 16), **S.bind("heads"))
repeats = c3.select_slider("Repeats (best of)", options=(1, 2, 3, 5), **S.bind("repeats"))
devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
device = c4.radio("Device", devices, horizontal=True, key=S.key("device"),
                  help="cuda appears when a GPU is present; varlen runs only there")

with guard("plan the benchmark's documents"):
    rows = strategy_table(synthetic_lengths(dataset, n=docs), context, strategies=("pad", "bfd"))
flop_ratio = rows[1].attention_ratio  # pad's attention cells / bfd's Σ len²: what run_benchmark calls flop_ratio
st.markdown(
    f"**Before running:** {docs} documents of {dataset} at context {context}. Padded (SDPA with is_causal, "
    "pads computed): "
    f"{rows[0].rows} rows x {context}² = {rows[0].attention_cost:,} cells. Packed by bfd into {rows[1].rows} rows: "
    f"`segments` and `varlen` compute Σ len² = {rows[1].attention_cost:,}, a bound of **{flop_ratio:.1f}x**; "
    f"`dense` computes {rows[1].rows} x {context}² = {rows[1].dense_mask_cost:,}, a bound of "
    f"**{rows[1].dense_mask_ratio:.1f}x**."
)


def _run() -> None:
    bar = st.progress(0.0, text="starting")
    from packing_core import run_benchmark
    try:
        st.session_state[S.key("result")] = run_benchmark(
            docs=docs, context=context, heads=heads, head_dim=64, repeats=repeats, device=device,
            dataset=dataset, progress=lambda f, msg: bar.progress(min(1.0, f), text=msg))
        st.session_state.pop(S.key("error"), None)
    except ValueError as e:
        st.session_state[S.key("error")] = str(e)
    bar.empty()


if st.button("Run the benchmark", type="primary"):
    with guard("run the benchmark"):
        _run()

if S.key("error") in st.session_state:
    st.error(f"Could not run the benchmark: {esc(st.session_state[S.key('error')])}")
result = st.session_state.get(S.key("result"))
if result is None:
    st.info("Press the button: it takes from seconds (32 documents) to minutes (2,048 on a CPU).")
else:
    cfg, machine = result.config, result.machine
    st.caption(f"{cfg['docs']} documents of {cfg['dataset']}, context {cfg['context']}, {cfg['heads']} heads x "
               f"{cfg['head_dim']}, {cfg['dtype']}, on {machine['device']} ({machine['device_name']}, "
               f"{machine['torch_threads']} threads), torch {machine['torch']}. Both layouts get q, k "
               "and v token-major, as a model's projection leaves them.")
    bounds = benchmark_bounds(result)
    figure(benchmark_figure(result, title="Attention throughput (higher is better)"), key=S.key("fig"))
    st.dataframe({
        "layout": ["padded"] + list(result.backends),
        "seconds": [result.padded.seconds] + [r.seconds for r in result.backends.values()],
        "tokens/s": [round(result.padded.tokens_per_s)] + [round(r.tokens_per_s) for r in result.backends.values()],
        "speed-up": [1.0] + [round(r.speedup, 2) for r in result.backends.values()],
        "its FLOP bound": ["1.0x"] + [f"{bounds[b]:.1f}x" for b in result.backends],
        "share of its bound": ["baseline"] + [f"{r.speedup / bounds[b]:.0%}" for b, r in result.backends.items()],
    }, hide_index=True)
    st.markdown(
        "Each backend is measured against the work it really does: `dense` against rows x context², "
        "because its materialised mask computes the masked cells too; `segments` and `varlen` against "
        "Σ len², because they skip them. Many small attention calls cost more per FLOP than one big one, "
        "so time follows FLOPs only roughly. A FLOP bound is what the arithmetic alone predicts: measured "
        "speed-ups usually fall short of it, but it is not a hard ceiling (a padded baseline that moves more "
        "memory per FLOP can lose by more)."
    )

st.subheader("Where segments' CPU time goes")
st.markdown(
    "The FLOP ratio counts arithmetic only. A short document does less arithmetic per byte of "
    "q, k and v than a long padded row, so on a CPU reading the inputs weighs more on packing. "
    "This run times the same per-document calls four ways, each adding one cost to the last."
)
if st.button("Break down the segments backend", key=S.key("breakdown_run")):
    with guard("break down the segments backend"):
        from packing_core import segments_breakdown
        with st.spinner("timing four stages"):
            st.session_state[S.key("breakdown")] = segments_breakdown(
                docs=docs, context=context, heads=heads, head_dim=64, repeats=repeats,
                dataset=dataset)
breakdown = st.session_state.get(S.key("breakdown"))
if breakdown is not None:
    stages = breakdown["stages"]
    labels = {
        "kernel_cached": "kernel only, each document's inputs already in the core's cache",
        "kernel_cold": "kernel only, on the real packed q, k, v",
        "copy_out": "plus copying each output into the result",
        "backend": "the whole backend: plus a fresh result tensor",
    }
    c = breakdown["config"]
    st.caption(f"{c['docs']} documents of {c['dataset']}, {c['heads']} heads x {c['head_dim']}, "
               f"float32 on CPU; padded takes {breakdown['padded_seconds']:.3f} s, FLOP ratio "
               f"{breakdown['flop_ratio']:.1f}x.")
    st.dataframe({
        "stage": [labels[name] for name in stages],
        "seconds": [round(r["seconds"], 4) for r in stages.values()],
        "speed-up over padded": [round(r["speedup"], 2) for r in stages.values()],
        "share of the FLOP ratio": [f"{r['of_flop_ratio']:.0%}" for r in stages.values()],
    }, hide_index=True)
    cached, cold, whole = (stages[n]["of_flop_ratio"] for n in ("kernel_cached", "kernel_cold", "backend"))
    st.markdown(
        f"With its inputs in cache the kernel alone would reach **{cached:.0%}** of the bound. "
        f"Reading the real inputs brings it to **{cold:.0%}**; writing the result, to "
        f"**{whole:.0%}**. No real step keeps a whole batch in a core's cache, so the first row is "
        "a limit, not a target."
    )
