"""The attention benchmark with flex: judged by its own tile bound, with build and compile times apart."""
import json
import runpy
from pathlib import Path

import pytest

from packing_core import make_plan
from packing_core.analysis.costs import tiled_cells
from packing_core.attention.flex import flex_unavailable
from packing_core.attention.tiles import tile_spans
from packing_core.data import synthetic_lengths
from packing_lab.bench import BenchmarkResult, busy_warning, format_benchmark, format_breakdown, run_benchmark

pytestmark = pytest.mark.skipif(flex_unavailable("cpu") is not None, reason=str(flex_unavailable("cpu")))
SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "attention_speed.py"
SMALL = dict(docs=12, context=64, heads=2, head_dim=8, repeats=2)    # 2 x 8: the tests' one flex shape class


@pytest.fixture(scope="module")
def result():
    return run_benchmark(**SMALL, backends=["flex", "segments"])    # 128-token tiles: the same class


def test_json_entry_for_flex_holds_the_five_figures(result):
    flex = json.loads(json.dumps(result.to_dict()))["backends"]["flex"]
    for key in ("seconds", "speedup", "of_own_bound", "block_mask_seconds", "compile_seconds"):
        assert isinstance(flex[key], float), key
    assert flex["block_mask_seconds"] > 0 and flex["compile_seconds"] >= 0
    assert flex["tile"] == 128 and flex["bound"] == "causal tiles touched x tile²"


def test_flex_is_judged_by_the_tiles_it_touches(result):
    lengths = synthetic_lengths("support-tickets", n=12, seed=0)
    pad = make_plan(lengths, 64, "pad").metrics()
    bound = pad.attention_cost_padded / tiled_cells(make_plan(lengths, 64, "bfd"), 128)
    flex = result.backends["flex"]
    assert flex.flop_ratio == pytest.approx(bound)
    assert flex.of_own_bound == pytest.approx(flex.speedup / bound) == pytest.approx(flex.of_flop_ratio)
    assert result.backends["segments"].flop_ratio == pytest.approx(result.flop_ratio) != pytest.approx(bound)


def test_every_round_is_kept_and_the_best_is_reported(result):
    for t in [result.padded, *result.backends.values()]:
        assert len(t.rounds) == SMALL["repeats"]
        assert t.seconds == min(t.rounds) <= t.median <= t.worst == max(t.rounds)
    assert BenchmarkResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result


def test_the_load_average_is_read_before_and_after(result):
    for key in ("load_before", "load_after"):
        assert len(getattr(result.machine, key)) == 3
    table = format_benchmark(result)
    assert "block mask" in table and "load average" in table
    assert ("warning: The machine was busy" in table) == (busy_warning(result.machine) is not None)


def test_flex_is_held_to_its_own_goal_and_the_others_to_theirs(result):
    from packing_lab.bench.attention import GOAL_FACTOR, GOAL_FACTORS
    for name, b in result.backends.items():
        assert b.goal_factor == GOAL_FACTORS.get(name, GOAL_FACTOR)
        assert b.goal_speedup == pytest.approx(b.goal_factor * b.flop_ratio)
        assert b.goal_pass == (b.speedup >= b.goal_speedup)
    assert result.backends["flex"].goal_factor == 0.6 and result.backends["segments"].goal_factor == 0.8


def test_the_table_gives_each_share_of_its_bound_beside_the_load_average(result):
    table = format_benchmark(result)
    summary = next(line for line in table.splitlines() if line.startswith("of own bound:"))
    for name, b in result.backends.items():
        assert f"{name} {b.of_own_bound:.2f}" in summary
    assert f"load average {result.machine.load_before[0]:.2f} before" in summary


@pytest.fixture(scope="module")
def breakdown():
    from packing_lab.bench import flex_breakdown
    return flex_breakdown(docs=12, context=256, heads=2, head_dim=8, repeats=1)


def test_flex_breakdown_sets_its_kernel_on_the_baselines_own_work_beside_the_packed_call(breakdown):
    assert breakdown.backend == "flex" and list(breakdown.stages) == ["same_work", "backend"]
    lengths = synthetic_lengths("support-tickets", n=12, seed=0)
    bfd = make_plan(lengths, 256, "bfd")
    pad = make_plan(lengths, 256, "pad").metrics()
    assert breakdown.flop_ratio == pytest.approx(pad.attention_cost_padded / tiled_cells(bfd, 128))
    whole = breakdown.stages["backend"]
    assert whole.of_flop_ratio == pytest.approx(breakdown.padded_seconds / whole.seconds / breakdown.flop_ratio)
    # a 256-token row in 128-token tiles: flex computes 3 of the 4 tiles, SDPA the whole square
    assert breakdown.counts["row_tiles"] == tile_spans([0, 256], 128).touched == 3
    same = breakdown.stages["same_work"]
    assert same.of_flop_ratio == pytest.approx(same.speedup / (4 / 3))
    assert "same_work" in format_breakdown(breakdown) and "partial" in format_breakdown(breakdown)


def test_cli_breaks_down_flex_as_json(capsys):
    main = runpy.run_path(str(SCRIPT))["main"]
    assert main(["--breakdown", "flex", "--docs", "8", "--context", "64", "--heads", "2", "--head-dim", "8",
                 "--repeats", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["backend"] == "flex" and set(out["stages"]) == {"same_work", "backend"}
