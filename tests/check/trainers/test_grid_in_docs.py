"""The checker guide's grid of trainer batches (docs/checker-guide.md, "Every batch a trainer emits") holds the
corpus as it is.

Its rows are every batch kind of ``tests/_trainers`` in the corpus' order, its columns the readers, and a
cell stands where a trainer's batches are judged for that reader (``n/a`` elsewhere); its totals add up.
A batch kind added to the corpus, or a reader, fails here until the grid is measured again
(``python -m tests._trainers.table --grid``). The verdicts themselves are the per-cell tests beside this one.
"""
import re

from tests._support import ROOT
from tests._trainers import MODULES, corpus, implementations
from tests._trainers.truth import READERS

SHORT = {"flex_attention": "flex", "flash_attention_2": "fa2", "flash_attention_3": "fa3"}
VERDICT = re.compile(r"^[SLXR]+$")     # sound, leak, label across an edge, refused: letters combine


def grid_section() -> str:
    text = (ROOT / "docs" / "checker-guide.md").read_text()
    start = text.index("## Every batch a trainer emits")
    end = text.find("\n## ", start + 1)
    return text[start:] if end == -1 else text[start:end]


def grid_rows(section: str) -> dict[str, list[str]]:
    rows = [line.strip("|").split("|") for line in section.splitlines() if re.match(r"\| [a-z_]+-", line)]
    return {r[0].strip(): [c.strip() for c in r[1:]] for r in rows}


def test_the_grid_has_every_batch_kind_and_reader_of_the_corpus():
    section = grid_section()
    header = next(line for line in section.splitlines() if line.startswith("| batch kind |"))
    assert [c.strip() for c in header.strip("|").split("|")[1:]] == [SHORT.get(r, r) for r in READERS]
    grid = grid_rows(section)
    modules = [corpus(name) for name in MODULES]
    assert list(grid) == [f"{m.TRAINER}-{k}" for m in modules for k in m.CASES]
    for m in modules:
        for kind in m.CASES:
            cells = dict(zip(READERS, grid[f"{m.TRAINER}-{kind}"]))
            assert {r for r, c in cells.items() if c != "n/a"} == set(implementations(m)), (m.TRAINER, kind)


def test_each_cell_is_one_verdict_and_the_totals_add_up_to_the_cells():
    section = grid_section()
    cells = [c for row in grid_rows(section).values() for c in row if c != "n/a"]
    assert [c for c in cells if not VERDICT.match(c)] == []
    total = re.search(r"\| \*\*all\*\* \| \*\*(\d+)\*\* \| \*\*(\d+)\*\* \|", section)
    assert total and int(total[1]) == len(cells) == int(total[2])        # the checker is right in every cell
    per_trainer = re.findall(r"^\| [^|*]+ \| (\d+) \| (\d+) \|$", section, re.M)
    assert sum(int(n) for n, _ in per_trainer) == len(cells) and all(n == right for n, right in per_trainer)
    assert f"{len(cells)} cells" in section and f"{len(grid_rows(section))} kinds of batch" in section
