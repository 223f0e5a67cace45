"""The README is a short front door and docs/ holds the rest, written as the present.

The README stays under 250 lines, shows a picture of the app that exists, lists every page and every extra
a trainer can install; every relative link of the README, CONTRIBUTING, CHANGELOG and docs/ reaches a file
(and a heading, when it names one); the README and docs/ carry no history (CHANGELOG.md is where it lives);
docs/ has an index, and the limits guide names every limit the library enforces.
"""
import re
import tomllib
from pathlib import Path

import pytest

import packing_core as pc
from app_pages._content import PAGES

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
GUIDES = sorted(DOCS.rglob("*.md"))
LINKED = [README, ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md", *GUIDES]
MAX_README_LINES = 250
MAX_PICTURE_BYTES = 300 * 1024
# Words that tell the past rather than the present: a review round, a before/now column, "x -> y" numbers.
HISTORY = {
    "round N": r"\bround \d+",
    "before and after": r"\bbefore and after\b",
    "a before, after or now column": r"\|\s*(?:before|after|now)\b[^|]*\|",
    "now": r"\bnow\b",
    "x -> y": r"\d(?:[\d.,]*)\s*(?:->|→)\s*\d",
    "used to": r"\bused to\b",
    "no longer": r"\bno longer\b",
}
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def prose(path: Path) -> str:
    """The file's text without its fenced code blocks (a command's output may quote anything)."""
    return FENCE.sub("", path.read_text(encoding="utf-8"))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {slug(h) for h in re.findall(r"^#{1,6} (.+)$", prose(path), re.M)}


def relative_links(path: Path) -> list[str]:
    return [t for t in LINK.findall(prose(path)) if not re.match(r"[a-z]+:", t)]


def test_the_readme_is_at_most_250_lines():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; move detail into docs/"


def test_the_readme_shows_a_picture_of_the_app_before_its_first_section():
    text = README.read_text(encoding="utf-8")
    head = text[:text.index("\n## ")]
    pictures = re.findall(r"!\[[^\]]+\]\((docs/images/[\w.-]+\.png)\)", head)
    assert pictures, "the README's first screen shows no picture from docs/images/"
    for picture in pictures:
        data = (ROOT / picture).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{picture} is not a PNG"
        assert len(data) < MAX_PICTURE_BYTES, f"{picture} is {len(data) // 1024} KB; retake it smaller"


def test_the_readme_lists_every_page_in_the_navigations_order():
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## The pages\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| ([^|]+?) \| [^|]+ \|$", section, re.M)
    assert rows[2:] == [p.title for p in PAGES]        # after the header and its rule


def test_the_readme_names_every_extra_a_trainer_can_install_and_how():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Checking your trainer\n", 1)[1].split("\n## ", 1)[0]
    assert sorted(re.findall(r"^\| `\[(\w+)\]` \|", section, re.M)) == sorted(extras)
    assert 'pip install "packing-lab @ git+' in section and "packing-lab " in section


@pytest.mark.parametrize("path", LINKED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_reaches_a_file_and_its_heading(path):
    broken = []
    for target in relative_links(path):
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.name}")
    assert broken == []


@pytest.mark.parametrize("path", [README, *GUIDES], ids=lambda p: str(p.relative_to(ROOT)))
def test_the_readme_and_the_guides_are_written_as_the_present(path):
    text = prose(path)
    found = [f"{name}: {m.group(0)!r}" for name, pattern in HISTORY.items()
             for m in re.finditer(pattern, text, re.I)]
    assert found == [], f"history belongs in CHANGELOG.md: {found}"


def test_the_history_check_catches_each_kind_of_history():
    said = ["Round 4 added it.", "before and after the change", "| page | before | now |", "it now holds",
            "Masks and labels 12 -> 9 minutes", "it used to scan", "it no longer runs"]
    for name, pattern in HISTORY.items():
        assert any(re.search(pattern, s, re.I) for s in said), name
    assert not any(re.search(p, "Before class, run warm; the load at the start and the end.", re.I)
                   for p in HISTORY.values())


def test_every_guide_is_in_the_docs_index_and_the_readme_reaches_the_index_and_the_changelog():
    index = relative_links(DOCS / "README.md")
    assert sorted({t.partition("#")[0] for t in index if t.endswith(".md")} - {"../README.md", "../CHANGELOG.md"}) \
        == sorted(p.name for p in DOCS.glob("*.md") if p.name != "README.md")
    links = relative_links(README)
    assert {"CONTRIBUTING.md", "CHANGELOG.md", "docs/README.md"} <= set(links)


def test_the_limits_guide_names_every_limit_the_library_enforces():
    text = (DOCS / "limits.md").read_text(encoding="utf-8")
    assert [name for name in pc.LIMITS if f"`{name}`" not in text] == []


def test_every_section_of_the_measurements_says_when_and_where_it_was_measured():
    text = (DOCS / "measurements.md").read_text(encoding="utf-8")
    sections = re.split(r"^## ", text, flags=re.M)[1:]
    undated = [s.splitlines()[0] for s in sections
               if "computed" not in s and not (re.search(r"\b20\d\d-\d\d-\d\d\b", s) and re.search(r"\b(AMD|Xeon)\b", s))]
    assert undated == []
