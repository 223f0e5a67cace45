"""One reader per format, one set of defences: every registered format read the same way, and held to the same limits.

Each test writes real files (pyarrow, csv, gzip) and reads them through ``open_source`` /
``read_batches`` or ``find_shards`` / ``scan``, the way every entry point does.
"""
from __future__ import annotations

import csv
import gzip
import json
import os
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import packing_core.data.sources as sources
from packing_core._settings import ReadBudget
from packing_core._validate import MAX_TEXT_BYTES
from packing_core.data.lengths import byte_tokenizer
from packing_core.data.scan import scan

TEXTS = ["hello", "packing, \"lab\"", "naïve café", "a\tb", "last one"] * 10
LENGTHS = list(range(1, len(TEXTS) + 1))
EVIL = "evil\x1b]0;title\x07\n"
ESCAPED = "evil\\x1b]0;title\\x07\\n"
SAVED_DATASET = "save_to_disk"


def _jsonl(texts, lengths) -> bytes:
    return "".join(json.dumps({"text": t, "length": n}) + "\n" for t, n in zip(texts, lengths)).encode()


def _delimited(texts, lengths, delimiter) -> bytes:
    import io

    buf = io.StringIO(newline="")
    w = csv.writer(buf, delimiter=delimiter, lineterminator="\n")
    w.writerow(["text", "length"])
    w.writerows(zip(texts, lengths))
    return buf.getvalue().encode()


def _arrow(texts, lengths, stream: bool) -> bytes:
    table = pa.table({"text": texts, "length": pa.array(lengths, pa.int64())})
    sink = pa.BufferOutputStream()
    with (pa.ipc.new_stream if stream else pa.ipc.new_file)(sink, table.schema) as w:
        w.write_table(table, max_chunksize=7)
    return sink.getvalue().to_pybytes()


def _parquet(texts, lengths) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"text": texts, "length": pa.array(lengths, pa.int64())}), sink, row_group_size=1)
    return sink.getvalue().to_pybytes()


# a writer for every registered format: a format registered without one fails the first test
WRITERS = {
    "csv": lambda t, n: _delimited(t, n, ","),
    "tsv": lambda t, n: _delimited(t, n, "\t"),
    "jsonl": _jsonl,
    "jsonl.gz": lambda t, n: gzip.compress(_jsonl(t, n)),
    "parquet": _parquet,
    "arrow": lambda t, n: _arrow(t, n, stream=True),
    "txt": lambda t, n: "".join(x + "\n" for x in t).encode(),
}
VARIANTS = {"arrow-file": ("arrow", lambda t, n: _arrow(t, n, stream=False))}
SUFFIX = {fmt: next(s for s, f in sources.SUFFIXES.items() if f == fmt) for fmt in sources.READERS}
CASES = sorted(WRITERS) + sorted(VARIANTS)
TXT_SAFE = [t.replace("\t", " ") for t in TEXTS]   # a txt line is the text itself


def _write(folder, case: str, texts=TEXTS, lengths=LENGTHS, stem="corpus"):
    fmt, writer = VARIANTS.get(case, (case, WRITERS.get(case)))
    path = folder / f"{stem}{SUFFIX[fmt]}"
    path.write_bytes(writer(texts, lengths))
    return path


def _read(src, columns, budget=None):
    out = {c: [] for c in columns}
    for batch, _ in sources.read_batches(src, columns, budget):
        for c in columns:
            col = batch.column(c)
            out[c] += (col.dictionary_decode() if pa.types.is_dictionary(col.type) else col).to_pylist()
    return out


def test_every_registered_format_reads_the_same_corpus(tmp_path):
    assert sorted(sources.READERS) == sorted(WRITERS), "write a sample file for every registered format"
    for case in CASES:
        src = sources.open_source(_write(tmp_path, case))
        if src.fmt == "txt":
            assert sources.columns(src) == ["text"]
            assert _read(src, ["text"])["text"] == TEXTS, case
            continue
        assert sources.columns(src) == ["text", "length"], case
        got = _read(src, ["text", "length"])
        assert got["text"] == TEXTS, case
        assert [int(n) for n in got["length"]] == LENGTHS, case   # CSV cells arrive as strings


def test_an_upload_in_memory_reads_as_its_file_does(tmp_path):
    for case in CASES:
        path = _write(tmp_path, case)
        with open(path, "rb") as f:
            upload = sources.open_source(f)
            assert _read(upload, ["text"]) == _read(sources.open_source(path), ["text"]), case


def test_a_saved_dataset_and_a_folder_of_shards_read_through_the_same_readers(tmp_path):
    datasets = pytest.importorskip("datasets")
    saved = tmp_path / "saved"
    datasets.Dataset.from_dict({"text": TEXTS, "length": LENGTHS}).save_to_disk(str(saved))
    shards = tmp_path / "shards"
    shards.mkdir()
    for case in CASES:
        _write(shards, case, stem=f"part-{case}")
    (found,) = sources.find_shards([saved])
    assert found.fmt == "arrow" and found.name.startswith("shard ")
    assert _read(found, ["text"])["text"] == TEXTS
    listed = sources.find_shards([shards])
    assert sorted(s.fmt for s in listed) == sorted(VARIANTS.get(c, (c,))[0] for c in CASES)
    assert all(_read(s, ["text"])["text"] == TEXTS for s in listed)
    assert [s.name for s in sources.find_shards([str(shards / "*.parquet")])] == [f"shard {shards / 'part-parquet.parquet'}"]


