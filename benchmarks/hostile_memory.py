"""Hostile input: peak memory and time of the CLI process tree on every case of the hostile catalogues.

    python benchmarks/hostile_memory.py                   # table
    python benchmarks/hostile_memory.py --json            # machine-readable
    python benchmarks/hostile_memory.py --only memory     # a pytest -k expression: a class, a case id

The catalogues are ``tests/e2e/test_hostile.py`` (report, scan, check, verify, --out),
``tests/e2e/test_hostile_round4.py`` (masks, counts, the optimal planner, the stream packer,
model caches, compressed Arrow, streams of batch files) and ``tests/e2e/test_hostile_inputs.py``
(the limits' own settings, small contexts, the stream command, concurrent warms). One home for the
cases: each catalogue runs under pytest, as in CI, with ``PACKING_LAB_HOSTILE_REPORT`` set, and
writes every case's exit code, seconds and the peak RSS of its whole process tree (a psutil
sampler over the tree plus the child's own ``wait4`` peak). This script adds whether the case
passed (pytest's JUnit XML), the machine and its load before and after, the enforced bounds and
the read budget. The limit the lab promises: at most 1 GiB per CLI process tree, one
``error:`` line (exit 2) or the right numbers, never a hang.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import packing_core as pc
from packing_core.data import read_budget
from packing_lab.bench import Machine, machine_info

ROOT = Path(__file__).resolve().parents[1]

CATALOGUES = ("tests/e2e/test_hostile.py", "tests/e2e/test_hostile_round4.py", "tests/e2e/test_hostile_inputs.py")
LIMIT_MIB = 1024


def _passed(junit: Path) -> dict[str, str]:
    """case id -> "passed" / "failed" / "skipped", from pytest's JUnit XML."""
    out = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("name", "")
        if "[" not in name:
            continue
        cid = name[name.index("[") + 1:-1]
        out[cid] = ("failed" if case.find("failure") is not None or case.find("error") is not None
                    else "skipped" if case.find("skipped") is not None else "passed")
    return out


def measure(only: str | None) -> dict:
    machine = machine_info()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for module in CATALOGUES:
            report, junit = Path(tmp) / "report.json", Path(tmp) / "junit.xml"
            report.unlink(missing_ok=True)
            command = [sys.executable, "-m", "pytest", module, "-q", "-p", "no:cacheprovider", f"--junitxml={junit}"]
            if only:
                command += ["-k", only]
            subprocess.run(command, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT),
                                                   "PACKING_LAB_HOSTILE_REPORT": str(report)},
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if not report.exists():
                continue
            status = _passed(junit) if junit.exists() else {}
            for r in json.loads(report.read_text()):
                rows.append({**r, "catalogue": Path(module).stem, "status": status.get(r["case"], "unknown"),
                             "within_limit": r["peak_mib"] <= LIMIT_MIB})
    return {"machine": machine.finished().to_dict(), "limit_mib": LIMIT_MIB, "bounds": pc.LIMITS,
            "budget": read_budget().to_dict(), "cases": rows}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", action="store_true")
    p.add_argument("--only", help="a pytest -k expression: a class (memory, hangs ...) or a case id")
    args = p.parse_args(argv)
    out = measure(args.only)
    if args.json:
        json.dump(out, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    print(f"{Machine.from_dict(out['machine']).line()}; limit {out['limit_mib']} MiB per CLI process tree")
    print(f"{'catalogue':<20} {'class':<15} {'case':<52} {'exit':>4} {'peak MiB':>9} {'s':>7}  status")
    for r in sorted(out["cases"], key=lambda r: -r["peak_mib"]):
        flag = "" if r["within_limit"] else "  OVER"
        print(f"{r['catalogue']:<20} {r['class']:<15} {r['case'][:52]:<52} {r['exit']:>4} {r['peak_mib']:>9.0f} "
              f"{r['seconds']:>7.1f}  {r['status']}{flag}")
    if out["cases"]:
        worst = max(out["cases"], key=lambda r: r["peak_mib"])
        passed = sum(r["status"] == "passed" for r in out["cases"])
        print(f"\n{passed} of {len(out['cases'])} cases passed; largest tree peak: {worst['case']} at "
              f"{worst['peak_mib']:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
