"""One cost model: the CLI's table, its JSON and every page show the same cost for the same plan and kernel.

Each number is read three times: parsed from ``report``'s text table, from ``report --format json``'s
``costs`` entry, and from the page as AppTest renders it; all three must equal what
``analysis.costs`` computes for that plan and kernel.
"""
import io
import json
import re

import numpy as np
import pytest

from packing_core import make_plan
from packing_core.analysis import HALVES, attention_cells
from packing_core.analysis.costs import CONVENTION, kernel_costs, tiled_cells
from packing_core.cli import main
from packing_core.data import synthetic_lengths
from tests._support import metric, open_page

WORKED = (120, 90, 300, 40, 55, 30, 210, 65)
# text header -> (JSON costs key, page title)
COST_COLUMNS = {"slot ratio": ("slot_ratio", "linear: slot ratio"),
                "attn cells": ("attention_cells", "attention cells"),
                "attn ratio": ("attention_ratio", "attention FLOP ratio"),
                "dense cells": ("dense_mask_cells", "dense-mask cells"),
                "dense ratio": ("dense_mask_ratio", "dense-mask FLOP ratio")}


def cli(*argv) -> str:
    out, err = io.StringIO(), io.StringIO()
    assert main(list(argv), out=out, err=err) == 0, err.getvalue()
    return out.getvalue()


def text_table(text: str) -> dict[str, dict[str, float]]:
    """``{strategy: {header: value}}`` from the text table (columns are separated by two or more spaces)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("strategy "))
    header = re.split(r"\s{2,}", lines[start].strip())
    rows = {}
    for line in lines[start + 1:]:
        if not line.strip():
            break
        cells = re.split(r"\s{2,}", line.strip())
        rows[cells[0]] = {h: float(c.rstrip("x").replace(",", "")) for h, c in zip(header[1:], cells[1:])
                          if h in COST_COLUMNS}
    return rows


def page_table(at) -> dict[str, dict[str, float]]:
    """``{strategy: {page title: value}}`` from the page's every-column strategy table."""
    frame = next(d.value for d in at.dataframe if "attention cells" in d.value.columns)
    return {row["strategy"]: {t: float(row[t]) for _, t in COST_COLUMNS.values()} for _, row in frame.iterrows()}


def assert_agree(text: dict, js: dict, page: dict) -> None:
    assert set(text) == set(js) == set(page)
    for strategy in text:
        for header, (key, title) in COST_COLUMNS.items():
            exact = js[strategy]["costs"][key]
            assert page[strategy][title] == pytest.approx(exact, rel=1e-12), (strategy, title)
            # the text table rounds: cells to 4 significant digits, ratios to 2 decimals
            assert text[strategy][header] == pytest.approx(exact, rel=5e-4, abs=5e-3), (strategy, header)
        assert js[strategy]["costs"]["convention"] == CONVENTION


def test_report_its_json_and_padded_vs_packed_give_the_worked_examples_costs():
    lengths = ",".join(map(str, WORKED))
    # the page lists every strategy, optimal too; report plans optimal on request
    text = text_table(cli("report", "--lengths", lengths, "--context", "512", "--batch-size", "32", "--optimal"))
    js = {s["strategy"]: s for s in json.loads(cli("report", "--lengths", lengths, "--context", "512",
                                                   "--batch-size", "32", "--optimal", "--format",
                                                   "json"))["strategies"]}
    at = open_page("padded_vs_packed")
    assert_agree(text, js, page_table(at))
    # and the Three bills step quotes the same cells for the page's plan (concat-cut) and its kernels
    cut, pad = make_plan(WORKED, 512, "concat-cut"), make_plan(WORKED, 512, "pad")
    said = "\n".join(m.value for m in at.markdown)
    costs = {c.kernel: c for c in kernel_costs(cut, pad, ("varlen", "flex", "dense"))}
    assert costs["varlen"].cells == js["concat-cut"]["costs"]["attention_cells"] == 166_198
    assert costs["dense"].cells == js["concat-cut"]["costs"]["dense_mask_cells"] == 524_288
    for c in costs.values():
        assert f"{c.cells:,}" in said and f"**{c.ratio:.1f}x**" in said, c.kernel
    ratio = next(m for m in at.metric if m.label == "Attention FLOP ratio").value
    assert ratio == f"{js['concat-cut']['costs']['attention_ratio']:.1f}x"


