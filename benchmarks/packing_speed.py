"""Planning speed: best-fit decreasing on support-tickets, and every strategy on 10M lengths.

    python benchmarks/packing_speed.py            # table
    python benchmarks/packing_speed.py --json     # machine-readable

Goals (2-core machine): bfd on 200,000 support tickets at context 512 in at most
50 ms and at most 1.001 x the lower-bound row count; 10,000,000 lengths in at most 3 s
with memory linear in the number of documents. Times are the best of --repeats runs
of planning plus metrics; ``layout`` adds the first sort of pieces by row.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import tracemalloc

import numpy as np

from packing_core import (
    STRATEGIES,
    make_plan,
    synthetic_lengths,
)


def _best_time(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def _peak_bytes(fn) -> int:
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def run(big: int, repeats: int, context: int, strategies) -> dict:
    tickets = synthetic_lengths("support-tickets")
    bfd = make_plan(tickets, context, "bfd").metrics()
    t_bfd = _best_time(lambda: make_plan(tickets, context, "bfd").metrics(), repeats)
    results = {
        "machine": {
            "cpus": os.cpu_count(), "processor": platform.processor() or platform.machine(),
            "python": platform.python_version(), "numpy": np.__version__,
        },
        "support_tickets": {
            "documents": len(tickets), "context": context, "strategy": "bfd",
            "seconds": t_bfd, "rows": bfd.rows, "lower_bound_rows": bfd.lower_bound_rows,
            "rows_over_lower_bound": bfd.rows_over_lower_bound,
            "goal_seconds": 0.050, "goal_rows_ratio": 1.001,
            "pass": t_bfd <= 0.050 and bfd.rows_over_lower_bound <= 1.001,
        },
        "large": [],
    }
    lengths = synthetic_lengths("support-tickets", n=big, seed=1)
    for s in strategies:
        secs = _best_time(lambda s=s: make_plan(lengths, context, s).metrics(), max(3, repeats // 3))
        plan = make_plan(lengths, context, s)
        t = time.perf_counter()
        _ = plan.piece_row
        layout = time.perf_counter() - t
        peak = _peak_bytes(lambda s=s: make_plan(lengths, context, s).metrics())
        results["large"].append({
            "strategy": s, "documents": big, "seconds": secs, "layout_seconds": layout,
            "peak_bytes": peak, "bytes_per_document": peak / big,
            "goal_seconds": 3.0, "pass": secs <= 3.0,
        })
    return results


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--big", type=int, default=10_000_000, help="documents in the large run")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--context", type=int, default=512)
    p.add_argument("--strategies", default=",".join(STRATEGIES),
                   help=f"comma-separated, from {','.join(STRATEGIES)}")
    a = p.parse_args(argv)
    r = run(a.big, a.repeats, a.context, [s for s in a.strategies.split(",") if s])
    if a.json:
        print(json.dumps(r, indent=2))
        return 0
    st = r["support_tickets"]
    print(f"machine: {r['machine']}")
    print(f"bfd, {st['documents']:,} support tickets, context {st['context']}: "
          f"{st['seconds'] * 1000:.1f} ms, {st['rows']:,} rows vs lower bound {st['lower_bound_rows']:,} "
          f"({st['rows_over_lower_bound']:.5f}x)  goal <= 50 ms and <= 1.001x: {'PASS' if st['pass'] else 'FAIL'}")
    print(f"\n{'strategy':<12}{'documents':>12}{'plan s':>9}{'layout s':>10}{'peak MB':>9}{'B/doc':>7}  goal <= 3 s")
    for x in r["large"]:
        print(f"{x['strategy']:<12}{x['documents']:>12,}{x['seconds']:>9.2f}{x['layout_seconds']:>10.2f}"
              f"{x['peak_bytes'] / 1e6:>9.0f}{x['bytes_per_document']:>7.0f}  {'PASS' if x['pass'] else 'FAIL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
