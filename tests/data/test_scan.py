"""Scanning corpora into profiles: formats, kinds, chat templates, engines, and every bad input."""
import functools
import gzip
import io
import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from packing_core.cli import main
from packing_core.data.chats import chat_lengths
from packing_core.data.kinds import detect_kind
from packing_core.data.lengths import byte_tokenizer
from packing_core.data.profile import LengthProfile
from packing_core.data.records import prompt_completion_lengths
from packing_core.data.scan import plan_scan, scan
from packing_core.data.sources import find_shards
from packing_core.models.tokenizers import load_tokenizer

BYTES = functools.partial(load_tokenizer, "bytes")
CHATS = [
    [{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4."}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a colour."},
     {"role": "assistant", "content": "Blue."}, {"role": "user", "content": "Another?"},
     {"role": "assistant", "content": "Green, the colour of grass."}],
]


@pytest.fixture(scope="module")
def smollm2():
    return load_tokenizer("smollm2")


def _jsonl(path, records, opener=open):
    with opener(path, "wt") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)
    return path


def _cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), out, err), out.getvalue(), err.getvalue()


# --- kinds and templates -----------------------------------------------------------------

def test_the_kind_comes_from_the_columns_and_can_be_overridden():
    assert detect_kind(["messages", "id"]) == "messages"
    assert detect_kind(["prompt", "completion"]) == "prompt-completion"
    assert detect_kind(["text", "url"]) == "text"
    assert detect_kind(["prompt", "completion", "text"], "text") == "text"
    with pytest.raises(ValueError, match="no column 'messages' for kind 'messages'"):
        detect_kind(["text"], "messages")


def test_a_templated_length_equals_the_tokenizers_own(smollm2):
    lengths, _ = chat_lengths(CHATS, smollm2, str)
    own = [len(smollm2.hf.apply_chat_template(m, tokenize=True)["input_ids"]) for m in CHATS]
    assert lengths.tolist() == own


def test_loss_tokens_are_the_assistant_turns(smollm2):
    _, loss = chat_lengths(CHATS, smollm2, str)
    # each assistant turn trains its answer and the end-of-turn marker after it
    answers = [[m["content"] + "<|im_end|>\n" for m in chat if m["role"] == "assistant"] for chat in CHATS]
    expected = [sum(len(ids) for ids in smollm2(a)) for a in answers]
    assert loss.tolist() == expected


def test_prompt_completion_trains_the_completion():
    lengths, loss = prompt_completion_lengths(["Q: 2+2? ", "Hi"], ["A: 4", "!"], byte_tokenizer, str)
    assert lengths.tolist() == [12, 3] and loss.tolist() == [4, 1]


@pytest.mark.parametrize("messages, message", [
    ([{"content": "hi"}], "message 0 has no role"),
    ([{"role": "wizard", "content": "hi"}], "message 0 has an unknown role 'wizard'"),
])
def test_bad_messages_name_the_row(smollm2, tmp_path, messages, message):
    path = _jsonl(tmp_path / "chat.jsonl", [{"messages": CHATS[0]}, {"messages": messages}])
    with pytest.raises(ValueError, match=f"chat.jsonl line 2: {message}"):
        scan([path], lambda: smollm2, workers=0)


def test_a_template_that_fails_names_the_row(smollm2, tmp_path):
    folder = tmp_path / "tok"
    smollm2.hf.save_pretrained(folder)
    (folder / "chat_template.jinja").write_text("{{ raise_exception('no system turns here') }}")
    path = _jsonl(tmp_path / "chat.jsonl", [{"messages": CHATS[0]}])
    with pytest.raises(ValueError, match="chat.jsonl line 1: the chat template failed .*no system turns here"):
        scan([path], functools.partial(load_tokenizer, str(folder)), workers=0)


def test_a_local_tokenizer_folder_loads_offline_and_names_itself(smollm2, tmp_path):
    folder = tmp_path / "my-tokenizer"
    smollm2.hf.save_pretrained(folder)
    tok = load_tokenizer(str(folder))
    assert tok.name == "my-tokenizer" and tok.vocab_hash == smollm2.vocab_hash
    assert tok(["Hello world"]) == smollm2(["Hello world"])


