"""Shared fixtures: the artefacts folder, one Streamlit server per test session, and Chromium.

The browser tests follow Streamlit's own e2e suite: start ``streamlit run app.py``
headless on a free port, poll ``/_stcore/health`` until it answers ``ok``, and after
every interaction wait until the app says its script has finished running, never a
fixed sleep::

    def test_something(app_page):
        app_page.open("padded_vs_packed")          # goto + wait for the script to finish
        app_page.select("Strategy", "bfd")         # change a widget + wait again
        app_page.assert_healthy()                  # no exception box, no dialog, no JS error

Without Playwright or Chromium every browser test is skipped with one reason that
``-ra`` lists in the summary. Screenshots land in ``artifacts/screenshots/``.
"""
from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "artifacts"
CHROMIUM = os.environ.get("PACKING_LAB_CHROMIUM", "/usr/bin/chromium")
SERVER_START_S = 90       # a cold 2-core machine imports torch + transformers first
SCRIPT_RUN_MS = 120_000   # one rerun may load a model the first time
VIEWPORT = {"width": 1400, "height": 1000}


# ---------------------------------------------------------------- required vs optional
def under_ci() -> bool:
    """CI sets ``CI=true``: there, everything the project requires must be present."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def skip_or_fail(reason: str) -> None:
    """Skip a test whose requirement is missing, with ``reason`` (the install step).

    On a developer's machine that is a skip listed by ``-ra``. Under CI the project's
    requirements (the real model, GSM8K, fortunes, Chromium) must be installed by
    ``.ci/run``, so a missing one fails the test instead of hiding behind a skip.
    """
    if under_ci():
        pytest.fail(f"required in CI but missing: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def require_smollm2() -> None:
    """Skip (or, under CI, fail) a test that needs the real pretrained SmolLM2, naming the install step."""
    from packing_core import pretrained_status

    available, message = pretrained_status()
    if not available:
        skip_or_fail(message)


@pytest.fixture(scope="session")
def smollm2_pair(require_smollm2):
    """SmolLM2 and its tokenizer, loaded once per test session."""
    from packing_core import load_pretrained

    return load_pretrained()


# ---------------------------------------------------------------- CUDA
def pytest_collection_modifyitems(config, items):
    """Tests marked ``cuda`` skip with one reason where torch sees no CUDA device."""
    marked = [item for item in items if item.get_closest_marker("cuda")]
    if not marked:
        return
    import torch
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (marker cuda; scripts/gpu_check.sh runs them)")
    for item in marked:
        item.add_marker(skip)


# ---------------------------------------------------------------- artefacts
@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    """``artifacts/`` at the repository root (gitignored): screenshots, server logs, figures."""
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


def save_tiny_llama(folder: Path, vocab_size: int, max_positions: int) -> Path:
    """A real transformers LlamaForCausalLM saved as safetensors in ``folder`` (random init, seed 0, for speed)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=max_positions)
    LlamaForCausalLM(cfg).save_pretrained(folder, safe_serialization=True)
    return folder


# ---------------------------------------------------------------- the server
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
            return r.read().strip() == b"ok"
    except OSError:
        return False


@dataclass
class StreamlitServer:
    """``streamlit run app.py`` in a subprocess; its output goes to ``log_path``."""

    url: str
    process: subprocess.Popen
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=15)


def start_streamlit(log_path: Path, port: int | None = None, timeout_s: float = SERVER_START_S,
                    script: str = "app.py") -> StreamlitServer:
    """Start the app headless on ``port`` (a free one by default) and wait until it is healthy."""
    port = port or free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "streamlit", "run", script, "--server.headless", "true",
           "--server.port", str(port), "--server.address", "127.0.0.1",
           "--browser.gatherUsageStats", "false",
           # Other work may touch the source tree during a run; a rerun mid-test is noise.
           "--server.fileWatcherType", "none", "--server.runOnSave", "false"]
    log = open(log_path, "wb")
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)
    log.close()  # the child holds its own copy of the descriptor
    server = StreamlitServer(f"http://127.0.0.1:{port}", proc, log_path)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with code {proc.returncode}:\n{server.log()[-3000:]}")
        if _healthy(server.url):
            return server
        time.sleep(0.5)
    server.stop()
    raise RuntimeError(f"streamlit was not healthy after {timeout_s:.0f} s:\n{server.log()[-3000:]}")


@pytest.fixture(scope="session")
def streamlit_server(artifacts_dir) -> StreamlitServer:
    """One server for the whole test session, stopped at the end (terminate, then kill)."""
    try:
        server = start_streamlit(artifacts_dir / "streamlit-server.log")
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)
    yield server
    server.stop()


# ---------------------------------------------------------------- the browser
def chromium_path() -> str | None:
    if Path(CHROMIUM).is_file():
        return CHROMIUM
    return shutil.which("chromium") or shutil.which("chromium-browser")


