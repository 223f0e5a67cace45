"""Hostile input: malformed and malicious files for the readers, the CLI and the app's upload.

One catalogue, three consumers. Every file in it either reads (a valid file that only
looks odd: formula strings, HTML, control characters, a 3 MB cell) or is refused with
one clear line that names the file and the problem::

    semicolon.csv  "length;text\\n3;abc"  -> error: ... seems to use ';' as delimiter ...
    formulas.csv   "text\\n=cmd|' /C calc'!A0"  -> read as plain text, one document
"""
from __future__ import annotations

import ast
import csv
import gzip
import io
import json
import os
import random
import re
import subprocess
import sys
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from packing_core.data.columns import lengths_from_file
from tests._support import LAUNCHER, AppPage, Measured

ROOT = Path(__file__).resolve().parents[2]
CLI_ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}


# ---------------------------------------------------------------- the catalogue
@dataclass(frozen=True)
class Hostile:
    """A file to throw at every reader: ``error`` is a regex the message must match; None = valid."""

    id: str
    name: str
    data: bytes
    error: str | None = None
    texts: tuple[str, ...] = ()   # for valid text files: the documents expected back
    marks: tuple = ()


def _csv(header: list[str], rows: list[list[str]]) -> bytes:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([header, *rows])
    return buf.getvalue().encode()


def _parquet() -> bytes:
    texts = [f"document number {i}" for i in range(3000)]
    buf = io.BytesIO()
    pq.write_table(pa.table({"length": [len(t) for t in texts], "text": texts}), buf)
    return buf.getvalue()