def test_the_tokenizer_picker_lists_the_built_ins_and_the_folders_of_the_setting(monkeypatch, tmp_path):
    from packing_core.models.tokenizers import tokenizer_choices

    monkeypatch.setenv("PACKING_LAB_TOKENIZERS", f"{tmp_path / 'a'}{os.pathsep}{tmp_path / 'b'}")
    assert tokenizer_choices() == ["smollm2", "bytes", str(tmp_path / "a"), str(tmp_path / "b")]


def test_chat_data_with_the_byte_tokenizer_asks_for_a_template(tmp_path):
    path = _jsonl(tmp_path / "chat.jsonl", [{"messages": CHATS[0]}])
    with pytest.raises(ValueError, match="needs a tokenizer with a chat template"):
        scan([path], BYTES, workers=0)


# --- inputs --------------------------------------------------------------------------------

def test_a_folder_a_glob_and_mixed_file_types_give_the_same_counts(tmp_path):
    texts = ["alpha", "be", "gamma ray", "d"]
    (tmp_path / "a.txt").write_text("\n".join(texts[:2]) + "\n")
    pq.write_table(pa.table({"text": texts[2:]}), tmp_path / "b.parquet")
    folder = scan([tmp_path], BYTES, workers=0)
    glob = scan([str(tmp_path / "*")], BYTES, workers=0)
    assert folder.count_dict() == glob.count_dict() == {5: 1, 2: 1, 9: 1, 1: 1}
    assert [s.rows for s in folder.sources] == [2, 2]


def test_jsonl_gz_csv_and_tsv_shards_are_read(tmp_path):
    _jsonl(tmp_path / "a.jsonl.gz", [{"text": "hello"}], opener=gzip.open)
    (tmp_path / "b.csv").write_text('text,n\n"two, words",1\n')
    (tmp_path / "c.tsv").write_text("text\tn\nabc\t1\n")
    assert scan([tmp_path], BYTES, workers=0).count_dict() == {3: 1, 5: 1, 10: 1}


def test_a_save_to_disk_dataset_is_read_from_its_arrow_files(tmp_path):
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_dict({"prompt": ["ab", "c"], "completion": ["xyz", "w"]}).save_to_disk(tmp_path / "ds")
    shards = find_shards([tmp_path / "ds"])
    assert [s.fmt for s in shards] == ["arrow"]
    profile = scan([tmp_path / "ds"], BYTES, workers=0)
    assert profile.kind == "prompt-completion"
    assert profile.count_dict() == {2: 1, 5: 1} and profile.trained_tokens == 4


def test_mixed_schemas_across_shards_name_both_shards(tmp_path):
    _jsonl(tmp_path / "a.jsonl", [{"text": "x"}])
    _jsonl(tmp_path / "b.jsonl", [{"prompt": "x", "completion": "y"}])
    with pytest.raises(ValueError, match=r"mixed schemas: shard .*b.jsonl has columns \['prompt', 'completion'\]"):
        plan_scan([tmp_path])


def test_a_glob_that_matches_nothing_says_so(tmp_path):
    with pytest.raises(ValueError, match=r"the glob '.*\*.parquet' matches no data files"):
        find_shards([str(tmp_path / "*.parquet")])


def test_truncated_shards_are_named(tmp_path):
    pq.write_table(pa.table({"text": ["a" * 100] * 1000}), tmp_path / "good.parquet")
    data = (tmp_path / "good.parquet").read_bytes()
    (tmp_path / "cut.parquet").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="shard .*cut.parquet is unreadable or truncated"):
        scan([tmp_path / "cut.parquet"], BYTES, workers=0)
    raw = gzip.compress(b'{"text": "hello"}\n' * 1000)
    (tmp_path / "cut.jsonl.gz").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match="shard .*cut.jsonl.gz is unreadable or truncated"):
        scan([tmp_path / "cut.jsonl.gz"], BYTES, workers=0)


