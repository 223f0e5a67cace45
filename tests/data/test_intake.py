"""Your data, one pipeline: report FILE, scan + report --profile, and an upload give the same numbers.

The real SmolLM2 tokenizer counts the tokens (chat lengths are its templated lengths), and
the files are real JSON Lines and Parquet written by pyarrow.
"""
import functools
import io
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from packing_core._validate import InputError
from packing_core.cli import main
from packing_core.data.intake import looks_like_profile, profile_from_inputs, profile_from_upload
from packing_core.data.kinds import detect_kind
from packing_core.data.lengths import byte_tokenizer
from packing_core.data.scan import scan
from packing_core.models.tokenizers import load_tokenizer
from tests._support import write_your_data

SMOLLM2 = functools.partial(load_tokenizer, "smollm2")
BYTES = functools.partial(load_tokenizer, "bytes")


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    return write_your_data(tmp_path_factory.mktemp("your-data"))


def _cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in argv], out, err)
    assert code == 0, err.getvalue()
    return json.loads(out.getvalue())


def _numbers(report: dict) -> dict:
    """What must agree between the paths: the totals, the headline and every whole-corpus plan."""
    return {"documents": report["profile"]["documents"], "tokens": report["profile"]["tokens"],
            "kind": report["profile"]["kind"], "loss_share": report["loss_share"], "headline": report["headline"],
            "plans": [(p["strategy"], p["basis"], p["rows"], p["slots"], p["trained_tokens"]) for p in report["strategies"]]}


@pytest.mark.parametrize("name", ["chats", "pairs", "shards"])
def test_report_file_and_scan_then_report_profile_print_the_same_numbers(name, corpora, tmp_path):
    direct = _cli("report", corpora[name], "--tokenizer", "smollm2", "--format", "json")
    _cli_scan = main(["scan", str(corpora[name]), "--tokenizer", "smollm2", "--workers", "0",
                      "--out", str(tmp_path / "p.json")], io.StringIO(), io.StringIO())
    assert _cli_scan == 0
    via_profile = _cli("report", "--profile", tmp_path / "p.json", "--format", "json")
    assert direct["report_version"] == via_profile["report_version"] == 2
    assert set(direct) == set(via_profile)                       # one shape
    assert _numbers(direct) == _numbers(via_profile)


@pytest.mark.parametrize("name", ["chats", "pairs", "shards"])
def test_an_upload_becomes_the_same_profile_as_the_file(name, corpora):
    path = corpora[name]
    files = sorted(path.iterdir()) if path.is_dir() else [path]
    uploaded = profile_from_upload([(f.name, f.read_bytes()) for f in files], SMOLLM2)
    read = profile_from_inputs([path], SMOLLM2)
    assert uploaded.count_dict() == read.count_dict()
    assert uploaded.trained_tokens == read.trained_tokens and uploaded.kind == read.kind
    assert [s.name for s in uploaded.sources] == [f.name for f in files]     # names, never a server folder


def test_chat_lengths_are_the_templated_lengths_and_only_the_answers_are_in_the_loss(corpora):
    tok = load_tokenizer("smollm2")
    profile = profile_from_inputs([corpora["chats"]], SMOLLM2)
    records = [json.loads(line)["messages"] for line in corpora["chats"].read_text().splitlines()]
    own = sorted(len(tok.hf.apply_chat_template(m, tokenize=True)["input_ids"]) for m in records)
    assert profile.kind == "messages"
    assert np.repeat(profile.lengths, profile.counts).tolist() == own
    assert 0.2 < profile.loss_share < 0.8          # the prompts are attended to, not trained on


def test_prompt_completion_is_planned_on_the_whole_pair_not_the_completion_alone(corpora):
    tok = load_tokenizer("smollm2")
    table = pq.read_table(corpora["pairs"]).to_pydict()
    whole = tok.count([p + c for p, c in zip(table["prompt"], table["completion"])])
    prompt = tok.count(table["prompt"])
    profile = profile_from_inputs([corpora["pairs"]], SMOLLM2)
    assert profile.kind == "prompt-completion"
    assert profile.tokens == int(whole.sum())
    assert profile.trained_tokens == int((whole - prompt).sum())


