"""Specification of packing_core.data.columns: one column of a file, chosen and read, as lengths or texts."""
from __future__ import annotations

import io
import json

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest

from packing_core.data import byte_tokenizer, describe_columns, lengths, parse_lengths, sources
from packing_core.data.columns import lengths_from_file, texts_from_file
from tests._support import TEXTS, small_blocks, whitespace_tokenizer, write

# --- files: happy paths --------------------------------------------------------------

def test_parquet_length_column_is_read(tmp_path):
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"n_tokens": [3, 1, 7], "other": ["x", "y", "z"]}), path)
    assert lengths_from_file(path).tolist() == [3, 1, 7]


def test_parquet_text_column_counts_utf8_bytes(tmp_path):
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"text": TEXTS}), path)
    assert lengths_from_file(path).tolist() == [len(t.encode()) for t in TEXTS]


def test_parquet_in_many_row_groups_read_in_small_batches_keeps_every_row(tmp_path, monkeypatch):
    path = tmp_path / "d.parquet"
    lengths = np.arange(1, 1001, dtype=np.int64)
    pq.write_table(pa.table({"length": lengths}), path, row_group_size=64)
    assert pq.ParquetFile(path).metadata.num_row_groups == 16
    small_blocks(monkeypatch, 300)
    batches = list(sources.read_batches(sources.open_source(path), ["length"]))
    assert max(len(values) for values, _ in batches) < 64 and len(batches) > 16
    assert np.array_equal(lengths_from_file(path), lengths)


def test_csv_text_column_with_byte_tokenizer_gives_exact_byte_lengths(tmp_path):
    path = tmp_path / "d.csv"
    pa_csv.write_csv(pa.table({"id": list(range(len(TEXTS))), "text": TEXTS}), path)
    assert lengths_from_file(path, column="text").tolist() == [len(t.encode()) for t in TEXTS]


def test_csv_quoted_newlines_stay_inside_one_document(tmp_path):
    path = write(tmp_path, "d.csv", 'text\n"line one\nline two"\nsolo\n')
    assert texts_from_file(path) == ["line one\nline two", "solo"]


def test_custom_tokenizer_is_used_for_text_columns(tmp_path):
    path = tmp_path / "d.csv"
    pa_csv.write_csv(pa.table({"text": TEXTS}), path)
    got = lengths_from_file(path, tokenizer=whitespace_tokenizer)
    assert got.tolist() == [len(t.split()) for t in TEXTS]


def test_byte_fast_path_equals_calling_the_tokenizer(tmp_path):
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"text": TEXTS * 3}), path)
    generic = lengths_from_file(path, tokenizer=lambda texts: byte_tokenizer(texts))
    assert np.array_equal(lengths_from_file(path), generic)


def test_tokenizer_sees_only_one_batch_at_a_time(tmp_path, monkeypatch):
    path = tmp_path / "d.jsonl"
    texts = [f"doc {i} " + "w " * (i % 7) for i in range(500)]
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    monkeypatch.setattr(lengths, "TOKENIZER_BATCH", 64)
    seen = []

    def spy(batch):
        seen.append(len(batch))
        return whitespace_tokenizer(batch)
    got = lengths_from_file(path, tokenizer=spy)
    assert max(seen) <= 64 and sum(seen) == 500
    assert got.tolist() == [len(t.split()) for t in texts]


@pytest.mark.parametrize("name", ["d.jsonl", "d.txt"])
def test_jsonl_and_txt_stream_in_small_blocks(tmp_path, monkeypatch, name):
    texts = [f"document number {i}" for i in range(300)]
    body = "".join((json.dumps({"text": t}) if name == "d.jsonl" else t) + "\n" for t in texts)
    path = write(tmp_path, name, body)
    small_blocks(monkeypatch, 500)
    assert len(list(sources.read_batches(sources.open_source(path), ["text"]))) > 5
    assert texts_from_file(path) == texts


def test_csv_streams_in_small_blocks(tmp_path, monkeypatch):
    path = tmp_path / "d.csv"
    lengths = np.arange(1, 3001)
    pa_csv.write_csv(pa.table({"length": lengths}), path)
    small_blocks(monkeypatch, 512)
    batches = list(sources.read_batches(sources.open_source(path), ["length"]))
    assert len(batches) > 5
    assert np.array_equal(lengths_from_file(path), lengths)


