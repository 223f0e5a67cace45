"""A big file of lines scanned as ranges of whole lines: every line once, named by its number in the file."""
from __future__ import annotations

import json

import pytest

from packing_core._validate import InputError
from packing_core.data import sources
from packing_core.data.sources import _lines


@pytest.fixture
def small_pieces(monkeypatch):
    monkeypatch.setattr(_lines, "MIN_PIECE_BYTES", 1000)


def _read_all(parts, column):
    out = []
    for part in parts:
        for batch, where in sources.read_batches(part, [column]):
            out += [(where(i), v) for i, v in enumerate(batch.column(0).to_pylist())]
    return out


@pytest.mark.parametrize("name", ["a.jsonl", "a.txt"])
def test_ranges_hold_every_line_once_numbered_as_in_the_file(tmp_path, small_pieces, name):
    texts = [f"document {i} " + "word " * (i % 17) for i in range(2000)]
    path = tmp_path / name
    path.write_text("".join((json.dumps({"text": t}) if name.endswith("jsonl") else t) + "\n" for t in texts))
    (whole,) = sources.find_shards([path])
    parts = sources.split_shard(whole, 8)
    assert len(parts) == 8 and sum(p.size for p in parts) == whole.size
    assert [p.lines[0] for p in parts[1:]] == [p.lines[1] for p in parts[:-1]]     # contiguous, no gap, no overlap
    assert _read_all(parts, "text") == _read_all([whole], "text") == [(f"line {i + 1}", t) for i, t in enumerate(texts)]


def test_an_error_in_a_later_range_names_its_line_in_the_file(tmp_path, small_pieces):
    lines = [json.dumps({"text": f"doc {i}"}) for i in range(3000)]
    lines[2500] = '{"text": "unclosed'
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    (whole,) = sources.find_shards([path])
    with pytest.raises(InputError, match="line 2501 is not valid JSON"):
        _read_all(sources.split_shard(whole, 4), "text")


def test_a_small_file_a_carriage_return_file_and_gzip_stay_whole(tmp_path, small_pieces):
    import gzip

    (tmp_path / "small.jsonl").write_text('{"text": "hi"}\n')
    (tmp_path / "cr.txt").write_bytes(b"one\r\ntwo\r\n" * 2000)
    (tmp_path / "big.jsonl.gz").write_bytes(gzip.compress(b"".join(b'{"text": "%d"}\n' % i for i in range(50_000)), 0))
    for name in ("small.jsonl", "cr.txt", "big.jsonl.gz"):
        (shard,) = sources.find_shards([tmp_path / name])
        assert sources.split_shard(shard, 4) == [shard], name
