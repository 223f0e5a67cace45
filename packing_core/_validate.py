"""One rule per concept: every entry point checks its arguments here, so one input gets one answer.

>>> whole_number(512, "context")
512
>>> whole_number(True, "context", hint="try 512")
Traceback (most recent call last):
packing_core._validate.InputError: context must be a whole number, got True (a boolean); try 512
>>> as_lengths([3, 2, 5]).tolist()
[3, 2, 5]
>>> as_lengths([3.0, 2.0])  # doctest: +ELLIPSIS
Traceback (most recent call last):
packing_core._validate.InputError: length 3.0 at position 0 is not a whole number; lengths must be whole numbers >= 1 ...
>>> choice("mask", "maybe", MASKS)
Traceback (most recent call last):
packing_core._validate.InputError: mask must be one of 'on', 'off', got 'maybe'

The bounds below are the lab's documented limits. Inside them every sum the lab forms
(tokens, slots, row offsets) fits an int64 with room to spare; attention costs, which
square lengths, are summed exactly with :func:`exact_sum_of_squares`.

>>> whole_number(10**10, "context", maximum=MAX_CONTEXT)  # doctest: +ELLIPSIS
Traceback (most recent call last):
packing_core._validate.InputError: context must be at most 268,435,456, got 10,000,000,000
>>> exact_sum_of_squares(np.array([3_000_000_000] * 4))  # 3.6e19: past int64, still exact
36000000000000000000
"""
from __future__ import annotations

import os
import re
from typing import Literal, get_args

import numpy as np

from packing_core._limit_settings import LIMIT_CEILING, SECONDS_CEILING, limit_setting  # noqa: F401

Mask = Literal["on", "off"]
Positions = Literal["reset", "continuous"]
Overlong = Literal["split", "truncate", "drop"]
MASKS: tuple[str, ...] = get_args(Mask)
OVERLONG_POLICIES: tuple[str, ...] = get_args(Overlong)
DEFAULT_CONTEXT = 512          # the lab's default row length (CLI and pages): TEACHING's worked example
LIMIT_ERRORS: list[str] = []   # settings of the limits below that were not numbers (the CLI reports the first)


def _limit(name: str, default):
    """``$PACKING_LAB_<name>`` read once, at import; a refused setting leaves ``default`` and a line in ``LIMIT_ERRORS``."""
    text = os.environ.get(f"PACKING_LAB_{name}", "").strip()
    value = limit_setting(name, text, default) if text else default
    if isinstance(value, str):
        LIMIT_ERRORS.append(value)
        return default
    return value


