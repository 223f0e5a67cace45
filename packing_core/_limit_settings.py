"""How an operator's setting of a limit is read: ``PACKING_LAB_<NAME>``, one rule for every limit.

A setting is written in ASCII (digits with underscores between them, a fraction, an exponent: ``1024``,
``1_048_576``, ``1e6``), is positive, whole for a count or a size, and at most its ceiling: 2**40 for a count
or a size (no file, batch or count the lab reads comes near it, and every reader and C library it reaches
takes it), a day for a time limit. ``_validate`` reads its limits with it at import, ``_settings`` the read
budget on every call; a refused setting is one line naming it, the rule and the default.
"""
from __future__ import annotations

import re
from decimal import Decimal

LIMIT_CEILING = 2**40          # the most a count or byte limit may be set to
SECONDS_CEILING = 86_400.0     # the most a time limit may be set to: a day
_SETTING_TEXT = re.compile(r"[0-9](?:_?[0-9])*(?:\.[0-9]+)?(?:[eE][+]?[0-9]{1,3})?")


def limit_setting(name: str, text: str, default):
    """``$PACKING_LAB_<name>`` as the number it sets, or why not (a str); ``default``'s type says whether it is
    seconds (a float) or a count or size (an int).

    >>> limit_setting("MAX_TURNS", "1e3", 512), limit_setting("MAX_PLAN_SECONDS", "0.5", 60.0)
    (1000, 0.5)
    >>> limit_setting("MAX_TURNS", "٣", 512)[:80]
    "PACKING_LAB_MAX_TURNS='٣' is not a positive number written in ASCII digits (e.g."
    >>> limit_setting("MAX_HEADER_BYTES", "1e23", 2**24)[:101]
    "PACKING_LAB_MAX_HEADER_BYTES='1e23' is more than any limit may be set to (1,099,511,627,776): no file"
    >>> limit_setting("MAX_TURNS", "2.5", 512)
    "PACKING_LAB_MAX_TURNS='2.5' is not a whole number; unset it for the default (512)"
    >>> limit_setting("MAX_PLAN_SECONDS", "inf", 60.0)[:59]
    "PACKING_LAB_MAX_PLAN_SECONDS='inf' is not a positive number"
    """
    seconds = isinstance(default, float)
    ceiling = SECONDS_CEILING if seconds else LIMIT_CEILING
    value = Decimal(text.replace("_", "")) if _SETTING_TEXT.fullmatch(text) else None
    if value is None:
        why = "not a positive number written in ASCII digits (e.g. 1024, 1_048_576 or 1e6)"
    elif value > ceiling:
        why = f"more than any limit may be set to ({ceiling:,.0f}" + (
            " seconds, a day)" if seconds else "): no file, batch or count the lab reads comes near it")
    elif not seconds and value != value.to_integral_value():
        why = "not a whole number"
    elif value <= 0:
        why = "not a positive number"
    else:
        return float(value) if seconds else int(value)
    return f"PACKING_LAB_{name}={text[:40]!r} is {why}; unset it for the default ({default:{'g' if seconds else ','}})"
