"""How long a run will take, said before the click: from the settings on screen and a rate measured here.

A class waits for every click, so a page says what a long run costs before it starts. Each
estimate is an :class:`Estimate`: seconds, and the sentence that says what the figure rests on.

- **The training demo** ("Train both"): the pairs this server already trained or read from its
  cache took a known time; a new seed takes about as long. A pair already trained shows at once.
- **The attention benchmark** and its breakdown: one causal attention call of a row, and one of a
  short document, are timed here just now (:func:`attention_rate`, a few hundredths of a second),
  and the benchmark's plans say how many of each every round makes.
- **A busy machine** (:func:`load_warning`): the 1-minute load average against the CPUs, read now.

>>> Estimate(0.4, "x").about(), Estimate(42.0, "x").about(), Estimate(150.0, "x").about()
('under a second', 'about 42 s', 'about 2.5 min')
"""
from __future__ import annotations

import os
import statistics
import threading
import time
from dataclasses import asdict, dataclass

from packing_lab.bench.machine import BUSY_LOAD_SHARE, load_average

# FlexAttention's first call in a process compiles its kernel: 15-40 s on the 2-core CPU machine
# (docs/measurements.md, "FlexAttention's tiles on CPU"); ``attention.flex.compile_records`` tells whether it already happened.
FLEX_COMPILE_S = 25.0
BREAKDOWN_LIMIT_S = 60.0     # the breakdown a class waits for: at most a minute


@dataclass(frozen=True)
class Estimate:
    """About how long a run takes, and what that figure rests on (a sentence for the page)."""

    seconds: float
    basis: str

    def about(self) -> str:
        """The time in words a class reads at a glance."""
        if self.seconds < 1:
            return "under a second"
        if self.seconds < 90:
            return f"about {self.seconds:.0f} s"
        return f"about {self.seconds / 60:.1f} min"

    def to_dict(self) -> dict:
        return asdict(self)


def load_warning(cpus: int | None = None) -> str | None:
    """A sentence when the machine is busy now (the 1-minute load average above half its CPUs), else None.

    >>> load_warning(cpus=10**6) is None
    True
    """
    load, cpus = load_average(), cpus or os.cpu_count() or 1
    if load is None or load[0] <= BUSY_LOAD_SHARE * cpus:
        return None
    return (f"The machine is busy now: load average {load[0]:.1f} on {cpus} CPUs. Other work shares the cores, so "
            "runs take longer than estimated and their times are noisier; best run when the load is below "
            f"{BUSY_LOAD_SHARE * cpus:g}.")


# ---------------------------------------------------------------- a cold server's waits
def cold_estimate(what: str, timings: dict | None = None) -> Estimate:
    """How long a cold server's wait ``what`` takes ("convert": SmolLM2's conversion; "tokenizer": its tokenizer's
    extraction), from what this server measured, or a first-run guess that says so (``demos.cold``).

    >>> cold_estimate("convert", timings={"convert": [90.0, 70.0, 80.0]}).about()
    'about 80 s'
    """
    from packing_lab.demos.cold import expected_seconds

    return Estimate(*expected_seconds(what, timings))


# ---------------------------------------------------------------- the training demo
def train_estimate(seed: int, neighbours: str) -> Estimate:
    """How long "Train both" takes for ``seed`` and ``neighbours``: nothing when the pair is already here,
    else the median of the pairs this server trained (the two runs of the same 150 steps each)."""
    from packing_lab.demos.warm import cached_pair, trained_seconds

    if cached_pair(seed, neighbours) is not None:
        return Estimate(0.0, "already trained on this server, so it shows at once")
    known = trained_seconds()
    if not known:
        return Estimate(20.0, "no pair has trained on this server yet; on 2 shared cores a pair takes 5-25 s")
    seconds = statistics.median(known)
    shown = ", ".join(f"{s:.0f} s" for s in known[:3])
    return Estimate(seconds, f"the last {min(len(known), 3)} pair(s) trained on this server took {shown}")


# ---------------------------------------------------------------- attention: the benchmark and its breakdown
@dataclass(frozen=True)
class AttentionRate:
    """What one causal SDPA call costs on this machine now, as ``per_call + per_cell x cells``.

    ``per_cell`` is the time per query-key score of one head (head_dim wide, causal: the kernel
    computes about half the square); ``masked_per_cell`` the same with a materialised boolean mask,
    which computes every cell. Measured by :func:`attention_rate`.
    """

    per_call: float
    per_cell: float
    masked_per_cell: float
    context: int
    heads: int
    head_dim: int

    def call(self, length: int, masked: bool = False) -> float:
        """Seconds of one call over a row (or document) of ``length`` tokens."""
        return self.per_call + (self.masked_per_cell if masked else self.per_cell) * self.heads * length * length


_rates: dict[tuple[int, int, int], tuple[float, AttentionRate]] = {}
_rates_lock = threading.Lock()
RATE_TTL_S = 120.0    # a rate measured this long ago is measured again: the load moves
RATE_MAX_LENGTH = 1024   # rows longer than this are timed at this length: the cost per cell, times their cells