def test_a_file_that_is_not_what_its_name_says_is_named(tmp_path):
    (tmp_path / "junk.parquet").write_bytes(b"this is not parquet at all")
    with pytest.raises(ValueError, match="shard .*junk.parquet is unreadable or truncated"):
        scan([tmp_path / "junk.parquet"], BYTES, workers=0)
    (tmp_path / "bad.jsonl").write_text('{"text": "ok"}\n{"text": oops}\n')
    with pytest.raises(ValueError, match="shard .*bad.jsonl: line 2 is not valid JSON"):
        scan([tmp_path / "bad.jsonl"], BYTES, workers=0)


def test_a_file_given_twice_counts_twice(tmp_path):
    path = _jsonl(tmp_path / "a.jsonl", [{"text": "abc"}, {"text": "de"}])
    assert scan([path, path], BYTES, workers=2).count_dict() == {2: 2, 3: 2}


def test_a_folder_without_tokenizer_files_gets_one_error_line(tmp_path):
    (tmp_path / "a.txt").write_text("hi\n")
    (tmp_path / "empty").mkdir()
    code, _, err = _cli("scan", str(tmp_path / "a.txt"), "--tokenizer", str(tmp_path / "empty"),
                        "--out", str(tmp_path / "p.json"))
    assert code == 2 and err.count("\n") == 1 and "holds no tokenizer files" in err


# --- engines and the command line ---------------------------------------------------------

def _shards(folder, n=4):
    folder.mkdir()
    rng = np.random.default_rng(0)
    for k in range(n):
        _jsonl(folder / f"part-{k}.jsonl", [{"prompt": "q" * int(a), "completion": "a" * int(b)}
                                           for a, b in rng.integers(1, 80, size=(300, 2))])
    return folder


def test_worker_processes_give_the_same_profile_as_one_process(tmp_path):
    folder = _shards(tmp_path / "data")
    one = scan([folder], BYTES, workers=0)
    two = scan([folder], BYTES, workers=2, cap=100)
    assert two.count_dict() == one.count_dict()
    assert np.array_equal(two.loss_tokens, one.loss_tokens)
    assert [s.name for s in two.sources] == [s.name for s in one.sources]   # shard order, not finish order
    assert two.over_cap == int(sum(c for n, c in one.count_dict().items() if n > 100))


def test_one_big_parquet_file_spreads_over_the_workers_as_row_group_ranges(tmp_path):
    from packing_core.data.sources import split_parquet

    rng = np.random.default_rng(1)
    prompts = ["q" * int(n) for n in rng.integers(1, 50, 1000)]
    completions = ["a" * int(n) for n in rng.integers(1, 50, 1000)]
    completions[899] = None
    pq.write_table(pa.table({"prompt": prompts, "completion": completions}), tmp_path / "big.parquet", row_group_size=100)
    (shard,) = find_shards([tmp_path / "big.parquet"])
    assert [p.row_groups for p in split_parquet(shard, 4)] == [(0, 2), (2, 5), (5, 8), (8, 10)]
    with pytest.raises(ValueError, match="big.parquet row 900 has no completion"):   # rows counted across ranges
        scan([tmp_path / "big.parquet"], BYTES, workers=2)
    completions[899] = "a"
    pq.write_table(pa.table({"prompt": prompts, "completion": completions}), tmp_path / "big.parquet", row_group_size=100)
    one, two = scan([tmp_path / "big.parquet"], BYTES, workers=0), scan([tmp_path / "big.parquet"], BYTES, workers=2)
    assert two.to_dict() | {"scan_seconds": 0} == one.to_dict() | {"scan_seconds": 0}
    assert [(s.name, s.rows) for s in two.sources] == [(str(tmp_path / "big.parquet"), 1000)]


def test_local_and_ray_engines_give_identical_profiles(tmp_path):
    pytest.importorskip("ray", reason="Ray is an optional extra: pip install -r requirements-ray.txt")
    folder = _shards(tmp_path / "data", n=3)
    local = scan([folder], BYTES, workers=2, cap=60).to_dict()
    ray = scan([folder], BYTES, engine="ray", workers=2, cap=60).to_dict()
    local.pop("scan_seconds")
    ray.pop("scan_seconds")
    assert ray == local


