"""The attention benchmark: small enough to run in a test, same code path as the CLI."""
import json
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from packing_core import make_plan
from packing_core.data import synthetic_lengths
from packing_lab.bench import BenchmarkResult, format_benchmark, run_benchmark

SMALL = dict(docs=12, context=64, heads=2, head_dim=8, repeats=1)
SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "attention_speed.py"


@pytest.fixture(scope="module")
def result():
    return run_benchmark(**SMALL)


def test_flop_ratio_is_padded_cost_over_packed_cost(result):
    lengths = synthetic_lengths("support-tickets", n=12, seed=0)
    pad = make_plan(lengths, 64, "pad").metrics()
    bfd = make_plan(lengths, 64, "bfd").metrics()
    assert result.flop_ratio == pytest.approx(pad.attention_cost_padded
                                                 / bfd.attention_cost_packed)
    assert result.tokens == bfd.real_tokens


def test_each_cpu_backend_reports_throughput_and_a_goal_verdict(result):
    assert set(result.backends) == {"segments", "dense"}
    for r in result.backends.values():
        assert r.tokens_per_s == pytest.approx(result.tokens / r.seconds)
        assert r.goal_pass == (r.speedup >= 0.8 * r.flop_ratio)
    # each backend against its own bound: dense computes every cell of each packed row
    assert result.backends["segments"].flop_ratio == result.flop_ratio
    assert result.backends["dense"].flop_ratio == pytest.approx(
        result.plans.pad.rows / result.plans.bfd.rows)
    assert result.backends["dense"].flop_ratio < result.flop_ratio


def test_machine_info_names_torch_and_the_cpus(result):
    assert result.machine.torch == torch.__version__
    assert result.machine.cpus == os.cpu_count()
    assert result.machine.torch_threads == torch.get_num_threads()
    assert BenchmarkResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result


def test_table_has_a_row_per_layout(result):
    table = format_benchmark(result)
    for name in ("padded", "segments", "dense", "FLOP ratio"):
        assert name in table


def test_progress_reaches_one():
    seen = []
    run_benchmark(**SMALL, backends=["segments"], progress=lambda f, m: seen.append(f))
    assert seen == sorted(seen) and seen[-1] == 1.0


def test_varlen_on_cpu_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="segments"):
        run_benchmark(**SMALL, backends=["varlen"])


def test_cli_prints_json(capsys):
    main = runpy.run_path(str(SCRIPT))["main"]
    code = main(["--docs", "8", "--context", "64", "--heads", "2", "--head-dim", "8",
                 "--repeats", "1", "--json"])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["config"]["docs"] == 8


def test_cli_turns_a_bad_dtype_into_one_line(capsys):
    main = runpy.run_path(str(SCRIPT))["main"]
    assert main(["--docs", "8", "--context", "64", "--dtype", "float8"]) == 2
    assert capsys.readouterr().err.startswith("error: unknown dtype")


def test_breakdown_names_every_stage_and_its_share_of_the_flop_ratio():
    from packing_lab.bench import format_breakdown, segments_breakdown
    r = segments_breakdown(docs=12, context=64, heads=2, head_dim=8, repeats=1)
    assert list(r.stages) == ["kernel_cached", "kernel_cold", "copy_out", "backend"]
    assert r.flop_ratio == pytest.approx(
        make_plan(synthetic_lengths("support-tickets", n=12, seed=0), 64, "pad")
        .metrics().attention_cost_padded
        / make_plan(synthetic_lengths("support-tickets", n=12, seed=0), 64, "bfd")
        .metrics().attention_cost_packed)
    for s in r.stages.values():
        assert s.seconds > 0
        assert s.of_flop_ratio == pytest.approx(r.padded_seconds / s.seconds / r.flop_ratio)
    assert "kernel_cold" in format_breakdown(r)


