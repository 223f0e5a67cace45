"""Many people on one server at once: the leakage lab and the dataset explorer, in real Chromium.

    python benchmarks/concurrent_users.py                     # own server, 10 users, a table
    python benchmarks/concurrent_users.py --json              # machine-readable
    python benchmarks/concurrent_users.py --users 4 --model tiny-rope \\
        --url http://127.0.0.1:8501 --pid 1234 --log server.log   # a server that is already up
    python benchmarks/concurrent_users.py --bomb              # plus one user with decompression bombs
    python benchmarks/concurrent_users.py --class --users 30 --train   # a lesson: p95 click latency vs a lone user
    python benchmarks/concurrent_users.py --class --users 30 --train --browsers 5 --think 1,5 --seed 0 --json

Every user is a fresh browser context (its own Streamlit session) in one headless Chromium.
All start together. Each one opens the Leakage lab, picks a mask and positions, reads the
verdict, then opens the Dataset explorer, picks a dataset in the sidebar and reads its
document count. Measured:

    time to complete     per user, from the common start to both answers read (p50, max)
    server memory        RSS of the server's process tree, sampled every 0.1 s (peak, growth)
    model loads          transformers' "Loading weights" bars in the server log (SmolLM2 only)

Goals: every user sees the verdict its settings imply and the right document count, no
exception anywhere; the server grows by less than 1.5 GB; the pretrained model loads at most
once (``st.cache_resource``), however many people ask for it at the same moment.

``--bomb`` adds a last warm round in which one more session uploads decompression bombs to
the Dataset explorer while the others work (a Parquet of 20M rows in 84 KB, and one whose
dictionary decodes to 2 GB). Goal: the others finish within 1.5x of the warm round without
it (p50 and max), and the bomber gets one clear error per file.
``--class`` is a lesson (``class_run``): a cold visitor, a lone student once per client, then
the whole class. ``--browsers`` of the class (5 by default) are Chromium sessions, the rest
protocol clients (benchmarks/_st_client.py: the same websocket messages, the same script
runs, no renderer). Why both: the browsers prove the real frontend works under the load; the
protocol clients put each student's real per-click work on the server without thirty
renderers on the server's two cores, which a classroom never has (each browser runs on its
student's laptop; here Chromium runs at nice 10 on one core, ``--browser-nice``,
``--browser-cpus``). Each student thinks
before every click, uniformly 1-5 s (``--think``, seeded per student by ``--seed``), so the
class follows the teacher at its own pace; ``--think 0,0`` is a stampede. A click is timed
from the click to the end of the run it caused, without the think time. Goals: every
session completes with the right answers; the protocol clients' p95 click latency is at most
3x a lone protocol student's with the same clicks and think times (the browsers' figures are
reported beside it); no dead time: a click over 2 s shows a progress bar or spinner within 2 s
(judged on the protocol clients, which see what the server sends, and on a lone Chromium, which
sees what is inside its window; the class's Chromium clicks are reported: five renderers share one
niced core) and no training starts but on "Train both" (everyone); the server's peak memory
<= 2 GiB; one model load; no traceback.

Exit code 0 when every goal is met, 1 otherwise.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import statistics
import sys
import threading
import time
from pathlib import Path

import psutil
from _server import CHROMIUM, chromium_path, run_finished, start_streamlit  # benchmarks/_server.py, beside this script
from _st_client import ProtocolError, ProtocolSession  # benchmarks/_st_client.py, beside this script

from packing_core.models import DEFAULT_MODEL, PRETRAINED, model_specs
from packing_lab.bench import load_average, machine_info

ROOT = Path(__file__).resolve().parents[1]

CHROMIUM = chromium_path() or CHROMIUM
GOAL_GROWTH_MB = 1536
GOAL_CLASS_RSS_MB = 2048     # --class: the whole server, peak
GOAL_CLASS_P95 = 3.0         # --class: p95 click latency of the class over a lone user's
TRAIN = False                # --class: each user also presses "Train both"
BROWSER_NICE = 0             # --class: the Chromium sessions' priority (--browser-nice)
BROWSER_CPUS = 0             # --class: how many cores the Chromium sessions may use (--browser-cpus; 0: all)
STEP_MS = 60_000  # one step may wait for a model load behind other users on two cores
MODEL_LABELS = {s.name: s.label for s in model_specs()}   # what the Leakage lab's picker shows
DATASETS = ("support-tickets", "bimodal")
GOAL_DEAD_S = 2.0            # --class: a click over this shows progress within it (issue 35's "no dead time")
TRAINING = "Training the tiny model"   # the training demo's progress text (app_pages/leakage_lab.py)
# In every page a browser opens: when a progress bar or spinner is inside the window, and when one says it trains.
PROGRESS_JS = """(() => {
  window.__plProgress = []; window.__plTraining = [];
  const inView = el => { const r = el.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && r.bottom > 0 && r.top < window.innerHeight; };
  setInterval(() => {
    const busy = [...document.querySelectorAll("[data-testid='stProgress'], [data-testid='stSpinner']")];
    if (busy.some(inView) && window.__plProgress.length < 5000) window.__plProgress.push(performance.now());
    if (busy.some(el => el.innerText.includes(%s)) && window.__plTraining.length < 5000)
      window.__plTraining.push(performance.now());
  }, 100);
})();""" % json.dumps(TRAINING)
LOAD_BAR = re.compile(r"Loading weights:\s+0%")


# ---------------------------------------------------------------- server and memory
def tree_rss(pid: int) -> int:
    """Resident memory of a process and all its children, in bytes."""
    proc = psutil.Process(pid)
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except psutil.Error:  # a child that just exited
            pass
    return total


def tree_cpu_seconds(pid: int) -> float:
    """CPU time (user + system) used so far by a process and its children."""
    proc = psutil.Process(pid)
    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


class PeakRss(threading.Thread):
    """Samples ``tree_rss(pid)`` every ``every`` seconds until stopped; keeps the peak."""

    def __init__(self, pid: int, every: float = 0.1):
        super().__init__(daemon=True)
        self.pid, self.every, self.peak, self._stop_event = pid, every, tree_rss(pid), threading.Event()

    def run(self):
        while not self._stop_event.wait(self.every):
            self.peak = max(self.peak, tree_rss(self.pid))

    def stop(self) -> int:
        self._stop_event.set()
        self.join()
        return self.peak


# ---------------------------------------------------------------- one user
def expected_verdict(model: str, mask: str, positions: str) -> str:
    """TEACHING 6-9: a leak breaks equivalence; continuous positions only matter to absolute ones."""
    broken = mask == "off" or (positions == "continuous" and model == "tiny-abs")
    return "NOT EQUIVALENT" if broken else "EQUIVALENT"


class Pace:
    """A student's think time before each click: uniform in ``[low, high]`` seconds, seeded per student.

    ``Pace(0, 0)`` clicks at once (the stampede of the plain runs). The same seed and student
    number give the same pauses, so a lone run and a class run wait alike.
    """

    def __init__(self, low: float = 0.0, high: float = 0.0, seed: int = 0, student: int = 0):
        self.low, self.high, self.rng = low, high, random.Random(f"{seed}-{student}")

    async def think(self) -> None:
        if self.high > 0:
            await asyncio.sleep(self.rng.uniform(self.low, self.high))


class Session:
    """The few async steps a user takes, each waiting for the script run it causes."""

    def __init__(self, page, url: str, pace: Pace | None = None):
        self.page, self.url, self.problems, self.step, self.ws = page, url, [], "start", None
        self.pace = pace or Pace()
        self.clicks = []   # (step, seconds from the click to the end of the run it caused)
        self.progress = []   # (step, seconds, first progress in view from the click or None, training text seen)
        page.on("websocket", lambda ws: setattr(self, "ws", ws))
        page.on("dialog", lambda d: (self.problems.append(f"dialog: {d.message}"), asyncio.ensure_future(d.dismiss())))
        page.on("pageerror", lambda e: self.problems.append(f"javascript: {e}"))

    async def settle(self):
        app = self.page.locator("[data-testid='stApp']")
        await app.and_(self.page.locator("[data-test-connection-state='CONNECTED']")).wait_for(
            state="attached", timeout=STEP_MS)
        await app.and_(self.page.locator("[data-test-script-state='notRunning']")).wait_for(
            state="attached", timeout=STEP_MS)

    async def seen(self, since_ms: float) -> tuple[float | None, bool]:
        """The first progress in view after ``since_ms`` (the page's clock), in s from then; whether training showed."""
        shown, training = await self.page.evaluate(
            "(t) => [(window.__plProgress || []).find(x => x >= t), (window.__plTraining || []).some(x => x >= t)]",
            since_ms)
        return (None if shown is None else (shown - since_ms) / 1000), bool(training)

    async def open(self, path: str):
        self.step = f"open {path}"
        await self.pace.think()
        start = time.perf_counter()
        await self.page.goto(f"{self.url}/{path}", wait_until="domcontentloaded", timeout=STEP_MS)
        await self.settle()  # a new page's script state goes initial -> running -> notRunning
        seconds = time.perf_counter() - start
        self.clicks.append((self.step, seconds))
        self.progress.append((self.step, seconds, *await self.seen(0.0)))   # a new page's clock starts at the click

    async def act(self, action, think: bool = True):
        """Think, do ``action`` and wait for the end of the script run it causes."""
        if think:
            await self.pace.think()
        since = await self.page.evaluate("performance.now()")
        start = time.perf_counter()
        async with self.ws.expect_event("framereceived", predicate=run_finished, timeout=STEP_MS):
            await action()
        await self.settle()
        self.clicks.append((self.step, time.perf_counter() - start))
        self.progress.append((self.step, self.clicks[-1][1], *await self.seen(since)))

    def named(self, role: str, label: str):
        return self.page.get_by_role(role, name=re.compile("^" + re.escape(label))).first

    async def radio(self, label: str, option: str):
        self.step = f"{label} = {option}"
        await self.act(lambda: self.named("radiogroup", label).get_by_text(option, exact=True).click())

    async def select(self, label: str, option: str):
        self.step = f"{label} = {option}"
        await self.pace.think()
        start = time.perf_counter()   # the click that opens the list is part of the choice
        await self.named("combobox", label).click()
        await self.act(lambda: self.page.get_by_role("option", name=option, exact=True).click(), think=False)
        self.clicks[-1] = (self.step, time.perf_counter() - start)
        self.progress[-1] = (self.step, self.clicks[-1][1], *self.progress[-1][2:])

    async def check_clean(self, where: str):
        if await self.page.get_by_test_id("stException").count():
            text = await self.page.get_by_test_id("stException").first.inner_text()
            self.problems.append(f"exception on {where}: {text[:300]}")


def settings(i: int, model: str) -> dict:
    """Student ``i``'s settings: every mask x positions pair and both datasets, in turn."""
    mask = "off" if i % 2 else "on"
    positions = "continuous" if i % 4 >= 2 else "reset"
    return {"user": i, "model": model, "mask": mask, "positions": positions, "dataset": DATASETS[i % len(DATASETS)],
            "expected_verdict": expected_verdict(model, mask, positions)}


async def one_user(browser, url: str, i: int, model: str, t0: float, pace: Pace | None = None) -> dict:
    result = {**settings(i, model), "client": "browser"}
    mask, positions, dataset = result["mask"], result["positions"], result["dataset"]
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(STEP_MS)   # a click waits as long as a step: 2 cores, 11 browsers
    await context.add_init_script(PROGRESS_JS)
    s = Session(await context.new_page(), url, pace)
    try:
        await s.open("leakage_lab")
        s.step = "tick 'Skip predictions'"
        await s.act(lambda: s.page.get_by_text("Skip predictions", exact=False).first.click())
        await s.select("Scenario", "Advanced: set every switch yourself")   # the free grid, unfolded
        if model != "tiny-rope":
            await s.select("Model", MODEL_LABELS[model])
        if mask != "on":
            await s.radio("Attention mask", mask)
        if positions != "reset":
            await s.radio("Position ids", positions)
        s.step = "read the verdict"
        verdict = await s.page.get_by_text(re.compile(r"^Verdict: ")).first.inner_text(timeout=STEP_MS)
        result["verdict"] = re.match(r"Verdict: ([A-Z ]+)\.", verdict)[1]
        result["verdict_seconds"] = round(time.perf_counter() - t0, 2)
        if TRAIN:
            s.step = "Train both"
            # the training demo is the step 'Train with the mask off' (a tab: the click mounts it, no rerun)
            await s.page.get_by_role("tab", name=re.compile("Train with the mask off")).click()
            await s.act(lambda: s.page.get_by_role("button", name="Train both").click())
            await s.page.get_by_text("Train loss, mask off").first.wait_for(timeout=STEP_MS)
        await s.check_clean("leakage_lab")
        await s.open("dataset_explorer")
        if dataset != "support-tickets":
            await s.select("Dataset", dataset)
        s.step = "read the document count"
        metric = s.page.get_by_test_id("stMetric").filter(has_text=re.compile(r"^Documents"))
        result["documents"] = await metric.first.get_by_test_id("stMetricValue").inner_text(timeout=STEP_MS)
        await s.check_clean("dataset_explorer")
    except Exception as e:  # noqa: BLE001  (a user that gets stuck is a result, not a crash)
        s.problems.append(f"at step {s.step!r}: {type(e).__name__}: {str(e).splitlines()[0][:300]}")
        shot = ROOT / "artifacts" / f"concurrent-user-{i}-failed.png"
        shot.parent.mkdir(exist_ok=True)
        await s.page.screenshot(path=str(shot))
        result["screenshot"] = str(shot.relative_to(ROOT))
    result["seconds"] = round(time.perf_counter() - t0, 2)
    result["problems"] = s.problems
    result["clicks"] = [(step, round(sec, 3)) for step, sec in s.clicks]
    result["progress"] = [(step, round(sec, 3), None if first is None else round(first, 2), trained)
                          for step, sec, first, trained in s.progress]
    await context.close()
    return result


async def protocol_user(url: str, i: int, model: str, t0: float, pace: Pace | None = None) -> dict:
    """Student ``i`` through the same clicks as ``one_user``, over the websocket protocol (no browser).

    It reads what a browser user reads, from the elements the server sends: the verdict box,
    the training metrics, the document count; an exception or error box is a problem.
    """
    result = {**settings(i, model), "client": "protocol"}
    mask, positions, dataset = result["mask"], result["positions"], result["dataset"]
    pace, clicks, progress, problems, step = pace or Pace(), [], [], [], "connect"
    s = ProtocolSession(url, timeout_s=STEP_MS / 1000)

    async def click(name: str, action, *args):
        nonlocal step
        step = name
        await pace.think()
        clicks.append((name, await action(*args)))
        first = s.last_progress_s
        progress.append((name, round(clicks[-1][1], 3), None if first is None else round(first, 2),
                         any(TRAINING in t for t in s.last_progress_texts)))
        problems.extend(f"on {name}: {e[:300]}" for e in s.exceptions() + s.alerts("error"))

    try:
        await s.connect()
        await click("open leakage_lab", s.open, "leakage_lab", True)   # a fresh tab: the frontend's files too
        await click("tick 'Skip predictions'", s.checkbox, "Skip predictions", True)
        await click("Scenario = Advanced: set every switch yourself", s.select, "Scenario",
                    "Advanced: set every switch yourself")
        if model != "tiny-rope":
            await click(f"Model = {MODEL_LABELS[model]}", s.select, "Model", MODEL_LABELS[model])
        if mask != "on":
            await click(f"Attention mask = {mask}", s.radio, "Attention mask", mask)
        if positions != "reset":
            await click(f"Position ids = {positions}", s.radio, "Position ids", positions)
        step = "read the verdict"
        verdicts = [m[1] for a in s.alerts() if (m := re.match(r"Verdict: ([A-Z ]+)\.", a))]
        if not verdicts:
            raise ProtocolError(f"no verdict on the page; its alerts: {s.alerts()}")
        result["verdict"] = verdicts[0]
        result["verdict_seconds"] = round(time.perf_counter() - t0, 2)
        if TRAIN:
            await click("Train both", s.click, "Train both")
            step = "read the training metrics"
            s.metric("Train loss, mask off")
        await click("open dataset_explorer", s.goto, "dataset_explorer")
        if dataset != "support-tickets":
            await click(f"Dataset = {dataset}", s.select, "Dataset", dataset)
        step = "read the document count"
        result["documents"] = s.metric("Documents")
    except Exception as e:  # noqa: BLE001  (a user that gets stuck is a result, not a crash)
        problems.append(f"at step {step!r}: {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}")
    finally:
        await s.close()
    result["seconds"] = round(time.perf_counter() - t0, 2)
    result["problems"] = problems
    result["clicks"] = [(name, round(sec, 3)) for name, sec in clicks]
    result["progress"] = progress
    result["messages"], result["asset_bytes"] = s.messages, s.asset_bytes
    return result


def bomb_files() -> list[tuple[str, bytes]]:
    """Small files that decode to far more than the lab's read budget allows."""
    import io

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    def parquet(table) -> bytes:
        buf = io.BytesIO()
        pq.write_table(table, buf)
        return buf.getvalue()

    words = pa.DictionaryArray.from_arrays(pa.array(np.zeros(1000, np.int32)), pa.array(["x" * 2_000_000]))
    return [("rows.parquet", parquet(pa.table({"length": pa.array(np.ones(20_000_000, np.int64))}))),
            ("dictionary.parquet", parquet(pa.table({"text": words})))]


async def bomber(browser, url: str, t0: float) -> dict:
    """One more student: uploads each bomb to the Dataset explorer and reads the error it gets."""
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(STEP_MS)   # a click waits as long as a step: 2 cores, 11 browsers
    s = Session(await context.new_page(), url)
    result = {"user": "bomber", "errors": []}
    try:
        await s.open("dataset_explorer")
        for name, data in bomb_files():
            s.step = f"upload {name}"
            uploader = s.page.get_by_test_id("stFileUploader").first.locator("input[type='file']")
            upload = {"name": name, "mimeType": "application/octet-stream", "buffer": data}
            await s.act(lambda u=uploader, f=upload: u.set_input_files(files=f))
            button = s.page.get_by_role("button", name="Analyse this file")
            if await button.count():
                await s.act(lambda b=button: b.click())
            alert = s.page.get_by_test_id("stAlertContentError").filter(has_text=name).first
            result["errors"].append(f"{name}: {(await alert.inner_text(timeout=2 * STEP_MS))[:160]}")
        await s.check_clean("dataset_explorer")
    except Exception as e:  # noqa: BLE001
        s.problems.append(f"at step {s.step!r}: {type(e).__name__}: {str(e).splitlines()[0][:300]}")
    result["seconds"] = round(time.perf_counter() - t0, 2)
    result["problems"] = s.problems
    await context.close()
    return result


async def all_users(url: str, users: int, model: str, bomb: bool = False) -> tuple[list[dict], float]:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        t0 = time.perf_counter()
        extra = [bomber(browser, url, t0)] if bomb else []
        results = await asyncio.gather(*(one_user(browser, url, i, model, t0) for i in range(users)), *extra)
        wall = time.perf_counter() - t0
        await browser.close()
    return list(results), wall


# ---------------------------------------------------------------- the run
def expected_documents() -> dict[str, str]:
    from packing_core import load_lengths

    return {name: f"{len(load_lengths(name)):,}" for name in DATASETS}


def pick_model(model: str) -> str:
    if model != "auto":
        return model
    from packing_core.models import pretrained_status

    return PRETRAINED if pretrained_status()[0] else DEFAULT_MODEL


def run(url: str, pid: int, log_path: Path | None, users: int, model: str, rounds: int = 1,
        bomb: bool = False) -> dict:
    """Run ``users`` sessions against the server at ``url`` (process ``pid``) and judge them.

    The first round meets a cold server (imports, model load, empty caches); a second round
    of new sessions shows the steady state.
    """
    machine = machine_info()
    documents = expected_documents()
    log_start = log_path.stat().st_size if log_path else 0
    rss_before, cpu_before = tree_rss(pid), tree_cpu_seconds(pid)
    sampler = PeakRss(pid)
    sampler.start()
    try:
        bombed = None
        rounds_run = [asyncio.run(all_users(url, users, model)) for _ in range(rounds)]
        bombed = asyncio.run(all_users(url, users, model, bomb=True)) if bomb else None
    finally:
        peak = sampler.stop()
    results, wall = rounds_run[0]
    rss_after, server_cpu = tree_rss(pid), tree_cpu_seconds(pid) - cpu_before
    new_log = ""
    if log_path:
        with open(log_path, "rb") as f:
            f.seek(log_start)
            new_log = f.read().decode(errors="replace")
    for r in (r for users_run, _ in rounds_run for r in users_run):
        r["ok"] = (not r["problems"] and r.get("verdict") == r["expected_verdict"]
                   and r.get("documents") == documents[r["dataset"]])
    seconds = [r["seconds"] for r in results]
    loads = len(LOAD_BAR.findall(new_log)) if log_path else None
    mb = 2**20
    summary = {
        "users": users, "model": model, "wall_seconds": round(wall, 2),
        "seconds_p50": round(statistics.median(seconds), 2), "seconds_max": round(max(seconds), 2),
        "server_rss_before_mb": round(rss_before / mb), "server_rss_peak_mb": round(peak / mb),
        "server_rss_after_mb": round(rss_after / mb), "server_rss_growth_mb": round((peak - rss_before) / mb),
        # the browsers share the machine: server CPU seconds tell how much of the wait is the server's
        "server_cpu_seconds": round(server_cpu, 1),
        "model_loads": loads, "server_tracebacks": new_log.count("Traceback"),
        "users_ok": sum(r["ok"] for r in results),
        "goal_growth_mb": GOAL_GROWTH_MB, "goal_model_loads": 1,
        "machine": machine.finished().to_dict(),
        "per_user": results,
    }
    summary["warm_rounds"] = [{
        "wall_seconds": round(w, 2), "users_ok": sum(r["ok"] for r in later),
        "seconds_p50": round(statistics.median(r["seconds"] for r in later), 2),
        "seconds_max": round(max(r["seconds"] for r in later), 2),
        "problems": [p for r in later for p in r["problems"]]} for later, w in rounds_run[1:]]
    every_round_ok = all(r["ok"] for users_run, _ in rounds_run for r in users_run)
    summary["goals_met"] = (every_round_ok and summary["server_tracebacks"] == 0
                            and summary["server_rss_growth_mb"] < GOAL_GROWTH_MB
                            and (loads is None or model != PRETRAINED or loads <= 1))
    if bombed is not None:
        others = [r for r in bombed[0] if r["user"] != "bomber"]
        bomber_result = next(r for r in bombed[0] if r["user"] == "bomber")
        for r in others:
            r["ok"] = (not r["problems"] and r.get("verdict") == r["expected_verdict"]
                       and r.get("documents") == documents[r["dataset"]])
        calm = rounds_run[-1][0]   # the last warm round without the bomb
        p50 = lambda rs: statistics.median(r["seconds"] for r in rs)  # noqa: E731
        top = lambda rs: max(r["seconds"] for r in rs)  # noqa: E731
        summary["bomb"] = {
            "users_ok": sum(r["ok"] for r in others), "seconds_p50": round(p50(others), 2),
            "seconds_max": round(top(others), 2), "calm_seconds_p50": round(p50(calm), 2),
            "calm_seconds_max": round(top(calm), 2), "slowdown_p50": round(p50(others) / p50(calm), 2),
            "slowdown_max": round(top(others) / top(calm), 2), "bomber_errors": bomber_result["errors"],
            "bomber_problems": bomber_result["problems"], "goal_slowdown": 1.5,
        }
        b = summary["bomb"]
        summary["goals_met"] = (summary["goals_met"] and b["users_ok"] == users and not b["bomber_problems"]
                                and len(b["bomber_errors"]) == len(bomb_files())
                                and b["slowdown_p50"] <= 1.5 and b["slowdown_max"] <= 1.5)
    return summary


def p95(values) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, int(round(0.95 * (len(v) - 1))))]


