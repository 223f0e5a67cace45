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

from pathlib import Path

import pytest

from tests._support import (  # noqa: F401
    ARTIFACTS,
    CHROMIUM,
    ROOT,
    SCRIPT_RUN_MS,
    SERVER_START_S,
    VIEWPORT,
    AppPage,
    StreamlitServer,
    _healthy,
    browser_skip_reason,
    chromium_path,
    free_port,
    run_finished,
    save_tiny_llama,
    skip_or_fail,
    start_streamlit,
    under_ci,
    wait_for_app_run,
)


@pytest.fixture(scope="session")
def require_smollm2() -> None:
    """Skip (or, under CI, fail) a test that needs the real pretrained SmolLM2, naming the install step."""
    from packing_core.models import pretrained_status

    available, message = pretrained_status()
    if not available:
        skip_or_fail(message)


@pytest.fixture(scope="session")
def smollm2_pair(require_smollm2):
    """SmolLM2 and its tokenizer, loaded once per test session."""
    from packing_core.models import load_pretrained

    return load_pretrained()


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


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    """``artifacts/`` at the repository root (gitignored): screenshots, server logs, figures."""
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="session")
def streamlit_server(artifacts_dir) -> StreamlitServer:
    """One server for the whole test session, stopped at the end (terminate, then kill)."""
    try:
        server = start_streamlit(artifacts_dir / "streamlit-server.log")
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)
    yield server
    server.stop()


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