# Fixed bounds: inside them every sum the lab forms (tokens, slots, row offsets) fits an int64.
MAX_CONTEXT = 2**28            # 268,435,456 tokens per row: far past any model's context
MAX_BATCH_SIZE = 2**20         # rows per batch (pad-longest, bucket)
MAX_LENGTH = 2**40             # tokens in one document (about 1.1e12)
MAX_DOCUMENTS = 2**30          # documents in one dataset (about 1.07e9)
MAX_TOTAL_TOKENS = 2**53       # tokens in one dataset (about 9.0e15; exact as a float64 too)
FIXED_LIMITS = ("MAX_CONTEXT", "MAX_BATCH_SIZE", "MAX_LENGTH", "MAX_DOCUMENTS", "MAX_TOTAL_TOKENS")
# Memory and time limits: each keeps one analysis of a hostile file under 1 GiB and a minute on a small server,
# and each may be raised for a bigger one with PACKING_LAB_<NAME> (``limit_hint`` says so in every refusal).
MAX_TEXT_BYTES = _limit("MAX_TEXT_BYTES", 4 << 20)   # bytes in one text value (a line, a cell), before tokenising
# characters of one unbroken run of letters, digits or punctuation that a tokenizer is given: no word of any language
# is near it, and SmolLM2's tokenizer spends about 1 s on each MiB of one such run, 4-6x its time on ordinary text
MAX_WORD_CHARS = _limit("MAX_WORD_CHARS", 16_384)
MAX_SPLIT_PIECES = _limit("MAX_SPLIT_PIECES", 4_000_000)   # extra pieces from splitting: a plan stays under 1 GiB
MAX_DISTINCT_LENGTHS = _limit("MAX_DISTINCT_LENGTHS", 2**20)   # distinct lengths in one profile (file ~40 MB)
MAX_PROFILE_BYTES = _limit("MAX_PROFILE_BYTES", 64 << 20)   # bytes of one profile file: refused before parsing
MAX_TURNS = _limit("MAX_TURNS", 512)             # messages in one chat record: each answer renders its prefix once
MAX_TEMPLATE_SECONDS = _limit("MAX_TEMPLATE_SECONDS", 2.0)   # seconds one chat-template rendering may take
MAX_WORKERS = _limit("MAX_WORKERS", 8)           # scan workers (processes or Ray actors): with a tokenizer each
MAX_BATCH_TOKENS = _limit("MAX_BATCH_TOKENS", 2**20)   # tokens (batch x row length) in one trainer batch file
MAX_MASK_VALUES = _limit("MAX_MASK_VALUES", 2**25)   # values of a 3D/4D mask in one batch (2 rows of 4,096 x 4,096)
MAX_STREAM_BATCHES = _limit("MAX_STREAM_BATCHES", 100_000)   # batch files one stream check reads, one at a time
MAX_BATCH_FILE_BYTES = _limit("MAX_BATCH_FILE_BYTES", 256 << 20)   # bytes of one batch file, read or unpacked
MAX_JSON_BYTES = _limit("MAX_JSON_BYTES", 32 << 20)   # bytes of one JSON batch, dataset index, stream state ...
MAX_CONFIG_BYTES = _limit("MAX_CONFIG_BYTES", 4 << 20)   # a model's config.json or weight index: a few KB in practice
MAX_TOKENIZER_FILE_BYTES = _limit("MAX_TOKENIZER_FILE_BYTES", 64 << 20)   # tokenizer.json of 250k tokens: ~20 MB
MAX_HEADER_BYTES = _limit("MAX_HEADER_BYTES", 16 << 20)   # a CSV header line
MAX_SHARDS = _limit("MAX_SHARDS", 100_000)       # files one scan may take (a glob or a folder that finds more)
MAX_DEPTH = _limit("MAX_DEPTH", 64)              # folder levels a folder or a ``**`` glob descends
MAX_ARROW_BATCH_BYTES = _limit("MAX_ARROW_BATCH_BYTES", 256 << 20)   # one Arrow record batch, decompressed
MAX_RUN_ROW_TOKENS = _limit("MAX_RUN_ROW_TOKENS", 8192)   # `check --model`'s longest row (sdpa; mask cells: square)
MAX_RUN_DOCUMENTS = _limit("MAX_RUN_DOCUMENTS", 512)   # documents `check --model` runs alone, one forward pass each
MAX_LAYERS = _limit("MAX_LAYERS", 256)           # layers in a local model's config.json
MAX_MODEL_WIDTH = _limit("MAX_MODEL_WIDTH", 65_536)   # hidden size, intermediate size, heads in a config.json
MAX_VOCAB = _limit("MAX_VOCAB", 2**21)           # vocabulary of a local model or tokenizer (2,097,152 tokens)
MAX_MODEL_PARAMETERS = _limit("MAX_MODEL_PARAMETERS", 2**31)   # parameters estimated from a config, before building
MAX_ADDED_TOKENS = _limit("MAX_ADDED_TOKENS", 4096)   # a tokenizer's added tokens the fast counters work around
MAX_STREAM_BUFFER = _limit("MAX_STREAM_BUFFER", 2**20)   # pieces a stream packer's buffer holds (~150 MB of Python)
MAX_PLAN_SECONDS = _limit("MAX_PLAN_SECONDS", 60.0)   # seconds the optimal planner may be given (its time_limit)
MAX_PRICING_CELLS = _limit("MAX_PRICING_CELLS", 40_000_000)   # knapsack cells of one pricing step of `optimal`
# A length written as text: ASCII spaces around, an optional sign, ASCII digits. "+7" is 7 and
# " 12 " is 12 everywhere; "12.0", "1e3" and "٣" (an Arabic-Indic three) are lengths nowhere.
# Spelled out so that Python's re and Arrow's RE2 read it alike (Python's \s and \d are Unicode).
INTEGER_TEXT = r"^[ \t\n\r\f\v]*[+-]?[0-9]+[ \t\n\r\f\v]*$"
LENGTH_FIX = "lengths must be whole numbers >= 1: fix or drop that row, or pick a text column"
_DIGITS = len(str(MAX_LENGTH))   # a length text with more digits can only be too large
_INTEGER = re.compile(INTEGER_TEXT)
_INT64_SAFE = 2**62
POSITIONS: tuple[str, ...] = get_args(Positions)


