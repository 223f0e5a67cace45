"""The start-up bar and the first-open bar (app_pages/_startup.py): what they load, that they go, when they show.

The bars themselves, on a fresh server in a real Chromium: tests/e2e/test_browser_startup.py.
"""
import subprocess
import sys
from pathlib import Path

from streamlit.testing.v1 import AppTest

from app_pages import _startup

ROOT = Path(__file__).resolve().parents[2]


def test_the_start_up_module_loads_nothing_heavy_so_its_bar_comes_first():
    probe = ("import sys; import app_pages._startup; "
             "print(sorted(m for m in ('torch', 'transformers', 'pandas', 'numpy', 'app_pages._data') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_app_py_draws_the_bar_before_anything_imports_torch():
    """Every import above ``start_once()`` in app.py is the standard library, Streamlit or _startup itself."""
    lines = (ROOT / "app.py").read_text().splitlines()
    call = next(i for i, line in enumerate(lines) if line.startswith("start_once()"))
    imports = [line.split()[1] for line in lines[:call] if line.startswith(("import ", "from "))]
    assert imports == ["os", "streamlit", "app_pages._startup"], imports


def test_the_steps_name_what_the_app_loads_on_its_first_run():
    """After a real first run of the app every step's modules are loaded, so the bar names real work."""
    probe = ("import sys; from streamlit.testing.v1 import AppTest; "
             "at = AppTest.from_file('app.py', default_timeout=300).run(); "
             "print(repr([e.value for e in at.exception])); "
             "from app_pages._startup import STEPS; "
             "print(sorted(m for _, ms, _ in STEPS for m in ms if m not in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    errors, missing = out.stdout.strip().splitlines()[-2:]
    assert errors == "[]" and missing == "[]", out.stdout


def _cold_page():
    import streamlit as st

    from app_pages._startup import start_once

    st.write(f"loaded: {start_once([('a module nobody imported', ('pl_startup_probe',), 1.0)])}")


def test_a_cold_step_is_imported_under_a_bar_that_goes_and_a_warm_one_draws_nothing(tmp_path, monkeypatch):
    (tmp_path / "pl_startup_probe.py").write_text("VALUE = 7\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "pl_startup_probe", raising=False)
    at = AppTest.from_function(_cold_page, default_timeout=60).run()
    assert not at.exception
    assert [m.value for m in at.markdown] == ["loaded: ['a module nobody imported']"]
    assert at.get("progress") == []
    assert sys.modules["pl_startup_probe"].VALUE == 7
    at.run()
    assert [m.value for m in at.markdown] == ["loaded: []"]
    assert _startup.cold_steps([("x", ("pl_startup_probe",), 1.0)]) == []


def _slow_first_open():
    import time

    import streamlit as st

    from app_pages._startup import first_open

    with first_open("A slow page for the test"):
        time.sleep(1.0)    # over FIRST_OPEN_DELAY_S: the thread draws the bar at least once
        st.write("built")


def test_the_first_open_bar_is_gone_when_the_page_is_built_and_the_page_counts_as_opened(monkeypatch):
    monkeypatch.setattr(_startup, "_opened", set())
    at = AppTest.from_function(_slow_first_open, default_timeout=60).run()
    assert not at.exception
    assert [m.value for m in at.markdown] == ["built"]
    assert at.get("progress") == [], "the first-open bar stayed after the page was built"
    assert _startup._opened == {"A slow page for the test"}