def browser_skip_reason() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "browser tests skipped: playwright not installed; pip install -r requirements-dev.txt"
    if chromium_path() is None:
        return f"browser tests skipped: {CHROMIUM} not found; apt-get install -y chromium"
    return None


@pytest.fixture(scope="session")
def require_browser() -> str:
    """Skip (with the reason in the ``-ra`` summary) unless Playwright and Chromium are here."""
    reason = browser_skip_reason()
    if reason:
        skip_or_fail(reason)
    return chromium_path()


@pytest.fixture(scope="session")
def browser(require_browser):
    """Headless Debian Chromium through Playwright (``playwright install`` is not needed)."""
    from playwright.sync_api import sync_playwright

    pw = sync_playwright().start()
    try:
        b = pw.chromium.launch(executable_path=require_browser, headless=True, args=["--no-sandbox"])
    except Exception as exc:   # a browser that cannot start is a failure, never a skip
        pw.stop()
        pytest.fail(f"Chromium ({require_browser}) could not start: {exc}", pytrace=False)
    yield b
    b.close()
    pw.stop()


def run_finished(payload) -> bool:
    """Is this websocket frame the server's "script finished" message (a full or fragment run)?

    Reading the protocol is exact where the DOM is not: a fast rerun can flip ``stApp`` from
    notRunning to running and back inside one render, and an upload starts its rerun late.
    A run cut short by a newer rerun does not count; the newer one will finish.
    """
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    if not isinstance(payload, (bytes, bytearray)):
        return False
    msg = ForwardMsg.FromString(payload)
    return msg.WhichOneof("type") == "script_finished" and msg.script_finished != ForwardMsg.FINISHED_EARLY_FOR_RERUN


def wait_for_app_run(page, timeout_ms: int = SCRIPT_RUN_MS) -> None:
    """Block until the app is connected and its script has finished running.

    ``stApp`` carries ``data-test-script-state`` (initial -> running -> notRunning) on
    every run, as in Streamlit's own e2e suite; the short first wait lets the last deltas render.
    """
    page.wait_for_timeout(250)
    page.locator("[data-testid='stApp'][data-test-connection-state='CONNECTED']").wait_for(
        state="attached", timeout=timeout_ms)
    page.locator("[data-testid='stApp'][data-test-script-state='notRunning']").wait_for(
        state="attached", timeout=timeout_ms)
    page.locator("[data-testid='stSkeleton']").first.wait_for(state="detached", timeout=timeout_ms)