class InputError(ValueError):
    """Bad input a user can fix: the message names the bad value and the fix.

    Every user-fixable refusal in the lab raises this (a ``ValueError``, so older callers still
    catch it). The CLI and the pages show it as one line; any other exception is a bug in the lab,
    reported as such with its traceback in the log.

    >>> isinstance(InputError("context must be a whole number"), ValueError)
    True
    """


def choice(name: str, value, choices) -> str:
    """``value`` if it is one of ``choices``, else one line naming the choices."""
    if not isinstance(value, str) or value not in choices:
        raise InputError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return value


def whole_number(value, name: str, *, minimum: int = 1, maximum: int | None = None, hint: str = "") -> int:
    """``value`` as an int: whole numbers only (no bools, no floats, no text), within bounds."""
    fix = f"; {hint}" if hint else ""
    if isinstance(value, (bool, np.bool_)):
        raise InputError(f"{name} must be a whole number, got {value!r} (a boolean){fix}")
    if not isinstance(value, (int, np.integer)):
        raise InputError(f"{name} must be a whole number, got {value!r}{fix}")
    value = int(value)
    if value < minimum:
        raise InputError(f"{name} must be at least {minimum:,}, got {value:,}{fix}")
    if maximum is not None and value > maximum:
        raise InputError(f"{name} must be at most {maximum:,}, got {value:,}{fix}")
    return value


