"""One table of formats: the registry. Nothing else in the lab lists suffixes or format names."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import packing_core.data as data
import packing_core.data.sources as sources

ROOT = Path(__file__).resolve().parents[3]
HOME = ROOT / "packing_core" / "data" / "sources"
WORDS = re.compile(r"\b(CSV|TSV|JSONL|JSON Lines|Parquet|Arrow|TXT)\b")


def test_input_suffixes_are_the_registrys_and_exported_from_the_data_package():
    assert data.INPUT_SUFFIXES == sources.INPUT_SUFFIXES == sources.input_suffixes() == tuple(sources.SUFFIXES)
    assert {sources.SUFFIXES[s] for s in sources.INPUT_SUFFIXES} == set(sources.READERS)
    assert {".csv", ".tsv", ".jsonl", ".jsonl.gz", ".parquet", ".arrow", ".txt"} <= set(sources.INPUT_SUFFIXES)


def _names_suffixes(args: list[ast.expr]) -> bool:
    """True when the argument is a literal tuple or list of strings that start with a dot (".toy")."""
    return bool(args) and isinstance(args[0], (ast.Tuple, ast.List)) and any(
        isinstance(e, ast.Constant) and isinstance(e.value, str) and e.value.startswith(".") for e in args[0].elts)


def _tables(path: Path) -> list[str]:
    """Literal collections in ``path`` naming two or more formats or suffixes, and strings listing three formats."""
    names = set(sources.SUFFIXES) | set(sources.READERS) | {s.lstrip(".") for s in sources.SUFFIXES}
    rel = path.relative_to(ROOT) if ROOT in path.parents else path.name
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.Dict, ast.Tuple, ast.List, ast.Set)):
            elts = node.keys if isinstance(node, ast.Dict) else node.elts
            hits = [e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
                    and e.value.lower() in names]
            if len(hits) >= 2:
                found.append(f"{rel}:{node.lineno} {hits}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and len(set(WORDS.findall(node.value))) >= 3:
            found.append(f"{rel}:{node.lineno} lists formats in words")
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "register" \
                and node.args and isinstance(node.args[0], ast.Constant) and path.parent != HOME \
                and _names_suffixes(node.args[1:2]):     # a format is registered with its suffixes, not any register()
            found.append(f"{rel}:{node.lineno} registers a format outside data/sources")
    return found


def test_no_format_table_exists_outside_the_registry():
    files = [*ROOT.glob("packing_core/**/*.py"), *ROOT.glob("app_pages/*.py"), ROOT / "app.py"]
    outside = [p for p in files if HOME not in p.parents and p.parent != HOME]
    assert len(outside) > 50
    assert [hit for p in outside for hit in _tables(p)] == []


def test_the_check_finds_a_table_written_by_hand(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text('FORMATS = {".csv": "csv", ".parquet": "parquet"}\nHELP = "CSV, TSV or Parquet"\n'
                       'register("toy", (".toy",), None)\n')
    assert len(_tables(planted)) == 3


def test_inside_the_registry_each_format_lives_in_its_own_reader_file():
    readers = {type(r).__module__ for r in sources.READERS.values()}
    assert all(m.startswith("packing_core.data.sources._") for m in readers)
    assert all((HOME / f"{m.rsplit('.', 1)[1]}.py").is_file() for m in readers)
    assert all(callable(r.columns) and callable(r.batches) and r.title for r in sources.READERS.values())
