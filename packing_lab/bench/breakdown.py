"""Where a CPU backend's time goes, stage by stage: the benchmark's breakdown.

``segments`` (:func:`segments_breakdown`): each stage adds one cost to the one before (the kernel
on cached inputs, on the real inputs, copying its output, a fresh result tensor), so its share of
the FLOP ratio should fall stage by stage; :func:`describe_breakdown` says so only as far as the
measured numbers bear it out.

``flex`` (:func:`flex_breakdown`): its kernel on the padded baseline's own work, against the
baseline's kernel on that same work, then on the packed documents.

Every share is a ratio of cells computed per second, since each bound counts the cells its kernel
really computes: aten's CPU flash kernel (``aten/src/ATen/native/cpu/FlashAttentionKernel.cpp``,
``cpu_flash_attention``) multiplies each query block by whole key blocks of up to 512 keys and
masks the future with -inf, so a causal row of 512 (or a document of n <= 512) costs its whole
square; FlexAttention's CPU template (``torch/_inductor/codegen/cpp_flex_attention_template.py``)
computes each tile its block mask lists, whole.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from packing_core.attention.backends import attend
from packing_core.attention.tiles import DEFAULT_TILE, tile_spans
from packing_core.packing.plan import cu_seqlens_from_lengths
from packing_lab.bench.attention import _check_arguments, _padded_baseline, _time_round
from packing_lab.bench.machine import Machine, machine_info

STAGES = ("kernel_cached", "kernel_cold", "copy_out", "backend")
FLEX_STAGES = ("same_work", "backend")
FLEX_SAMPLE_ROWS = 16     # padded rows the same-work stage runs (enough to fill the cores, cheap to hold)


@dataclass(frozen=True)
class Stage:
    """One stage's best time, its speed-up over padded rows and its share of the FLOP ratio."""

    seconds: float
    speedup: float
    of_flop_ratio: float


@dataclass(frozen=True)
class BreakdownConfig:
    dataset: str
    docs: int
    context: int
    heads: int
    head_dim: int
    repeats: int
    seed: int
    padded_layout: str


@dataclass(frozen=True)
class Breakdown:
    """What :func:`segments_breakdown` or :func:`flex_breakdown` measured; ``to_dict()`` is the script's ``--json``."""

    machine: Machine
    config: BreakdownConfig
    flop_ratio: float             # the backend's own bound
    padded_seconds: float
    stages: dict[str, Stage]      # in STAGES (FLEX_STAGES) order
    backend: str = "segments"
    counts: dict[str, int] = field(default_factory=dict)   # flex: tile, tiles touched and full, sample rows

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Breakdown:
        return cls(Machine.from_dict(d["machine"]), BreakdownConfig(**d["config"]), d["flop_ratio"],
                   d["padded_seconds"], {k: Stage(**v) for k, v in d["stages"].items()},
                   d.get("backend", "segments"), dict(d.get("counts", {})))