def test_tsv_is_read_with_tabs(tmp_path):
    path = write(tmp_path, "d.tsv", "length\ttext\n3\ta, b\n4\tc\n")
    assert lengths_from_file(path).tolist() == [3, 4]
    assert texts_from_file(path) == ["a, b", "c"]


@pytest.mark.parametrize("suffix", [".jsonl", ".ndjson", ".json"])
def test_jsonl_text_and_length_columns(tmp_path, suffix):
    rows = [{"text": t, "length": i + 1} for i, t in enumerate(TEXTS)]
    path = write(tmp_path, "d" + suffix, "\n".join(json.dumps(r) for r in rows) + "\n\n")
    assert lengths_from_file(path).tolist() == [1, 2, 3, 4, 5]
    assert lengths_from_file(path, column="text").tolist() == [len(t.encode()) for t in TEXTS]


def test_txt_is_one_document_per_line_and_skips_blank_lines(tmp_path):
    path = write(tmp_path, "d.txt", "first doc\r\n\n   \nsecond\n")
    assert texts_from_file(path) == ["first doc", "second"]
    assert lengths_from_file(path, column="ignored").tolist() == [9, 6]


def test_blank_texts_in_a_text_column_are_skipped(tmp_path):
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"text": ["ab", "", None, "  ", "cde"]}), path)
    assert lengths_from_file(path).tolist() == [2, 3]


def test_auto_column_prefers_length_then_text_then_the_only_column(tmp_path):
    both = write(tmp_path, "both.csv", "text,num_tokens\nabcdef,2\n")
    text = write(tmp_path, "text.csv", "id,text\n1,abc\n")
    only = write(tmp_path, "only.csv", "body\nabcd\n")
    assert lengths_from_file(both).tolist() == [2]
    assert lengths_from_file(text).tolist() == [3]
    assert lengths_from_file(only).tolist() == [4]


def test_integer_csv_column_is_lengths_and_text_column_is_tokenized(tmp_path):
    path = write(tmp_path, "d.csv", "size,body\n12,hello\n7,hi\n")
    assert lengths_from_file(path, column="size").tolist() == [12, 7]
    assert lengths_from_file(path, column="body").tolist() == [5, 2]


def test_ambiguous_columns_ask_for_column(tmp_path):
    path = write(tmp_path, "d.csv", "a,b\n1,x\n")
    with pytest.raises(ValueError, match=r"\['a', 'b'\].*pass column="):
        lengths_from_file(path)


def test_fmt_overrides_the_suffix(tmp_path):
    path = write(tmp_path, "export.dat", "length\n5\n6\n")
    assert lengths_from_file(path, fmt="csv").tolist() == [5, 6]


def test_uploads_are_read_from_memory(tmp_path):
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"length": [2, 9]}), path)
    upload = io.BytesIO(path.read_bytes())
    upload.name = "upload.parquet"
    assert lengths_from_file(upload).tolist() == [2, 9]
    assert lengths_from_file(upload).tolist() == [2, 9]  # rewound for a second read
    assert lengths_from_file(b"text\nabc\n", fmt="csv").tolist() == [3]


def test_streamlit_upload_is_read():
    import streamlit.runtime.uploaded_file_manager as uploads
    record = uploads.UploadedFileRec("id", "upload.jsonl", "application/json", b'{"text": "abc"}\n')
    upload = uploads.UploadedFile(record, None)
    assert describe_columns(upload) == ["text"]
    assert lengths_from_file(upload).tolist() == [3]
    assert texts_from_file(upload) == ["abc"]


def test_non_seekable_stream_is_read(tmp_path):
    class Stream:  # an HTTP body, say: read() only
        name = "body.csv"

        def __init__(self):
            self._data = io.BytesIO(b"length\n3\n4\n")

        def read(self, *args):
            return self._data.read(*args)
    assert lengths_from_file(Stream()).tolist() == [3, 4]


def test_jsonl_length_column_of_digit_strings_is_lengths(tmp_path):
    path = write(tmp_path, "d.jsonl", '{"length": "12"}\n{"length": "7"}\n')
    assert lengths_from_file(path).tolist() == [12, 7]


def test_jsonl_with_byte_order_mark_and_crlf(tmp_path):
    path = write(tmp_path, "d.jsonl", b'\xef\xbb\xbf{"text": "ab"}\r\n{"text": "c"}\r\n')
    assert describe_columns(path) == ["text"]
    assert lengths_from_file(path).tolist() == [2, 1]