async def students(url: str, who: list[tuple[int, str]], model: str, think: tuple[float, float] = (0, 0),
                   seed: int = 0, one_by_one: bool = False) -> tuple[list[dict], float]:
    """Run each ``(student, client)`` of ``who`` ("browser" or "protocol"), together or ``one_by_one``."""
    from playwright.async_api import async_playwright

    pw = browser = None
    if any(client == "browser" for _, client in who):
        pw = await async_playwright().start()
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
    try:
        t0 = time.perf_counter()

        def user(i: int, client: str):
            pace = Pace(*think, seed=seed, student=i)
            return (one_user(browser, url, i, model, t0, pace) if client == "browser" else
                    protocol_user(url, i, model, t0, pace))

        if one_by_one:
            results = [await user(i, client) for i, client in who]
        else:
            results = await asyncio.gather(*(user(i, client) for i, client in who))
        wall = time.perf_counter() - t0
    finally:
        if browser is not None:
            await browser.close()
            await pw.stop()
    return list(results), wall


def _browsers_apart(url: str, who: list[tuple[int, str]], model: str, think: tuple[float, float], seed: int,
                    one_by_one: bool, settings: tuple[bool, int, int, int]) -> tuple[list[dict], float]:
    """``students`` in a process of their own, at a lower priority and on ``BROWSER_CPUS`` of the cores
    (its Playwright driver and Chromium inherit both).

    Playwright hands every websocket frame of every browser to this Python process; in the
    protocol clients' own event loop that work would delay their reading of the server's
    answers. In a classroom each browser runs on its student's laptop; here they share the
    server's cores: at nice ``BROWSER_NICE`` on the last ``BROWSER_CPUS`` cores they take the CPU the
    server leaves, and never all of it.
    """
    global TRAIN, STEP_MS, BROWSER_NICE, BROWSER_CPUS
    TRAIN, STEP_MS, BROWSER_NICE, BROWSER_CPUS = settings
    if BROWSER_NICE > 0:
        os.nice(BROWSER_NICE)
    cpus = sorted(os.sched_getaffinity(0))
    if 0 < BROWSER_CPUS < len(cpus):   # the last cores only: the server keeps the others to itself
        os.sched_setaffinity(0, cpus[-BROWSER_CPUS:])
    return asyncio.run(students(url, who, model, think, seed, one_by_one))