def segments_breakdown(*, docs: int = 256, context: int = 512, heads: int = 16,
                       head_dim: int = 64, repeats: int = 3, dataset: str = "support-tickets",
                       seed: int = 0, padded_layout: str = "model", progress=None) -> Breakdown:
    """Where the CPU ``segments`` backend's time goes, stage by stage (float32, CPU).

    Each stage adds one cost to the one before; its ``of_flop_ratio`` is the share of
    the FLOP ratio it would reach if that were all the backend paid:

    - ``kernel_cached``: each document's SDPA call repeated on its own inputs, so they
      sit in the core's cache, summed over the documents: the kernel's own cost, an
      estimate no real step reaches (a step's inputs were just written, and a batch's
      q, k, v do not fit in a core's cache).
    - ``kernel_cold``: the same calls over the real packed tensors, outputs dropped.
    - ``copy_out``: plus copying each output into a result tensor that is reused.
    - ``backend``: ``attend(..., "segments")``: plus a fresh result tensor per call,
      whose first touch costs a page fault per 4 KiB page.

    ``progress(fraction, message)``, if given, hears each round start (a page draws its bar from it).
    """
    from packing_core.data import synthetic_lengths
    from packing_core.packing.strategies import make_plan

    _check_arguments(heads, head_dim, repeats, padded_layout)
    machine = machine_info("cpu")
    lengths = synthetic_lengths(dataset, n=docs, seed=seed)
    pad, bfd = make_plan(lengths, context, "pad"), make_plan(lengths, context, "bfd")
    flop_ratio = pad.metrics().attention_cost_padded / bfd.metrics().attention_cost_packed
    g = torch.Generator().manual_seed(seed)
    cpu = torch.device("cpu")
    padded, _ = _padded_baseline(pad.n_rows, context, heads, head_dim, torch.float32, cpu, g,
                                 padded_layout)
    piece_len = bfd.piece_len
    cu = cu_seqlens_from_lengths(piece_len).tolist()
    q, k, v = (torch.randn(int(cu[-1]), heads, head_dim, generator=g) for _ in range(3))
    reused = torch.zeros_like(q)
    spans = list(zip(cu[:-1], cu[1:]))

    def per_document(copy: bool):
        def run():
            for a, b in spans:
                o = F.scaled_dot_product_attention(
                    *(t[a:b][None].transpose(1, 2) for t in (q, k, v)), is_causal=True)
                if copy:
                    reused[a:b] = o[0].transpose(0, 1)
        return run

    def cached_kernel() -> float:
        """Sum over documents of one call on inputs in cache (best of four repeats)."""
        per = {}
        for n in np.unique(piece_len).tolist():
            # A small token-major copy: the backend's layout, small enough to stay cached.
            xq, xk, xv = (t[:n].clone()[None].transpose(1, 2) for t in (q, k, v))
            F.scaled_dot_product_attention(xq, xk, xv, is_causal=True)
            times = []
            for _ in range(4):
                start = time.perf_counter()
                F.scaled_dot_product_attention(xq, xk, xv, is_causal=True)
                times.append(time.perf_counter() - start)
            per[n] = min(times)
        return sum(per[n] for n in piece_len.tolist())

    cu_t = torch.tensor(cu, dtype=torch.int32)
    fns = {
        "padded": padded,
        "kernel_cold": per_document(copy=False),
        "copy_out": per_document(copy=True),
        "backend": lambda: attend(q, k, v, cu_t, int(piece_len.max()), "segments"),
    }
    report = progress or (lambda fraction, message: None)
    report(0.0, "warm-up: every stage once")
    for fn in fns.values():
        fn()
    best = {name: float("inf") for name in fns}
    for r in range(repeats):
        report((r + 1) / (repeats + 2), f"round {r + 1} of {repeats}: padded rows, then the three per-document passes")
        for name, seconds in _time_round(fns, cpu).items():
            best[name] = min(best[name], seconds)
    report((repeats + 1) / (repeats + 2), "each document length once more, its inputs in cache")
    best["kernel_cached"] = cached_kernel()
    padded_s = best.pop("padded")
    return Breakdown(
        machine=machine.finished(),
        config=BreakdownConfig(dataset=dataset, docs=int(docs), context=context, heads=heads, head_dim=head_dim,
                               repeats=repeats, seed=seed, padded_layout=padded_layout),
        flop_ratio=flop_ratio, padded_seconds=padded_s,
        stages={name: Stage(best[name], padded_s / best[name], padded_s / best[name] / flop_ratio) for name in STAGES})


def format_breakdown(result: Breakdown) -> str:
    """Plain-text table of a :func:`segments_breakdown` or :func:`flex_breakdown` result."""
    c, n = result.config, result.counts
    lines = [f"{result.backend} on CPU, {c.docs} {c.dataset}, {c.heads} heads x {c.head_dim}, "
             f"{result.machine.torch_threads} threads; padded ({c.padded_layout} layout) "
             f"{result.padded_seconds:.3f} s, own bound {result.flop_ratio:.2f}",
             f"{'stage':<14} {'seconds':>8} {'speedup':>8} {'of own bound':>13}"]
    for name, r in result.stages.items():
        lines.append(f"{name:<14} {r.seconds:>8.3f} {r.speedup:>8.2f} {r.of_flop_ratio:>13.2f}")
    if result.backend == "flex":
        lines.append(f"same_work: flex and SDPA on {n['sample_rows']} padded rows, each one document of "
                     f"{c.context} tokens (flex computes {n['row_tiles']} of {(c.context // n['tile']) ** 2} "
                     f"{n['tile']}-token tiles per row, SDPA the whole square)")
        lines.append(f"backend: {n['touched']} tiles touched, {n['touched'] - n['full']} of them partial "
                     f"(the mask predicate runs on every cell of a partial tile)")
    lines.append(result.machine.line())
    return "\n".join(lines)


def describe_breakdown(result: Breakdown) -> str:
    """The sentence under a :func:`segments_breakdown` table, only as far as its numbers bear out.

    Each stage adds a cost, so its share of the FLOP ratio should fall stage by stage. When
    the measured shares do not (a noisy neighbour slowed an earlier stage), the sentence
    says so instead of narrating a fall the table contradicts.

    >>> from types import SimpleNamespace
    >>> stages = lambda *s: SimpleNamespace(stages={n: Stage(1.0, 1.0, x) for n, x in zip(STAGES, s)})
    >>> describe_breakdown(stages(0.95, 0.78, 0.73, 0.63))[:61]
    'With its inputs in cache the kernel alone would reach **95%**'
    >>> describe_breakdown(stages(0.70, 0.78, 0.73, 0.63))[:61]
    'These stages should each cost more than the last, but here **'
    """
    shares = [result.stages[n].of_flop_ratio for n in STAGES]
    cached, cold, copy, whole = shares
    if all(a >= b for a, b in zip(shares, shares[1:])):
        return (f"With its inputs in cache the kernel alone would reach **{cached:.0%}** of the bound. "
                f"Reading the real inputs brings it to **{cold:.0%}**; writing the result, to "
                f"**{copy:.0%}**; a fresh result tensor, to **{whole:.0%}**. No real step keeps a whole "
                "batch in a core's cache, so the first figure is a limit, not a target.")
    return ("These stages should each cost more than the last, but here **"
            + "**, **".join(f"{x:.0%}" for x in shares)
            + "** do not fall in that order: other work on the machine slowed some rounds more than "
            "others, so this run cannot say where the time goes. Run it again when the machine is quiet.")


