"""One column of a file, chosen and read: its values as lengths (counted) or as texts (to tokenise).

    >>> data = b"length,text\\n3,hi!\\n5,hello\\n"
    >>> lengths_from_file(data, fmt="csv").tolist(), lengths_from_file(data, "text", fmt="csv").tolist()
    ([3, 5], [3, 5])

What a column holds is read from its Arrow type, batch by batch (:func:`column_batches`)::

    integers, or text in a column named like a length  ->  lengths (``_lengths.length_values``)
    lists of integers (pre-tokenised ``input_ids``)     ->  lengths: each list's length
    text                                                ->  texts; blank ones are no documents

Files are read in batches (see ``sources``) and only the lengths are kept, so a file larger
than memory works. The scan (``scan.scan_shard``) reads one-column kinds through the same
:func:`column_batches`, so a file gives one answer however it is read.
"""
from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

import packing_core.data.sources as sources
from packing_core._lengths import length_values
from packing_core._settings import ReadBudget
from packing_core._validate import INTEGER_TEXT, InputError, as_lengths, whole_number
from packing_core.data.kinds import KIND_COLUMNS, LENGTH_COLUMNS
from packing_core.data.lengths import Tokenizer, byte_tokenizer, token_lengths

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["column_batches", "column_lengths", "describe_columns", "lengths_from_file", "pick_column", "texts_from_file"]


def describe_columns(source, fmt: str | None = None) -> list[str]:
    """Column names of a file, for a column picker; a ``.txt`` file has one: ``text``.

    For JSON Lines these are the keys seen in the first batch (about ``sources.BATCH_BYTES``).
    """
    return sources.columns(sources.open_source(source, fmt))


def pick_column(src: sources.Source, column: str | None, want: str, names: list[str] | None = None) -> str:
    """The column to read: the one asked for, else a length column, else ``text``, else the only one.

    ``names`` are the columns when the caller has read the header already (it is read once).
    """
    if src.fmt == "txt":
        return "text"  # one document per line; there is no other column
    names = sources.columns(src) if names is None else names
    if not names:
        raise InputError(f"no documents found in {src.name}")
    if column is not None:
        if column not in names:
            raise InputError(f"{src.name} has no column {column!r}; available columns: {names}. "
                             "Pass one of them as column=")
        return column
    lower = {c.lower(): c for c in names}
    preferred = (LENGTH_COLUMNS if want == "lengths" else ()) + ("text",)
    for c in preferred:
        if c in lower:
            return lower[c]
    if len(names) == 1:
        return names[0]
    wanted = "a length column (integers) or a text column" if want == "lengths" else "a text column"
    shown = ", ".join(map(repr, names[:20])) + (f" ... and {len(names) - 20:,} more" if len(names) > 20 else "")
    raise InputError(f"{src.name} has columns [{shown}]; pass column= naming {wanted}")


def _type_kind(values: pa.Array, column: str, sniff: bool, kind: str | None) -> str:
    """'lengths' or 'text' for one batch of a column, from its Arrow type (and its name)."""
    import pyarrow as pa

    t = values.type
    if pa.types.is_null(t):  # all missing: a length column fails on it, a text column skips it
        return kind or ("lengths" if column.lower() in LENGTH_COLUMNS else "text")
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        # a delimited file's cells are all strings: a column of digits there is a length column
        return "lengths" if kind == "lengths" or (kind is None and _looks_like_lengths(values, column, sniff)) \
            else "text"
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t):
        return "lengths"
    return ""