def as_lengths(values, where=None, *, copy: bool = True) -> np.ndarray:
    """Document lengths as a new 1-D int64 array: whole numbers, each >= 1.

    The one rule for lengths everywhere (plans, stats, files): booleans, floats (even
    ``3.0``), text and ``None`` are refused with the position of the first bad value;
    so are lengths above ``MAX_LENGTH``, more than ``MAX_DOCUMENTS`` documents and more
    than ``MAX_TOTAL_TOKENS`` tokens. ``where(i)`` names value ``i`` in messages
    ("data row 3"); the default is "position i".

    >>> as_lengths([5, 2**41])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    packing_core._validate.InputError: length 2,199,023,255,552 at position 1 is above the largest length the lab accepts ...
    """
    where = where or (lambda i: f"position {i}")
    if isinstance(values, (str, bytes)):
        raise InputError(f"lengths must be numbers, got text {values[:40]!r}; "
                         "use parse_lengths() for text")
    if isinstance(values, (list, tuple)):
        bad = next((i for i, v in enumerate(values) if isinstance(v, (bool, np.bool_, str, bytes, float))
                    or v is None), None)
        if bad is not None:
            raise InputError(f"length {values[bad]!r} at {where(bad)} is not a whole number; lengths "
                             "must be whole numbers >= 1 (for text like '120, 90' use parse_lengths())")
    arr = np.asarray(values)
    if arr.ndim != 1:
        fix = "wrap a single number in a list: [n]" if arr.ndim == 0 else "flatten it first"
        raise InputError(f"lengths must be a 1-D list, got shape {arr.shape}; {fix}")
    if arr.size == 0:
        raise InputError("no lengths given; pass at least one document length, e.g. [120, 90, 300]")
    if arr.dtype.kind == "f":
        raise InputError(f"lengths must be whole numbers, got floats (first value {arr[0].item()!r}); "
                         "lengths count tokens: convert them with int() or round them first")
    if arr.dtype.kind not in "iu":
        raise InputError(f"lengths must be whole numbers, got dtype {arr.dtype} (first value "
                         f"{arr[0]!r}); convert them to integers first (for text use parse_lengths())")
    if arr.size > MAX_DOCUMENTS:
        raise InputError(f"{arr.size:,} documents is more than the lab accepts ({MAX_DOCUMENTS:,}); "
                         "analyse a sample or a shard of the dataset")
    # compared in the input's own dtype: a uint64 2**64-1 keeps its value in the message
    too_big = arr > MAX_LENGTH
    if too_big.any():
        i = int(np.argmax(too_big))
        raise InputError(f"length {int(arr[i]):,} at {where(i)} is above the largest length the lab accepts "
                         f"({MAX_LENGTH:,} tokens); fix that value or drop the document")
    below = arr < 1
    if below.any():
        i = int(np.argmax(below))
        raise InputError(f"length {arr[i].item()!r} at {where(i)} is not >= 1; every document needs "
                         "at least one token: drop empty documents or fix the value")
    # a copy by default (callers may keep editing their input); planning passes copy=False so
    # a plan of 10M lengths does not hold a second 80 MB array
    out = arr.astype(np.int64, copy=copy)
    total = int(out.sum()) if out.size * MAX_LENGTH < _INT64_SAFE else float(out.sum(dtype=np.float64))
    if total > MAX_TOTAL_TOKENS:
        raise InputError(f"the lengths add up to {total:,.0f} tokens, more than the lab accepts "
                         f"({MAX_TOTAL_TOKENS:,}); analyse a sample or a shard of the dataset")
    return out








def whole_number_text(value) -> int | None:
    """A whole number written as an int or as :data:`INTEGER_TEXT` (a JSON key), else None; never a bool or float.

    >>> whole_number_text("+7"), whole_number_text(" 12 "), whole_number_text("٣"), whole_number_text(12.0)
    (7, 12, None, None)
    """
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, str) and len(value) <= 64 and _INTEGER.match(value):
        return int(value.strip())
    return None