def browsers_apart(url: str, who, model: str, think=(0, 0), seed: int = 0, one_by_one: bool = False):
    """Start ``_browsers_apart`` in a forked process; returns its future (a ([results], wall) pair)."""
    import concurrent.futures
    import multiprocessing

    pool = concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"))
    future = pool.submit(_browsers_apart, url, who, model, think, seed, one_by_one,
                         (TRAIN, STEP_MS, BROWSER_NICE, BROWSER_CPUS))
    pool.shutdown(wait=False)   # the worker ends once its one task is done
    return future


def step_name(step: str) -> str:
    """A click's kind, without the value chosen: 'Attention mask = off' -> 'Attention mask'."""
    return step.split(" = ")[0]


def click_figures(lone: list[dict], crowd: list[dict]) -> dict:
    """p50/p95 click latency of the lone runs and of the class, their ratio, and the same per kind of click."""
    lone_s = [sec for r in lone for _, sec in r["clicks"]]
    class_s = [sec for r in crowd for _, sec in r["clicks"]]
    if not lone_s or not class_s:
        return {"clicks": len(class_s), "lone_clicks": len(lone_s)}
    out = {"lone_click_p50": round(statistics.median(lone_s), 3), "lone_click_p95": round(p95(lone_s), 3),
           "class_click_p50": round(statistics.median(class_s), 3), "class_click_p95": round(p95(class_s), 3),
           "lone_clicks": len(lone_s), "clicks": len(class_s), "users_ok": sum(r["ok"] for r in crowd),
           "users": len(crowd)}
    out["p95_ratio"] = round(out["class_click_p95"] / out["lone_click_p95"], 2)
    by_step: dict[str, dict[str, list[float]]] = {}
    for where, runs in (("lone", lone), ("class", crowd)):
        for r in runs:
            for step, sec in r["clicks"]:
                by_step.setdefault(step_name(step), {"lone": [], "class": []})[where].append(sec)
    out["steps"] = {name: {f"{where}_{q}": round(f(v), 3) for where, v in d.items() if v
                           for q, f in (("p50", statistics.median), ("p95", p95))}
                    for name, d in by_step.items()}
    return out


