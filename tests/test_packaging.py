"""The library a trainer installs: declared ranges and extras, the ``packing-lab`` command, and nothing optional
loaded or needed where a trainer's environment has only torch and transformers.

A package is made missing the way Python itself reports one that is not installed: ``None`` in
``sys.modules`` (``import`` raises ``ModuleNotFoundError`` and ``importlib.util.find_spec`` returns None).
``tools/trainer_env.py`` builds a real torch-only environment and installs the checkout into it; it needs
a package index and minutes, so it is a script, and these tests run the same checks here.
"""
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OPTIONAL = ("streamlit", "plotly", "pandas", "pyarrow", "highspy", "ray")
# twenty lengths where no simple bound proves bfd's plan, so optimal needs its LP
LP_NEEDED = "241,253,326,385,110,143,346,384,174,193,360,226,181,348,177,222,293,264,125,108"
BLOCK = "import sys\nfor m in {names!r}: sys.modules[m] = None\n"


def python(code: str, *args: str, block=OPTIONAL, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCK.format(names=tuple(block)) + code, *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def cli(*argv: str, block=OPTIONAL, cwd=ROOT) -> subprocess.CompletedProcess:
    return python("from packing_lab.cli import main\nsys.exit(main(sys.argv[1:]))", *argv, block=block, cwd=cwd)


def test_pyproject_declares_the_library_as_ranges_with_extras_and_the_packing_lab_command():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    deps = {d.split(">")[0].split("=")[0].split("<")[0].strip(): d for d in project["dependencies"]}
    assert set(deps) == {"numpy", "safetensors", "torch", "transformers"}
    assert all("==" not in d and ">=" in d for d in deps.values()), "ranges, never pins: a trainer keeps its releases"
    extras = project["optional-dependencies"]
    assert {"app", "optimal", "ray", "dev", "data"} <= set(extras)
    assert any(d.startswith("streamlit") for d in extras["app"]) and any(d.startswith("highspy") for d in extras["optimal"])
    assert all("==" not in d for e in extras.values() for d in e)
    assert project["scripts"] == {"packing-lab": "packing_lab.cli:main"}
    # the pinned set the app and CI install stays in requirements.txt, exact
    pinned = (ROOT / "requirements.txt").read_text(encoding="utf-8")
    assert "torch==2.13.0" in pinned and "transformers==" in pinned


def test_importing_the_library_loads_no_optional_package():
    code = ("import packing_core, packing_core.check, packing_core.integrations as i\n"
            "i.guard, i.PackingCheckCallback, packing_core.make_plan, packing_core.check_hf_batch\n"
            "print([m for m in {names!r} if sys.modules.get(m) is not None])")
    proc = python(code.format(names=OPTIONAL), block=())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_the_trainer_entry_points_run_with_every_optional_package_missing():
    """The help, report --lengths, scan of a text file, a static check of a batch file and the guard
    (tools/trainer_smoke.py)."""
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "trainer_smoke.py"), "--block"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    checks = json.loads(proc.stdout)["checks"]
    assert [c["name"] for c in checks if not c["ok"]] == [], checks
    assert len(checks) == 7 and proc.returncode == 0


@pytest.mark.parametrize("argv, missing, extra", [
    (("report", "data.jsonl"), "pyarrow", "packing-lab[data]"),
    (("report", "--lengths", LP_NEEDED, "--strategy", "optimal"), "highspy", "packing-lab[optimal]"),
    (("report", "--lengths", LP_NEEDED, "--optimal"), "highspy", "packing-lab[optimal]"),
])
def test_a_missing_optional_part_is_one_line_naming_the_extra_to_install(tmp_path, argv, missing, extra):
    (tmp_path / "data.jsonl").write_text('{"text": "hello there"}\n', encoding="utf-8")
    proc = cli(*argv, block=(missing,), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: ") and f"pip install '{extra}'" in proc.stderr


def test_a_data_file_reads_when_pyarrow_is_there(tmp_path):
    (tmp_path / "data.jsonl").write_text('{"text": "hello there"}\n', encoding="utf-8")
    proc = cli("report", "data.jsonl", "--tokenizer", "bytes", block=(), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "1 documents, 11 tokens" in proc.stdout


def test_python_m_packing_core_runs_the_library_commands_and_names_where_the_labs_live():
    proc = subprocess.run([sys.executable, "-m", "packing_core", "zoo"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "`packing-lab zoo`" in proc.stderr
    help_ = subprocess.run([sys.executable, "-m", "packing_core", "--help"], cwd=ROOT, capture_output=True, text=True,
                           timeout=120).stdout
    assert "report" in help_ and "check" in help_ and "zoo" not in help_


@pytest.mark.parametrize("content, expect", [
    (b"one short document\n\n  \nand a second one\r\nthird\n", {"counts": {"5": 1, "16": 1, "18": 1}}),
    (b"caf\xe9 au lait\n", {"error": "is not UTF-8 text (line 1"}),
    (b"ok\n\x00\x01binary", {"error": "looks binary (NUL byte"}),
])
def test_a_text_file_scans_to_the_same_answer_with_and_without_pyarrow(tmp_path, content, expect):
    (tmp_path / "in.txt").write_bytes(content)
    answers = []
    for block in ((), ("pyarrow",)):
        out = tmp_path / f"p{len(block)}.json"
        proc = cli("scan", "in.txt", "--tokenizer", "bytes", "--out", out.name, block=block, cwd=tmp_path)
        if "counts" in expect:
            assert proc.returncode == 0, proc.stderr
            answers.append(json.loads(out.read_text())["counts"])
        else:
            assert proc.returncode == 2 and expect["error"] in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
            answers.append(proc.stderr)
    assert answers[0] == answers[1]
    if "counts" in expect:
        assert answers[0] == expect["counts"]
