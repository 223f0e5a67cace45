"""Attention throughput: padded rows against packed rows, beside the FLOP ratio.

Padding puts every document in its own row of ``context`` slots, so attention pays
``rows x context**2``. A kernel that skips masked blocks (``segments``, ``varlen``) pays
one square per document, ``sum(len**2)``; a materialised dense mask (``dense``) still
computes every cell of each packed row, ``packed rows x context**2``::

    lengths [300, 100, 100] at context 512, one packed row
      padded         3 x 512**2          = 786,432
      block-skipping 300**2 + 2 x 100**2 = 110,000      bound 7.1x
      dense mask     1 x 512**2          = 262,144      bound 3.0x

A tiled kernel (``flex``) computes every ``tile x tile`` square a document touches
(:func:`packing_core.analysis.costs.tiled_cells`): its bound is ``rows x context**2 /
(tiles x tile**2)``, lower than Σ len² for tickets of ~114 tokens in 128-token tiles.

The benchmark times them on random q, k, v of realistic width, laid out as a model's
projection leaves them (token-major on both sides), and checks each backend against its
own bound: packed tokens/s >= 0.8 x (its bound) x padded tokens/s. Every round's time is
kept (best, median, worst), and the load average before and after tells whether the
machine was shared.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from packing_core._validate import InputError, whole_number
from packing_core.attention.backends import attend, available_backends
from packing_core.attention.flex import block_mask_from_cu, compile_records
from packing_core.attention.tiles import BOUND_LABELS, DEFAULT_TILE, tile_spans
from packing_core.packing.plan import cu_seqlens_from_lengths
from packing_lab.bench.machine import Machine, busy_warning, machine_info

GOAL_FACTOR = 0.8
PACKED_BACKENDS = ("varlen", "flex", "segments", "dense")
# What run_benchmark times when no backends are named. flex is left out: its first call
# compiles for seconds to tens of seconds, so callers ask for it (the script and the page do).
DEFAULT_BACKENDS = ("varlen", "segments", "dense")
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# Bytes of q, k, v and output held at once by the padded baseline (it runs in chunks).
_PADDED_CHUNK_BYTES = 512 * 2**20

Progress = Callable[[float, str], None]


@dataclass(frozen=True)
class Timing:
    """One layout's best time over the rounds, and the attention tokens per second it gives."""

    seconds: float
    tokens_per_s: float
    rounds: tuple[float, ...] = field(default=(), kw_only=True)   # every round's seconds

    @property
    def median(self) -> float:
        return statistics.median(self.rounds) if self.rounds else self.seconds

    @property
    def worst(self) -> float:
        return max(self.rounds) if self.rounds else self.seconds


@dataclass(frozen=True)
class BackendTiming(Timing):
    """A packed backend's timing against the padded baseline and the goal."""

    speedup: float          # padded seconds / these seconds
    flop_ratio: float       # its own bound: padded attention FLOPs / the FLOPs this backend computes
    goal_speedup: float     # GOAL_FACTOR x flop_ratio
    goal_pass: bool
    of_flop_ratio: float    # speedup / flop_ratio
    bound: str = field(default="", kw_only=True)          # what flop_ratio counts (BOUND_LABELS)
    of_own_bound: float = field(default=0.0, kw_only=True)  # = of_flop_ratio, under the name --json readers use
    tile: int | None = field(default=None, kw_only=True)                  # flex: tile size
    block_mask_seconds: float | None = field(default=None, kw_only=True)  # flex: best block-mask build
    compile_seconds: float | None = field(default=None, kw_only=True)     # flex: first call minus a steady one


@dataclass(frozen=True)
class BenchmarkConfig:
    """What was timed: the data, the shapes, the dtype and how often."""

    dataset: str
    docs: int
    context: int
    heads: int
    head_dim: int
    repeats: int
    dtype: str
    seed: int
    padded_layout: str
    tile: int


@dataclass(frozen=True)
class PlanCost:
    """A plan's rows and attention cells (bfd also its tiles: what flex computes)."""

    rows: int
    attention_cost: int
    tile: int | None = None
    tiled_cells: int | None = None


@dataclass(frozen=True)
class BenchmarkPlans:
    pad: PlanCost           # padding to the context: the baseline
    bfd: PlanCost           # the packed plan every backend runs


