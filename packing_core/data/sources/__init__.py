"""Every input through one reader: a reader per format, registered by suffix, and ``open_source()``.

    open_source(path | bytes | upload)  ->  Source      regular files only, the name escaped
    columns(src)                        ->  ["text", ...]           from the header alone
    read_batches(src, columns, budget)  ->  (RecordBatch, where)    bytes per value, the ReadBudget
    find_shards(files | folders | globs | save_to_disk folders)  ->  [Source, ...]

A reader knows its format and nothing of the limits; ``_base`` applies them to every
format alike (see the table in ``_base``). To add a format: write one reader (``columns``
and ``batches``) in a file of its own here, and register it below by its suffixes; the
CLI, the scan, the explorer's uploader and ``INPUT_SUFFIXES`` (a live view of ``FORMATS``,
the one :class:`~packing_core._registry.Registry` of formats) then read it.

    >>> src = open_source(b'{"text": "hi"}\\n{"text": "hello"}\\n', fmt="jsonl")
    >>> [(b.column(0).to_pylist(), where(1)) for b, where in read_batches(src, ["text"])]
    [(['hi', 'hello'], 'line 2')]
"""
from packing_core.data.sources._base import (
    BATCH_BYTES,
    FORMATS,
    INPUT_SUFFIXES,
    READERS,
    SUFFIXES,
    WHOLE,
    Reader,
    Source,
    SourceError,
    Where,
    check_budget,
    check_regular,
    display,
    file_type,
    fmt_of,
    input_suffixes,
    open_source,
    pyarrow,
    register,
    unregister,
)
from packing_core.data.sources._read import columns, read_batches
from packing_core.data.sources._safe_json import load_json
from packing_core.data.sources._shards import MAX_SHARDS, find_shards, split_parquet, split_shard

# Each reader is imported (pyarrow with it) when a file of its format is first read.
_HERE = "packing_core.data.sources"
register("csv", (".csv",), f"{_HERE}._csv:CSV")
register("tsv", (".tsv",), f"{_HERE}._csv:TSV")
register("jsonl", (".jsonl", ".ndjson", ".json", ".jsonlines"), f"{_HERE}._jsonl:JSONL")
register("jsonl.gz", (".jsonl.gz", ".ndjson.gz", ".json.gz"), f"{_HERE}._jsonl:JSONL_GZ")
register("parquet", (".parquet",), f"{_HERE}._parquet:PARQUET")
register("arrow", (".arrow",), f"{_HERE}._arrow:ARROW")
register("txt", (".txt",), f"{_HERE}._txt:TXT")

__all__ = ["FORMATS", "register", "unregister"]
