"""Hostile input: peak memory and time of the CLI on every case of the round-2 catalogue.

    python benchmarks/hostile_memory.py            # table
    python benchmarks/hostile_memory.py --json     # machine-readable
    python benchmarks/hostile_memory.py --only memory

The catalogue is ``tests/test_fuzz.py``'s ``CLI_CASES`` (one home for the cases): each runs
``python -m packing_core report`` in a child process, whose peak RSS comes from
``os.wait4``. The limit the lab promises: at most 1 GiB per CLI run, one ``error:`` line
(exit 2) or the right numbers, never a hang. Also reports the enforced bounds and budget.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
from pathlib import Path

import packing_core as pc
from packing_core.data import read_budget
from packing_core.experiments import Machine, machine_info

ROOT = Path(__file__).resolve().parents[1]


def catalogue():
    spec = importlib.util.spec_from_file_location("hostile_catalogue", ROOT / "tests" / "test_fuzz.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it runs
    spec.loader.exec_module(module)
    return module


def measure(only: str | None, timeout: float) -> dict:
    machine = machine_info()
    fuzz = catalogue()
    cases = [c for c in fuzz.CLI_CASES if only in (None, c.cls, c.id)]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            folder = Path(tmp) / case.id
            folder.mkdir()
            (folder / "folder.csv").mkdir()
            r = fuzz.measure_case(case, folder, timeout=timeout)
            line = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
            results.append({"case": case.id, "class": case.cls, "exit": r.rc, "peak_mib": round(r.peak_mib, 1),
                            "seconds": round(r.seconds, 2), "within_limit": r.peak_mib <= fuzz.CLI_MEMORY_LIMIT_MIB,
                            "error": line[:160]})
    return {"machine": machine.finished().to_dict(),
            "limit_mib": fuzz.CLI_MEMORY_LIMIT_MIB, "bounds": pc.LIMITS, "budget": read_budget().to_dict(),
            "cases": results}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", action="store_true")
    p.add_argument("--only", help="one class (numbers, memory, hangs, tracebacks, messages, answers) or case id")
    p.add_argument("--timeout", type=float, default=60)
    args = p.parse_args(argv)
    out = measure(args.only, args.timeout)
    if args.json:
        json.dump(out, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    print(f"{Machine.from_dict(out['machine']).line()}; limit {out['limit_mib']} MiB per CLI run")
    print(f"{'class':<11} {'case':<38} {'exit':>4} {'peak MiB':>9} {'s':>6}")
    for r in out["cases"]:
        flag = "" if r["within_limit"] else "  OVER"
        print(f"{r['class']:<11} {r['case']:<38} {r['exit']:>4} {r['peak_mib']:>9.0f} {r['seconds']:>6.2f}{flag}")
    worst = max(out["cases"], key=lambda r: r["peak_mib"])
    print(f"\nworst: {worst['case']} at {worst['peak_mib']:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