def column_batches(src: sources.Source, column: str, *, text_only: bool = False, budget: ReadBudget | None = None
                   ) -> Iterator[tuple[str, pa.Array | np.ndarray, sources.Where]]:
    """Yield ``(kind, values, where)``: kind ``"lengths"`` (int64 numpy) or ``"text"`` (non-blank strings).

    A column of token-id lists (pre-tokenised data) is a length column: each list's length.
    Lengths follow the one rule, ``_lengths.length_values``; ``where(i)`` names value ``i``.
    """
    if src.fmt == "txt" and importlib.util.find_spec("pyarrow") is None:
        yield from _plain_text(src, budget)     # a trainer's environment: lines as Python strings, same limits
        return
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = None
    sniff = getattr(sources.FORMATS.get(src.fmt).reader, "text_cells", False) and not text_only
    for batch, where in sources.read_batches(src, [column], budget):
        values = batch.column(0)
        if pa.types.is_dictionary(values.type):
            values = values.dictionary_decode()
        t = values.type
        if (pa.types.is_list(t) or pa.types.is_large_list(t)) and pa.types.is_integer(t.value_type):
            values = pc.list_value_length(values)
        elif column.lower() in KIND_COLUMNS["token-ids"] and (pa.types.is_string(t) or pa.types.is_large_string(t)):
            values = _id_list_texts(values, _named(src, column, where))
        batch_kind = _type_kind(values, column, sniff, kind)
        if not batch_kind:
            raise InputError(f"{src.name}: column {sources.display(column)!r} has type {t}, neither integer "
                             "lengths, token-id lists nor text; pick another column")
        if kind is not None and batch_kind != kind:
            raise InputError(f"{src.name}: column {column!r} changes from {kind} to {batch_kind} at "
                             f"{where(0)}; a column must hold only integer lengths or only text")
        kind = batch_kind
        if kind == "lengths":
            yield kind, length_values(values, _named(src, column, where)), where
        else:
            values = values.cast(pa.string())   # each value already held to MAX_TEXT_BYTES by the reader
            blank = pc.fill_null(pc.equal(pc.utf8_trim_whitespace(values), ""), True)
            keep = np.flatnonzero(~blank.to_numpy(zero_copy_only=False))
            # blank texts (empty, whitespace, missing) are no documents and are skipped
            yield kind, values.take(pa.array(keep)), _kept(where, keep)


def _plain_text(src: sources.Source, budget: ReadBudget | None) -> Iterator[tuple[str, list, sources.Where]]:
    """A ``.txt`` file's non-blank lines as text, without pyarrow (``sources._txt.plain_lines``).

    A ``.txt`` file's one column is ``text``, never read as lengths, so its kind is text here as in
    :func:`column_batches`; blank lines are no documents.
    """
    from packing_core.data.sources._txt import plain_lines

    for lines, where in plain_lines(src, budget):
        keep = np.array([i for i, line in enumerate(lines) if line.strip()], dtype=np.int64)
        yield "text", [lines[i] for i in keep.tolist()], _kept(where, keep)


# a list of token ids written as text, as pandas' to_csv writes a list column: "[1, 2, 3]"
ID_LIST_TEXT = r"^[ \t]*\[[ \t]*([+-]?[0-9]+[ \t]*(,[ \t]*[+-]?[0-9]+[ \t]*)*)?\][ \t]*$"