@dataclass
class AppPage:
    """A Playwright page on the running app, with the waits and checks every test needs."""

    page: object
    server: StreamlitServer
    shots: Path
    dialogs: list[str] = field(default_factory=list)
    js_errors: list[str] = field(default_factory=list)
    log_start: int = 0
    ws: object = None  # the page's current websocket to the server

    def __post_init__(self):
        self.log_start = self.server.log_path.stat().st_size  # judge only what this test causes
        self.page.on("websocket", lambda ws: setattr(self, "ws", ws))

    @property
    def base_url(self) -> str:
        return self.server.url

    def open(self, path: str = "") -> AppPage:
        self.page.goto(f"{self.base_url}/{path.lstrip('/')}", wait_until="domcontentloaded")
        self.page.locator("[data-testid='stAppViewContainer']").wait_for(state="attached", timeout=60_000)
        self.wait()
        return self

    def wait(self) -> None:
        wait_for_app_run(self.page)

    @property
    def main(self):
        return self.page.locator("[data-testid='stMain']")

    def text(self) -> str:
        """The visible text of the main area (the sidebar excluded)."""
        return self.main.inner_text()

    def exceptions(self) -> list[str]:
        return [e.inner_text() for e in self.page.locator("[data-testid='stException']").all()]

    def new_server_log(self) -> str:
        with open(self.server.log_path, "rb") as f:
            f.seek(self.log_start)
            return f.read().decode(errors="replace")

    def assert_healthy(self) -> None:
        """No exception box, no dialog, no JavaScript error, no traceback in the server log."""
        assert self.exceptions() == [], f"the app shows an exception: {self.exceptions()[0][:2000]}"
        assert self.dialogs == [], f"a dialog fired: {self.dialogs}"
        assert self.js_errors == [], f"JavaScript error on the page: {self.js_errors}"
        log = self.new_server_log()
        assert "Traceback" not in log, f"the server logged a traceback:\n{log[-3000:]}"

    def metric(self, label: str) -> str:
        """The value shown by the ``st.metric`` whose label starts with ``label``."""
        box = self.page.locator("[data-testid='stMetric']").filter(
            has=self.page.locator("[data-testid='stMetricLabel']", has_text=re.compile("^" + re.escape(label))))
        return box.first.locator("[data-testid='stMetricValue']").inner_text()

    def alerts(self, kind: str = "error") -> list[str]:
        """Texts of the ``st.error`` (or warning / info / success) boxes in the main area."""
        return [a.inner_text() for a in self.main.locator(f"[data-testid='stAlertContent{kind.title()}']").all()]

    def screenshot(self, name: str) -> Path:
        self.shots.mkdir(parents=True, exist_ok=True)
        path = self.shots / f"{re.sub(r'[^A-Za-z0-9_.-]+', '-', name)}.png"
        # Streamlit scrolls inside its main container, not the document, so full_page alone
        # captures one screen: grow the viewport to the content for the shot instead.
        height = self.page.evaluate("""() => Math.max(document.body.scrollHeight,
            ...[...document.querySelectorAll("[data-testid='stMain'], [data-testid='stAppViewContainer']")]
                .map(e => e.scrollHeight))""")
        size = self.page.viewport_size
        self.page.set_viewport_size({"width": size["width"], "height": min(max(height, size["height"]), 12_000)})
        self.page.wait_for_timeout(300)  # let the charts re-layout to the new size
        self.page.screenshot(path=str(path), full_page=True)
        self.page.set_viewport_size(size)
        return path

    # --- widgets, found by their accessible name (the label); each waits for its rerun
    @contextmanager
    def rerun(self, timeout_ms: int = SCRIPT_RUN_MS):
        """Wait, after the block, for the end of a script run that the block caused."""
        with self.ws.expect_event("framereceived", predicate=run_finished, timeout=timeout_ms):
            yield
        self.wait()

    def control(self, role: str, label: str):
        """The widget with ARIA ``role`` whose label starts with ``label``."""
        return self.page.get_by_role(role, name=re.compile("^" + re.escape(label))).first

    def click(self, label: str) -> None:
        with self.rerun():
            self.page.get_by_role("button", name=label, exact=True).click()

    def select(self, label: str, option: str) -> None:
        self.control("combobox", label).click()
        with self.rerun():
            self.page.get_by_role("option", name=option, exact=True).click()

    def toggle(self, label: str) -> None:
        """Flip a checkbox or toggle (a toggle is a switch-styled checkbox)."""
        box = self.page.locator("[data-testid='stCheckbox'], [data-testid='stToggle']").filter(
            has=self.page.get_by_text(label, exact=False)).first
        with self.rerun():
            box.locator("label").first.click()

    def radio(self, label: str, option: str) -> None:
        with self.rerun():
            self.control("radiogroup", label).get_by_text(option, exact=True).click()

    def slider_keys(self, label: str, *keys: str) -> None:
        """Move a slider with the keyboard (Home, End, ArrowRight, ...): exact and layout-free."""
        thumb = self.control("slider", label)
        thumb.focus()
        with self.rerun():
            for key in keys:
                thumb.press(key)

    def slider_value(self, label: str) -> str:
        return self.control("slider", label).get_attribute("aria-valuetext")

    def fill(self, label: str, text: str) -> None:
        """Type into a text input or text area and commit it (Ctrl+Enter), as a user does."""
        box = self.control("textbox", label)
        box.fill(text)
        with self.rerun():
            box.press("Control+Enter")

    def upload(self, files, timeout_ms: int = SCRIPT_RUN_MS) -> None:
        """Give the page's file uploader ``files``: a path, or ``{"name", "mimeType", "buffer"}``."""
        with self.rerun(timeout_ms):
            self.page.get_by_test_id("stFileUploader").first.locator("input[type='file']").set_input_files(files)


@pytest.fixture
def app_page(request, browser, streamlit_server, artifacts_dir):
    """A fresh browser context on the session's server; dialogs are recorded and dismissed.

    ``@pytest.mark.viewport(width=1024, height=768)`` opens it at another size (a projector's).
    """
    size = request.node.get_closest_marker("viewport")
    context = browser.new_context(viewport=dict(size.kwargs) if size else VIEWPORT)
    context.set_default_timeout(60_000)
    page = context.new_page()
    app = AppPage(page, streamlit_server, artifacts_dir / "screenshots")

    def on_dialog(dialog):
        app.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    page.on("dialog", on_dialog)
    page.on("pageerror", lambda exc: app.js_errors.append(str(exc)))
    yield app
    context.close()


@pytest.fixture
def own_app(browser, artifacts_dir):
    """``own_app(name)``: a server of the test's own, started with the environment the test set, and a page on it."""
    started = []

    def start(name: str) -> AppPage:
        server = start_streamlit(artifacts_dir / f"streamlit-{name}.log")
        context = browser.new_context(viewport=VIEWPORT)
        context.set_default_timeout(60_000)
        started.append((server, context))
        return AppPage(context.new_page(), server, artifacts_dir / "screenshots")

    yield start
    for server, context in started:
        context.close()
        server.stop()
