"""Type-check ``packing_core``, ``packing_lab`` and ``tools`` with mypy against a recorded baseline that may only shrink.

    python scripts/typecheck.py            # exit 1 on any error beyond the baseline
    python scripts/typecheck.py --update   # after fixing errors: write the smaller baseline

The baseline (``scripts/mypy-baseline.json``) counts errors per file. A file may hold at most its
recorded count, a file not in it none, and the subpackages in ``CLEAN`` none at all: a new error
anywhere fails the run. ``--update`` refuses to raise a count (fix the error instead).
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / "scripts" / "mypy-baseline.json"
CLEAN = ("packing_core/packing/", "packing_core/data/")   # held at zero errors
_ERROR = re.compile(r"^(?P<file>[^:\s]+\.py):\d+(?::\d+)?: error: ")


def errors_per_file(output: str) -> Counter:
    """``{file: count}`` from mypy's output.

    >>> errors_per_file("a/b.py:3: error: x  [attr-defined]\\na/b.py:9: note: y\\nc.py:1: error: z  [misc]\\n")
    Counter({'a/b.py': 1, 'c.py': 1})
    """
    return Counter(m["file"] for m in map(_ERROR.match, output.splitlines()) if m)


def run_mypy() -> tuple[str, int]:
    proc = subprocess.run([sys.executable, "-m", "mypy", "packing_core", "packing_lab", "tools"], cwd=ROOT,
                          capture_output=True, text=True)
    if proc.returncode not in (0, 1):   # 2: mypy itself failed (bad configuration, crash)
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit(f"typecheck: mypy failed to run (exit {proc.returncode})")
    return proc.stdout, proc.returncode


def judge(now: Counter, base: Counter) -> list[str]:
    """One line per file beyond its baseline, or with any error in a subpackage held at zero.

    >>> judge(Counter({"packing_lab/viz/a.py": 2}), Counter({"packing_lab/viz/a.py": 2}))
    []
    >>> judge(Counter({"packing_lab/viz/a.py": 3}), Counter({"packing_lab/viz/a.py": 2}))
    ['packing_lab/viz/a.py: 3 error(s), the baseline allows 2']
    >>> judge(Counter({"packing_core/data/b.py": 1}), Counter({"packing_core/data/b.py": 1}))
    ['packing_core/data/b.py: 1 error(s) in a subpackage held at zero (packing_core/packing/, packing_core/data/)']
    """
    lines = [f"{f}: {n} error(s), the baseline allows {base.get(f, 0)}"
             for f, n in sorted(now.items()) if n > base.get(f, 0)]
    lines += [f"{f}: {n} error(s) in a subpackage held at zero ({', '.join(CLEAN)})"
              for f, n in sorted(now.items()) if f.startswith(CLEAN) and n <= base.get(f, 0)]
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--update", action="store_true", help="write the baseline from this run (counts may only fall)")
    args = p.parse_args(argv)
    output, _ = run_mypy()
    now = errors_per_file(output)
    base = Counter(json.loads(BASELINE.read_text())) if BASELINE.exists() else Counter()
    if args.update and not BASELINE.exists():   # the first baseline records what is there (held-at-zero parts aside)
        base = Counter({f: n for f, n in now.items() if not f.startswith(CLEAN)})
    problems = judge(now, base)
    if args.update and not problems:
        BASELINE.write_text(json.dumps(dict(sorted(now.items())), indent=1) + "\n")
        print(f"typecheck: baseline written: {sum(now.values())} errors in {len(now)} files")
        return 0
    if problems:
        if args.update:
            print("typecheck: refusing to raise the baseline; fix these first:")
        bad = {line.split(":")[0] for line in problems}
        print("\n".join(line for line in output.splitlines() if (m := _ERROR.match(line)) and m["file"] in bad))
        print("\n".join(f"typecheck: {line}" for line in problems))
        return 1
    fallen = sum(base.values()) - sum(now.values())
    print(f"typecheck: {sum(now.values())} errors in {len(now)} files, within the baseline of {sum(base.values())}"
          + (f"; {fallen} fixed since: run with --update to lower it" if fallen > 0 else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