@dataclass(frozen=True)
class BenchmarkResult:
    """What :func:`run_benchmark` measured; ``to_dict()`` is the ``--json`` shape."""

    machine: Machine
    config: BenchmarkConfig
    plans: BenchmarkPlans
    tokens: int
    flop_ratio: float
    goal_factor: float
    padded: Timing
    backends: dict[str, BackendTiming]

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "BenchmarkResult":
        """Back from ``to_dict()`` (or the script's ``--json``)."""
        def rounds(t: dict) -> dict:
            return {**t, "rounds": tuple(t.get("rounds", ()))}
        return cls(machine=Machine.from_dict(d["machine"]), config=BenchmarkConfig(**d["config"]),
                   plans=BenchmarkPlans(PlanCost(**d["plans"]["pad"]), PlanCost(**d["plans"]["bfd"])),
                   tokens=d["tokens"], flop_ratio=d["flop_ratio"], goal_factor=d["goal_factor"],
                   padded=Timing(**rounds(d["padded"])),
                   backends={k: BackendTiming(**rounds(v)) for k, v in d["backends"].items()})


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _time_round(fns: dict[str, Callable[[], object]], device: torch.device) -> dict[str, float]:
    """Seconds of one call of each function, one after the other: one interleaved round.

    The caller keeps each function's best round. Interleaving and taking the minimum keep
    the ratios honest on a shared machine: a noisy neighbour slows some rounds, rarely the
    best one of each function.
    """
    seconds = {}
    for name, fn in fns.items():
        _sync(device)
        start = time.perf_counter()
        fn()
        _sync(device)
        seconds[name] = time.perf_counter() - start
    return seconds


def resolve_dtype(dtype: str | None, device: torch.device) -> torch.dtype:
    """``None``/"auto": bfloat16 on CUDA (what flash kernels run), float32 on CPU."""
    if dtype in (None, "auto"):
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if dtype not in _DTYPES:
        raise InputError(f"unknown dtype {dtype!r}: choose auto, {', '.join(_DTYPES)}")
    return _DTYPES[dtype]


PADDED_LAYOUTS = ("model", "contiguous")


def _check_arguments(heads: int, head_dim: int, repeats: int, padded_layout: str) -> None:
    """Refuse arguments no benchmark can run, before any planning or allocation."""
    for name, value, hint in (("heads", heads, 16), ("head_dim", head_dim, 64),
                              ("repeats", repeats, 3)):
        whole_number(value, name, hint=f"try {hint}")
    if padded_layout not in PADDED_LAYOUTS:
        raise InputError(f"unknown padded layout {padded_layout!r}: choose "
                         f"{' or '.join(PADDED_LAYOUTS)}")