def _corrupt_body(data: bytes, seed: int = 3) -> bytes:
    """Scribble over the data pages but keep the header and footer magic intact."""
    rng, out = random.Random(seed), bytearray(data)
    for _ in range(64):
        out[rng.randrange(8, len(out) // 2)] = rng.randrange(256)
    return bytes(out)


def _zip(name: str, text: str) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(name, text)
    return buf.getvalue()


PARQUET = _parquet()
FORMULAS = ("=cmd|' /C calc'!A0", "+1+1", "@SUM(1)", "-2+3", '=HYPERLINK("http://x.example","y")')
HTML = ('<script>alert("pwned")</script>', "<img src=x onerror=alert(1)>",
        "</div><h1 id=injected>BIG</h1>", "**bold** $x^2$ :red[red]")
ODD_UNICODE = ("\u202eevil.exe", "thumbs 👍🏽", "zero\u200bwidth", "tab\tinside")
GARBAGE = random.Random(0).randbytes(4096)                              # has NUL bytes
HIGH_BYTES = bytes(random.Random(1).randrange(128, 256) for _ in range(3000))  # no NUL, not UTF-8

CATALOGUE = [
    Hostile("empty", "empty.txt", b"", r"no documents found"),
    Hostile("blank-lines", "blank.txt", b"\n  \n\t\n", r"no documents found"),
    Hostile("header-only", "header.csv", b"length,text\n", r"no documents found"),
    Hostile("binary-garbage", "garbage.csv", GARBAGE, r"looks binary"),
    Hostile("binary-garbage-jsonl", "garbage.jsonl", GARBAGE, r"looks binary"),
    Hostile("non-utf8", "latin1.csv", "text\nok\ncafé\n".encode("latin-1"), r"not UTF-8.*line 3"),
    Hostile("non-utf8-txt", "latin1.txt", "ok\ncafé\n".encode("latin-1"), r"not UTF-8.*line 2"),
    Hostile("high-bytes-one-line", "high.csv", HIGH_BYTES, r"UTF-8"),
    Hostile("utf16", "utf16.txt", "hello\nworld\n".encode("utf-16"), r"UTF-16"),
    Hostile("semicolon-delimiter", "semicolon.csv", b"length;text\n3;abc\n4;defg\n", r"';'"),
    Hostile("no-known-column", "columns.csv", b"id,body\n1,hi\n", r"pass column="),
    Hostile("wide-header", "wide.csv", b",".join(b"c%d" % i for i in range(20_000)) + b"\n",
            r"and 19,980 more.*pass column="),
    Hostile("deep-json-arrays", "deep.jsonl", b'{"text": ' + b"[" * 10_000 + b"]" * 10_000 + b"}\n",
            r"nested too deeply"),
    Hostile("deep-json-objects", "deep2.jsonl", b'{"a":' * 10_000 + b"1" + b"}" * 10_000 + b"\n",
            r"nested too deeply"),
    Hostile("json-array-not-lines", "array.json", b'[{"text": "a"}, {"text": "b"}]\n', r"jq -c"),
    Hostile("json-giant-integer", "bigint.jsonl", b'{"length": 1' + b"0" * 5000 + b"}\n", r"line 1 .*too large"),
    Hostile("zero-length", "zero.csv", b"length\n5\n0\n", r"data row 2 holds 0"),
    Hostile("negative-length", "negative.csv", b"length\n5\n-3\n", r"holds -3"),
    Hostile("fractional-length", "fraction.csv", b"length\n2.5\n", r"holds '2.5'"),
    Hostile("thirty-digit-length", "digits.csv", b"length\n" + b"9" * 30 + b"\n", r"holds '9{30}'"),
    Hostile("parquet-named-csv", "table.csv", PARQUET, r"looks like Parquet"),
    Hostile("parquet-named-txt", "table.txt", PARQUET, r"looks like Parquet"),
    Hostile("truncated-parquet", "cut.parquet", PARQUET[: len(PARQUET) // 2], r"not a readable Parquet"),
    Hostile("corrupt-parquet-pages", "scribbled.parquet", _corrupt_body(PARQUET), r"Parquet"),
    Hostile("gzip-named-csv", "data.csv", gzip.compress(b"length\n3\n"), r"gzip"),
    Hostile("xlsx-like-zip", "sheet.csv", _zip("xl/workbook.xml", "<workbook/>"), r"zip archive"),
    Hostile("unknown-suffix", "payload.exe", b"MZ\x90\x00", r"cannot tell the format"),
    Hostile("formula-strings", "formulas.csv", _csv(["text"], [[f] for f in FORMULAS]), texts=FORMULAS),
    Hostile("html-and-script", "html.csv", _csv(["text"], [[h] for h in HTML]), texts=HTML),
    Hostile("unicode-controls", "unicode.txt", "\n".join(ODD_UNICODE).encode() + b"\n", texts=ODD_UNICODE),
    Hostile("three-megabyte-cell", "longcell.csv", _csv(["text"], [["a" * 3_000_000]]), texts=("a" * 3_000_000,)),
]
ERRORS = [c for c in CATALOGUE if c.error]
VALID = [c for c in CATALOGUE if not c.error]


def cases(items):
    return [pytest.param(c, id=c.id, marks=c.marks) for c in items]


@pytest.fixture(scope="module")
def hostile_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("hostile")
    for c in CATALOGUE:
        (folder / c.name).write_bytes(c.data)
    return folder


def assert_clear(message: str, case: Hostile) -> None:
    """One line, short, naming the file, and saying what is wrong."""
    assert re.search(case.error, message), f"{message!r} does not match {case.error!r}"
    assert "\n" not in message.strip(), f"message spans lines: {message!r}"
    assert len(message) < 600, f"message is {len(message):,} characters long: {message[:300]!r}..."
    assert case.name in message, f"message does not name the file {case.name}: {message!r}"


# ---------------------------------------------------------------- the file reader
@pytest.mark.parametrize("case", cases(ERRORS))
@pytest.mark.parametrize("as_upload", [False, True], ids=["path", "upload"])
def test_reader_refuses_hostile_file_with_one_clear_value_error(case, as_upload, hostile_dir):
    source = hostile_dir / case.name
    if as_upload:  # what the app hands over: an in-memory file with a name
        source = io.BytesIO(case.data)
        source.name = case.name
    with pytest.raises(ValueError) as e:
        lengths_from_file(source)
    assert_clear(str(e.value), case)


@pytest.mark.parametrize("case", cases(VALID))
def test_reader_reads_odd_but_valid_text_literally(case, hostile_dir):
    got = lengths_from_file(hostile_dir / case.name)
    assert got.tolist() == [len(t.encode()) for t in case.texts]


def test_reader_names_a_missing_column_and_the_ones_that_exist(tmp_path):
    path = tmp_path / "good.csv"
    path.write_bytes(b"length,text\n3,abc\n")
    with pytest.raises(ValueError, match=r"no column 'tokens'.*\['length', 'text'\]"):
        lengths_from_file(path, column="tokens")


def test_reader_takes_a_million_line_text_file_in_seconds(million_txt):
    path, widths = million_txt
    start = time.perf_counter()
    got = lengths_from_file(path)
    assert np.array_equal(got, widths)
    assert time.perf_counter() - start < 20


# ---------------------------------------------------------------- the command line
def run_cli(*args, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "packing_core", "report", *map(str, args)], cwd=ROOT,
                          env=CLI_ENV, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def cli_results(hostile_dir) -> dict[str, subprocess.CompletedProcess]:
    """Every catalogue file through the CLI, a few at a time (each run imports torch)."""
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        # bytes: the catalogue is about reading files, and loading transformers 31 times costs a minute
        runs = {c.id: pool.submit(run_cli, hostile_dir / c.name, "--format", "json", "--tokenizer", "bytes")
                for c in CATALOGUE}
        return {k: f.result() for k, f in runs.items()}


@pytest.mark.parametrize("case", cases(ERRORS))
def test_cli_refuses_hostile_file_with_exit_2_and_one_error_line(case, cli_results):
    r = cli_results[case.id]
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.returncode == 2, (r.returncode, r.stderr[-500:])
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr[-1000:]
    assert_clear(lines[0], case)
    assert r.stdout == ""


@pytest.mark.parametrize("case", cases(VALID))
def test_cli_reports_odd_but_valid_text_file(case, cli_results):
    r = cli_results[case.id]
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.returncode == 0, r.stderr[-500:]
    report = json.loads(r.stdout)["strategies"]
    assert {m["documents"] for m in report} == {len(case.texts)}


def test_cli_names_a_missing_column(tmp_path):
    path = tmp_path / "good.csv"
    path.write_bytes(b"length,text\n3,abc\n")
    r = run_cli(path, "--column", "tokens")
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert re.fullmatch(r"error: .*no column 'tokens'.*\['length', 'text'\].*\n", r.stderr)


@pytest.fixture(scope="module")
def million_txt(tmp_path_factory) -> tuple[Path, np.ndarray]:
    """A big but valid text file: 1,000,000 lines of 1 to 60 characters, and their lengths."""
    widths = np.random.default_rng(0).integers(1, 61, 1_000_000)
    path = tmp_path_factory.mktemp("big") / "million.txt"
    path.write_text("\n".join("x" * w for w in widths.tolist()) + "\n")
    return path, widths


def test_cli_reports_a_million_line_length_column_within_a_minute(tmp_path):
    lengths = np.random.default_rng(0).integers(1, 700, 1_000_000)
    path = tmp_path / "million.csv"
    path.write_text("length\n" + "\n".join(map(str, lengths.tolist())) + "\n")
    start = time.perf_counter()
    r = run_cli(path, "--format", "json", timeout=180)
    assert r.returncode == 0, r.stderr[-500:]
    assert time.perf_counter() - start < 60
    whole = [m for m in json.loads(r.stdout)["strategies"] if m["basis"] == "counts"]   # not the sampled ones
    assert {m["real_tokens"] for m in whole if m["tokens_lost"] == 0} == {int(lengths.sum())}


def test_cli_refuses_an_absurd_document_length_quickly(tmp_path):
    path = tmp_path / "huge.csv"
    path.write_bytes(b"length\n5\n10000000000\n")
    try:
        r = run_cli(path, "--strategy", "bfd", timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail("one absurd length kept the CLI busy for more than 20 s")
    # planned from its counts: exact at once (10**10 / 512 rows), where a plan per piece was refused
    assert r.returncode == 0 and "19,531,251" in r.stdout, r.stderr


# ---------------------------------------------------------------- static checks
SOURCES = sorted([ROOT / "app.py", *(p for d in ("app_pages", "packing_core") for p in (ROOT / d).glob("**/*.py"))])
UNSAFE_CALLS = {"pickle.load", "pickle.loads", "torch.load", "joblib.load", "pd.read_pickle",
                "pandas.read_pickle", "yaml.load", "marshal.loads", "dill.load", "eval", "exec"}


def _calls(path: Path):
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            yield node, ast.unparse(node.func)


def _where(path: Path, node) -> str:
    return f"{path.relative_to(ROOT)}:{node.lineno}"


def test_nothing_unpickles_or_evaluates_data():
    found = [f"{_where(p, n)} {name}()" for p in SOURCES if p.exists() for n, name in _calls(p)
             if name in UNSAFE_CALLS
             or any(k.arg == "allow_pickle" and not (isinstance(k.value, ast.Constant) and k.value.value is False)
                    for k in n.keywords)]
    assert found == [], "unsafe deserialisation or eval (load safetensors/Parquet instead): " + ", ".join(found)


def test_raw_html_comes_only_from_string_literals():
    """``unsafe_allow_html=True`` / ``st.html`` may only render text written in the source.

    A literal cannot carry a user's file name, text or column name into the page.
    """
    found = []
    for p in SOURCES:
        if not p.exists():
            continue
        for n, name in _calls(p):
            raw = any(k.arg == "unsafe_allow_html" and not (isinstance(k.value, ast.Constant) and not k.value.value)
                      for k in n.keywords) or name.endswith(("st.html", "components.html", "components.v1.html"))
            if raw and not (n.args and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str)):
                found.append(f"{_where(p, n)} {name}({ast.unparse(n.args[0]) if n.args else ''})")
    assert found == [], "raw HTML built from variables (escape with html.escape or use st.text): " + ", ".join(found)


@pytest.mark.parametrize("source, verdict", [
    ("st.markdown(user_text, unsafe_allow_html=True)", "flagged"),
    ("st.markdown(f'<b>{name}</b>', unsafe_allow_html=True)", "flagged"),
    ("st.markdown('<br>', unsafe_allow_html=True)", "clean"),
    ("st.markdown(text)", "clean"),
    ("obj = pickle.load(f)", "flagged"),
    ("w = torch.load(path, weights_only=True)", "flagged"),
])
def test_static_checks_catch_what_they_claim(source, verdict, tmp_path, monkeypatch):
    path = tmp_path / "page.py"
    path.write_text(f"import streamlit as st\n{source}\n")
    monkeypatch.setattr(sys.modules[__name__], "SOURCES", [path])
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    failed = []
    for check in (test_nothing_unpickles_or_evaluates_data, test_raw_html_comes_only_from_string_literals):
        try:
            check()
        except AssertionError:
            failed.append(check.__name__)
    assert ("flagged" if failed else "clean") == verdict


# ---------------------------------------------------------------- the app's upload (AppTest)
EXPLORER = "app_pages/dataset_explorer.py"
UPLOADABLE = {"csv", "tsv", "jsonl", "json", "ndjson", "parquet", "txt"}  # Streamlit refuses other suffixes
PICKED_COLUMN = {"no-known-column", "wide-header"}  # the app's column picker answers "which column?"
APP_ERRORS = [c for c in ERRORS if c.name.rsplit(".", 1)[-1] in UPLOADABLE and c.id not in PICKED_COLUMN]


def _plain(markdown: str) -> str:
    """Undo the app's markdown escaping (``zero\\.csv`` -> ``zero.csv``) to read the message."""
    return re.sub(r"\\(.)", r"\1", markdown)


def _explorer():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    return at.switch_page(EXPLORER).run()


def _upload(at, name: str, data: bytes):
    at.file_uploader(key="w_upload").set_value((name, data, "application/octet-stream")).run()
    analyse = [b for b in at.button if b.label.startswith("Analyse")]
    if analyse:  # the columns could be read: now read the data
        analyse[0].click().run()
    return at


def _documents(at) -> str:
    return next(m.value for m in at.metric if m.label == "Documents")


@pytest.mark.parametrize("case", cases(APP_ERRORS))
def test_app_upload_of_hostile_file_shows_one_error_and_keeps_the_dataset(case):
    at = _explorer()
    before = _documents(at)
    _upload(at, case.name, case.data)
    assert not at.exception, at.exception[0].value
    errors = [_plain(e.value) for e in at.error]
    assert len(errors) == 1, errors
    assert_clear(errors[0].split(": ", 1)[1], case)
    assert _documents(at) == before  # the built-in dataset is still shown, with its numbers


# the app counts with SmolLM2's tokenizer (auto), which is never given one unbroken run past MAX_WORD_CHARS;
# the reader and the CLI above count bytes, where the same file is valid
ONE_LONG_WORD = "three-megabyte-cell"
APP_VALID = [c for c in VALID if c.id != ONE_LONG_WORD]


@pytest.mark.parametrize("case", cases(APP_VALID))
def test_app_upload_of_odd_but_valid_text_becomes_the_dataset(case):
    at = _explorer()
    _upload(at, case.name, case.data)
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert _documents(at) == f"{len(case.texts):,}"
    assert _plain(at.subheader[0].value).startswith(f"uploaded: {case.name}")


def test_app_upload_of_one_three_megabyte_word_is_one_line_naming_the_limit():
    case = next(c for c in VALID if c.id == ONE_LONG_WORD)
    at = _explorer()
    _upload(at, case.name, case.data)
    errors = [_plain(e.value) for e in at.error]
    assert not at.exception and len(errors) == 1, errors
    assert "unbroken run of 3,000,000 characters" in errors[0] and "PACKING_LAB_MAX_WORD_CHARS" in errors[0], errors


def test_app_error_about_a_previous_file_goes_when_another_file_is_chosen():
    at = _explorer()
    _upload(at, "latin1.csv", "text\nok\ncafé\n".encode("latin-1"))  # fails at 'Analyse'
    _upload(at, "semicolon.csv", b"length;text\n3;abc\n")          # fails before 'Analyse'
    assert [e.value for e in at.error if "latin1" in e.value] == []


def test_app_reads_a_good_file_after_a_bad_one_in_the_same_session():
    at = _explorer()
    _upload(at, "negative.csv", b"length\n5\n-3\n")
    assert len(at.error) == 1
    _upload(at, "good.csv", b"length\n5\n3\n8\n")
    assert not at.error and _documents(at) == "3"


# ---------------------------------------------------------------- the app's upload (a real browser)
BROWSER_BAD = ["semicolon-delimiter", "binary-garbage", "non-utf8", "deep-json-arrays", "zero-length",
               "parquet-named-csv", "truncated-parquet", "corrupt-parquet-pages"]
HOSTILE_NAME = '<img src=x onerror=alert(1)><b id=injected>x</b>.csv'


def _browser_upload(app_page, name: str, data: bytes | None = None, path: Path | None = None) -> None:
    app_page.upload(str(path) if path else {"name": name, "mimeType": "application/octet-stream", "buffer": data})
    if app_page.page.get_by_role("button", name="Analyse this file").count():
        app_page.click("Analyse this file")


@pytest.mark.browser
def test_browser_upload_of_hostile_files_shows_one_escaped_error_each_and_keeps_working(app_page):
    app_page.open("dataset_explorer")
    before = app_page.metric("Documents")
    by_id = {c.id: c for c in CATALOGUE}
    for case in (by_id[i] for i in BROWSER_BAD):
        _browser_upload(app_page, case.name, case.data)
        errors = app_page.alerts("error")
        assert len(errors) == 1, (case.id, errors)  # and none left over from the previous file
        assert case.name in errors[0] and re.search(case.error, errors[0]), (case.id, errors[0])
        assert app_page.metric("Documents") == before, case.id  # the built-in numbers still render
        app_page.assert_healthy()
    app_page.screenshot("explorer-after-hostile-uploads")


@pytest.mark.browser
def test_browser_shows_html_in_a_file_name_and_texts_as_text_never_as_markup(app_page):
    app_page.open("dataset_explorer")
    _browser_upload(app_page, HOSTILE_NAME, _csv(["text"], [[h] for h in HTML]))
    assert app_page.metric("Documents") == f"{len(HTML)}"
    page = app_page.page
    assert page.locator("#injected, img[src='x'], h1#injected").count() == 0
    assert "<img src=x onerror=alert(1)>" in app_page.text()  # the literal name, shown as text
    app_page.assert_healthy()  # includes: no alert() dialog fired
    app_page.screenshot("explorer-hostile-file-name")


@pytest.mark.browser
def test_browser_analyses_a_million_line_text_upload_within_a_minute(app_page, million_txt):
    path, widths = million_txt
    app_page.open("dataset_explorer")
    app_page.unfold(app_page.control("combobox", "Tokenizer"), "Use your own data")
    app_page.select("Tokenizer", "bytes")   # the widths below are bytes (auto would pick SmolLM2's tokens)
    start = time.perf_counter()
    _browser_upload(app_page, path.name, path=path)
    assert app_page.metric("Documents") == "1,000,000"
    assert app_page.metric("Longest") == f"{int(widths.max()):,}"
    assert time.perf_counter() - start < 60
    app_page.assert_healthy()


# ---------------------------------------------------------------- round 2: the CLI under a budget
# Every case runs ``python -m packing_core report`` in a child process with a timeout and
# measures the child's peak memory (``os.wait4``). Six classes: silently wrong numbers,
# memory unbounded by the input, hangs, tracebacks, messages, one answer per input.
CLI_MEMORY_LIMIT_MIB = 1024
CLASSES = ("numbers", "memory", "hangs", "tracebacks", "messages", "answers")


def run_measured(argv: list[str], env: dict | None = None, timeout: float = 60, command=None) -> Measured:
    """Run the CLI (or ``command``) in a child; its own peak RSS comes from ``os.wait4``."""
    import signal
    import tempfile

    command = command or [sys.executable, "-m", "packing_core", "report", *argv]
    with tempfile.TemporaryDirectory() as tmp:
        out, err, usage = (Path(tmp) / n for n in ("out", "err", "usage"))
        start = time.perf_counter()
        with open(out, "wb") as o, open(err, "wb") as e:
            launcher = subprocess.Popen([sys.executable, "-I", "-S", "-c", LAUNCHER, str(usage), *command], cwd=ROOT,
                                        env={**CLI_ENV, **(env or {})}, stdout=o, stderr=e, stdin=subprocess.DEVNULL,
                                        start_new_session=True)
            try:
                launcher.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(launcher.pid, signal.SIGKILL)  # the launcher and the child: a hang
                launcher.wait()
        seconds = time.perf_counter() - start
        rc, peak_kib = map(int, usage.read_text().split()) if usage.exists() else (-9, 0)
        return Measured(rc, out.read_text(errors="replace"), err.read_text(errors="replace"), peak_kib / 1024, seconds)


@dataclass(frozen=True)
class CliCase:
    """A hostile (or odd but valid) CLI run: ``make(folder)`` writes its files and returns the arguments.

    ``error`` is a regex for the one ``error:`` line; None means valid, and ``check`` then
    gets the JSON report and returns True when the numbers are right.
    """

    id: str
    cls: str
    make: object
    error: str | None = None
    check: object = None
    env: tuple = ()


def _write(folder: Path, name: str, data: bytes | str) -> str:
    path = folder / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return str(path)


def _pq(folder: Path, name: str, table: pa.Table) -> str:
    pq.write_table(table, folder / name)
    return str(folder / name)


def _fifo(folder: Path) -> list[str]:
    path = folder / "pipe.csv"
    if not path.exists():
        os.mkfifo(path)
    return [str(path)]


def _loop(folder: Path) -> list[str]:
    path = folder / "loop.csv"
    if not path.is_symlink():
        path.symlink_to("loop.csv")
    return [str(path)]


def _dict_bomb(folder: Path) -> list[str]:
    """1,000 rows sharing one 2 MB string: 94 KB on disk, 2 GB once decoded."""
    values = pa.DictionaryArray.from_arrays(pa.array([0] * 1000, pa.int32()), pa.array(["x" * 2_000_000]))
    return [_pq(folder, "dictbomb.parquet", pa.table({"text": values})), "--tokenizer", "bytes"]


def _one(report: dict, key: str):
    rows = report["strategies"]
    assert len({m[key] for m in rows}) == 1, report
    return rows[0][key]


BIG = 2**40  # MAX_LENGTH
CLI_CASES = [
    # 1. silently wrong numbers: exact, or refused
    CliCase("sum-of-lengths-near-1e18", "numbers",
            lambda d: [_write(d, "near1e18.csv", "length\n" + "999999999999999999\n" * 10), "--overlong", "truncate"],
            r"999999999999999999.*above the largest length"),
    CliCase("uint64-max-in-parquet", "numbers",
            lambda d: [_pq(d, "u64.parquet", pa.table({"length": pa.array([5, 2**64 - 1], pa.uint64())}))],
            r"row 2 holds 18,446,744,073,709,551,615"),
    CliCase("int64-min-in-parquet", "numbers",
            lambda d: [_pq(d, "i64.parquet", pa.table({"length": pa.array([5, -2**63], pa.int64())}))],
            r"row 2 holds -9223372036854775808"),
    CliCase("lengths-adding-past-max-total", "numbers",
            lambda d: [_write(d, "total.csv", "length\n" + f"{BIG}\n" * 8200), "--overlong", "truncate"],
            r"9,015,995,347,763,200 tokens, more than the lab accepts"),
    CliCase("attention-cost-past-int64-is-exact", "numbers",
            lambda d: ["--lengths", ",".join(["7"] * 200), "--context", str(2**28), "--strategy", "pad"],
            check=lambda r: _one(r, "attention_cost_padded") == 200 * 2**56),
    CliCase("tokens-lost-near-max-length-exact", "numbers",
            lambda d: ["--lengths", f"{BIG},5", "--overlong", "truncate", "--strategy", "pad"],
            check=lambda r: _one(r, "tokens_lost") == BIG - 512 and _one(r, "real_tokens") == 517),
    CliCase("context-10-billion", "numbers", lambda d: ["--lengths", "5,3", "--context", "10000000000", "--strategy", "pad"],
            r"context must be at most 268,435,456, got 10,000,000,000"),
    CliCase("json-length-2-to-the-63", "numbers",
            lambda d: [_write(d, "big.jsonl", '{"length": 5}\n{"length": %d}\n' % 2**63)], r"line 2.*too large"),
    # 2. memory bounded by a budget, not by the input
    CliCase("parquet-20M-rows-in-84KB", "memory",
            lambda d: [_pq(d, "rows.parquet", pa.table({"length": pa.array(np.ones(20_000_000, np.int64))}))],
            r"20,000,000 rows \(limit 10,000,000, PACKING_LAB_MAX_ROWS\) \(from its metadata\)"),
    CliCase("parquet-one-64MB-string", "memory",
            lambda d: [_pq(d, "bigstring.parquet", pa.table({"text": ["a" * 64_000_000]})), "--tokenizer", "bytes"],
            r"holds 64,000,0\d\d bytes of text in 1 rows \(from its metadata\), more than one document"),
    CliCase("parquet-dictionary-bomb", "memory", _dict_bomb, r"2,000,008,000 bytes \(limit .*PACKING_LAB_MAX_BYTES\)"),
    CliCase("csv-400k-columns", "memory",
            lambda d: [_write(d, "wide.csv", ",".join(f"c{i}" for i in range(400_000)) + "\n" + "1," * 399_999 + "1\n")],
            r"and 399,980 more\]; pass column="),
    CliCase("context-200M-sizes-nothing-by-it", "memory",
            lambda d: ["--lengths", "5,3,300000000", "--context", "200000000"],
            check=lambda r: {m["strategy"] for m in r["strategies"]} >= {"bucket", "bfd"} and _one(r, "documents") == 3),
    CliCase("txt-one-50MB-line", "memory", lambda d: [_write(d, "line.txt", "a" * 50_000_000 + "\n")],
            r"line 1 is longer than 4,194,304 bytes"),
    CliCase("jsonl-one-50MB-line", "memory",
            lambda d: [_write(d, "line.jsonl", '{"text": "' + "a" * 50_000_000 + '"}\n')], r"line 1 is longer than"),
    CliCase("csv-one-50MB-cell", "memory", lambda d: [_write(d, "cell.csv", "text\n" + "a" * 50_000_000 + "\n")],
            r"data row 1 is longer than 8,388,608 bytes"),
    CliCase("txt-rows-past-the-budget", "memory", lambda d: [_write(d, "rows.txt", "ab\n" * 5000)],
            r"5,000 rows \(limit 1,000, PACKING_LAB_MAX_ROWS\) by line 5000", env=(("PACKING_LAB_MAX_ROWS", "1000"),)),
    CliCase("bytes-past-the-budget", "memory", lambda d: [_write(d, "bytes.csv", "length\n" + "7\n" * 300_000)],
            r"bytes \(limit 100,000, PACKING_LAB_MAX_BYTES\)", env=(("PACKING_LAB_MAX_BYTES", "100000"),)),
    CliCase("budget-setting-not-a-number", "memory", lambda d: [_write(d, "ok.csv", "length\n7\n")],
            r"PACKING_LAB_MAX_ROWS='lots' is not a positive number", env=(("PACKING_LAB_MAX_ROWS", "lots"),)),
    # 3. hangs: only regular files are read
    CliCase("fifo", "hangs", _fifo, r"pipe.csv is a FIFO \(named pipe\), not a regular file"),
    CliCase("character-device", "hangs", lambda d: ["/dev/zero"], r"/dev/zero is a character device"),
    # a folder is an input (the shards of a corpus): an empty one is named, whatever its suffix
    CliCase("folder-with-a-suffix", "hangs", lambda d: [str(d / "folder.csv")], r"folder.*folder.csv.* holds no data files"),
    # 4. tracebacks: one line instead
    CliCase("context-1e20", "tracebacks", lambda d: ["--lengths", "5", "--context", "1e20"], r"--context: '1e20' is not a whole"),
    CliCase("context-10-to-the-20", "tracebacks", lambda d: ["--lengths", "5", "--context", str(10**20)],
            r"context must be at most 268,435,456"),
    CliCase("batch-size-1e20", "tracebacks", lambda d: ["--lengths", "5", "--batch-size", "1e20"], r"--batch-size: '1e20'"),
    CliCase("batch-size-10-to-the-20", "tracebacks", lambda d: ["--lengths", "5", "--batch-size", str(10**20)],
            r"batch_size must be at most 1,048,576"),
    CliCase("seed-negative", "tracebacks", lambda d: ["--lengths", "5", "--seed", "-1"], r"--seed: seed must be at least 0"),
    CliCase("jsonl-lone-surrogate-key", "tracebacks", lambda d: [_write(d, "surkey.jsonl", '{"\\ud800": 1}\n')],
            r"surkey.jsonl: line 1 holds a lone surrogate"),
    CliCase("jsonl-lone-surrogate-text", "tracebacks",
            lambda d: [_write(d, "surtext.jsonl", '{"text": "ok"}\n{"text": "a\\udfffb"}\n'), "--tokenizer", "bytes"],
            r"surtext.jsonl: line 2 holds a lone surrogate"),
    # 5. messages: names escaped, causes named, places named
    CliCase("newline-in-file-name", "messages", lambda d: [_write(d, "two\nlines.csv", "length\n0\n")],
            r"two\\nlines.csv: column 'length' at data row 1 holds 0"),
    CliCase("ansi-escapes-in-file-name", "messages",
            lambda d: [_write(d, "t\x1b]0;pwned\x07\x1b[2J.csv", "length\n0\n")], r"t\\x1b\]0;pwned\\x07\\x1b\[2J.csv"),
    CliCase("bidi-override-in-file-name", "messages", lambda d: [_write(d, "a\u202ecod.csv", "length\n0\n")], r"a\\u202ecod.csv"),
    CliCase("undecodable-jsonl-value", "messages",
            lambda d: [_write(d, "bad.jsonl", b'{"text": "ok"}\n{"text": "caf\xe9"}\n'), "--tokenizer", "bytes"],
            r"bad.jsonl is not UTF-8 text \(line 2"),
    CliCase("undecodable-csv-header", "messages", lambda d: [_write(d, "badhead.csv", b"l\xe9ngth\n3\n")],
            r"badhead.csv is not UTF-8 text \(line 1"),
    # 6. one answer per input
    CliCase("float-text-in-csv", "answers", lambda d: [_write(d, "f.csv", "length\n12.0\n")], r"f.csv.*holds '12.0'"),
    CliCase("float-in-jsonl", "answers", lambda d: [_write(d, "f.jsonl", '{"length": 12.0}\n')], r"f.jsonl.*holds 12.0"),
    CliCase("float-in-parquet", "answers", lambda d: [_pq(d, "f.parquet", pa.table({"length": [12.0]}))], r"holds 12.0, a"),
    CliCase("float-in-lengths", "answers", lambda d: ["--lengths", "12.0"], r"item 1 holds '12.0'"),
    CliCase("plus-sign-in-csv", "answers", lambda d: [_write(d, "p.csv", "length\n+7\n5\n")],
            check=lambda r: _one(r, "real_tokens") == 12),
    CliCase("plus-sign-in-lengths", "answers", lambda d: ["--lengths", "+7,5"], check=lambda r: _one(r, "real_tokens") == 12),
    CliCase("bare-cr-in-txt", "answers", lambda d: [_write(d, "cr.txt", "ab\rcde\rf\r"), "--tokenizer", "bytes"],
            check=lambda r: _one(r, "documents") == 3 and _one(r, "real_tokens") == 6),
    CliCase("bare-cr-in-csv", "answers", lambda d: [_write(d, "cr.csv", "text\rab\rcde\rf\r"), "--tokenizer", "bytes"],
            check=lambda r: _one(r, "documents") == 3 and _one(r, "real_tokens") == 6),
    CliCase("duplicate-parquet-columns", "answers",
            lambda d: [_pq(d, "dup.parquet", pa.table([pa.array([1]), pa.array([2])], names=["length", "length"]))],
            r"dup.parquet has two columns named 'length'"),
    CliCase("duplicate-csv-columns", "answers", lambda d: [_write(d, "dup.csv", "length,length\n1,2\n")],
            r"dup.csv has two columns named 'length'"),
    CliCase("symlink-loop", "answers", _loop, r"loop.csv is a symbolic link loop"),
    CliCase("missing-file", "answers", lambda d: [str(d / "nowhere.csv")], r"file not found: .*nowhere.csv"),
    CliCase("token-id-lists-in-parquet", "answers",
            lambda d: [_pq(d, "ids.parquet", pa.table({"input_ids": [[1, 2, 3], [4], [5, 6]]}))],
            check=lambda r: _one(r, "documents") == 3 and _one(r, "real_tokens") == 6),
    CliCase("token-id-lists-in-jsonl", "answers",
            lambda d: [_write(d, "ids.jsonl", '{"input_ids": [1, 2, 3]}\n{"input_ids": [4]}\n{"input_ids": [5, 6]}\n')],
            check=lambda r: _one(r, "documents") == 3 and _one(r, "real_tokens") == 6),
]
assert {c.cls for c in CLI_CASES} == set(CLASSES) and len({c.id for c in CLI_CASES}) == len(CLI_CASES)


def measure_case(case: CliCase, folder: Path, timeout: float = 60) -> Measured:
    argv = case.make(folder)
    return run_measured([*argv, "--format", "json"], env=dict(case.env), timeout=timeout)


@pytest.fixture(scope="module")
def cli_round2(tmp_path_factory) -> dict[str, Measured]:
    """Every round-2 case, two at a time; each child gets its own folder and 60 s."""
    folders = {c.id: tmp_path_factory.mktemp(c.id[:30]) for c in CLI_CASES}
    (folders["folder-with-a-suffix"] / "folder.csv").mkdir()
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = {c.id: pool.submit(measure_case, c, folders[c.id]) for c in CLI_CASES}
        return {k: f.result() for k, f in runs.items()}


@pytest.mark.parametrize("case", [pytest.param(c, id=f"{c.cls}-{c.id}") for c in CLI_CASES])
def test_cli_round2_case_answers_in_one_line_or_with_exact_numbers_within_budget(case, cli_round2):
    r = cli_round2[case.id]
    assert r.rc not in (-9, 137), f"killed after the timeout ({r.seconds:.0f} s): a hang"
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.peak_mib <= CLI_MEMORY_LIMIT_MIB, f"peak {r.peak_mib:,.0f} MiB > {CLI_MEMORY_LIMIT_MIB} MiB"
    if case.error is None:
        assert r.rc == 0, r.stderr[-500:]
        assert case.check(json.loads(r.stdout)), r.stdout[:2000]
        return
    assert r.rc == 2, (r.rc, r.stderr[-500:])
    assert r.stdout == ""
    assert r.stderr.endswith("\n") and r.stderr.count("\n") == 1, repr(r.stderr[-1000:])
    line = r.stderr.rstrip("\n")
    assert line.startswith("error: ") and len(line) < 600, line[:700]
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f\u202e]", line), f"raw control characters: {line!r}"
    assert re.search(case.error, line), f"{line!r} does not match {case.error!r}"


def test_run_measured_sees_the_childs_own_peak_memory_not_ours():
    """The measurement can fail both ways: 300 MiB must read as >= 300, a bare interpreter as < 60."""
    big = run_measured([], command=[sys.executable, "-c", "import numpy as np; print(np.ones(300 << 17).sum())"])
    small = run_measured([], command=[sys.executable, "-S", "-c", "print(1)"])
    assert big.rc == 0 and big.peak_mib >= 300, big
    assert small.rc == 0 and small.peak_mib < 60, small


def test_a_huge_document_makes_a_histogram_of_a_bounded_number_of_bins():
    from packing_core.analysis import length_histogram
    from packing_lab.viz import length_histogram_figure

    for lengths, context in (([5, 10**9], 512), ([1] * 10 + [2**40], 1), (list(range(1, 100_000)), 2**28)):
        h = length_histogram(lengths, context)
        assert len(h.counts) <= 120 and int(h.counts.sum()) == len(lengths)
        assert len(length_histogram_figure(h).data[0].x) <= 120


def test_plan_figures_are_bounded_whatever_the_context_and_the_number_of_rows():
    from packing_core import make_plan
    from packing_lab.advice import row_order
    from packing_lab.viz import plan_strip, row_order_figure

    huge = make_plan([2**28 - 1, 5, 7], 2**28, "pad")  # three rows of 2**28 slots
    fig = plan_strip(huge, max_cols=512)
    assert np.asarray(fig.data[0].z).size <= 3 * 512
    tiny = make_plan(np.ones(200_000, np.int64), 2**20, "bfd")  # one row, 200,000 one-token documents
    assert all(len(t.x) <= 2000 for t in plan_strip(tiny, max_cols=512).data[1:] if t.x is not None)
    many = make_plan(np.full(100_000, 9), 16, "ffd")  # 100,000 rows
    fig = row_order_figure({"ffd": row_order(many)})
    assert len(fig.data[0].x) <= 2000 and int(max(fig.data[0].y)) == 9


def _one_error_line(r: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and r.stderr.startswith("error: "), r.stderr[-1000:]
    return r.stderr.strip()


@pytest.mark.skipif(__import__("importlib.util").util.find_spec("flash_attn") is not None, reason="flash-attn is installed")
def test_verify_with_flash_attention_names_the_missing_package_not_the_model(tmp_path):
    """Even with no model installed at all, the missing kernel package is the first cause named."""
    env = {**CLI_ENV, "PACKING_LAB_CACHE": str(tmp_path / "cache"), "PACKING_LAB_MODELS": str(tmp_path / "models")}
    r = subprocess.run([sys.executable, "-m", "packing_core", "verify", "--model", "smollm2", "--attn-implementation",
                        "flash_attention_2"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    line = _one_error_line(r)
    assert "flash-attn package, which is not installed" in line and "not installed (and no" not in line


def test_an_empty_tokenizer_folder_in_the_cache_is_named_in_one_line(tmp_path):
    folder = tmp_path / "cache" / "smollm2-135m-instruct-tokenizer"
    folder.mkdir(parents=True)
    data = tmp_path / "t.csv"
    data.write_text("text\nhello world\n")
    r = subprocess.run([sys.executable, "-m", "packing_core", "report", str(data), "--tokenizer", "smollm2"], cwd=ROOT,
                       env={**CLI_ENV, "PACKING_LAB_CACHE": str(tmp_path / "cache")}, capture_output=True, text=True,
                       timeout=120)
    assert f"the cached tokenizer folder {folder} is empty or broken" in _one_error_line(r)


# ---------------------------------------------------------------- round 2: the app's per-analysis budget
def _rows_txt(n: int) -> bytes:
    return b"ab\n" * n


@pytest.mark.parametrize("name, data, env, shown", [
    ("rows.txt", _rows_txt(5000), {"PACKING_LAB_MAX_ROWS": "1000"}, r"5,000 rows \(limit 1,000, PACKING_LAB_MAX_ROWS\)"),
    ("bytes.csv", b"length\n" + b"7\n" * 300_000, {"PACKING_LAB_MAX_BYTES": "100000"}, r"limit 100,000, PACKING_LAB_MAX_BYTES"),
    ("surrogate.jsonl", b'{"\\ud800": 1}\n', {}, r"line 1 holds a lone surrogate"),
], ids=["rows", "bytes", "lone-surrogate-key"])
def test_app_upload_past_the_budget_shows_one_error_and_the_next_file_is_served(name, data, env, shown, monkeypatch):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    at = _explorer()
    before = _documents(at)
    _upload(at, name, data)
    assert not at.exception, at.exception[0].value
    errors = [_plain(e.value) for e in at.error]
    assert len(errors) == 1 and re.search(shown, errors[0]) and name in errors[0], errors
    assert _documents(at) == before
    _upload(at, "good.csv", b"length\n5\n3\n8\n")  # the same session, the next file: served
    assert not at.error and _documents(at) == "3"


def _parquet_bytes(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


@pytest.mark.browser
def test_browser_hostile_uploads_leave_the_server_small_and_serving_the_next_user(app_page, browser):
    """After each bomb: one error (or the right numbers), no exception box, the tab still answers,
    the server's memory back near its baseline, its peak at most 400 MiB above it and below 2 GiB; then a new visitor
    is served."""
    import psutil

    server = psutil.Process(app_page.server.pid)
    app_page.open("dataset_explorer")
    before = app_page.metric("Documents")
    _browser_upload(app_page, "warm.csv", b"length\n5\n0\n")  # refused: imports the upload path, keeps the form open
    baseline = server.memory_info().rss
    # The server is the session's: earlier tests loaded models into it. Its high-water mark starts again here
    # (clear_refs 5, Linux 4.0+), so the peak below is what these uploads cost, not what the session did before.
    Path(f"/proc/{server.pid}/clear_refs").write_text("5")
    bomb = pa.DictionaryArray.from_arrays(pa.array(np.zeros(1000, np.int32)), pa.array(["x" * 2_000_000]))
    uploads = [
        ("rows.parquet", _parquet_bytes(pa.table({"length": pa.array(np.ones(20_000_000, np.int64))})), r"20,000,000 rows"),
        ("bomb.parquet", _parquet_bytes(pa.table({"text": bomb})), r"PACKING_LAB_MAX_BYTES"),
        ("string.parquet", _parquet_bytes(pa.table({"text": ["a" * 64_000_000]})), r"more than one document may hold"),
        ("surrogate.jsonl", b'{"\\ud800": 1}\n', r"lone surrogate"),
        ("wide.csv", (",".join(f"c{i}" for i in range(400_000)) + "\n" + "0," * 399_999 + "0\n").encode(),
         r"wide.csv has columns \['c0'.*pass column="),   # no column is guessed: the kind is detected, or named
        ("billion.csv", b"length\n1000000000\n", None),  # valid: one document of 10^9 tokens
    ]
    for name, data, error in uploads:
        start = time.perf_counter()
        _browser_upload(app_page, name, data)
        app_page.assert_healthy()
        if error is None:
            assert app_page.metric("Documents") == "1", name
            assert app_page.page.locator(".js-plotly-plot .bars path").count() <= 2 * 120 + 10, name
        else:
            errors = app_page.alerts("error")
            assert len(errors) == 1 and re.search(error, errors[0]), (name, errors)
            assert app_page.metric("Documents") == before, name
        assert time.perf_counter() - start < 60, f"{name} took {time.perf_counter() - start:.0f} s"
        grown = (server.memory_info().rss - baseline) / 2**20
        assert grown < 300, f"after {name} the server holds {grown:,.0f} MiB more than its baseline"
    peak = int(re.search(r"VmHWM:\s+(\d+) kB", Path(f"/proc/{server.pid}/status").read_text()).group(1)) / 2**10
    above = peak - baseline / 2**20
    assert above <= 400, f"the uploads took the server {above:,.0f} MiB above its baseline (peak {peak:,.0f} MiB)"
    assert peak <= 2048, f"the server peaked at {peak:,.0f} MiB"
    context = browser.new_context()  # the next student: a fresh session on the same server
    try:
        context.set_default_timeout(60_000)
        # the whole first run, then the metric by its label (the first metric box to render may be another)
        visitor = AppPage(context.new_page(), app_page.server, app_page.shots).open("dataset_explorer")
        visitor.assert_healthy()
        assert visitor.metric("Documents") == before
    finally:
        context.close()