def dead_time(runs: list[dict]) -> dict:
    """Clicks over ``GOAL_DEAD_S`` with no progress by then, and training after a click that is not "Train both".

    A browser's progress is a bar or spinner inside its window (sampled every 0.1 s); a protocol
    client's is a bar or spinner the server sent (the browser would draw it). 0.15 s of slack
    covers the sampling, as in benchmarks/teacher_tour.py. A fresh browser's first page is listed
    apart (``first_page``): until the frontend's 2.3 MB of scripts are fetched and compiled, no
    page can draw anything; the protocol client's first page counts those files and is judged.
    """
    slow, first_page, trained, over = [], [], [], 0
    for r in runs:
        for i, (step, sec, first, training) in enumerate(r.get("progress", [])):
            if sec > GOAL_DEAD_S:
                over += 1
                if first is None or first > GOAL_DEAD_S + 0.15:
                    line = (f"user {r['user']} ({r['client']}) {step}: {sec:.1f} s, progress "
                            f"{'never' if first is None else f'after {first:.1f} s'}")
                    (first_page if i == 0 and r["client"] == "browser" else slow).append(line)
            if training and step != "Train both":
                trained.append(f"user {r['user']} ({r['client']}) {step}")
    return {"clicks": sum(len(r.get("progress", [])) for r in runs), "clicks_over_goal": over,
            "slow_without_progress": slow, "slow_first_page_of_a_fresh_browser": first_page,
            "trained_without_button": trained}