# ---------------------------------------------------------------- the defences, for every format
@pytest.mark.parametrize("case", CASES)
def test_a_fifo_is_refused_before_it_is_opened(tmp_path, case):
    fmt = VARIANTS.get(case, (case,))[0]
    pipe = tmp_path / f"pipe{SUFFIX[fmt]}"
    os.mkfifo(pipe)
    start = time.monotonic()
    with pytest.raises(sources.SourceError, match=r"pipe.* is a FIFO \(named pipe\), not a regular file"):
        sources.open_source(pipe)
    with pytest.raises(sources.SourceError, match=r"is a FIFO"):
        sources.find_shards([pipe])
    assert time.monotonic() - start < 2


LOCATION = {"csv": "data row 2", "tsv": "data row 2", "jsonl": "line 2", "jsonl.gz": "line 2", "txt": "line 2",
            "parquet": "row group 1", "arrow": "row 2"}


@pytest.mark.parametrize("case", CASES)
def test_an_over_long_value_is_refused_with_the_escaped_name_and_its_place(tmp_path, case):
    fmt = VARIANTS.get(case, (case,))[0]
    path = _write(tmp_path, case, ["short", "x" * (MAX_TEXT_BYTES + 10), "after"], [1, 2, 3], stem=EVIL)
    with pytest.raises(sources.SourceError) as e:
        _read(sources.open_source(path), ["text"])
    message = str(e.value)
    assert ESCAPED in message and "\x1b" not in message and "\n" not in message
    assert LOCATION[fmt] in message and f"{MAX_TEXT_BYTES:,}" in message, message


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("limit, shown", [
    (ReadBudget(rows=10, bytes=1 << 30, seconds=60), r"rows \(limit 10, PACKING_LAB_MAX_ROWS\)"),
    (ReadBudget(rows=10**6, bytes=100, seconds=60), r"bytes \(limit 100, PACKING_LAB_MAX_BYTES\)"),
    (ReadBudget(rows=10**6, bytes=1 << 30, seconds=1e-9), r"s \(limit 1e-09 s, PACKING_LAB_MAX_SECONDS\)"),
], ids=["rows", "bytes", "seconds"])
def test_the_read_budget_refuses_past_each_limit(tmp_path, case, limit, shown):
    path = _write(tmp_path, case, stem=EVIL)
    with pytest.raises(sources.SourceError, match=shown) as e:
        _read(sources.open_source(path), ["text"], limit)
    assert str(e.value).startswith(f"{tmp_path}/{ESCAPED}") and "is larger than one analysis may read" in str(e.value)


@pytest.mark.parametrize("case", CASES)
def test_the_read_budget_comes_from_the_environment_settings(tmp_path, monkeypatch, case):
    monkeypatch.setenv("PACKING_LAB_MAX_ROWS", "7")
    with pytest.raises(sources.SourceError, match=r"rows \(limit 7, PACKING_LAB_MAX_ROWS\)"):
        _read(sources.open_source(_write(tmp_path, case)), ["text"])


def test_every_defence_holds_for_every_format(tmp_path):
    """The registry and the defences' tests cover the same formats: a new format is tested by adding a writer."""
    covered = {VARIANTS.get(c, (c,))[0] for c in CASES}
    assert covered == set(sources.READERS) == set(LOCATION)


# ---------------------------------------------------------------- shards: in a folder, on both engines
def _evil_folder(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    _write(folder, "jsonl", stem="good")
    _write(folder, "parquet", stem=EVIL)
    return folder


@pytest.mark.parametrize("workers", [0, 1])
def test_a_shard_in_a_folder_is_held_to_the_budget_with_its_name_escaped(tmp_path, workers):
    folder = _evil_folder(tmp_path)
    with pytest.raises(ValueError) as e:
        scan([folder], lambda: byte_tokenizer, workers=workers, budget=ReadBudget(rows=10, bytes=1 << 30, seconds=60))
    message = str(e.value)
    assert f"shard {folder}/" in message and ESCAPED in message and "\x1b" not in message
    assert "rows (limit 10, PACKING_LAB_MAX_ROWS)" in message


def test_a_shard_in_a_folder_refuses_an_over_long_line_by_its_place(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    _write(folder, "jsonl.gz", ["ok", "y" * (MAX_TEXT_BYTES + 1)], [1, 2], stem=EVIL)
    with pytest.raises(ValueError) as e:
        scan([folder], lambda: byte_tokenizer, kind="text", workers=0)
    assert f"shard {folder}/{ESCAPED}.jsonl.gz: line 2: 'text' holds" in str(e.value)


def test_the_ray_engine_reads_through_the_same_defences(tmp_path):
    pytest.importorskip("ray", reason="Ray is an optional extra: pip install -r requirements-ray.txt")
    folder = _evil_folder(tmp_path)
    with pytest.raises(ValueError) as e:
        scan([folder], lambda: byte_tokenizer, engine="ray", workers=1,
             budget=ReadBudget(rows=10, bytes=1 << 30, seconds=60))
    message = str(e.value)
    assert ESCAPED in message and "\x1b" not in message and "rows (limit 10, PACKING_LAB_MAX_ROWS)" in message
