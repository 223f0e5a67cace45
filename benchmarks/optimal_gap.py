"""The optimal planner on hard and random bin-packing instances: rows, the proven bound, the gap, the time.

    python benchmarks/optimal_gap.py                 # table
    python benchmarks/optimal_gap.py --json          # machine-readable
    python benchmarks/optimal_gap.py --instances 3 --time-limit 5

Instances, generated the standard way (Falkenauer, 1996, "A hybrid grouping genetic algorithm for bin
packing", J. Heuristics 2), seeded:

- **triplets** t60, t120, t249, t501: capacity 1,000; each row of the optimum holds three pieces
  that fill it exactly: the first uniform in [380, 490], the second uniform in [250, s / 2] where
  ``s`` is the room left, the third the rest. The optimum is n / 3 rows, and so is the LP bound, but
  rounding the LP misses it: the classic hard case for a column-generation planner.
- **uniform** u120, u250, u500, u1000: capacity 150, pieces uniform in [20, 100].

Each instance is planned by ``optimal_from_counts`` with ``--time-limit``; the certificate gives the
rows, the proven lower bound (L2 or LP) and the gap, beside bfd's rows; the wall and CPU seconds are
this script's (the planner's budget is work, so its plan does not depend on them unless the clock
stopped it: the status says so). Goal: every triplet instance closed (gap 0) within the default
budget of 5 s; no uniform instance above its bound by more than one row.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from packing_core.packing import optimal_from_counts, plan_from_counts
from packing_lab.bench import machine_info

TRIPLETS = {"t60": 60, "t120": 120, "t249": 249, "t501": 501}
UNIFORM = {"u120": 120, "u250": 250, "u500": 500, "u1000": 1000}


def triplets(n: int, seed: int, capacity: int = 1000) -> np.ndarray:
    """Falkenauer's triplets: ``n // 3`` rows, each three pieces that fill ``capacity`` exactly."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n // 3):
        first = int(rng.integers(380, 491))
        room = capacity - first
        second = int(rng.integers(250, room // 2 + 1))
        out += [first, second, room - second]
    return np.array(out)


def uniform(n: int, seed: int) -> np.ndarray:
    """Falkenauer's uniform class: ``n`` pieces uniform in [20, 100], capacity 150."""
    return np.random.default_rng(seed).integers(20, 101, n)


def instances(count: int):
    for name, n in TRIPLETS.items():
        for seed in range(count):
            yield "triplets", name, seed, triplets(n, seed), 1000
    for name, n in UNIFORM.items():
        for seed in range(count):
            yield "uniform", name, seed, uniform(n, seed), 150


def measure(lengths: np.ndarray, context: int, time_limit: float) -> dict:
    sizes, n = np.unique(lengths, return_counts=True)
    counts = dict(zip(sizes.tolist(), n.tolist()))
    t, cpu = time.perf_counter(), time.process_time()
    c = optimal_from_counts(counts, context, time_limit=time_limit).certificate
    seconds, cpu = time.perf_counter() - t, time.process_time() - cpu
    return {"rows": c.rows, "bound": c.bound.rows, "bound_name": c.bound.name, "gap_rows": c.gap_rows,
            "bfd_rows": plan_from_counts(counts, context, "bfd").metrics.rows, "seconds": seconds,
            "cpu_seconds": cpu, "method": c.method, "status": getattr(c, "status", c.note),
            "work": getattr(c, "work", None)}


def summary(results: list[dict]) -> list[dict]:
    out = []
    for name in [*TRIPLETS, *UNIFORM]:
        rs = [r for r in results if r["instance"] == name]
        if rs:
            out.append({"instance": name, "count": len(rs), "closed": sum(r["gap_rows"] == 0 for r in rs),
                        "gap_rows": sum(r["gap_rows"] for r in rs), "rows": sum(r["rows"] for r in rs),
                        "bound": sum(r["bound"] for r in rs), "bfd_rows": sum(r["bfd_rows"] for r in rs),
                        "mean_seconds": float(np.mean([r["seconds"] for r in rs])),
                        "max_seconds": float(np.max([r["seconds"] for r in rs])),
                        "mean_cpu_seconds": float(np.mean([r["cpu_seconds"] for r in rs]))})
    return out


def goals(results: list[dict]) -> list[dict]:
    t = [r for r in results if r["class"] == "triplets"]
    u = [r for r in results if r["class"] == "uniform"]
    return [{"goal": "every triplet instance closed (gap 0)", "pass": all(r["gap_rows"] == 0 for r in t),
             "value": f"{sum(r['gap_rows'] == 0 for r in t)} of {len(t)}"},
            {"goal": "every uniform instance within 1 row of its bound", "pass": all(r["gap_rows"] <= 1 for r in u),
             "value": f"largest gap {max((r['gap_rows'] for r in u), default=0)} row(s)"}]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--instances", type=int, default=5, help="seeds per instance class (default 5)")
    ap.add_argument("--time-limit", type=float, default=5.0)
    args = ap.parse_args(argv)
    machine = machine_info()
    results = []
    for cls, name, seed, lengths, context in instances(args.instances):
        results.append({"class": cls, "instance": name, "seed": seed, **measure(lengths, context, args.time_limit)})
        if not args.json:
            r = results[-1]
            print(f"{name:>6} seed {seed}: {r['rows']:>4} rows, {r['bound_name']} {r['bound']:>4}, gap {r['gap_rows']}, "
                  f"{r['seconds']:5.2f} s  {r['status']}", flush=True)
    machine = machine.finished()
    report = {"machine": machine.to_dict(), "time_limit": args.time_limit, "instances": results,
              "summary": summary(results), "goals": goals(results)}
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
    else:
        print(f"\n{'class':>6} {'closed':>7} {'bound':>6} {'bfd':>6} {'rows':>6} {'gap':>4} {'mean s':>7} {'max s':>6} "
              f"{'cpu s':>6}")
        for s in report["summary"]:
            print(f"{s['instance']:>6} {s['closed']:>3} of {s['count']:<2} {s['bound']:>6} {s['bfd_rows']:>6} {s['rows']:>6} "
                  f"{s['gap_rows']:>4} {s['mean_seconds']:>7.2f} {s['max_seconds']:>6.2f} {s['mean_cpu_seconds']:>6.2f}")
        print(f"\n{machine.line()}")
        for g in report["goals"]:
            print(f"{'PASS' if g['pass'] else 'FAIL'}  {g['goal']}: {g['value']}")
    return 0 if all(g["pass"] for g in report["goals"]) else 1


if __name__ == "__main__":
    sys.exit(main())
