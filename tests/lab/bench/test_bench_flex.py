"""The attention benchmark with flex: judged by its own tile bound, with build and compile times apart."""
import json

import pytest

from packing_core import make_plan
from packing_core.analysis.costs import tiled_cells
from packing_core.attention.flex import flex_unavailable
from packing_core.data import synthetic_lengths
from packing_lab.bench import BenchmarkResult, busy_warning, format_benchmark, run_benchmark

pytestmark = pytest.mark.skipif(flex_unavailable("cpu") is not None, reason=str(flex_unavailable("cpu")))
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
