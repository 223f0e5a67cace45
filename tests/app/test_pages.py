"""The page list: app.py, lesson(), the page tests and benchmarks/page_speed.py all read _content.PAGES."""
import ast
import importlib.util
from pathlib import Path

import pytest

import packing_core as pc
from app_pages import _content, _lab
from app_pages._content import PAGES
from packing_core.cli import _parser

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


def test_a_page_not_in_the_list_is_named_with_the_fix():
    with pytest.raises(KeyError, match="add a PageSpec there"):
        _content.page("app_pages/not_a_page.py")


def test_page_speed_times_every_page_in_lesson_order():
    spec = importlib.util.spec_from_file_location("page_speed", ROOT / "benchmarks" / "page_speed.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert list(module.PAGES) == [p.name for p in PAGES] and "bug_zoo" in module.PAGES


def test_the_default_context_has_one_home():
    assert _lab.SHARED.defaults["context"] == pc.DEFAULT_CONTEXT
    assert _parser().parse_args(["report", "--lengths", "3"]).context == pc.DEFAULT_CONTEXT
    assert pc.DEFAULT_CONTEXT in _lab.CONTEXTS
