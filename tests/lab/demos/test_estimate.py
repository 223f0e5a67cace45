"""Estimates said before the click: the training demo, the benchmark and its breakdown, a busy machine."""
import json
import time

import pytest

from packing_lab.demos import estimate as E
from packing_lab.demos import warm as W
from packing_lab.demos.train import TrainResult


def _run(mask: str, seconds: float) -> TrainResult:
    return TrainResult(mask=mask, seed=0, steps=150, same_topic=0.9, losses=(2.0,) * 150, train_loss=1.2,
                       packed_loss=1.2, alone_loss=1.3, visible_loss=1.1, drift_share=0.5, drift_cases=10,
                       seconds=seconds)


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PACKING_LAB_CACHE", str(tmp_path))
    monkeypatch.setattr(W, "_memo", {})
    return tmp_path


FIXED = E.AttentionRate(per_call=1e-4, per_cell=2e-9, masked_per_cell=5e-9, context=512, heads=8, head_dim=64)


@pytest.fixture
def fixed_rate(monkeypatch):
    """A rate of our choosing, so the arithmetic of an estimate can be checked exactly."""
    monkeypatch.setattr(E, "attention_rate", lambda context, heads, head_dim=64: FIXED)
    return FIXED


def test_a_pair_already_trained_costs_nothing_and_a_new_seed_costs_what_this_server_measured(fresh_cache):
    W._memo[(0, "related")] = (_run("on", 4.0), _run("off", 6.0))
    W._memo[(1, "related")] = (_run("on", 10.0), _run("off", 12.0))
    assert E.train_estimate(0, "related").seconds == 0.0
    new = E.train_estimate(7, "independent")
    assert new.seconds == pytest.approx((10.0 + 22.0) / 2)       # the median of 10 s and 22 s
    assert "22 s" in new.basis and "10 s" in new.basis


def test_the_disk_cache_tells_the_time_of_pairs_trained_by_an_earlier_server(fresh_cache):
    folder = fresh_cache / "demo"
    folder.mkdir()
    (folder / f"{W.demo_key(3, 'related')}.json").write_text(json.dumps([_run("on", 7.0).to_dict(),
                                                                       _run("off", 8.0).to_dict()]))
    (folder / "oldcode-seed4-related.json").write_text(json.dumps([_run("on", 99.0).to_dict()] * 2))  # other code
    assert W.trained_seconds() == [15.0]
    assert E.train_estimate(5, "related").seconds == 15.0


def test_with_nothing_trained_the_estimate_says_so(fresh_cache):
    estimate = E.train_estimate(5, "related")
    assert estimate.seconds > 0 and "no pair has trained on this server yet" in estimate.basis


def test_the_benchmark_estimate_is_the_rounds_of_its_plans_at_the_measured_rate(fixed_rate):
    from packing_core import make_plan
    from packing_core.data import synthetic_lengths

    lengths = synthetic_lengths("support-tickets", n=64)
    pad, bfd = make_plan(lengths, 512, "pad"), make_plan(lengths, 512, "bfd")
    one = E.benchmark_estimate(docs=64, context=512, heads=8, repeats=1, backends=("segments",), dataset="support-tickets")
    padded = pad.n_rows * fixed_rate.per_cell * 8 * 512 ** 2 + fixed_rate.per_call
    squares = float((bfd.piece_len.astype(float) ** 2).sum())
    segments = len(bfd.piece_len) * fixed_rate.per_call + fixed_rate.per_cell * 8 * squares
    assert one.seconds == pytest.approx(2 * (padded + segments))          # a warm-up round and one timed round
    three = E.benchmark_estimate(docs=64, context=512, heads=8, repeats=3, backends=("segments",),
                                 dataset="support-tickets")
    assert three.seconds == pytest.approx(2 * one.seconds)                # four rounds against two
    dense = E.benchmark_estimate(docs=64, context=512, heads=8, repeats=1, backends=("segments", "dense"),
                                 dataset="support-tickets")
    assert dense.seconds - one.seconds == pytest.approx(2 * bfd.n_rows * (fixed_rate.per_call
                                                                          + fixed_rate.masked_per_cell * 8 * 512 ** 2))
    assert f"{pad.n_rows:,} padded rows and {bfd.n_rows:,} packed rows" in one.basis


