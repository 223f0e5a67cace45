"""The type check CI runs: mypy on packing_core against a baseline that may only shrink."""
import importlib.util
import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _typecheck():
    spec = importlib.util.spec_from_file_location("typecheck", ROOT / "scripts" / "typecheck.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_new_error_beyond_the_baseline_fails_and_an_old_one_does_not():
    tc = _typecheck()
    output = "packing_lab/viz/a.py:3: error: x  [attr-defined]\npacking_lab/viz/a.py:7: error: y  [arg-type]\n"
    now = tc.errors_per_file(output)
    assert tc.judge(now, Counter({"packing_lab/viz/a.py": 2})) == []
    assert tc.judge(now, Counter({"packing_lab/viz/a.py": 1})) == ["packing_lab/viz/a.py: 2 error(s), the baseline allows 1"]
    assert tc.judge(now, Counter()) != []


def test_packing_and_data_are_held_at_zero_in_the_baseline():
    import json

    base = json.loads((ROOT / "scripts" / "mypy-baseline.json").read_text())
    assert not [f for f in base if f.startswith(_typecheck().CLEAN)]


def test_ci_and_pre_commit_run_the_type_check_and_ruff():
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines() if not line.strip().startswith("#")]
    assert "python scripts/typecheck.py" in ci and any(re.match(r"python -m ruff check", line) for line in ci)
    hooks = (ROOT / ".pre-commit-config.yaml").read_text()
    assert "scripts/typecheck.py" in hooks and "ruff check" in hooks