def flex_breakdown(*, docs: int = 256, context: int = 512, heads: int = 16, head_dim: int = 64,
                   repeats: int = 3, dataset: str = "support-tickets", seed: int = 0,
                   padded_layout: str = "model", tile: int = DEFAULT_TILE, progress=None) -> Breakdown:
    """Where the CPU ``flex`` backend's time goes (float32, CPU): its kernel on the padded
    baseline's own work, then on the packed documents.

    - ``same_work``: flex over :data:`FLEX_SAMPLE_ROWS` padded rows, each one document of
      ``context`` tokens, against SDPA over the same rows and layout: flex's cells per second
      against the baseline kernel's, on identical work. Its share is the ceiling of flex's share
      of its bound here: the packed call can only add to it (short documents leave most of the
      tiles partial, and a query tile reads one or two key tiles instead of four).
    - ``backend``: ``attend(..., "flex")`` on the packed plan, as the benchmark runs it.

    ``counts`` holds the tiles: touched and full over the packed plan, touched per padded row.
    """
    from packing_core.data import synthetic_lengths
    from packing_core.packing.strategies import make_plan

    _check_arguments(heads, head_dim, repeats, padded_layout)
    machine = machine_info("cpu")
    lengths = synthetic_lengths(dataset, n=docs, seed=seed)
    pad, bfd = make_plan(lengths, context, "pad"), make_plan(lengths, context, "bfd")
    g = torch.Generator().manual_seed(seed)
    cpu = torch.device("cpu")
    padded, qkv_pad = _padded_baseline(pad.n_rows, context, heads, head_dim, torch.float32, cpu, g,
                                       padded_layout)
    cu = cu_seqlens_from_lengths(bfd.piece_len)
    spans = tile_spans(cu, tile)
    flop_ratio = pad.metrics().attention_cost_padded / spans.cells
    q, k, v = (torch.randn(int(cu[-1]), heads, head_dim, generator=g) for _ in range(3))
    cu_t = torch.from_numpy(cu.astype(np.int32))
    # the same work: rows of the padded baseline, each one document, in the model layout both ways
    rows = min(FLEX_SAMPLE_ROWS, pad.n_rows)
    rq, rk, rv = (torch.randn(rows, context, heads, head_dim, generator=g) for _ in range(3))
    row_cu = torch.arange(0, rows * context + 1, context, dtype=torch.int32)
    row_spans = tile_spans(row_cu.numpy(), tile)
    fns = {
        "padded": padded,
        "sdpa_rows": lambda: F.scaled_dot_product_attention(rq.transpose(1, 2), rk.transpose(1, 2), rv.transpose(1, 2),
                                                            is_causal=True),
        "same_work": lambda: attend(rq.reshape(-1, heads, head_dim), rk.reshape(-1, heads, head_dim),
                                    rv.reshape(-1, heads, head_dim), row_cu, context, "flex", tile=tile),
        "backend": lambda: attend(q, k, v, cu_t, int(bfd.piece_len.max()), "flex", tile=tile),
    }
    report = progress or (lambda fraction, message: None)
    report(0.0, "warm-up: every stage once (flex compiles on its first call)")
    for fn in fns.values():
        fn()
    best = {name: float("inf") for name in fns}
    for r in range(repeats):
        report((r + 1) / (repeats + 1), f"round {r + 1} of {repeats}: padded rows, SDPA and flex on "
               f"{rows} rows, flex on the packed plan")
        for name, seconds in _time_round(fns, cpu).items():
            best[name] = min(best[name], seconds)
    same_bound = rows * context ** 2 / row_spans.cells
    same = best["sdpa_rows"] / best["same_work"]
    whole = best["padded"] / best["backend"]
    return Breakdown(
        machine=machine.finished(),
        config=BreakdownConfig(dataset=dataset, docs=int(docs), context=context, heads=heads, head_dim=head_dim,
                               repeats=repeats, seed=seed, padded_layout=padded_layout),
        flop_ratio=flop_ratio, padded_seconds=best["padded"],
        stages={"same_work": Stage(best["same_work"], same, same / same_bound),
                "backend": Stage(best["backend"], whole, whole / flop_ratio)},
        backend="flex",
        counts={"tile": tile, "touched": spans.touched, "full": spans.full, "sample_rows": rows,
                "row_tiles": row_spans.touched // rows},
    )