def test_flex_adds_its_compile_only_while_no_kernel_has_compiled(fixed_rate, monkeypatch):
    import packing_core.attention.flex as flex

    base = dict(docs=32, context=512, heads=8, repeats=1, dataset="support-tickets")
    monkeypatch.setattr(flex, "compile_records", lambda: [])
    cold = E.benchmark_estimate(backends=("segments", "flex"), **base)
    monkeypatch.setattr(flex, "compile_records", lambda: ["compiled"])
    warm = E.benchmark_estimate(backends=("segments", "flex"), **base)
    assert cold.seconds - warm.seconds == pytest.approx(E.FLEX_COMPILE_S) and "compiles" in cold.basis


def test_the_breakdown_keeps_within_a_minute_by_timing_fewer_documents(monkeypatch):
    options = (32, 64, 128, 256, 512, 1024, 2048)
    slow = E.AttentionRate(per_call=1e-3, per_cell=2e-9, masked_per_cell=5e-9, context=2048, heads=8, head_dim=64)
    monkeypatch.setattr(E, "attention_rate", lambda context, heads, head_dim=64: slow)

    def estimate(n):
        return E.breakdown_estimate(docs=n, context=2048, heads=8, repeats=3, dataset="support-tickets")

    fits = E.docs_within(E.BREAKDOWN_LIMIT_S, options, estimate)
    assert fits is not None and fits < 2048
    assert estimate(fits).seconds <= E.BREAKDOWN_LIMIT_S < estimate(options[options.index(fits) + 1]).seconds
    monkeypatch.setattr(E, "attention_rate", lambda context, heads, head_dim=64: E.AttentionRate(
        per_call=1.0, per_cell=1e-3, masked_per_cell=1e-3, context=2048, heads=8, head_dim=64))
    assert E.docs_within(E.BREAKDOWN_LIMIT_S, options, estimate) is None      # not even 32 documents fit


def test_the_estimate_of_a_real_run_is_within_a_factor_of_four_of_its_time(monkeypatch):
    """Measured here, on whatever load the machine has (the rate is timed under the same load), on the lab's one
    torch thread, after a first run has paid the process's one-off costs as a server's first visitor does."""
    import torch

    from packing_lab.bench import run_benchmark

    monkeypatch.setattr(E, "_rates", {})
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        run_benchmark(docs=32, context=128, heads=1, repeats=1, backends=["segments", "dense"])
        settings = dict(docs=64, context=512, heads=4, repeats=1, dataset="support-tickets")
        estimate = E.benchmark_estimate(backends=("segments", "dense"), **settings)
        start = time.perf_counter()
        run_benchmark(backends=["segments", "dense"], **settings)
        took = time.perf_counter() - start
    finally:
        torch.set_num_threads(threads)
    assert took / 4 <= estimate.seconds <= took * 4, (estimate, took)


def test_a_busy_machine_is_named_before_the_run(monkeypatch):
    monkeypatch.setattr(E, "load_average", lambda: (6.2, 5.0, 4.0))
    assert "load average 6.2 on 2 CPUs" in E.load_warning(cpus=2)
    monkeypatch.setattr(E, "load_average", lambda: (0.3, 0.2, 0.1))
    assert E.load_warning(cpus=2) is None


def test_the_breakdown_reports_each_round_to_a_progress_bar():
    from packing_lab.bench import segments_breakdown

    heard = []
    segments_breakdown(docs=32, context=128, heads=1, repeats=2, progress=lambda f, what: heard.append((f, what)))
    shares = [f for f, _ in heard]
    assert shares == sorted(shares) and shares[0] == 0.0 and len(heard) == 2 + 2
    assert "round 2 of 2" in heard[2][1]