def attention_rate(context: int, heads: int, head_dim: int = 64) -> AttentionRate:
    """Time a few SDPA calls here (a row of ``context`` tokens, with and without a mask, and a 16-token one).

    The median of three of each. A row longer than ``RATE_MAX_LENGTH`` is timed at that length and its cost
    per cell kept (a masked call at 8,192 tokens and 16 heads alone takes seconds on two cores, and a page
    estimates before anything runs): tens of milliseconds in all. Kept for two minutes per shape, so a page
    that redraws does not measure again.
    """
    import torch
    import torch.nn.functional as F

    from packing_core.attention import masks

    key = (int(context), int(heads), int(head_dim))
    with _rates_lock:
        hit = _rates.get(key)
        if hit is not None and time.monotonic() - hit[0] < RATE_TTL_S:
            return hit[1]
    g = torch.Generator().manual_seed(0)

    def best(length: int, mask: bool) -> float:
        q, k, v = (torch.randn(1, heads, length, head_dim, generator=g) for _ in range(3))
        allowed = masks.allowed(torch.zeros(length, dtype=torch.long)) if mask else None   # one document: causal
        times = []
        for _ in range(3):
            start = time.perf_counter()
            F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, is_causal=not mask)
            times.append(time.perf_counter() - start)
        return statistics.median(times)   # not the best: on a shared machine the run waits as the median call does

    small = best(16, False)
    timed = min(int(context), RATE_MAX_LENGTH)
    cells = heads * timed * timed
    rate = AttentionRate(per_call=small, per_cell=max(best(timed, False) - small, 0.0) / cells,
                         masked_per_cell=max(best(timed, True) - small, 0.0) / cells,
                         context=key[0], heads=key[1], head_dim=key[2])
    with _rates_lock:
        _rates[key] = (time.monotonic(), rate)
    return rate


def _plans(docs: int, context: int, dataset: str):
    from packing_core.data import synthetic_lengths
    from packing_core.packing.strategies import make_plan

    lengths = synthetic_lengths(dataset, n=docs)
    return make_plan(lengths, context, "pad"), make_plan(lengths, context, "bfd")


def _round_seconds(pad, bfd, context: int, rate: AttentionRate, backends) -> dict[str, float]:
    """One round of each layout, from the plans: padded rows, one call per document, packed rows under a mask."""
    pieces = bfd.piece_len.astype(float)
    out = {"padded": pad.n_rows * rate.call(context) - (pad.n_rows - 1) * rate.per_call,
           "segments": len(pieces) * rate.per_call + rate.per_cell * rate.heads * float((pieces ** 2).sum())}
    for b in backends:
        if b in ("dense", "flex", "varlen"):
            # flex skips empty tiles but pays its tile machinery: no cheaper than the dense mask on a CPU here
            out[b] = bfd.n_rows * rate.call(context, masked=True) if b != "varlen" else out["segments"]
    return out


def benchmark_estimate(*, docs: int, context: int, heads: int, repeats: int, backends, dataset: str,
                       head_dim: int = 64) -> Estimate:
    """About how long ``run_benchmark`` takes with these settings: a warm-up round and ``repeats`` rounds of
    every layout, each from the plans and :func:`attention_rate`, plus FlexAttention's compile when it is due."""
    from packing_core.attention.flex import compile_records

    rate = attention_rate(context, heads, head_dim)
    pad, bfd = _plans(docs, context, dataset)
    per_round = _round_seconds(pad, bfd, context, rate, backends)
    seconds = (repeats + 1) * sum(per_round[b] for b in ("padded", *backends))
    compile_due = "flex" in backends and not compile_records()
    if compile_due:
        seconds += FLEX_COMPILE_S
    ms = rate.call(context) * 1e3
    basis = (f"{pad.n_rows:,} padded rows and {bfd.n_rows:,} packed rows, {repeats} rounds and a warm-up; one "
             f"{context}-token attention call takes {ms:.0f} ms here now"
             + (", and flex compiles its kernel first (15-40 s)" if compile_due else ""))
    return Estimate(seconds, basis)


def breakdown_estimate(*, docs: int, context: int, heads: int, repeats: int, dataset: str,
                       head_dim: int = 64) -> Estimate:
    """About how long ``segments_breakdown`` takes: a warm-up and ``repeats`` rounds of padded rows and three
    per-document passes, then each distinct length four times in cache."""
    rate = attention_rate(context, heads, head_dim)
    pad, bfd = _plans(docs, context, dataset)
    per_round = _round_seconds(pad, bfd, context, rate, ())
    distinct = len(set(bfd.piece_len.tolist()))
    seconds = (repeats + 1) * (per_round["padded"] + 3 * per_round["segments"]) + 5 * distinct * rate.per_call
    return Estimate(seconds, f"{pad.n_rows:,} padded rows and {len(bfd.piece_len):,} documents, {repeats} rounds "
                             f"and a warm-up of four passes each")


def docs_within(limit_s: float, options, estimate_of) -> int | None:
    """The most documents among ``options`` whose ``estimate_of(docs)`` fits in ``limit_s``, or None if none does.

    >>> docs_within(10, (32, 64, 128), lambda n: __import__("types").SimpleNamespace(seconds=n / 8))
    64
    """
    fitting = [n for n in sorted(options) if estimate_of(n).seconds <= limit_s]
    return fitting[-1] if fitting else None
