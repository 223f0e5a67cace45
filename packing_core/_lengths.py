"""The one rule for a length read from a file's column or typed as text: ``length_values``.

Every reader, ``--lengths`` and an upload go through it, so ``"+7"`` is 7 and ``"12.0"``, ``"1e3"``
or ``"٣"`` (an Arabic-Indic three) are refused everywhere, naming the value and its place. Arrow
arrays are checked in C (pyarrow compute); without pyarrow installed, Python and numpy values follow
the same rule value by value (a trainer's environment reading ``--lengths``).
"""
from __future__ import annotations

import numpy as np

from packing_core._validate import _DIGITS, _INTEGER, INTEGER_TEXT, LENGTH_FIX, MAX_LENGTH, InputError

__all__ = ["length_values"]


def length_values(values, where, fix: str = LENGTH_FIX) -> np.ndarray:
    """Lengths read from a file's column (or typed as text) as int64: the one rule for every reader.

    ``values`` is an Arrow array (a column of one batch), a numpy array or a list. Kept:
    integers, and text spelling one (:data:`INTEGER_TEXT`: ASCII digits, an optional sign,
    spaces around). Refused, naming the first bad value as ``where(i)`` followed by ``fix``:
    booleans, floats (even ``12.0``), any other text (``"12.0"``, ``"1e3"``, ``"٣"``, ``""``),
    missing values, and lengths outside 1..``MAX_LENGTH``. The checks run over the whole
    column at once (Arrow compute and numpy), never one value at a time in Python.

    >>> length_values(["+7", " 12 ", "3"], str).tolist()
    [7, 12, 3]
    >>> length_values(["3", "٣"], lambda i: f"line {i + 1}")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    packing_core._validate.InputError: line 2 holds '٣'; lengths must be whole numbers >= 1: fix or drop that row, ...

    Without pyarrow installed (a trainer's environment reading ``--lengths``), Python and numpy
    values follow the same rule, value by value (:func:`_plain_length_values`).
    """
    def fail(i: int, problem: str):
        raise InputError(f"{where(i)} {problem}; {fix}")

    try:
        import pyarrow as pa
        import pyarrow.compute as pc
    except ImportError:
        return _plain_length_values(values, fail)

    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if isinstance(arr, (list, tuple)):   # Python values: a bool is refused as one, not read as 1
        flag = next((i for i, v in enumerate(arr) if isinstance(v, (bool, np.bool_))), None)
        if flag is not None:
            fail(flag, f"holds {arr[flag]!r}, a boolean")
    if not isinstance(arr, pa.Array):
        try:
            arr = pa.array(arr)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):  # mixed Python values: compared as text
            arr = pa.array([None if v is None else str(v) for v in arr], pa.string())
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    kind = arr.type
    if len(arr) and arr.null_count == len(arr):
        fail(0, "has no value")
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        ok = pc.fill_null(pc.match_substring_regex(arr, INTEGER_TEXT), False).to_numpy(zero_copy_only=False)
        if not ok.all():
            i = int(np.argmin(ok))
            text = arr[i].as_py()
            fail(i, f"holds {text[:40]!r}" if text else "has no value")
        digits = pc.utf8_trim(arr, characters=" \t\r\n\v\f+")
        width = pc.utf8_length(pc.utf8_ltrim(digits, characters="-0")).to_numpy(zero_copy_only=False)
        if (width > _DIGITS).any():
            i = int(np.argmax(width > _DIGITS))
            fail(i, f"holds {arr[i].as_py().strip()[:40]!r}, above the largest length the lab accepts ({MAX_LENGTH:,})")
        arr = pc.cast(digits, pa.int64())
    elif pa.types.is_boolean(kind):
        i = int(np.argmax(arr.is_valid().to_numpy(zero_copy_only=False)))
        fail(i, f"holds {arr[i].as_py()!r}, a boolean")
    elif pa.types.is_floating(kind):
        i = int(np.argmax(arr.is_valid().to_numpy(zero_copy_only=False)))
        fail(i, f"holds {arr[i].as_py()!r}, a {kind} number; lengths are integers: store the column as integers")
    elif not pa.types.is_integer(kind):
        fail(0, f"holds values of type {kind}, neither integers nor text")
    if arr.null_count:
        fail(int(np.argmax(arr.is_null().to_numpy(zero_copy_only=False))), "has no value")
    out = arr.to_numpy(zero_copy_only=False)
    return _in_range(out, fail)


_ARROW_FLOAT = {"float16": "halffloat", "float32": "float", "float64": "double"}   # as pyarrow names them


def _plain_length_values(values, fail) -> np.ndarray:
    """:func:`length_values` on Python or numpy values, without pyarrow: the same rule and the same words."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "iu":
        out = values
    elif isinstance(values, np.ndarray) and values.dtype.kind in "bf":
        valid = np.flatnonzero(~np.isnan(values)) if values.dtype.kind == "f" else np.arange(len(values))
        if not len(valid):
            fail(0, "has no value")
        i = int(valid[0])
        if values.dtype.kind == "b":
            fail(i, f"holds {bool(values[i])!r}, a boolean")
        fail(i, f"holds {float(values[i])!r}, a {_ARROW_FLOAT.get(values.dtype.name, values.dtype.name)} number; "
                "lengths are integers: store the column as integers")
    else:
        items = values.tolist() if isinstance(values, np.ndarray) else list(values)
        if items and all(v is None for v in items):
            fail(0, "has no value")
        text = any(isinstance(v, str) for v in items)
        ints = []
        for i, v in enumerate(items):
            if v is None:
                fail(i, "has no value")
            if isinstance(v, (bool, np.bool_)):
                fail(i, f"holds {v!r}, a boolean")
            if text and not isinstance(v, str):     # mixed values are compared as text, as Arrow reads them
                v = str(v)
            if isinstance(v, str):
                if not _INTEGER.match(v):
                    fail(i, f"holds {v[:40]!r}" if v else "has no value")
                digits = v.strip(" \t\r\n\v\f+")
                if len(digits.lstrip("-0")) > _DIGITS:
                    fail(i, f"holds {v.strip()[:40]!r}, above the largest length the lab accepts ({MAX_LENGTH:,})")
                v = int(digits)
            elif isinstance(v, float):
                fail(i, f"holds {v!r}, a double number; lengths are integers: store the column as integers")
            elif not isinstance(v, int):
                fail(0, f"holds values of type {type(v).__name__}, neither integers nor text")
            if v > MAX_LENGTH:
                fail(i, f"holds {v:,}, above the largest length the lab accepts ({MAX_LENGTH:,})")
            ints.append(v)
        out = np.array(ints, dtype=np.int64)
    return _in_range(out, fail)


def _in_range(out: np.ndarray, fail) -> np.ndarray:
    """``out`` as int64 once every value is a length from 1 to ``MAX_LENGTH``; else ``fail`` names the first that is not.

    The comparison runs in the column's own dtype, so a uint64 2**64-1 keeps its value in the message.
    """
    big = out > MAX_LENGTH
    if big.any():
        i = int(np.argmax(big))
        fail(i, f"holds {int(out[i]):,}, above the largest length the lab accepts ({MAX_LENGTH:,})")
    small = out < 1
    if small.any():
        i = int(np.argmax(small))
        fail(i, f"holds {out[i].item()!r}")
    return out.astype(np.int64)