def test_a_failed_shard_in_a_worker_names_it_and_writes_nothing(tmp_path):
    folder = _shards(tmp_path / "data", n=2)
    (folder / "part-1.jsonl").write_text('{"prompt": "x", "completion": null}\n')
    out = tmp_path / "profile.json"
    code, _, err = _cli("scan", str(folder), "--tokenizer", "bytes", "--workers", "2", "--out", str(out))
    assert code == 2 and "part-1.jsonl line 1 has no completion" in err
    assert not out.exists() and list(tmp_path.glob(".profile.json*")) == []


def test_scan_then_report_from_the_profile(tmp_path):
    folder = _shards(tmp_path / "data", n=2)
    out = tmp_path / "profile.json"
    code, said, err = _cli("scan", str(folder), "--tokenizer", "bytes", "--workers", "0", "--out", str(out))
    assert code == 0 and "600 documents" in said and "documents/s" in err and "ETA" in err
    code, said, _ = _cli("report", "--profile", str(out), "--context", "128")
    assert code == 0
    assert "of the tokens are in the loss" in said
    lines: dict[str, list[str]] = {}
    for line in said.splitlines():                 # the table's row of each strategy (a note may start "bfd is ...")
        if line.split():
            lines.setdefault(line.split()[0], line.split())
    assert lines["bfd"][1] == "counts" and lines["next-fit"][1] == "sampled"
    profile = LengthProfile.load(out)
    assert profile.documents == 600 and profile.kind == "prompt-completion"


def test_a_profile_of_another_version_is_one_error_line(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"schema_version": 0, "counts": {}}))
    code, _, err = _cli("report", "--profile", str(path))
    assert code == 2 and "schema_version 0" in err and err.count("\n") == 1


def test_ctrl_c_during_a_scan_is_one_line_and_leaves_no_file(tmp_path, monkeypatch):
    import packing_core.data.scan as scan_module

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(scan_module, "scan", interrupted)
    (tmp_path / "a.txt").write_text("hi\n")
    out = tmp_path / "profile.json"
    code, _, err = _cli("scan", str(tmp_path / "a.txt"), "--tokenizer", "bytes", "--out", str(out))
    assert (code, err) == (130, "error: interrupted; nothing was written\n")
    assert list(tmp_path.iterdir()) == [tmp_path / "a.txt"]


def test_workers_fork_from_a_one_thread_process_with_the_tokenizer_loaded_and_spawn_otherwise(monkeypatch):
    import packing_core.data.scan as scan_module

    calls = []
    loader = lambda: calls.append("loaded") or byte_tokenizer  # noqa: E731
    monkeypatch.setattr(scan_module.sys, "platform", "linux")
    monkeypatch.setattr(scan_module.threading, "active_count", lambda: 1)
    assert scan_module._start_method(loader) == "fork" and calls == ["loaded"]
    monkeypatch.setattr(scan_module.threading, "active_count", lambda: 3)   # a server's threads: no fork
    assert scan_module._start_method(loader) == "spawn" and calls == ["loaded"]
    monkeypatch.setattr(scan_module.sys, "platform", "darwin")
    monkeypatch.setattr(scan_module.threading, "active_count", lambda: 1)
    assert scan_module._start_method(loader) == "spawn"


def test_forked_workers_count_chats_as_this_process_does(tmp_path):
    import subprocess
    import sys

    path = _jsonl(tmp_path / "chat.jsonl", [{"messages": c} for c in CHATS * 200])
    code = ("import functools, threading, packing_core as pc\n"
            "import packing_core.data.scan as s\n"
            "load = functools.partial(pc.load_tokenizer, 'smollm2')\n"
            f"a = pc.scan([{str(path)!r}], load, workers=2); b = pc.scan([{str(path)!r}], load, workers=0)\n"
            "print(threading.active_count(), a.count_dict() == b.count_dict(), a.trained_tokens == b.trained_tokens)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["1", "True", "True"] and "forked" not in run.stderr