def test_limit_tokenizes_only_what_is_asked(tmp_path):
    path = write(tmp_path, "d.txt", "".join(f"doc {i}\n" for i in range(500)))
    seen = []
    got = lengths_from_file(path, tokenizer=lambda t: seen.extend(t) or whitespace_tokenizer(t), limit=10)
    assert got.tolist() == [2] * 10 and len(seen) == 10


def test_limit_stops_early(tmp_path):
    path = write(tmp_path, "d.txt", "".join(f"doc {i}\n" for i in range(100)))
    assert len(lengths_from_file(path, limit=7)) == 7
    assert texts_from_file(path, limit=3) == ["doc 0", "doc 1", "doc 2"]


def test_texts_from_file_refuses_a_length_column(tmp_path):
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"length": [1, 2]}), path)
    with pytest.raises(ValueError, match="holds lengths, not text"):
        texts_from_file(path, column="length")
    with pytest.raises(ValueError, match="holds lengths, not text"):
        texts_from_file(write(tmp_path, "d.csv", "length\n3\n"))


def test_describe_columns_for_each_format(tmp_path):
    pq.write_table(pa.table({"a": [1], "text": ["x"]}), tmp_path / "d.parquet")
    assert describe_columns(tmp_path / "d.parquet") == ["a", "text"]
    assert describe_columns(write(tmp_path, "d.csv", "x,y\n1,2\n")) == ["x", "y"]
    assert describe_columns(write(tmp_path, "d.jsonl", '{"u": 1}\n{"v": "s", "u": 2}\n')) == ["u", "v"]
    assert describe_columns(write(tmp_path, "d.txt", "hi\n")) == ["text"]


# --- files: every bad input names the problem and the fix ------------------------------

def test_missing_file(tmp_path):
    with pytest.raises(ValueError, match="file not found.*check the path"):
        lengths_from_file(tmp_path / "nope.csv")


def test_folder_instead_of_file(tmp_path):
    with pytest.raises(ValueError, match="is a folder"):
        lengths_from_file(tmp_path)


def test_unknown_suffix_lists_formats(tmp_path):
    with pytest.raises(ValueError, match=r"'\.xlsx'.*\.parquet.*fmt="):
        lengths_from_file(write(tmp_path, "d.xlsx", "x"))
    with pytest.raises(ValueError, match="unknown fmt='excel'"):
        lengths_from_file(write(tmp_path, "d.csv", "x\n1\n"), fmt="excel")


def test_binary_file_is_refused(tmp_path):
    with pytest.raises(ValueError, match="looks binary.*NUL byte at byte 4"):
        lengths_from_file(write(tmp_path, "d.csv", b"text\x00\x01\x02"))


@pytest.mark.parametrize("head, hint", [(b"\x1f\x8b\x08\x00", "gzip-compressed"),
                                        (b"\xff\xfet\x00e\x00", "UTF-16"),
                                        (b"PK\x03\x04rest", "zip archive")])
def test_known_binary_formats_get_a_hint(tmp_path, head, hint):
    with pytest.raises(ValueError, match=hint):
        lengths_from_file(write(tmp_path, "d.txt", head))


@pytest.mark.parametrize("batch_bytes", [8 << 20, 40])  # 40: line 1 is a batch of its own
def test_missing_value_in_jsonl_length_column_names_the_line(tmp_path, monkeypatch, batch_bytes):
    small_blocks(monkeypatch, batch_bytes)
    path = write(tmp_path, "d.jsonl", '{"text": "a", "length": null}\n{"text": "b", "length": 2}\n')
    with pytest.raises(ValueError, match="'length' at line 1 has no value"):
        lengths_from_file(path)


def test_parquet_named_csv_is_recognised(tmp_path):
    pq.write_table(pa.table({"length": [1]}), tmp_path / "d.parquet")
    path = write(tmp_path, "d.csv", (tmp_path / "d.parquet").read_bytes())
    with pytest.raises(ValueError, match="looks like Parquet.*fmt='parquet'"):
        lengths_from_file(path)


@pytest.mark.parametrize("name", ["d.txt", "d.jsonl", "d.csv"])
def test_non_utf8_file_names_the_line(tmp_path, name):
    body = {"d.txt": b"ok\nfine\n\xe9t\xe9\n", "d.jsonl": b'{"text": "a"}\n{"text": "\xff"}\n',
            "d.csv": b"text\nabc\n\xff oops\n"}[name]
    line = {"d.txt": 3, "d.jsonl": 2, "d.csv": 3}[name]
    with pytest.raises(ValueError, match=rf"not UTF-8 text \(line {line}, byte .*re-save it as UTF-8"):
        lengths_from_file(write(tmp_path, name, body))


