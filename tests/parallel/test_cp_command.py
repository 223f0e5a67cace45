"""The cp command: balance per scheme, rank files with --out, and check --cp reading them back."""
import io
import json

import pytest

from packing_core.cli import main


def run_cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), out, err), out.getvalue(), err.getvalue()


def test_the_table_gives_each_scheme_at_each_size():
    code, out, err = run_cli("cp", "--lengths", "16,16,9,30", "--context", "32", "--cp", "2,4")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].startswith("bfd rows at context 32") and len(lines) == 2 + 6


def test_json_carries_each_ranks_work_and_the_pads():
    code, out, _ = run_cli("cp", "--lengths", "7,5", "--context", "16", "--cp", "2", "--scheme", "zigzag-document",
                           "--format", "json")
    (b,) = json.loads(out)["balance"]
    assert code == 0 and b["pads_added"] == 1 + 3 and sum(b["work"]) == 28 + 15


def test_out_writes_one_file_per_rank_that_check_finds_sound(tmp_path):
    code, out, _ = run_cli("cp", "--lengths", "7,5,12,3", "--context", "32", "--cp", "2", "--scheme",
                           "zigzag-document", "--out", str(tmp_path / "ranks"))
    assert code == 0 and "wrote 2 rank files" in out
    assert sorted(p.name for p in (tmp_path / "ranks").iterdir()) == ["rank-0.safetensors", "rank-1.safetensors"]
    code, out, _ = run_cli("check", str(tmp_path / "ranks"), "--cp", "2", "--cp-scheme", "zigzag-document")
    assert code == 0 and "SOUND" in out
    code, out, _ = run_cli("check", str(tmp_path / "ranks" / "rank-1.safetensors"), "--cp", "2", "--format", "json")
    assert code == 0 and json.loads(out)["ranks"] == [1]


def test_check_under_the_wrong_scheme_exits_one_and_names_the_finding(tmp_path):
    run_cli("cp", "--lengths", "7,5,12,3", "--context", "32", "--cp", "2", "--scheme", "zigzag-row", "--out",
            str(tmp_path))
    code, out, _ = run_cli("check", str(tmp_path), "--cp", "2", "--cp-scheme", "contiguous")
    assert code == 1 and "cp_chunks_not_the_scheme" in out


@pytest.mark.parametrize("argv, match", [
    (["cp", "--lengths", "7,5"], "give the context-parallel size"),
    (["cp", "--lengths", "7,5", "--cp", "0"], "--cp must be at least 1"),
    (["cp", "--lengths", "7,5", "--cp", "1000000"], "at most 1,024"),
    (["cp", "--lengths", "7,5", "--cp", "2,x"], "not a whole number"),
    (["cp", "--lengths", "7,5", "--cp", "2,4", "--out", "x"], "one --cp size and one --scheme"),
    (["cp", "--lengths", "7,5", "--cp", "2", "--tp", "0"], "--tp must be at least 1"),
    (["check", "x.safetensors", "--cp", "2,4"], "one size"),
])
def test_bad_input_is_one_error_line_and_exit_two(argv, match):
    code, out, err = run_cli(*argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and match in err, err


def test_cp_one_and_three_are_ordinary_sizes():
    for n in ("1", "3"):
        code, out, _ = run_cli("cp", "--lengths", "7,5,12", "--context", "24", "--cp", n)
        rows = [line.split() for line in out.splitlines()[2:]]
        assert code == 0 and [r[:2] for r in rows] == [[s, n] for s in ("contiguous", "zigzag-row", "zigzag-document")]


def test_a_profile_is_balanced_from_its_counts_like_its_lengths(tmp_path):
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps({"schema_version": 1, "kind": "text", "tokenizer": {"name": "bytes"},
                                   "counts": {"7": 3, "300": 2, "512": 1}, "sources": [], "over_cap": {}}))
    code, from_counts, _ = run_cli("cp", "--profile", str(profile), "--cp", "2", "--format", "json")
    code2, from_lengths, _ = run_cli("cp", "--lengths", "7,7,7,300,300,512", "--cp", "2", "--format", "json")
    assert code == code2 == 0
    assert json.loads(from_counts)["balance"] == json.loads(from_lengths)["balance"]
    code, _, err = run_cli("cp", "--profile", str(profile), "--cp", "2", "--strategy", "ffd")
    assert code == 2 and "balanced from its length counts, packed by bfd" in err
