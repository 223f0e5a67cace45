"""Verification speed: SmolLM2 on your texts (alone vs packed, plus the drift continuations), warm;
and the Bug zoo page's first render, warm.

    python benchmarks/verify_speed.py            # table
    python benchmarks/verify_speed.py --json     # machine-readable

"Warm" means the model is loaded (the app caches it with st.cache_resource): what a class
waits for after the first visitor. Goals: verification + both continuations <= 10 s;
the zoo page's render <= 2 s (its reproductions run behind buttons).
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from packing_core.models import load_pretrained
from packing_core.verify import drift_pretrained, verify_pretrained
from packing_lab.bench import machine_info

ROOT = Path(__file__).resolve().parents[1]
TEXTS = ("My grandmother grew tomatoes, beans and squash in a small garden behind her house every summer.",
         "The central bank raised interest rates by half a point to slow inflation, and markets fell.")
GOALS = {"verify_and_drift": 10.0, "zoo_page": 2.0}


def best(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--repeats", type=int, default=3, help="warm runs; the best counts")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    machine = machine_info()
    pre = load_pretrained()
    verify_pretrained(mask="off", texts=TEXTS, pretrained=pre)            # warm-up
    verify_s = best(lambda: verify_pretrained(mask="off", texts=TEXTS, pretrained=pre), args.repeats)
    drift_s = best(lambda: drift_pretrained(TEXTS, mask="off", pretrained=pre), args.repeats)

    def zoo_page():
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
        at.switch_page("app_pages/bug_zoo.py")
        at.run()
        if at.exception:
            raise SystemExit(f"bug_zoo: the page raised {at.exception[0].value}")

    zoo_page()                                                                  # warm-up
    zoo_s = best(zoo_page, args.repeats)
    result = {"machine": machine.finished().to_dict(),
              "verify_seconds": verify_s, "drift_seconds": drift_s,
              "verify_and_drift_seconds": verify_s + drift_s, "zoo_page_seconds": zoo_s,
              "goals": GOALS, "verify_and_drift_pass": verify_s + drift_s <= GOALS["verify_and_drift"],
              "zoo_page_pass": zoo_s <= GOALS["zoo_page"]}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"SmolLM2 verify (2 texts, alone + packed): {verify_s:.2f} s")
        print(f"SmolLM2 drift (2 x 20 greedy tokens):    {drift_s:.2f} s")
        print(f"  together: {verify_s + drift_s:.2f} s (goal <= {GOALS['verify_and_drift']:.0f} s)")
        print(f"Bug zoo page, warm first render:         {zoo_s:.2f} s (goal <= {GOALS['zoo_page']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
