"""The README's two commands are the ones that work: CI runs exactly its test command."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    """The command lines of the README's first bash block (run the app, run the tests)."""
    block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)
    assert block, "README.md has no bash block with its two commands"
    return [line.strip() for line in block.group(1).splitlines() if line.strip()]


def ci_lines() -> list[str]:
    """The lines of .ci/run that run something (comments and blanks dropped)."""
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


def test_readme_opens_with_the_app_and_the_test_command():
    app, tests = readme_commands()[:2]
    assert app.endswith("streamlit run app.py")
    assert "pytest" in tests


def test_ci_runs_the_readme_test_command_verbatim():
    assert readme_commands()[1] in ci_lines()


def test_ci_builds_a_fresh_environment_and_an_empty_model_cache():
    lines = ci_lines()
    venv = next(line for line in lines if "-m venv" in line)
    assert "--system-site-packages" not in venv
    assert any(re.match(r"source .*/bin/activate", line) for line in lines)
    assert any(line.startswith("export PACKING_LAB_CACHE=") and "ci_tmp" in line for line in lines)
    # the venv and the caches come before the test command, so the command runs inside them
    assert lines.index(venv) < lines.index(readme_commands()[1])