def test_corrupt_parquet(tmp_path):
    with pytest.raises(ValueError, match="not a readable Parquet file"):
        lengths_from_file(write(tmp_path, "d.parquet", b"not parquet at all"))


@pytest.mark.parametrize("header, sep", [("length;text", "';'"), ("length\ttext", r"'\\t'.*fmt='tsv'")])
def test_wrong_delimiter_is_named(tmp_path, header, sep):
    path = write(tmp_path, "d.csv", header + "\n3" + header[6] + "hi\n")
    with pytest.raises(ValueError, match=rf"parsed as one column.*{sep}"):
        lengths_from_file(path, column="length")
    with pytest.raises(ValueError, match="parsed as one column"):
        describe_columns(path)


def test_ragged_csv_rows(tmp_path):
    with pytest.raises(ValueError, match="could not parse.*Expected 2 columns.*delimiter"):
        lengths_from_file(write(tmp_path, "d.csv", "a,b\n1,2\n1,2,3\n"), column="a")


def test_unknown_column_lists_available(tmp_path):
    path = write(tmp_path, "d.csv", "length,text\n3,hi\n")
    with pytest.raises(ValueError, match=r"no column 'txt'.*\['length', 'text'\].*column="):
        lengths_from_file(path, column="txt")


@pytest.mark.parametrize("cell, shown", [("0", "holds 0"), ("-2", "holds -2"), ("abc", "holds 'abc'"),
                                         ("3.5", "holds '3.5'"), ('""', "has no value")])
def test_bad_csv_length_names_the_row(tmp_path, cell, shown):
    path = write(tmp_path, "d.csv", f"length\n4\n{cell}\n5\n")
    with pytest.raises(ValueError, match=rf"'length' at data row 2 {shown}.*>= 1"):
        lengths_from_file(path)


@pytest.mark.parametrize("table, shown", [({"length": [4, 0]}, "holds 0"),
                                          ({"length": [4, None]}, "has no value")])
def test_bad_parquet_length_names_the_row(tmp_path, table, shown):
    pq.write_table(pa.table(table), tmp_path / "d.parquet")
    with pytest.raises(ValueError, match=rf"at row 2 {shown}"):
        lengths_from_file(tmp_path / "d.parquet")


def test_later_non_integer_in_a_streamed_csv_names_its_row(tmp_path, monkeypatch):
    path = write(tmp_path, "d.csv", "length\n" + "7\n" * 500 + "oops\n")
    small_blocks(monkeypatch, 256)
    with pytest.raises(ValueError, match="data row 501 holds 'oops'"):
        lengths_from_file(path)


@pytest.mark.parametrize("content", ["", "length,text\n", "\n\n"])
def test_empty_data_says_no_documents_found(tmp_path, content):
    path = write(tmp_path, "d.csv" if content != "\n\n" else "d.txt", content)
    with pytest.raises(ValueError, match="no documents found in .*d\\."):
        lengths_from_file(path)


def test_malformed_json_names_the_line(tmp_path):
    with pytest.raises(ValueError, match="line 2 is not valid JSON"):
        lengths_from_file(write(tmp_path, "d.jsonl", '{"length": 3}\n{"length": \n'))


def test_json_array_file_gets_a_jsonl_hint(tmp_path):
    with pytest.raises(ValueError, match="line 1 is a JSON list, not an object.*jq"):
        lengths_from_file(write(tmp_path, "d.json", '[{"length": 3}]\n'))


def test_deeply_nested_json_line_is_refused(tmp_path):
    with pytest.raises(ValueError, match="line 2 is nested too deeply"):
        lengths_from_file(write(tmp_path, "d.jsonl", '{"length": 3}\n' + "[" * 100_000 + "\n"))


@pytest.mark.parametrize("value, what", [('{"en": "hi"}', "an object"), ('["a", "b"]', "an array"),
                                         ("true", "a boolean")])
def test_json_column_holding_nested_or_boolean_values(tmp_path, value, what):
    path = write(tmp_path, "d.jsonl", '{"text": "ok"}\n{"text": %s}\n' % value)
    with pytest.raises(ValueError, match=f"line 2: 'text' holds {what}"):
        lengths_from_file(path)