def test_a_length_column_a_text_column_and_token_id_lists_are_kinds_of_their_own(tmp_path):
    pq.write_table(pa.table({"n_tokens": [3, 9, 3], "text": ["a", "b", "c"]}), tmp_path / "counted.parquet")
    pq.write_table(pa.table({"input_ids": [[1, 2], [3], [4, 5, 6]]}), tmp_path / "ids.parquet")
    with pa.OSFile(str(tmp_path / "ids.arrow"), "wb") as sink:   # what save_to_disk writes: an Arrow stream
        with pa.ipc.new_stream(sink, pa.schema([("input_ids", pa.list_(pa.int64()))])) as w:
            w.write_table(pa.table({"input_ids": [[1, 2], [3], [4, 5, 6]]}))
    counted = profile_from_inputs([tmp_path / "counted.parquet"], BYTES)
    assert (counted.kind, counted.tokenizer, counted.count_dict()) == ("lengths", "none", {3: 2, 9: 1})
    texts = profile_from_inputs([tmp_path / "counted.parquet"], BYTES, kind="text")
    assert (texts.kind, texts.count_dict()) == ("text", {1: 3})
    for name in ("ids.parquet", "ids.arrow"):
        ids = profile_from_inputs([tmp_path / name], BYTES)
        assert (ids.kind, ids.count_dict()) == ("lengths", {1: 1, 2: 1, 3: 1}), name
    assert detect_kind(["input_ids", "text"]) == "token-ids"


def test_a_bad_length_in_a_scanned_shard_names_the_row(tmp_path):
    with pa.OSFile(str(tmp_path / "bad.arrow"), "wb") as sink:
        with pa.ipc.new_stream(sink, pa.schema([("length", pa.int64())])) as w:
            w.write_table(pa.table({"length": [5, 0]}))
    with pytest.raises(ValueError, match=r"bad.arrow: column .length. at row 2 holds 0"):
        profile_from_inputs([tmp_path / "bad.arrow"], BYTES)


def test_an_uploaded_profile_is_loaded_and_json_lines_are_read_as_data():
    data = json.dumps({"schema_version": 1, "kind": "lengths", "tokenizer": {"name": "none"}, "documents": 2,
                       "tokens": 8, "counts": {"3": 1, "5": 1}, "loss_tokens": None, "sources": []}).encode()
    assert looks_like_profile(data) and not looks_like_profile(b'{"text": "hi"}\n{"text": "ho"}\n')
    profile = profile_from_upload([("profile.json", data)], BYTES)
    scan_bytes = profile_from_upload([("texts.json", b'{"text": "hi"}\n{"text": "hello"}\n')], BYTES)
    assert profile.count_dict() == {3: 1, 5: 1} and scan_bytes.count_dict() == {2: 1, 5: 1}


def test_an_upload_error_names_the_file_and_never_the_servers_folder():
    with pytest.raises(ValueError) as e:
        profile_from_upload([("chats.jsonl.gz", b"not gzip at all")], BYTES)
    assert "chats.jsonl.gz" in str(e.value) and "packing-lab-upload" not in str(e.value) and "/tmp" not in str(e.value)


def test_two_shards_of_one_name_are_refused():
    with pytest.raises(ValueError, match="two uploads are named 'a.arrow'"):
        profile_from_upload([("a.arrow", b""), ("dir/a.arrow", b"")], lambda: byte_tokenizer)


def test_report_refuses_chat_data_with_the_byte_tokenizer_in_one_line(corpora):
    out, err = io.StringIO(), io.StringIO()
    assert main(["report", str(corpora["chats"]), "--tokenizer", "bytes"], out, err) == 2
    assert err.getvalue().count("\n") == 1 and "chat template" in err.getvalue()


def test_an_upload_the_scan_reads_is_held_to_the_read_budget_bytes(corpora):
    from packing_core._settings import ReadBudget

    data = corpora["chats"].read_bytes()
    with pytest.raises(ValueError, match=rf"chats.jsonl is larger than one analysis may read: {len(data):,} bytes"):
        profile_from_upload([("chats.jsonl", data)], SMOLLM2, budget=ReadBudget(rows=10**6, bytes=1000, seconds=60))


# --- one answer per input: the hostile length values through every entry point -------------------------

# value on line 2 (line 1 holds "12") -> the lengths read, or the words of the refusal
HOSTILE = [("٣", "line 2 holds '٣'; lengths must be whole numbers >= 1"),   # an Arabic-Indic three
           ("+7", [12, 7]), (" 12 ", [12, 12]),
           ("1e3", "line 2 holds '1e3'; lengths must be whole numbers >= 1"),
           ("12.0", "line 2 holds '12.0'; lengths must be whole numbers >= 1"),
           ("", "line 2 has no value; lengths must be whole numbers >= 1"),
           ("-3", "line 2 holds -3; lengths must be whole numbers >= 1"),
           ("0", "line 2 holds 0; lengths must be whole numbers >= 1"),
           (True, "line 2: 'length' holds a boolean (True); pick a column that holds plain text or an integer length")]