def _padded_baseline(rows: int, context: int, heads: int, head_dim: int, dt: torch.dtype,
                     dev: torch.device, g: torch.Generator, layout: str = "model"):
    """The padded layout: one document per row, ``[B, H, context, D]``, causal SDPA.

    Returns ``(run, qkv)``. It runs in chunks of rows to bound memory; pads sit after
    the real tokens, so ``is_causal`` alone keeps them unseen (the fastest honest padded
    call: no mask tensor).

    ``layout`` is how q, k and v lie in memory. ``"model"``: as a model's projection
    leaves them, ``[B, L, H, D]`` viewed as ``[B, H, L, D]`` (transformers' Llama passes
    exactly this view to SDPA), token-major like the packed ``[T, H, D]``.
    ``"contiguous"``: head-major, which a model only gets by copying; SDPA reads it
    faster (measured 20 % on CPU), so it is the kinder baseline for padding.
    """
    bytes_per_row = 4 * heads * context * head_dim * torch.finfo(dt).bits // 8
    chunk = max(1, min(rows, _PADDED_CHUNK_BYTES // bytes_per_row))
    if layout == "model":
        qkv = [torch.randn(chunk, context, heads, head_dim, generator=g).to(dev, dt).transpose(1, 2)
               for _ in range(3)]
    else:
        qkv = [torch.randn(chunk, heads, context, head_dim, generator=g).to(dev, dt)
               for _ in range(3)]
    sizes = [chunk] * (rows // chunk) + ([rows % chunk] if rows % chunk else [])

    def run():
        for n in sizes:
            F.scaled_dot_product_attention(*(t[:n] for t in qkv), is_causal=True)
    return run, qkv


def run_benchmark(*, docs: int = 256, context: int = 512, heads: int = 16, head_dim: int = 64,
                  repeats: int = 3, device: str = "cpu", dtype: str | None = None,
                  backends=None, dataset: str = "support-tickets", seed: int = 0,
                  padded_layout: str = "model", tile: int = DEFAULT_TILE,
                  progress: Progress | None = None) -> BenchmarkResult:
    """Time padded against packed attention on ``docs`` documents of ``dataset``.

    ``backends`` defaults to :data:`DEFAULT_BACKENDS` that run here; name ``"flex"`` to
    time it too, with ``tile``-token tiles (its block-mask build and its first, compiling
    call are timed apart). ``progress(fraction, message)`` is called as each stage starts.
    """
    from packing_core.data import synthetic_lengths
    from packing_core.packing.strategies import make_plan

    _check_arguments(heads, head_dim, repeats, padded_layout)
    report = progress or (lambda fraction, message: None)
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InputError(f"device {device!r} requested but CUDA is not available: use --device cpu")
    dt = resolve_dtype(dtype, dev)
    usable = available_backends(dev)
    machine = machine_info(str(dev))
    if backends is None:
        backends = [b for b in DEFAULT_BACKENDS if b in usable]
    for b in backends:
        if b not in usable:
            raise InputError(f"backend {b!r} does not run on {dev.type}: choose from "
                             f"{', '.join(x for x in PACKED_BACKENDS if x in usable)}")

    report(0.0, f"planning {docs} documents of {dataset}")
    lengths = synthetic_lengths(dataset, n=docs, seed=seed)
    pad = make_plan(lengths, context, "pad")
    bfd = make_plan(lengths, context, "bfd")
    pad_m, bfd_m = pad.metrics(), bfd.metrics()
    flop_ratio = pad_m.attention_cost_padded / bfd_m.attention_cost_packed
    tokens = bfd_m.real_tokens

    g = torch.Generator().manual_seed(seed)
    padded, qkv_pad = _padded_baseline(pad.n_rows, context, heads, head_dim, dt, dev, g,
                                       padded_layout)

    # Packed: the bfd plan's pieces back to back, row by row, no pads.
    piece_len = bfd.piece_len
    cu = torch.from_numpy(cu_seqlens_from_lengths(piece_len, np.int32))
    row_tokens = np.bincount(bfd.piece_row, weights=piece_len, minlength=bfd.n_rows)
    row_cu = torch.from_numpy(cu_seqlens_from_lengths(row_tokens, np.int32))
    q, k, v = (torch.randn(tokens, heads, head_dim, generator=g).to(dev, dt) for _ in range(3))
    cu, row_cu = cu.to(dev), row_cu.to(dev)
    max_len = int(piece_len.max())

    def packed(backend):
        return lambda: attend(q, k, v, cu, max_len, backend, row_offsets=row_cu, tile=tile)

    fns = {"padded": padded, **{b: packed(b) for b in backends}}
    report(0.05, "warm-up" + (" (flex compiles on its first call: seconds to a minute)"
                              if "flex" in backends else ""))
    F.scaled_dot_product_attention(*(t[:1] for t in qkv_pad), is_causal=True)
    first_call, compiled_before = {}, set(compile_records())
    for b in backends:
        _sync(dev)
        start = time.perf_counter()
        fns[b]()
        _sync(dev)
        first_call[b] = time.perf_counter() - start
    flex_compiled = bool(set(compile_records()) - compiled_before)
    rounds = {name: [] for name in fns}
    mask_rounds = []
    for r in range(repeats):
        report(0.1 + 0.9 * r / repeats, f"round {r + 1} of {repeats}: padded "
               f"{pad.n_rows} rows, packed {bfd.n_rows} rows ({', '.join(backends)})")
        for name, seconds in _time_round(fns, dev).items():
            rounds[name].append(seconds)
        if "flex" in backends:
            _sync(dev)
            start = time.perf_counter()
            block_mask_from_cu(cu, tile, dev)
            _sync(dev)
            mask_rounds.append(time.perf_counter() - start)
    best = {name: min(times) for name, times in rounds.items()}

    padded_s = best["padded"]
    # dense computes every cell of each packed row; segments and varlen one square per
    # document; flex every tile a document touches
    tiled = tile_spans(cu.cpu().numpy(), tile).cells    # = analysis.costs.tiled_cells(bfd, tile)
    bounds = {"dense": pad_m.attention_cost_padded / bfd_m.attention_cost_padded,
              "flex": pad_m.attention_cost_padded / tiled}
    results = {}
    for backend in backends:
        seconds = best[backend]
        speedup = padded_s / seconds
        bound = bounds.get(backend, flop_ratio)
        extra = {}
        if backend == "flex":
            extra = {"tile": tile, "block_mask_seconds": min(mask_rounds),
                     "compile_seconds": max(0.0, first_call[backend] - seconds) if flex_compiled else 0.0}
        results[backend] = BackendTiming(
            seconds=seconds, tokens_per_s=tokens / seconds, speedup=speedup,
            flop_ratio=bound, goal_speedup=GOAL_FACTOR * bound,
            goal_pass=bool(speedup >= GOAL_FACTOR * bound),
            of_flop_ratio=speedup / bound, of_own_bound=speedup / bound,
            bound=BOUND_LABELS[backend], rounds=tuple(rounds[backend]), **extra,
        )
    report(1.0, "done")
    return BenchmarkResult(
        machine=machine.finished(),
        config=BenchmarkConfig(dataset=dataset, docs=int(docs), context=context, heads=heads, head_dim=head_dim,
                               repeats=repeats, dtype=str(dt).replace("torch.", ""), seed=seed,
                               padded_layout=padded_layout, tile=tile),
        plans=BenchmarkPlans(PlanCost(pad_m.rows, pad_m.attention_cost_padded),
                             PlanCost(bfd_m.rows, bfd_m.attention_cost_packed, tile, int(tiled))),
        tokens=tokens,
        flop_ratio=flop_ratio,
        goal_factor=GOAL_FACTOR,
        padded=Timing(seconds=padded_s, tokens_per_s=tokens / padded_s, rounds=tuple(rounds["padded"])),
        backends=results,
    )


def format_benchmark(result: BenchmarkResult | dict) -> str:
    """Plain-text table of a :func:`run_benchmark` result (or of its ``to_dict()``)."""
    r = result if isinstance(result, BenchmarkResult) else BenchmarkResult.from_dict(result)
    m, c = r.machine, r.config
    lines = [
        f"{c.dataset}: {c.docs} documents, {r.tokens} tokens, context "
        f"{c.context}, {c.heads} heads x {c.head_dim}, {c.dtype}",
        f"torch {m.torch} on {m.device} ({m.device_name}, {m.cpus} CPUs, {m.torch_threads} threads)",
        f"FLOP ratio padded/packed (block-skipping kernels): {r.flop_ratio:.2f} "
        f"(pad {r.plans.pad.rows} rows, bfd {r.plans.bfd.rows} rows)",
        f"padded q, k, v in the {c.padded_layout} layout",
        "",
        f"{'layout':<10} {'seconds':>9} {'median':>8} {'worst':>8} {'tokens/s':>12} {'speedup':>8} "
        f"{'goal':>7}  result",
        f"{'padded':<10} {r.padded.seconds:>9.3f} {r.padded.median:>8.3f} {r.padded.worst:>8.3f} "
        f"{r.padded.tokens_per_s:>12,.0f} {1.0:>8.2f} {'':>7}  baseline",
    ]
    for name, b in r.backends.items():
        lines.append(
            f"{name:<10} {b.seconds:>9.3f} {b.median:>8.3f} {b.worst:>8.3f} {b.tokens_per_s:>12,.0f} "
            f"{b.speedup:>8.2f} {b.goal_speedup:>7.2f}  {'PASS' if b.goal_pass else 'fail'} "
            f"({b.of_flop_ratio:.2f} of its bound {b.flop_ratio:.2f}"
            f"{', ' + b.bound if b.bound else ''})")
    flex = r.backends.get("flex")
    if flex is not None and flex.block_mask_seconds is not None:
        lines.append(f"flex, {flex.tile}-token tiles: block mask {flex.block_mask_seconds * 1e3:.1f} ms "
                     f"({flex.block_mask_seconds / flex.seconds:.1%} of a call), compile "
                     + (f"{flex.compile_seconds:.1f} s on the first call" if flex.compile_seconds
                        else "done earlier in this process"))
    lines.append(f"goal: speedup >= {r.goal_factor} x each backend's own FLOP bound")
    if m.load_before and m.load_after:
        lines.append(f"load average {m.load_before[0]:.2f} before, {m.load_after[0]:.2f} after")
    warning = busy_warning(m)
    if warning:
        lines.append("warning: " + warning)
    return "\n".join(lines)