def test_nested_parquet_column_of_strings_is_neither_lengths_nor_text(tmp_path):
    pq.write_table(pa.table({"ids": [["a", "b"], ["c"]]}), tmp_path / "d.parquet")
    with pytest.raises(ValueError, match="'ids' has type list<.*neither integer lengths, token-id lists nor text"):
        lengths_from_file(tmp_path / "d.parquet")


def test_pre_tokenised_token_id_lists_count_as_lengths_in_parquet_and_jsonl(tmp_path):
    pq.write_table(pa.table({"input_ids": [[1, 2, 3], [7], [5, 5]]}), tmp_path / "d.parquet")
    path = write(tmp_path, "d.jsonl", '{"input_ids": [1, 2, 3]}\n{"input_ids": [7]}\n{"input_ids": [5, 5]}\n')
    assert lengths_from_file(tmp_path / "d.parquet").tolist() == [3, 1, 2]
    assert lengths_from_file(path).tolist() == [3, 1, 2]


def test_an_empty_token_id_list_is_a_document_without_tokens(tmp_path):
    pq.write_table(pa.table({"input_ids": [[1, 2], []]}), tmp_path / "d.parquet")
    with pytest.raises(ValueError, match="at row 2 holds 0"):
        lengths_from_file(tmp_path / "d.parquet")


@pytest.mark.parametrize("name, data", [
    ("d.csv", b"length\n4\n12.0\n"), ("d.jsonl", b'{"length": 4}\n{"length": 12.0}\n'), ("d.parquet", None)])
def test_a_float_length_is_refused_in_every_format(tmp_path, name, data):
    path = tmp_path / name
    if data is None:
        pq.write_table(pa.table({"length": [4.0, 12.0]}), path)
    else:
        path.write_bytes(data)
    with pytest.raises(ValueError, match=r"holds '?12\.0'?|holds 4\.0, a double"):
        lengths_from_file(path)
    with pytest.raises(ValueError, match="item 2 holds '12.0'"):
        parse_lengths("4, 12.0")


@pytest.mark.parametrize("name, data", [("d.csv", b"length\n+7\n 3 \n"), ("d.jsonl", b'{"length": "+7"}\n{"length": " 3 "}\n')])
def test_a_plus_sign_reads_as_the_same_length_in_every_format(tmp_path, name, data):
    (tmp_path / name).write_bytes(data)
    assert lengths_from_file(tmp_path / name).tolist() == [7, 3] == parse_lengths("+7, 3").tolist()


def test_json_length_too_large_names_the_line(tmp_path):
    path = write(tmp_path, "d.jsonl", '{"length": 3}\n{"length": %d}\n' % 2**70)
    with pytest.raises(ValueError, match="line 2: 'length' holds 1180591620717411303424, too large"):
        lengths_from_file(path)


def test_json_column_mixing_types_names_the_line(tmp_path):
    path = write(tmp_path, "d.jsonl", '{"length": 3}\n{"length": "x"}\n')
    with pytest.raises(ValueError, match="line 2: 'length' holds 'x'"):
        lengths_from_file(path)


def test_tokenizer_returning_wrong_count_is_refused(tmp_path):
    path = write(tmp_path, "d.txt", "a\nb\n")
    with pytest.raises(ValueError, match="returned 1 id lists for 2 texts"):
        lengths_from_file(path, tokenizer=lambda texts: [[1]])


def test_tokenizer_returning_no_ids_names_the_document(tmp_path):
    path = write(tmp_path, "d.txt", "a\n\n!!\n")
    with pytest.raises(ValueError, match="no tokens for the document at line 3"):
        lengths_from_file(path, tokenizer=lambda texts: [[1] if t.isalpha() else [] for t in texts])


def test_line_numbers_stay_right_across_batches(tmp_path, monkeypatch):
    small_blocks(monkeypatch, 50)
    path = write(tmp_path, "d.txt", "word\n" * 69 + "!!\n" + "word\n" * 10)
    with pytest.raises(ValueError, match="document at line 70;"):
        lengths_from_file(path, tokenizer=lambda texts: [[1] if t.isalpha() else [] for t in texts])


def test_non_callable_tokenizer_is_refused(tmp_path):
    with pytest.raises(ValueError, match="tokenizer must be a callable"):
        lengths_from_file(write(tmp_path, "d.txt", "a\n"), tokenizer="gpt2")
