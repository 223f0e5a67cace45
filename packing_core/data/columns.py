"""Document lengths: the only thing a packing plan needs to know about a dataset.

Every source ends as a 1-D ``np.int64`` array, one entry per document, each >= 1::

    >>> as_lengths([120, 90, 300]).tolist()
    [120, 90, 300]
    >>> parse_lengths("120, 90\\n300").tolist()
    [120, 90, 300]
    >>> x = synthetic_lengths("support-tickets")
    >>> len(x), round(float(x.mean()))
    (200000, 114)

Files are read in batches (see ``sources``) and only the lengths are kept, so a file
larger than memory works. A text column is turned into lengths by a ``Tokenizer``:
any callable ``list[str] -> list[list[int]]``; ``byte_tokenizer`` (UTF-8 bytes) is the
dependency-free default.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import packing_core.data.sources as sources
from packing_core._settings import ReadBudget
from packing_core._validate import INTEGER_TEXT, MAX_DOCUMENTS, MAX_LENGTH, InputError, as_lengths, whole_number
from packing_core.data.kinds import LENGTH_COLUMNS

Tokenizer = Callable[[list[str]], list[list[int]]]
TOKENIZER_BATCH = 1024  # texts per tokenizer call: bounds the memory of the id lists

SYNTHETIC: dict[str, str] = {
    "support-tickets": "200,000 support tickets, mean ~114 tokens, long right tail; for context 512",
    "bimodal": "100,000 docs: short chat turns (~40 tokens) and long documents (~400); for context 512",
    "long-tailed": "100,000 docs, Pareto: many short (median ~27), a few very long (>512, up to 8192)",
}
_DEFAULT_N = {"support-tickets": 200_000, "bimodal": 100_000, "long-tailed": 100_000}


# --- lists of numbers ----------------------------------------------------------------



_SEPARATORS = re.compile(r"[\s,;]+")
_INTEGER = re.compile(INTEGER_TEXT)
_DIGITS = len(str(MAX_LENGTH))   # more digits than this can only be too large


def parse_lengths(text: str) -> np.ndarray:
    """Lengths typed by a person: numbers separated by commas, semicolons, spaces or new lines.

    >>> parse_lengths("120, 90,300\\n 7").tolist()
    [120, 90, 300, 7]
    """
    tokens = [t for t in _SEPARATORS.split(str(text)) if t]
    if not tokens:
        raise InputError("no lengths given; type whole numbers separated by commas, e.g. '120, 90, 300'")
    for i, token in enumerate(tokens):
        if not _INTEGER.match(token):
            raise InputError(f"could not read {token[:40]!r} (item {i + 1}) as a length; type whole numbers "
                             "separated by commas, spaces or new lines, e.g. '120, 90, 300'")
        if len(token.lstrip("+-0")) > _DIGITS:
            raise InputError(f"length {token[:40]} (item {i + 1}) is above the largest length the lab "
                             f"accepts ({MAX_LENGTH:,} tokens)")
    return as_lengths(np.array(tokens).astype(np.int64))


# --- synthetic datasets --------------------------------------------------------------

def _lognormal(rng: np.random.Generator, n: int, means, sigmas, component=None) -> np.ndarray:
    """Lognormal (mixture) draws: draw ``i`` has mean ``means[component[i]]`` (mean, not median).

    float32 keeps 10 million draws fast.
    """
    means, sigmas = np.float32(means), np.float32(sigmas)
    mus = np.log(means) - sigmas * sigmas / 2
    pick = 0 if component is None else component
    z = rng.standard_normal(n, dtype=np.float32)
    z *= sigmas[pick]
    z += mus[pick]
    return np.exp(z, out=z)


def synthetic_lengths(name: str, n: int | None = None, seed: int = 0) -> np.ndarray:
    """Seeded synthetic lengths; ``SYNTHETIC`` describes each name.

    >>> x = synthetic_lengths("support-tickets", n=100_000)
    >>> round(float(x.mean())), int(x.min()) >= 1, float((x > 512).mean()) < 0.01
    (114, True, True)

    Padding every support ticket to 512 leaves about three quarters of the slots as pads
    (1 - 114/512 = 0.78): the waste that packing removes.
    """
    if name not in SYNTHETIC:
        raise InputError(f"unknown synthetic dataset {name!r}; choose one of {sorted(SYNTHETIC)}")
    n = _DEFAULT_N[name] if n is None else n
    n = whole_number(n, "n", maximum=MAX_DOCUMENTS, hint="e.g. n=10_000")
    rng = np.random.default_rng(seed)
    if name == "support-tickets":
        x = _lognormal(rng, n, [114.0], [0.7])  # sigma 0.7: ~0.6 % of tickets exceed 512
    elif name == "bimodal":
        is_doc = (rng.random(n, dtype=np.float32) < 0.3).view(np.int8)  # 70 % chat, 30 % documents
        x = _lognormal(rng, n, [40.0, 400.0], [0.5, 0.12], component=is_doc)
    else:  # long-tailed: Pareto(alpha 1.3) above 16 tokens = 16 * exp(Exp(1) / 1.3), capped at 8192
        x = rng.standard_exponential(n, dtype=np.float32)
        x /= np.float32(1.3)
        np.exp(x, out=x)
        x *= np.float32(16.0)
        np.minimum(x, np.float32(8192.0), out=x)
    np.rint(x, out=x)
    np.maximum(x, 1.0, out=x)
    return x.astype(np.int64)


# --- tokenizers ----------------------------------------------------------------------

def byte_tokenizer(texts: list[str]) -> list[list[int]]:
    """UTF-8 bytes as token ids: a tokenizer without a vocabulary file.

    >>> byte_tokenizer(["hé", "ok"])
    [[104, 195, 169], [111, 107]]
    """
    return [list(t.encode("utf-8")) for t in texts]


def count_tokens(tokenizer: Tokenizer, texts: list[str]) -> np.ndarray:
    """Token count of each text (no special tokens added by the wrapper).

    A tokenizer with a ``count`` method (``HFTokenizer``) counts without building id lists.

    >>> count_tokens(byte_tokenizer, ["hé", "ok"]).tolist()
    [3, 2]
    """
    if tokenizer is byte_tokenizer:
        return np.fromiter((len(t.encode("utf-8")) for t in texts), dtype=np.int64, count=len(texts))
    if not texts:
        return np.zeros(0, np.int64)
    if callable(getattr(tokenizer, "count", None)):
        return np.asarray(tokenizer.count(texts), dtype=np.int64)
    ids = tokenizer(texts)
    if isinstance(ids, Mapping) and "input_ids" in ids:  # a Hugging Face BatchEncoding
        ids = ids["input_ids"]
    if len(ids) != len(texts):
        raise InputError(f"the tokenizer returned {len(ids)} id lists for {len(texts)} texts; a "
                         "Tokenizer must map list[str] -> one list of token ids per text")
    return np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(texts))


def _token_lengths(texts: pa.Array, tokenizer: Tokenizer, where) -> np.ndarray:
    if tokenizer is byte_tokenizer:  # same numbers, computed in C without building id lists
        return pc.binary_length(texts).to_numpy(zero_copy_only=False).astype(np.int64)
    parts = [count_tokens(tokenizer, texts.slice(start, TOKENIZER_BATCH).to_pylist())
             for start in range(0, len(texts), TOKENIZER_BATCH)]
    lengths = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    if (lengths == 0).any():
        raise InputError(f"the tokenizer returned no tokens for the document at "
                         f"{where(int(np.argmin(lengths)))}; make it return at least one id per "
                         "non-blank text (e.g. add a BOS token)")
    return lengths


# --- files ---------------------------------------------------------------------------

def describe_columns(source, fmt: str | None = None) -> list[str]:
    """Column names of a file, for a column picker; a ``.txt`` file has one: ``text``.

    For JSON Lines these are the keys seen in the first batch (about ``sources.BATCH_BYTES``).
    """
    return sources.columns(sources.open_source(source, fmt))


def _pick_column(src: sources.Source, column: str | None, want: str) -> str:
    """The column to read: the one asked for, else a length column, else ``text``, else the only one."""
    if src.fmt == "txt":
        return "text"  # one document per line; there is no other column
    names = sources.columns(src)
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


def _batches(src: sources.Source, column: str, text_only: bool, budget: ReadBudget | None = None):
    """Yield ``(kind, values, where)``: kind 'lengths' (int64 numpy) or 'text' (non-blank strings).

    A column of token-id lists (pre-tokenised data) is a length column: each list's length.
    """
    kind = None
    for batch, where in sources.read_batches(src, [column], budget):
        values = batch.column(0)
        if pa.types.is_dictionary(values.type):
            values = values.dictionary_decode()
        t = values.type
        if (pa.types.is_list(t) or pa.types.is_large_list(t)) and pa.types.is_integer(t.value_type):
            values, t = pc.list_value_length(values), pa.int64()
        if pa.types.is_null(t):  # all missing: a length column fails on it, a text column skips it
            batch_kind = kind or ("lengths" if column.lower() in LENGTH_COLUMNS else "text")
        elif pa.types.is_string(t) or pa.types.is_large_string(t):
            # a delimited file's cells are all strings: a column of digits there is a length column
            sniff = getattr(sources.READERS.get(src.fmt), "text_cells", False) and not text_only
            batch_kind = "lengths" if kind == "lengths" or (
                kind is None and _looks_like_lengths(values, column, sniff)) else "text"
        elif pa.types.is_integer(t) or pa.types.is_floating(t):
            batch_kind = "lengths"
        else:
            raise InputError(f"{src.name}: column {sources.display(column)!r} has type {t}, neither integer "
                             "lengths, token-id lists nor text; pick another column")
        if kind is not None and batch_kind != kind:
            raise InputError(f"{src.name}: column {column!r} changes from {kind} to {batch_kind} at "
                             f"{where(0)}; a column must hold only integer lengths or only text")
        kind = batch_kind
        if kind == "lengths":
            yield kind, _file_lengths(values, where, src, column), where
        else:
            values = values.cast(pa.string())   # each value already held to MAX_TEXT_BYTES by the reader
            blank = pc.fill_null(pc.equal(pc.utf8_trim_whitespace(values), ""), True)
            keep = np.flatnonzero(~blank.to_numpy(zero_copy_only=False))
            # blank texts (empty, whitespace, missing) are no documents and are skipped
            yield kind, values.take(pa.array(keep)), (lambda i, k=keep, w=where: w(int(k[i])))


def _looks_like_lengths(values: pa.Array, column: str, sniff: bool) -> bool:
    """Strings that are lengths: in a column named like one, or (sniff) a column of integers."""
    if column.lower() in LENGTH_COLUMNS:
        return True
    if column.lower() == "text" or not sniff:
        return False
    filled = values.filter(pc.not_equal(values, ""))
    return len(filled) > 0 and pc.all(pc.match_substring_regex(filled, INTEGER_TEXT)).as_py()


def _file_lengths(values: pa.Array, where, src, column) -> np.ndarray:
    """A batch of a length column as int64, naming the first row that is not a length >= 1.

    The rule is ``_validate``'s, in every format: integers (text spelling one, such as
    ``"+7"``), never floats: ``12.0`` is refused in every file format and in ``--lengths``.
    """
    def fail(i: int, problem: str):
        raise InputError(f"{src.name}: column {sources.display(column)!r} at {where(i)} {problem}; lengths must be "
                         "whole numbers >= 1: fix or drop that row, or pick a text column")
    if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
        ok = pc.fill_null(pc.match_substring_regex(values, INTEGER_TEXT), False).to_numpy(zero_copy_only=False)
        if not ok.all():
            i = int(np.argmin(ok))
            fail(i, f"holds {values[i].as_py()[:40]!r}" if values[i].as_py() else "has no value")
        digits = pc.utf8_trim(values, characters=" \t\r\n\v\f+")
        long = (pc.utf8_length(pc.utf8_ltrim(digits, characters="-0")).to_numpy(zero_copy_only=False) > _DIGITS)
        if long.any():
            i = int(np.argmax(long))
            fail(i, f"holds {values[i].as_py().strip()[:40]!r}, above the largest length ({MAX_LENGTH:,})")
        values = pc.cast(digits, pa.int64())
    if values.null_count:
        fail(int(np.argmax(values.is_null().to_numpy(zero_copy_only=False))), "has no value")
    if pa.types.is_floating(values.type):
        i = 0
        fail(i, f"holds {values[i].as_py()!r}, a {values.type} number; lengths are integers: store the "
             "column as integers")
    arr = values.to_numpy(zero_copy_only=False)
    big = arr > MAX_LENGTH  # in the column's own dtype: a uint64 2**64-1 keeps its value
    if big.any():
        i = int(np.argmax(big))
        fail(i, f"holds {int(arr[i]):,}, above the largest length the lab accepts ({MAX_LENGTH:,})")
    bad = arr < 1
    if bad.any():
        fail(int(np.argmax(bad)), f"holds {arr[int(np.argmax(bad))].item()!r}")
    return arr.astype(np.int64)


def _check_limit(limit) -> None:
    if limit is not None:
        whole_number(limit, "limit", hint="or None for no limit")


def lengths_from_file(source, column: str | None = None, tokenizer: Tokenizer | None = None,
                      fmt: str | None = None, *, limit: int | None = None,
                      budget: ReadBudget | None = None) -> np.ndarray:
    """Document lengths from a file of any registered format (``sources.INPUT_SUFFIXES``), read in batches.

    ``source`` is a path, bytes, or a binary file-like object with a ``.name`` (an upload);
    the format comes from the suffix or ``fmt=``. ``column`` is a length column (integers)
    or a text column, whose texts are run through ``tokenizer`` (default ``byte_tokenizer``)::

        >>> data = b"length,text\\n3,hi!\\n5,hello\\n"
        >>> lengths_from_file(data, fmt="csv").tolist(), lengths_from_file(data, "text", fmt="csv").tolist()
        ([3, 5], [3, 5])

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
    column = _pick_column(src, column, "lengths")
    parts, total, seen = [], 0, "lengths"
    try:
        for kind, values, where in _batches(src, column, text_only=False, budget=budget):
            if limit is not None:
                values = values[: limit - total]  # tokenize no more than asked for
            seen = kind
            parts.append(values if kind == "lengths" else _token_lengths(values, tokenizer, where))
            total += len(parts[-1])
            if limit is not None and total >= limit:
                break
    finally:  # a server reads one upload after another: hand Arrow's freed buffers back to the system
        pa.default_memory_pool().release_unused()
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
    column = _pick_column(src, column, "text")
    texts: list[str] = []
    for kind, values, _ in _batches(src, column, text_only=True):
        if kind != "text":
            raise InputError(f"{src.name}: column {column!r} holds lengths, not text; pass a text "
                             f"column as column= (columns: {sources.columns(src)})")
        texts.extend((values if limit is None else values[: limit - len(texts)]).to_pylist())
        if limit is not None and len(texts) >= limit:
            break
    if not texts:
        raise InputError(f"no documents found in {src.name} (column {column!r})")
    return texts
