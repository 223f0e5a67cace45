"""The page list: app.py, lesson(), the page tests and benchmarks/page_speed.py all read _content.PAGES."""
import ast
import importlib.util
import re
from pathlib import Path

import pytest

import packing_core as pc
from app_pages import _content, _state
from app_pages._content import PAGES
from packing_core.cli.dispatch import parser

ROOT = Path(__file__).resolve().parents[2]
PAGE_FILES = sorted(p for p in (ROOT / "app_pages").glob("*.py") if not p.name.startswith("_"))


def _calls(path: Path, name: str) -> list[ast.Call]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)
            and (getattr(n.func, "id", None) == name or getattr(n.func, "attr", None) == name)]


def test_every_page_file_has_one_spec_and_every_spec_a_file():
    assert sorted(ROOT / p.path for p in PAGES) == PAGE_FILES
    assert len({p.title for p in PAGES}) == len({p.name for p in PAGES}) == len(PAGES)
    assert sum(p.minutes for p in PAGES) == 60


@pytest.mark.parametrize("spec", PAGES, ids=lambda p: p.name)
def test_each_page_reads_its_lesson_from_its_spec_and_keys_its_settings_by_its_name(spec):
    path = ROOT / spec.path
    lessons = _calls(path, "lesson")
    assert [ast.unparse(c.args[0]) for c in lessons] == ["__file__"]
    titles = [c.args[0].value for c in _calls(path, "title") if c.args and isinstance(c.args[0], ast.Constant)]
    assert titles[:1] == [spec.title]
    owners = {c.args[0].value for c in _calls(path, "page_settings")}
    assert owners <= {spec.name}


def lesson_plan() -> str:
    return (ROOT / "docs" / "lesson-plan.md").read_text(encoding="utf-8")


def test_the_lesson_plan_is_the_page_list_and_its_minutes_add_up_to_its_total():
    text = lesson_plan()
    stated = int(re.search(r"\*\*The lesson plan: (\d+) minutes\.\*\*", text).group(1))
    table = re.search(r"\| page \| minutes \| steps \|\n\| --- \| --- \| --- \|\n(.*?)\n\| total \| (\d+) \| \|", text, re.S)
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table.group(1).splitlines()]
    assert [(title, int(minutes)) for title, minutes, _ in rows] == [(p.title, p.minutes) for p in PAGES]
    assert [steps for *_, steps in rows] == [" · ".join(f"{i} {s}" for i, s in enumerate(p.steps, 1)) or "no steps"
                                             for p in PAGES]
    assert stated == int(table.group(2)) == sum(p.minutes for p in PAGES) == 60


def test_the_lesson_plan_says_what_each_page_covers_in_the_navigations_order():
    section = lesson_plan().split("\n## The pages\n", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"^- \*\*(.+?)\*\*: \S", section, re.M) == [p.title for p in PAGES]


def test_the_lesson_plan_is_written_as_the_present():
    """The current plan, never its history: no "12 -> 9 minutes", no before / now columns, no rounds."""
    assert not re.search(r"\d+ ?-> ?\d+|\bround \d|\| before \||\| now \||\bversion \d of\b", lesson_plan(), re.I)


def test_steps_are_named_once_each_and_short_enough_for_a_projectors_tab_bar():
    for p in PAGES:
        assert len(set(p.steps)) == len(p.steps) and all(s.strip() == s and s for s in p.steps), p.title
        assert p.steps == () or 2 <= len(p.steps) <= 5, p.title     # five tabs fill 1024 px beside the sidebar
        # "1 · name" per tab: longer than this overflows the tab bar at 1024 px beside the sidebar
        # (tests/e2e/test_projector.py measures the bar itself; this catches a long name without a browser)
        assert sum(len(s) + 4 for s in p.steps) <= 90, p.title


def test_a_page_with_steps_draws_them_through_steps_and_a_page_without_does_not():
    for p in PAGES:
        calls = _calls(ROOT / p.path, "steps")
        assert len(calls) == (1 if p.steps else 0), p.title
        assert [ast.unparse(c.args[0]) for c in calls] == (["__file__"] if p.steps else []), p.title


def test_a_page_not_in_the_list_is_named_with_the_fix():
    with pytest.raises(KeyError, match="add a PageSpec there"):
        _content.page("app_pages/not_a_page.py")


def test_page_speed_times_every_page_in_lesson_order_read_from_the_app_without_a_path_trick():
    script = ROOT / "benchmarks" / "page_speed.py"
    assert "sys.path" not in script.read_text(encoding="utf-8")
    spec = importlib.util.spec_from_file_location("page_speed", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert list(module.page_specs()) == [p.name for p in PAGES] and "bug_zoo" in module.page_specs()


def test_the_default_context_has_one_home():
    assert _state.SHARED.defaults["context"] == pc.DEFAULT_CONTEXT
    assert parser().parse_args(["report", "--lengths", "3"]).context == pc.DEFAULT_CONTEXT
    assert pc.DEFAULT_CONTEXT in _state.CONTEXTS


# Sentences the library computes once (verdicts, notes, captions) and the CLI prints too: a page shows them
# as they come (VerifyReport.verdict, drift_verdict, TrainPair.story, balance_rows(fit=True).note,
# analysis.basis_note, describe_profile, profile_sample) and never writes them again itself.
LIBRARY_WORDS = ("EQUIVALENT", "DIFFERENT", "cannot fill", "planned from the counts", "of the tokens are in the loss",
                 "looks better in training", "The words part at generated token", "200_000", "messages\", \"prompt")


HELPERS = sorted(p for p in (ROOT / "app_pages").glob("_*.py") if p.name not in ("__init__.py", "_content.py"))


@pytest.mark.parametrize("path", [*PAGE_FILES, *HELPERS], ids=lambda p: p.name)
def test_a_page_shows_the_librarys_sentences_and_never_composes_them(path):
    text = path.read_text(encoding="utf-8")
    assert [w for w in LIBRARY_WORDS if w in text] == []
    assert "spec.tokenizer" not in text and "find_model(" not in text      # the library routes every model


def test_the_leakage_lab_stays_thin():
    lines = (ROOT / "app_pages" / "leakage_lab.py").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 315, f"{len(lines)} lines: move logic to the library, prose to _content"