def test_cli_breakdown_prints_json_and_refuses_cuda(capsys):
    main = runpy.run_path(str(SCRIPT))["main"]
    assert main(["--breakdown", "--docs", "8", "--context", "64", "--heads", "2",
                 "--head-dim", "8", "--repeats", "1", "--json"]) == 0
    assert set(json.loads(capsys.readouterr().out)["stages"]) >= {"backend", "kernel_cached"}
    assert main(["--breakdown", "--device", "cuda"]) == 2
    assert capsys.readouterr().err.startswith("error: --breakdown measures the CPU")


GPU_CHECK = Path(__file__).resolve().parents[3] / "scripts" / "gpu_check.sh"


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here: run the script itself")
def test_gpu_check_refuses_a_machine_without_cuda(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path / "out"), "PYTHON": sys.executable}
    r = subprocess.run(["bash", str(GPU_CHECK)], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2
    assert r.stderr.startswith("error:") and "no CUDA device" in r.stderr
    assert not (tmp_path / "out").exists()


def test_gpu_check_rehearses_every_step_on_cpu(tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "OUT": str(out), "PYTHON": sys.executable,
           "GPU_CHECK_DEVICE": "cpu", "GPU_CHECK_DOCS": "8"}
    r = subprocess.run(["bash", str(GPU_CHECK)], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "CPU rehearsal" in (out / "gpu.txt").read_text()
    assert "skipped" in (out / "tests.log").read_text()      # the CUDA tests, cleanly
    result = BenchmarkResult.from_dict(json.loads((out / "attention_8.json").read_text()))
    assert result.config.docs == 8 and result.machine.device == "cpu"
    assert "FLOP ratio" in r.stdout and "rehearsal on cpu" in r.stdout


def test_padded_q_k_v_lie_token_major_like_a_models_projection_unless_asked():
    from packing_lab.bench.attention import _padded_baseline
    g = torch.Generator().manual_seed(0)
    cpu = torch.device("cpu")
    _, (q, _, _) = _padded_baseline(3, 16, 4, 8, torch.float32, cpu, g)
    assert q.shape == (3, 4, 16, 8)
    assert q.stride() == (16 * 4 * 8, 8, 4 * 8, 1)     # [B, L, H, D] viewed as [B, H, L, D]
    _, (q, _, _) = _padded_baseline(3, 16, 4, 8, torch.float32, cpu, g, "contiguous")
    assert q.shape == (3, 4, 16, 8) and q.is_contiguous()


def test_padded_layout_is_recorded_and_a_bad_one_is_refused():
    r = run_benchmark(**SMALL, backends=["segments"], padded_layout="contiguous")
    assert r.config.padded_layout == "contiguous"
    assert "contiguous layout" in format_benchmark(r)
    with pytest.raises(ValueError, match="model or contiguous"):
        run_benchmark(**SMALL, padded_layout="rows")


@pytest.mark.parametrize("bad, message", [
    (dict(heads=0), "heads must be at least 1, got 0; try 16"),
    (dict(head_dim=-1), "head_dim must be at least 1, got -1; try 64"),
    (dict(repeats=0), "repeats must be at least 1, got 0; try 3"),
])
def test_sizes_no_benchmark_can_run_are_refused_with_a_hint(bad, message):
    from packing_lab.bench import segments_breakdown
    args = {**SMALL, **bad}
    with pytest.raises(ValueError, match=message):
        run_benchmark(**args)
    with pytest.raises(ValueError, match=message):
        segments_breakdown(**args)


def test_the_machine_names_its_cpu_model_where_linux_lists_it():
    from pathlib import Path

    from packing_lab.bench import machine_info

    info = Path("/proc/cpuinfo")
    listed = [line.partition(":")[2].strip() for line in info.read_text().splitlines()
              if line.startswith("model name")] if info.is_file() else []
    if not listed:
        pytest.skip("no model name in /proc/cpuinfo here")
    assert machine_info().processor == listed[0]       # "AMD EPYC", not the empty platform.processor()