def test_report_its_json_and_the_explorer_give_the_tickets_costs():
    text = text_table(cli("report", "--synthetic", "support-tickets", "--context", "512", "--optimal"))
    js = {s["strategy"]: s for s in json.loads(cli("report", "--synthetic", "support-tickets", "--context", "512",
                                                   "--optimal", "--format", "json"))["strategies"]}
    assert_agree(text, js, page_table(open_page("dataset_explorer", dataset="support-tickets", context=512)))


def test_the_benchmarks_bounds_are_the_cost_models_cells_in_both_conventions():
    at = open_page("benchmark")
    said = "\n".join(m.value for m in at.markdown)
    lengths = synthetic_lengths("support-tickets", n=128)
    pad, bfd = make_plan(lengths, 512, "pad"), make_plan(lengths, 512, "bfd")
    costs = {c.kernel: c for c in kernel_costs(bfd, pad, ("varlen", "flex", "dense"))}
    half_base = attention_cells(pad, "padded", convention=HALVES)
    assert f"{attention_cells(pad):,} cells" in said
    for kernel, c in costs.items():
        assert f"{c.cells:,}" in said and f"**{c.ratio:.1f}x**" in said, kernel
        if kernel != "varlen":     # read for a GPU: the padded causal kernel pays its lower half
            gpu = half_base / attention_cells(bfd, kernel, convention=HALVES)
            assert f"({gpu:.1f}x on a GPU)" in said, kernel
    # the tile figure's panels carry the same cells, for the 16 documents it draws
    figure = next(c for c in at.get("plotly_chart")).proto.spec
    few = synthetic_lengths("support-tickets", n=16)
    drawn = kernel_costs(make_plan(few, 512, "bfd"), make_plan(few, 512, "pad"), ("segments", "flex", "dense"))
    for c in drawn:
        assert f"{c.cells:,} cells" in figure, c.kernel


def test_a_benchmark_run_judges_each_backend_by_the_cost_models_bound():
    from packing_core.analysis import benchmark_bounds
    from packing_lab.bench import run_benchmark

    r = run_benchmark(docs=32, context=512, heads=1, head_dim=16, repeats=1, backends=["segments", "dense"])
    lengths = synthetic_lengths("support-tickets", n=32)
    costs = {c.kernel: c for c in kernel_costs(make_plan(lengths, 512, "bfd"), make_plan(lengths, 512, "pad"),
                                               ("segments", "dense"))}
    bounds = benchmark_bounds(r)
    # flex's bound reads the run's tile count: the cost model's tiles over the same bfd pieces
    assert r.plans.bfd.tiled_cells == tiled_cells(make_plan(lengths, 512, "bfd"), r.config.tile)
    assert r.plans.pad.attention_cost == attention_cells(make_plan(lengths, 512, "pad"))
    for backend in ("segments", "dense"):
        assert r.backends[backend].flop_ratio == pytest.approx(costs[backend].ratio)    # what the run judged by
        assert bounds[backend] == pytest.approx(costs[backend].ratio)                   # what the page shows


def test_balance_its_json_and_the_explorers_balance_step_give_the_same_step_cost():
    """Each step's cost per rank, averaged over the epoch's steps, and the verdict read from it: CLI, JSON, page."""
    from packing_core.analysis.costs import training_flops

    argv = ("balance", "--synthetic", "support-tickets", "--context", "512", "--ranks", "8", "--micro-batches", "4")
    text, js = cli(*argv), json.loads(cli(*argv, "--format", "json"))
    step, first = js["step"], js["first_step"]
    for split in ("before", "after"):        # the first step's ranks: max/mean of the attention cells they hold
        attention = np.asarray(first[split]["rank_attention"], dtype=float)
        assert first[split]["attention_imbalance"] == pytest.approx(attention.max() / attention.mean(), rel=1e-12)
    flops = training_flops(np.asarray(first["before"]["rank_tokens"]), np.asarray(first["before"]["rank_attention"]),
                           "SmolLM2-135M")
    assert float(flops.max()) > float(flops.mean())                # as dealt, one rank waits for none
    assert step["slowest_rank_flops_summed_over_steps"]["balanced_by_attention"] < \
        step["slowest_rank_flops_summed_over_steps"]["before"]
    assert step["verdict"] in text
    at = open_page("dataset_explorer", dataset="support-tickets", context=512)
    said = "\n".join(m.value for m in at.markdown).replace("\\", "")
    assert f"**{step['verdict'][0].upper() + step['verdict'][1:]}.**" in said
    per_step = js["attention_imbalance_per_step"]
    assert metric(at, "A step's max/mean, as dealt") == f"{per_step['before']:.2f}"
    assert metric(at, "Balanced by attention") == f"{per_step['after']:.2f}"