def class_run(url: str, pid: int, log_path: Path | None, users: int, model: str, browsers: int = 5,
              think: tuple[float, float] = (1.0, 5.0), seed: int = 0, lone: int = 4) -> dict:
    """A lesson for a class of ``users``: a cold visitor, a lone student, then the whole class.

    The class is ``browsers`` real Chromium sessions (in a process of their own:
    ``browsers_apart``) and the rest protocol clients (benchmarks/_st_client.py; each
    downloads the frontend's files once, as a browser with an empty cache does). The
    browsers prove the real frontend works under the load; the
    protocol clients put the server's own per-click work on it (the same BackMsg reruns, the
    same script runs, the same ForwardMsg deltas) without thirty renderers on the server's two
    cores: in a classroom each student's browser runs on the student's own laptop.

    Students follow the teacher at their own pace: before each click a student thinks for a
    time drawn uniformly from ``think`` seconds (seeded per student: ``Pace``). Each click is
    timed from the click to the ``script_finished`` of the run it caused (a browser user also
    waits until the page says it is no longer running); the think time is not in it.

    1. a cold visitor: students 0..3 one after the other, no think time, protocol client
       (imports, the model load, every cache the lesson reads);
    2. a lone student, once per client: students 0..``lone``-1 one after the other, with the
       think time (the four mask x positions settings and both datasets: the class's clicks);
    3. the class: students 0..``users``-1 at once, the first ``browsers`` of them in Chromium.

    Goals: every session completes with the right answers (browsers and protocol clients); the
    protocol clients' p95 click latency <= 3x a lone protocol student's (the server's latency;
    the browsers' own figures are reported beside it: they also time rendering on a core shared
    with the other browsers); the server's memory (its process tree, peak) <= 2 GiB; SmolLM2
    loaded at most once; no traceback.
    """
    documents = expected_documents()
    browsers = max(0, min(browsers, users))
    log_start = log_path.stat().st_size if log_path else 0
    sampler = PeakRss(pid)
    sampler.start()
    machine = machine_info()
    load = [load_average()]
    clients = ["protocol"] + (["browser"] if browsers else [])
    try:
        cold, cold_wall = asyncio.run(students(url, [(i, "protocol") for i in range(4)], model, one_by_one=True))
        lone_runs = {"protocol": asyncio.run(students(url, [(i, "protocol") for i in range(lone)], model, think, seed,
                                                      one_by_one=True))[0]}
        if browsers:   # the browsers always in their own process, alone as in the class
            lone_runs["browser"] = browsers_apart(url, [(i, "browser") for i in range(lone)], model, think, seed,
                                                  one_by_one=True).result()[0]
        load.append(load_average())
        cpu_before = tree_cpu_seconds(pid)
        in_chromium = browsers_apart(url, [(i, "browser") for i in range(browsers)], model, think, seed) \
            if browsers else None
        crowd, wall = asyncio.run(students(url, [(i, "protocol") for i in range(browsers, users)], model, think, seed))
        if in_chromium is not None:
            seen, browser_wall = in_chromium.result()
            crowd, wall = seen + crowd, max(wall, browser_wall)
        server_cpu = tree_cpu_seconds(pid) - cpu_before
        load.append(load_average())
    finally:
        peak = sampler.stop()
    new_log = ""
    if log_path:
        with open(log_path, "rb") as f:
            f.seek(log_start)
            new_log = f.read().decode(errors="replace")
    everyone = cold + [r for runs in lone_runs.values() for r in runs] + crowd
    for r in everyone:
        r["ok"] = (not r["problems"] and r.get("verdict") == r["expected_verdict"]
                   and r.get("documents") == documents[r["dataset"]])
    per_client = {c: click_figures(lone_runs[c], [r for r in crowd if r["client"] == c]) for c in clients}
    # Dead time, per client and phase. Judged: the protocol clients (whether the server answers a
    # long run with progress) and a lone Chromium (one student's browser, as on the student's laptop);
    # the class's Chromium clicks also wait for five renderers on one niced core (reported).
    phases = {"cold visitor": cold, **{f"lone {c}": runs for c, runs in lone_runs.items()}, "class": crowd}
    dead = {f"{phase}, {c}": dead_time([r for r in runs if r["client"] == c])
            for phase, runs in phases.items() for c in clients if any(r["client"] == c for r in runs)}
    judged = [k for k in dead if k.endswith("protocol") or k == "lone browser, browser"]
    all_clicks = [sec for r in crowd for _, sec in r["clicks"]]
    loads = len(LOAD_BAR.findall(new_log)) if log_path else None
    goal = per_client["protocol"]
    s = {
        "users": users, "browsers": browsers, "protocol_clients": users - browsers, "model": model,
        "train_both": TRAIN, "think_seconds": list(think), "seed": seed, "lone_students": lone,
        "browser_nice": BROWSER_NICE, "browser_cpus": BROWSER_CPUS,
        "wall_seconds": round(wall, 2), "cold_visitor_seconds": round(cold_wall, 2),
        # the figures of the goal: the protocol clients against a lone protocol student
        "lone_click_p50": goal.get("lone_click_p50"), "lone_click_p95": goal.get("lone_click_p95"),
        "class_click_p50": goal.get("class_click_p50"), "class_click_p95": goal.get("class_click_p95"),
        "p95_ratio": goal.get("p95_ratio"), "clients": per_client,
        "class_clicks": len(all_clicks), "users_ok": sum(r["ok"] for r in crowd),
        "server_cpu_seconds": round(server_cpu, 1),
        "server_cpu_per_click": round(server_cpu / max(1, len(all_clicks)), 3),
        "server_rss_peak_mb": round(peak / 2**20), "model_loads": loads,
        "server_tracebacks": new_log.count("Traceback"), "load_average": load,
        "dead_time": dead, "dead_time_judged": judged, "goal_dead_s": GOAL_DEAD_S,
        "goal_p95_ratio": GOAL_CLASS_P95, "goal_rss_mb": GOAL_CLASS_RSS_MB,
        "machine": machine.finished().to_dict(),
        "problems": [f"user {r['user']} ({r['client']}): {p}" for r in everyone for p in r["problems"]],
        "per_user": crowd,
    }
    # The latency goal is the server's: the protocol clients' clicks. A Chromium click also times
    # its own rendering, on a core it shares with four other browsers (reported, not judged).
    ratios_met = goal.get("p95_ratio") is not None and goal["p95_ratio"] <= GOAL_CLASS_P95
    no_dead_time = all(not dead[k]["slow_without_progress"] for k in judged) \
        and not any(d["trained_without_button"] for d in dead.values())
    s["goals_met"] = (s["users_ok"] == users and all(r["ok"] for r in everyone) and s["server_tracebacks"] == 0
                      and ratios_met and no_dead_time and s["server_rss_peak_mb"] <= GOAL_CLASS_RSS_MB
                      and (loads is None or model != PRETRAINED or loads <= 1))
    return s


