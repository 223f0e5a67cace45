"""Parquet: columns from the schema; limits checked in the metadata before a page is decoded.

From the metadata alone: the rows to read against the budget, the decoded size of the
chosen columns against the budget, and each row group's bytes per row against
``MAX_TEXT_BYTES`` (a 16 KB file can hold one 500 MB text). Text columns are read as
dictionaries, so a few long values repeated a million times are counted (and refused by
the budget) before they are decoded. ``where(i)`` is "row N".
"""
from __future__ import annotations

import dataclasses

import pyarrow.parquet as pq

import packing_core.data.sources._base as base
import packing_core.data.sources._read as _read
from packing_core._validate import MAX_TEXT_BYTES, limit_hint

MAX_BATCH_ROWS = 65_536      # a cap on rows per batch when rows are tiny


def _file(src: base.Source, **options) -> pq.ParquetFile:
    if src.path is not None:
        return pq.ParquetFile(str(src.path), **options)
    return pq.ParquetFile(src.memory(), **options)


def split(src: base.Source, pieces: int) -> list[base.Source]:
    """A Parquet source as up to ``pieces`` ranges of its row groups (other formats stay whole)."""
    groups = _file(src).metadata.num_row_groups if src.fmt == "parquet" and pieces > 1 else 0
    if groups < 2:
        return [src]
    k = min(pieces, groups)
    bounds = sorted({round(i * groups / k) for i in range(k + 1)})
    return [dataclasses.replace(src, size=src.size * (b - a) // groups, row_groups=(a, b), _handles=[])
            for a, b in zip(bounds, bounds[1:])]


class Parquet:
    """A ``.parquet`` file, or a range of its row groups (one scan task of a big file)."""

    title = "Parquet"

    def columns(self, src: base.Source) -> list[str]:
        return list(_file(src).schema_arrow.names)

    def batches(self, src: base.Source, columns: list[str], budget):
        pf = _file(src)
        meta = pf.metadata
        groups = list(range(meta.num_row_groups) if src.row_groups is None else range(*src.row_groups))
        offset = sum(meta.row_group(g).num_rows for g in range(groups[0])) if groups else 0
        rows = sum(meta.row_group(g).num_rows for g in groups)
        index = [i for i in range(meta.num_columns) if meta.schema.column(i).path.split(".")[0] in columns]
        decoded, widest = 0, 1.0
        for g in groups:
            group = meta.row_group(g)
            size = sum(group.column(i).total_uncompressed_size for i in index)
            per_row = size / max(1, group.num_rows)
            if per_row > MAX_TEXT_BYTES:   # some value is longer than a document may be
                raise base.SourceError(
                    f"{src.name}: row group {g} holds {size:,} bytes of {', '.join(map(base.display, columns))} in "
                    f"{group.num_rows:,} rows (from its metadata), more than one document may hold "
                    f"({MAX_TEXT_BYTES:,} bytes); split the long values or drop them ({limit_hint('MAX_TEXT_BYTES')})")
            decoded += size
            widest = max(widest, per_row)
        base.check_budget(src.name, budget, rows, decoded, 0.0, "(from its metadata)")
        batch_rows = int(min(MAX_BATCH_ROWS, max(1, base.BATCH_BYTES // widest)))
        schema = pf.schema_arrow
        text = [c for c in columns if c in schema.names and _read.is_text(schema.field(c).type)]
        if text:
            pf = _file(src, read_dictionary=text)
        for batch in pf.iter_batches(batch_size=batch_rows, columns=columns, row_groups=groups):
            yield batch, (lambda i, o=offset: f"row {o + i + 1}")
            offset += batch.num_rows


PARQUET = Parquet()