def _id_list_texts(values: pa.Array, where: sources.Where) -> pa.Array:
    """How many ids each ``"[1, 2, 3]"`` holds (CSV cells of a token-id column); any other text is refused.

    A CSV cell is always text, so a list column saved by pandas comes back as ``"[1, 2, 3]"``: its
    ids are counted (3), never its characters (9).

    >>> import pyarrow as pa
    >>> _id_list_texts(pa.array(["[1, 2, 3]", " [7] "]), str).to_pylist()
    [3, 1]
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    ok = pc.fill_null(pc.match_substring_regex(values, ID_LIST_TEXT), False).to_numpy(zero_copy_only=False)
    if not ok.all():
        i = int(np.argmin(ok))
        text = values[i].as_py()
        raise InputError(f"{where(i)} holds {text[:40]!r}, not a list of token ids like [1, 2, 3]; a token-id "
                         "column holds integer lists (name the column text to count it as text)")
    commas = pc.count_substring(values, ",").to_numpy(zero_copy_only=False)
    empty = pc.match_substring_regex(values, r"^[ \t]*\[[ \t]*\][ \t]*$").to_numpy(zero_copy_only=False)
    return pa.array(np.where(empty, 0, commas + 1).astype(np.int64))


def _named(src: sources.Source, column: str, where: sources.Where) -> sources.Where:
    return lambda i: f"{src.name}: column {sources.display(column)!r} at {where(i)}"


def _kept(where: sources.Where, keep: np.ndarray) -> sources.Where:
    """``where`` after blanks are dropped: item ``i`` is row ``keep[i]``."""
    return lambda i: where(int(keep[i]))


def _looks_like_lengths(values: pa.Array, column: str, sniff: bool) -> bool:
    """Strings that are lengths: in a column named like one, or (sniff) a column of integers."""
    if column.lower() in LENGTH_COLUMNS:
        return True
    if column.lower() == "text" or not sniff:
        return False
    import pyarrow.compute as pc

    filled = values.filter(pc.not_equal(values, ""))
    return len(filled) > 0 and pc.all(pc.match_substring_regex(filled, INTEGER_TEXT)).as_py()


def _check_limit(limit) -> None:
    if limit is not None:
        whole_number(limit, "limit", hint="or None for no limit")


def lengths_from_file(source, column: str | None = None, tokenizer: Tokenizer | None = None,
                      fmt: str | None = None, *, limit: int | None = None,
                      budget: ReadBudget | None = None) -> np.ndarray:
    """Document lengths from a file of any registered format (``sources.INPUT_SUFFIXES``), read in batches.

    ``source`` is a path, bytes, or a binary file-like object with a ``.name`` (an upload);
    the format comes from the suffix or ``fmt=``. ``column`` is a length column (integers)
    or a text column, whose texts are run through ``tokenizer`` (default ``byte_tokenizer``).

    With ``column=None`` a column named length/lengths/n_tokens/num_tokens is used, else
    ``text``, else the only column. In a ``.txt`` file each line is a document and blank
    lines are skipped; blank or missing texts in a text column are skipped too.
    ``limit`` stops after that many documents. ``budget`` (default: the environment's
    ``PACKING_LAB_MAX_ROWS``, ``_BYTES``, ``_SECONDS``) caps what one call may read.
    """
    return column_lengths(source, column, tokenizer, fmt, limit=limit, budget=budget)[0]


def column_lengths(source, column: str | None = None, tokenizer: Tokenizer | None = None, fmt: str | None = None,
                   *, limit: int | None = None, budget: ReadBudget | None = None) -> tuple[np.ndarray, str]:
    """``lengths_from_file``, plus what the column held: ``"lengths"`` (counted) or ``"text"`` (tokenised).

    >>> column_lengths(b"text\\nhi\\n", fmt="csv")
    (array([2]), 'text')
    """
    tokenizer = byte_tokenizer if tokenizer is None else tokenizer
    if not callable(tokenizer):
        raise InputError(f"tokenizer must be a callable list[str] -> list[list[int]], got {tokenizer!r}")
    _check_limit(limit)
    src = source if isinstance(source, sources.Source) else sources.open_source(source, fmt)
    column = pick_column(src, column, "lengths")
    parts: list[np.ndarray] = []
    total, seen = 0, "lengths"
    try:
        for kind, values, where in column_batches(src, column, budget=budget):
            if limit is not None:
                values = values[: limit - total]  # tokenize no more than asked for
            seen = kind
            parts.append(values if kind == "lengths" else token_lengths(values, tokenizer, where))
            total += len(parts[-1])
            if limit is not None and total >= limit:
                break
    finally:  # a server reads one upload after another: hand Arrow's freed buffers back to the system
        if "pyarrow" in sys.modules and sys.modules["pyarrow"] is not None:
            sys.modules["pyarrow"].default_memory_pool().release_unused()
    if total == 0:
        raise InputError(f"no documents found in {src.name} (column {sources.display(column)!r})")
    return as_lengths(np.concatenate(parts)), seen  # the dataset's bounds: documents, total tokens


def texts_from_file(source, column: str | None = None, fmt: str | None = None,
                    limit: int | None = None) -> list[str]:
    """The non-blank texts of a text column (or the lines of a ``.txt`` file), in file order.

    Reading stops after ``limit`` texts, so a preview of a huge file stays cheap.
    """
    _check_limit(limit)
    src = sources.open_source(source, fmt)
    names = None if src.fmt == "txt" else sources.columns(src)
    column = pick_column(src, column, "text", names)
    texts: list[str] = []
    for kind, values, _ in column_batches(src, column, text_only=True):
        if kind != "text":
            raise InputError(f"{src.name}: column {column!r} holds lengths, not text; pass a text "
                             f"column as column= (columns: {names})")
        part = values if limit is None else values[: limit - len(texts)]
        texts.extend(part.to_pylist() if hasattr(part, "to_pylist") else part)
        if limit is not None and len(texts) >= limit:
            break
    if not texts:
        raise InputError(f"no documents found in {src.name} (column {column!r})")
    return texts