def _class_table(s: dict) -> str:
    lines = [f"a class of {s['users']} on model {s['model']} ({s['browsers']} in Chromium, {s['protocol_clients']} "
             f"protocol clients; think time {s['think_seconds'][0]}-{s['think_seconds'][1]} s, seed {s['seed']}): "
             f"{s['users_ok']}/{s['users']} sessions complete, wall {s['wall_seconds']} s",
             f"load average       {' -> '.join(f'{x[0]:.1f}' for x in s['load_average'] if x)} (start, after the lone runs, "
             "after the class)"]
    for client, f in s["clients"].items():
        if "p95_ratio" not in f:
            continue
        judged = " (the goal)" if client == "protocol" else " (reported: rendering included)"
        lines += [f"{client:<9} clicks{judged}   lone p50 {f['lone_click_p50']} s  p95 {f['lone_click_p95']} s "
                  f"({f['lone_clicks']} clicks)",
                  f"                   class p50 {f['class_click_p50']} s  p95 {f['class_click_p95']} s "
                  f"({f['clicks']} clicks): {f['p95_ratio']}x (goal <= {s['goal_p95_ratio']}x)"]
        lines += [f"                     {name:<32} lone p50 {v.get('lone_p50', '-')}  class p50 "
                  f"{v.get('class_p50', '-')}  p95 {v.get('class_p95', '-')}" for name, v in f["steps"].items()]
    for where, d in s["dead_time"].items():
        judged = "judged" if where in s["dead_time_judged"] else "reported"
        lines += [f"dead time, {where} ({judged}): {d['clicks_over_goal']} of {d['clicks']} clicks over "
                  f"{s['goal_dead_s']} s; without progress by then: {len(d['slow_without_progress'])} (and "
                  f"{len(d['slow_first_page_of_a_fresh_browser'])} first pages of a fresh browser); "
                  f"training without the button: {len(d['trained_without_button'])}",
                  *(f"                   {x}" for x in d["slow_without_progress"][:8] + d["trained_without_button"][:8])]
    lines += [f"server CPU         {s['server_cpu_seconds']} s over the class, {s['server_cpu_per_click']} s per click",
              f"server memory      peak {s['server_rss_peak_mb']} MB (goal <= {s['goal_rss_mb']})",
              f"model loads        {s['model_loads']} (goal <= 1)   server tracebacks {s['server_tracebacks']}",
              *(f"problem: {p}" for p in s["problems"][:10]),
              f"\ngoals met: {'yes' if s['goals_met'] else 'NO'}"]
    return "\n".join(lines)