def exact_sum_of_squares(x: np.ndarray) -> int:
    """``sum(x**2)`` of non-negative integers as an exact Python int, never an int64 overflow.

    Squares of values up to ``MAX_LENGTH`` are summed in int64 chunks small enough not to
    overflow; the chunk sums are added as Python ints.

    >>> exact_sum_of_squares(np.array([3, 4]))
    25
    """
    x = np.asarray(x, dtype=np.int64)
    if x.size == 0:
        return 0
    top = int(x.max())
    if top >= 2**31:  # the square itself leaves int64: exact Python ints over the distinct values
        values, counts = np.unique(x, return_counts=True)
        return sum(int(v) * int(v) * int(c) for v, c in zip(values.tolist(), counts.tolist()))
    chunk = max(1, _INT64_SAFE // max(1, top * top))
    if chunk >= x.size:
        return int(np.dot(x, x))
    starts = np.arange(0, x.size, chunk)
    return sum(np.add.reduceat(x * x, starts).tolist())


def as_context(value, name: str = "context") -> int:
    """A row length in tokens: a whole number from 1 to ``MAX_CONTEXT``.

    >>> as_context(2048)
    2048
    """
    return whole_number(value, name, maximum=MAX_CONTEXT, hint="try 512 or 2048")


def as_seed(value, name: str = "seed") -> int:
    """A random seed: a whole number from 0 to 2**63 - 1 (what numpy's generators take)."""
    return whole_number(value, name, minimum=0, maximum=2**63 - 1, hint="try 0")


def as_bucket_edges(values, name: str = "bucket_edges") -> tuple[int, ...]:
    """Upper bucket edges in tokens: at least one, each a whole number >= 1 (``int()`` would truncate 2.5).

    >>> as_bucket_edges([128, 64])
    (128, 64)
    >>> as_bucket_edges([2.5])
    Traceback (most recent call last):
    packing_core._validate.InputError: bucket_edges[0] must be a whole number, got 2.5; give upper edges in tokens, e.g. [64, 256]
    """
    hint = "give upper edges in tokens, e.g. [64, 256]"
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise InputError(f"{name} must be a list of token counts, got {values!r}; {hint}")
    edges = tuple(whole_number(v, f"{name}[{i}]", maximum=MAX_LENGTH, hint=hint) for i, v in enumerate(values))
    if not edges:
        raise InputError(f"{name} is empty; {hint}")
    return edges


def as_batch_size(value, name: str = "batch_size") -> int:
    """Rows per batch: a whole number from 1 to ``MAX_BATCH_SIZE``."""
    return whole_number(value, name, maximum=MAX_BATCH_SIZE, hint="try 32")


# The documented limits, by name (docs/limits.md lists them; the hostile-input benchmark prints them).
LIMITS = {name: globals()[name] for name in (
    *FIXED_LIMITS, "MAX_TEXT_BYTES", "MAX_SPLIT_PIECES", "MAX_DISTINCT_LENGTHS", "MAX_PROFILE_BYTES", "MAX_TURNS",
    "MAX_TEMPLATE_SECONDS", "MAX_WORKERS", "MAX_BATCH_TOKENS", "MAX_MASK_VALUES", "MAX_STREAM_BATCHES",
    "MAX_BATCH_FILE_BYTES", "MAX_JSON_BYTES", "MAX_CONFIG_BYTES", "MAX_TOKENIZER_FILE_BYTES", "MAX_HEADER_BYTES",
    "MAX_SHARDS", "MAX_DEPTH", "MAX_ARROW_BATCH_BYTES", "MAX_RUN_ROW_TOKENS", "MAX_RUN_DOCUMENTS", "MAX_LAYERS",
    "MAX_MODEL_WIDTH", "MAX_VOCAB", "MAX_MODEL_PARAMETERS", "MAX_ADDED_TOKENS", "MAX_STREAM_BUFFER",
    "MAX_PLAN_SECONDS", "MAX_PRICING_CELLS", "MAX_WORD_CHARS")}


def limit_hint(name: str) -> str:
    """How a refusal names its limit, and how to raise it.

    >>> limit_hint("MAX_LAYERS")
    'limit MAX_LAYERS = 256; raise it with PACKING_LAB_MAX_LAYERS'
    >>> limit_hint("MAX_LENGTH")
    'MAX_LENGTH = 1,099,511,627,776, a fixed bound (sums stay exact in int64)'
    """
    value = LIMITS[name]
    shown = f"{value:g}" if isinstance(value, float) else f"{value:,}"
    if name in FIXED_LIMITS:
        return f"{name} = {shown}, a fixed bound (sums stay exact in int64)"
    return f"limit {name} = {shown}; raise it with PACKING_LAB_{name}"


def as_workers(value, name: str = "workers") -> int:
    """Scan workers: a whole number from 0 (this process) to ``MAX_WORKERS``.

    >>> as_workers(1000000)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    packing_core._validate.InputError: workers must be at most 8, got 1,000,000; ...
    """
    return whole_number(value, name, minimum=0, maximum=MAX_WORKERS,
                        hint=f"each worker holds a tokenizer; {MAX_WORKERS} keep a scan under 1 GiB "
                             f"({limit_hint('MAX_WORKERS')})")
