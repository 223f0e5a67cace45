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
from packing_core.data.sources import _arrow, _csv, _jsonl, _parquet, _txt
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
    columns,
    display,
    file_type,
    fmt_of,
    input_suffixes,
    open_source,
    read_batches,
    register,
    unregister,
)
from packing_core.data.sources._parquet import split as split_parquet
from packing_core.data.sources._safe_json import load_json
from packing_core.data.sources._shards import MAX_SHARDS, find_shards, split_shard

register("csv", (".csv",), _csv.CSV)
register("tsv", (".tsv",), _csv.TSV)
register("jsonl", (".jsonl", ".ndjson", ".json", ".jsonlines"), _jsonl.JSONL)
register("jsonl.gz", (".jsonl.gz", ".ndjson.gz", ".json.gz"), _jsonl.JSONL_GZ)
register("parquet", (".parquet",), _parquet.PARQUET)
register("arrow", (".arrow",), _arrow.ARROW)
register("txt", (".txt",), _txt.TXT)

__all__ = ["FORMATS", "register", "unregister"]