def _table(s: dict) -> str:
    lines = [f"{s['users']} users, model {s['model']}: {s['users_ok']}/{s['users']} ok, wall {s['wall_seconds']} s",
             f"time to complete   p50 {s['seconds_p50']} s   max {s['seconds_max']} s   (first round: a fresh server is cold)",
             *(f"                   p50 {w['seconds_p50']} s   max {w['seconds_max']} s   (next round: new sessions, warm caches)"
               for w in s["warm_rounds"]),
             f"server RSS         before {s['server_rss_before_mb']} MB   peak {s['server_rss_peak_mb']} MB   "
             f"growth {s['server_rss_growth_mb']} MB (goal < {s['goal_growth_mb']})",
             f"server CPU         {s['server_cpu_seconds']} s over all rounds (the browsers run on the same machine)",
             f"model loads        {s['model_loads']} (goal <= 1 for smollm2)   server tracebacks {s['server_tracebacks']}",
             "", "user  mask  positions   dataset          verdict          documents  seconds  ok"]
    for r in s["per_user"]:
        lines.append(f"{r['user']:>4}  {r['mask']:<4}  {r['positions']:<10}  {r['dataset']:<15}  "
                     f"{r.get('verdict', '-'):<15}  {r.get('documents', '-'):>9}  {r['seconds']:>7}  "
                     f"{'yes' if r['ok'] else 'NO: ' + '; '.join(r['problems'])[:200]}")
    if "bomb" in s:
        b = s["bomb"]
        lines += ["", f"with one bomber: {b['users_ok']}/{s['users']} ok, p50 {b['seconds_p50']} s (calm "
                  f"{b['calm_seconds_p50']} s, x{b['slowdown_p50']}), max {b['seconds_max']} s (calm "
                  f"{b['calm_seconds_max']} s, x{b['slowdown_max']}); goal <= x{b['goal_slowdown']}",
                  *(f"  bomber got: {e}" for e in b["bomber_errors"]),
                  *(f"  bomber problem: {p}" for p in b["bomber_problems"])]
    lines.append(f"\ngoals met: {'yes' if s['goals_met'] else 'NO'}")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--users", type=int, default=10)
    p.add_argument("--model", default="auto", choices=("auto", *MODEL_LABELS),
                   help="auto: smollm2 when installed, else tiny-rope")
    p.add_argument("--url", help="use this running server instead of starting one (needs --pid)")
    p.add_argument("--pid", type=int, help="process id of the server at --url, for its memory")
    p.add_argument("--log", type=Path, help="the server's log, to count model loads and tracebacks")
    p.add_argument("--rounds", type=int, default=2, help="1 cold round, then warm rounds of new sessions")
    p.add_argument("--bomb", action="store_true",
                   help="add a warm round in which one more session uploads decompression bombs")
    p.add_argument("--class", dest="class_", action="store_true",
                   help="a lesson for a class of --users: a lone user first, then all at once; p95 click latency")
    p.add_argument("--train", action="store_true", help="with --class: every user also presses 'Train both'")
    p.add_argument("--browsers", type=int, default=5,
                   help="with --class: how many of the class are real Chromium sessions; the rest speak the "
                        "websocket protocol (benchmarks/_st_client.py)")
    p.add_argument("--think", default="1,5", metavar="LOW,HIGH",
                   help="with --class: a student's think time before each click, uniform in seconds (0,0: at once)")
    p.add_argument("--seed", type=int, default=0, help="with --class: the seed of the think times")
    p.add_argument("--browser-nice", type=int, default=10,
                   help="with --class: run Chromium at this nice value (0: the server's own priority)")
    p.add_argument("--browser-cpus", type=int, default=1,
                   help="with --class: Chromium runs on this many of the machine's last cores (0: on all of them)")
    p.add_argument("--lone", type=int, default=4, help="with --class: how many lone sessions, one after the other")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    global STEP_MS, TRAIN, BROWSER_NICE, BROWSER_CPUS
    if args.class_:
        # thirty sessions and their browsers on two cores: a step may wait long
        STEP_MS, TRAIN, BROWSER_NICE, BROWSER_CPUS = 300_000, args.train, args.browser_nice, args.browser_cpus
    try:
        think = tuple(float(x) for x in args.think.split(","))
        if len(think) != 2 or not 0 <= think[0] <= think[1]:
            raise ValueError
    except ValueError:
        p.error(f"--think {args.think!r}: give two numbers of seconds, LOW,HIGH with 0 <= LOW <= HIGH, e.g. 1,5")
    if args.url and not args.pid:
        p.error("--url needs --pid (the server process, to measure its memory)")
    if not Path(CHROMIUM).is_file() and not (args.class_ and args.browsers == 0):
        print(f"error: {CHROMIUM} not found; apt-get install -y chromium", file=sys.stderr)
        return 2
    model = pick_model(args.model)
    proc = None
    if args.url:
        url, pid, log = args.url, args.pid, args.log
    else:
        log = ROOT / "artifacts" / "concurrent-users-server.log"
        log.parent.mkdir(exist_ok=True)
        server = start_streamlit(log)
        proc, url, pid = server, server.url, server.pid
    try:
        summary = (class_run(url, pid, log, args.users, model, args.browsers, think, args.seed, args.lone)
                   if args.class_ else
                   run(url, pid, log, args.users, model, args.rounds, bomb=args.bomb))
    finally:
        if proc is not None:
            proc.stop()
    print(json.dumps(summary, indent=2) if args.json else (_class_table if args.class_ else _table)(summary))
    return 0 if summary["goals_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
