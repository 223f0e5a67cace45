"""Watch it pack on a shared server: what its Play timer costs the server, a placement at a time.

    python benchmarks/watch_speed.py            # a line per packer
    python benchmarks/watch_speed.py --json     # machine-readable

One headless Chromium opens the page on a fresh server, plays every packer of the step-through to its
end, and the server's CPU time (its process, from /proc through psutil) is read before and after each
play, then over 10 s after the last one. Goals: at most 100 ms of server CPU a placement (the timer
reruns only the player), and at most 0.1 s over the 10 idle seconds (the timer exists only while playing).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

import psutil
from _server import CHROMIUM, chromium_path, start_streamlit  # benchmarks/_server.py, beside this script

from packing_core.packing import TRACE_STRATEGIES
from packing_lab.bench import machine_info

CHROMIUM = chromium_path() or CHROMIUM
GOAL_MS_PER_PLACEMENT = 100.0
GOAL_IDLE_S = 0.1
IDLE_S = 10.0
WAIT_MS = 180_000


def _cpu(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def measure() -> dict:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        server = start_streamlit(Path(tmp) / "server.log")
        try:
            proc = psutil.Process(server.pid)
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
                page = browser.new_page(viewport={"width": 1024, "height": 768})
                page.goto(f"{server.url}/watch_it_pack")
                play = page.get_by_role("button", name="Play", exact=True)
                play.wait_for(timeout=WAIT_MS)
                plays = {}
                for strategy in TRACE_STRATEGIES:
                    page.get_by_role("radiogroup", name="Packer").get_by_text(strategy, exact=True).click()
                    page.get_by_text(re.compile(r"pieces wait")).wait_for(timeout=WAIT_MS)
                    steps = int(re.search(r"(\d+) pieces wait", page.get_by_text(re.compile(r"pieces wait")).inner_text())
                                .group(1))
                    cpu, wall = _cpu(proc), time.perf_counter()
                    play.click()
                    page.get_by_text(re.compile(r"^The plan \(documents per row\)")).wait_for(timeout=WAIT_MS)
                    play.wait_for(timeout=WAIT_MS)          # "Pause" is "Play" again: the timer stopped
                    time.sleep(1.0)
                    used = _cpu(proc) - cpu
                    plays[strategy] = {"placements": steps, "wall_seconds": time.perf_counter() - wall,
                                       "server_cpu_seconds": used, "ms_per_placement": 1000 * used / steps}
                cpu = _cpu(proc)
                time.sleep(IDLE_S)
                idle = _cpu(proc) - cpu
                browser.close()
        finally:
            server.stop()
    worst = max(p["ms_per_placement"] for p in plays.values())
    return {"plays": plays, "idle_seconds": IDLE_S, "idle_server_cpu_seconds": idle,
            "goals": {"ms_per_placement": {"goal": GOAL_MS_PER_PLACEMENT, "worst": worst,
                                           "pass": worst <= GOAL_MS_PER_PLACEMENT},
                      "idle_cpu_seconds": {"goal": GOAL_IDLE_S, "measured": idle, "pass": idle <= GOAL_IDLE_S}}}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", action="store_true", help="print JSON instead of lines")
    args = p.parse_args(argv)
    if not Path(CHROMIUM).is_file():
        print(f"error: {CHROMIUM} not found; apt-get install -y chromium", file=sys.stderr)
        return 2
    machine = machine_info()
    result = measure()
    result["machine"] = machine.finished().to_dict()
    ok = all(g["pass"] for g in result["goals"].values())
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(machine.finished().line())
        for name, v in result["plays"].items():
            print(f"{name:<9} {v['placements']} placements in {v['wall_seconds']:.1f} s: server CPU "
                  f"{v['server_cpu_seconds']:.2f} s, {v['ms_per_placement']:.0f} ms a placement")
        print(f"idle {IDLE_S:.0f} s after the last: server CPU {result['idle_server_cpu_seconds']:.2f} s")
        print("PASS" if ok else "FAIL", f"(goals: <= {GOAL_MS_PER_PLACEMENT:.0f} ms a placement, "
                                          f"<= {GOAL_IDLE_S} s idle)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
