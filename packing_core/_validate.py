"""One rule per concept: every entry point checks its arguments here, so one input gets one answer.

>>> whole_number(512, "context")
512
>>> whole_number(True, "context")
Traceback (most recent call last):
ValueError: context must be a whole number, got True (a boolean); try 512
>>> as_lengths([3, 2, 5]).tolist()
[3, 2, 5]
>>> as_lengths([3.0, 2.0])  # doctest: +ELLIPSIS
Traceback (most recent call last):
ValueError: length 3.0 at position 0 is not a whole number; lengths must be whole numbers >= 1 ...
>>> choice("mask", "maybe", MASKS)
Traceback (most recent call last):
ValueError: mask must be one of 'on', 'off', got 'maybe'
"""
from __future__ import annotations

from typing import Literal, get_args

import numpy as np

Mask = Literal["on", "off"]
Positions = Literal["reset", "continuous"]
Overlong = Literal["split", "truncate", "drop"]
Strategy = Literal["pad", "pad-longest", "bucket", "concat-cut", "next-fit", "ffd", "bfd"]
MASKS: tuple[str, ...] = get_args(Mask)
POSITIONS: tuple[str, ...] = get_args(Positions)


def choice(name: str, value, choices) -> str:
    """``value`` if it is one of ``choices``, else one line naming the choices."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return value


def whole_number(value, name: str, *, minimum: int = 1, maximum: int | None = None, hint: str = "") -> int:
    """``value`` as an int: whole numbers only (no bools, no floats, no text), within bounds."""
    fix = f"; {hint}" if hint else ""
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be a whole number, got {value!r} (a boolean){fix}")
    if not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be a whole number, got {value!r}{fix}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum:,}, got {value:,}{fix}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be at most {maximum:,}, got {value:,}{fix}")
    return value


def as_lengths(values) -> np.ndarray:
    """Document lengths as a new 1-D int64 array: whole numbers, each >= 1.

    The one rule for lengths everywhere (plans, stats, files): booleans, floats (even
    ``3.0``), text and ``None`` are refused with the position of the first bad value.
    """
    if isinstance(values, (str, bytes)):
        raise ValueError(f"lengths must be numbers, got text {values[:40]!r}; "
                         "use parse_lengths() for text")
    if isinstance(values, (list, tuple)):
        bad = next((i for i, v in enumerate(values) if isinstance(v, (bool, np.bool_, str, bytes, float))
                    or v is None), None)
        if bad is not None:
            raise ValueError(f"length {values[bad]!r} at position {bad} is not a whole number; lengths "
                             "must be whole numbers >= 1 (for text like '120, 90' use parse_lengths())")
    arr = np.asarray(values)
    if arr.ndim != 1:
        fix = "wrap a single number in a list: [n]" if arr.ndim == 0 else "flatten it first"
        raise ValueError(f"lengths must be a 1-D list, got shape {arr.shape}; {fix}")
    if arr.size == 0:
        raise ValueError("no lengths given; pass at least one document length, e.g. [120, 90, 300]")
    if arr.dtype.kind == "f":
        raise ValueError(f"lengths must be whole numbers, got floats (first value {arr[0].item()!r}); "
                         "lengths count tokens: convert them with int() or round them first")
    if arr.dtype.kind not in "iu":
        raise ValueError(f"lengths must be whole numbers, got dtype {arr.dtype} (first value "
                         f"{arr[0]!r}); convert them to integers first (for text use parse_lengths())")
    if arr.dtype.kind == "u" and arr.dtype.itemsize == 8:
        too_big = arr > np.iinfo(np.int64).max
        if too_big.any():
            i = int(np.argmax(too_big))
            raise ValueError(f"length {int(arr[i]):,} at position {i} is too large to be a token count")
    bad = arr < 1
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"length {arr[i].item()!r} at position {i} is not >= 1; every document needs "
                         "at least one token: drop empty documents or fix the value")
    return arr.astype(np.int64)  # astype copies: callers may keep editing their input
