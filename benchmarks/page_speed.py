"""Page speed: each page's first render with warm caches, measured through Streamlit's AppTest.

    python benchmarks/page_speed.py            # table
    python benchmarks/page_speed.py --json     # machine-readable

For every page: one render warms the process (imports, st.cache_data, st.cache_resource),
then a fresh AppTest session renders the page again from ``app.py`` and is timed: what a
new visitor waits for once the server has served anyone. Goal: at most 2 s per page.
The benchmark page is timed before its button is pressed (the run itself is the benchmark).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from streamlit.testing.v1 import AppTest  # noqa: E402  (after the offline settings)

from packing_lab.bench import machine_info  # noqa: E402

GOAL_S = 2.0
TIMEOUT_S = 180  # a cold first render imports torch and transformers


def page_specs() -> dict:
    """``{name: PageSpec}`` of every page in lesson order, read from the app itself (``_content.PAGES``).

    AppTest runs ``app.py`` with the app's folder importable, as ``streamlit run`` does; the first
    run also warms the process. No path is set here: the app is not an installed package.
    """
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT_S).run()
    if at.exception:
        raise SystemExit(f"app.py raised {at.exception[0].value}")
    return {p.name: p for p in sys.modules["app_pages._content"].PAGES}


def render(spec) -> tuple[float, AppTest]:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT_S)
    at.switch_page(spec.path)
    start = time.perf_counter()
    at.run()
    return time.perf_counter() - start, at


def measure(pages, repeats: int) -> dict:
    specs = page_specs()
    unknown = [p for p in pages or () if p not in specs]
    if unknown:
        raise SystemExit(f"unknown pages {unknown}: choose from {', '.join(specs)}")
    out = {}
    for page in pages or specs:
        cold, at = render(specs[page])
        if at.exception:
            raise SystemExit(f"{page}: the page raised {at.exception[0].value}")
        warm = min(render(specs[page])[0] for _ in range(repeats))
        out[page] = {"cold_seconds": cold, "warm_seconds": warm, "goal_seconds": GOAL_S,
                     "goal_pass": warm <= GOAL_S}
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--repeats", type=int, default=3, help="warm renders per page; the best counts")
    p.add_argument("--pages", nargs="*", help="page names (default: every page, in lesson order)")
    args = p.parse_args(argv)
    machine = machine_info()
    pages = measure(args.pages, args.repeats)
    result = {"machine": machine.finished().to_dict(), "pages": pages, "all_pass": all(v["goal_pass"] for v in pages.values())}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{'page':<20} {'first (cold)':>13} {'warm':>8}  goal <= {GOAL_S:.0f} s")
        for name, v in pages.items():
            print(f"{name:<20} {v['cold_seconds']:>12.2f}s {v['warm_seconds']:>7.2f}s  "
                  f"{'PASS' if v['goal_pass'] else 'FAIL'}")
    return 0 if result["all_pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
