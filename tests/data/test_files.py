"""The reader's defences, one behaviour each: safe JSON, safe output paths, bounded reads."""
from __future__ import annotations

import os

import pytest

from packing_core.data.files import check_output, load_json, read_bytes, write_atomic
from packing_core.data.profile import LengthProfile
from packing_core.data.sources import find_shards


@pytest.mark.parametrize("raw, message", [
    (b'{"a": 1, "a": 2}', "holds the key 'a' twice"),
    (b'{"a": NaN}', "holds NaN"),
    (b'{"a": -Infinity}', "holds -Infinity"),
    (b"[" * 50_000 + b"]" * 50_000, "nested too deeply"),
    (b'{"a": 18446744073709551516}', "past 9,223,372,036,854,775,807"),
    (b"[" + b"1," * 1000 + b"1]", "more than the lab reads in one"),
    (b'{"a": "caf\xe9"}', "not UTF-8 text"),
])
def test_load_json_refuses_what_json_loads_would_accept_or_crash_on(raw, message):
    with pytest.raises(ValueError, match=message):
        load_json(raw, "x.json", duplicates=True, max_int=2**63 - 1, max_items=500)


def test_load_json_reads_plain_json():
    assert load_json(b'{"a": [1, 2], "b": {"c": null}}', "x.json", duplicates=True) == {"a": [1, 2], "b": {"c": None}}


def test_check_output_refuses_an_input_through_a_hard_link(tmp_path):
    (tmp_path / "data.txt").write_text("hi\n")
    os.link(tmp_path / "data.txt", tmp_path / "out.json")
    with pytest.raises(ValueError, match="is one of the inputs"):
        check_output(tmp_path / "out.json", [tmp_path / "data.txt"])
    assert check_output(tmp_path / "new.json", [tmp_path / "data.txt"]) == tmp_path / "new.json"


def test_write_atomic_leaves_the_old_file_and_no_temporary_when_writing_fails(tmp_path):
    target = tmp_path / "p.json"
    target.write_text("old")

    def fails(f):
        f.write(b"half")
        raise OSError(28, "No space left on device")

    with pytest.raises(ValueError) as e:
        write_atomic(target, fails)
    assert "p.json" in str(e.value) and ".part" not in str(e.value)
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["p.json"]


def test_read_bytes_refuses_a_fifo_and_reads_at_most_the_limit(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(ValueError, match="is a FIFO"):
        read_bytes(tmp_path / "pipe", "the profile", 100)
    (tmp_path / "big").write_bytes(b"x" * 101)
    with pytest.raises(ValueError, match="larger than 100 bytes"):
        read_bytes(tmp_path / "big", "the profile", 100)


def test_a_folder_linking_to_itself_yields_each_file_once(tmp_path):
    (tmp_path / "a.txt").write_text("hi\n")
    (tmp_path / "self").symlink_to(".")
    (tmp_path / "again").symlink_to(".")
    assert [str(s.path) for s in find_shards([tmp_path])] == [str(tmp_path / "a.txt")]
    assert [str(s.path) for s in find_shards([str(tmp_path / "**" / "*.txt")])] == [str(tmp_path / "a.txt")]


def test_profile_counts_past_the_limits_are_refused_not_wrapped():
    with pytest.raises(ValueError, match="more than the lab accepts"):
        LengthProfile.from_counts({5: 2**62})
    big = LengthProfile.from_counts({2**40: 2**12, 3: 2**29})   # 4.5e15 tokens: exact in int64
    assert big.tokens == 2**52 + 3 * 2**29 and big.documents == 2**29 + 2**12