def _entry_points(path):
    """The four ways a file becomes a profile, each run -> sorted lengths (the CLI: its totals) or the refusal."""
    def lengths_of(run):
        try:
            profile = run()
        except InputError as e:
            return str(e)
        return sorted(np.repeat(profile.lengths, profile.counts).tolist())

    def report(target):
        out, err = io.StringIO(), io.StringIO()
        code = main(["report", str(target), "--tokenizer", "bytes", "--format", "json", "--strategy", "pad"], out, err)
        if code:
            assert code == 2, err.getvalue()     # 2: bad input, said in one line (3 would be a bug)
            return err.getvalue().removeprefix("error: ").strip()
        totals = json.loads(out.getvalue())["profile"]
        return {"documents": totals["documents"], "tokens": totals["tokens"]}

    return [("report FILE", lambda: report(path)),
            ("report FOLDER", lambda: report(path.parent)),
            ("scan, local engine", lambda: lengths_of(lambda: scan([path], BYTES, engine="local", workers=0))),
            ("upload (the explorer)", lambda: lengths_of(lambda: profile_from_upload([(path.name, path.read_bytes())],
                                                                                       BYTES)))]


@pytest.mark.parametrize("value, answer", HOSTILE, ids=[repr(v) for v, _ in HOSTILE])
def test_a_hostile_length_gets_one_answer_at_every_entry_point(tmp_path, value, answer):
    folder = tmp_path / "lenfolder"
    folder.mkdir()
    path = folder / "one.jsonl"
    path.write_text(json.dumps({"length": "12"}) + "\n" + json.dumps({"length": value}) + "\n", encoding="utf-8")
    for name, run in _entry_points(path):
        got = run()
        if not isinstance(answer, list):   # the same refusal, naming the file (each entry point spells its path)
            assert isinstance(got, str) and answer in got and "one.jsonl" in got.split(answer)[0], (name, got)
        elif isinstance(got, dict):
            assert got == {"documents": len(answer), "tokens": sum(answer)}, (name, got)
        else:
            assert got == sorted(answer), (name, got)


def test_the_scan_s_worker_processes_read_lengths_by_the_same_rule(tmp_path):
    for value, answer in (("+7", [7, 12]), ("٣", "holds '٣'")):
        path = tmp_path / f"{len(str(value))}.jsonl"
        path.write_text(json.dumps({"length": "12"}) + "\n" + json.dumps({"length": value}) + "\n", encoding="utf-8")
        if isinstance(answer, list):
            profile = scan([path], BYTES, workers=1)
            assert sorted(np.repeat(profile.lengths, profile.counts).tolist()) == answer
        else:
            with pytest.raises(InputError, match=answer):
                scan([path], BYTES, workers=1)


@pytest.mark.parametrize("name, tokenizer", [("data.jsonl", "bytes"), ("chats.jsonl", "smollm2")])
def test_report_file_reads_the_header_once_and_detects_the_kind_once(tmp_path, corpora, monkeypatch, name, tokenizer):
    import packing_core.data.kinds as kinds
    import packing_core.data.scan as scan_module
    from packing_core.data.sources import _base, _jsonl

    path = tmp_path / name
    if name == "chats.jsonl":
        path.write_bytes(corpora["chats"].read_bytes())
    else:
        path.write_text("".join(json.dumps({"text": f"document {i} " * (1 + i % 5)}) + "\n" for i in range(2000)))
    headers, detections, opens = [], [], []
    columns, detect, open_ = _jsonl.JsonLines.columns, kinds.detect_kind, _base.Source.open
    monkeypatch.setattr(_jsonl.JsonLines, "columns", lambda self, src: headers.append(src.name) or columns(self, src))
    monkeypatch.setattr(scan_module, "detect_kind", lambda *a, **k: detections.append(a) or detect(*a, **k))
    monkeypatch.setattr(_base.Source, "open", lambda self: opens.append(self.name) or open_(self))
    out, err = io.StringIO(), io.StringIO()
    assert main(["report", str(path), "--tokenizer", tokenizer], out, err) == 0, err.getvalue()
    assert len(headers) == 1 and len(detections) == 1
    assert opens.count(str(path)) == 2          # the header, then the data
