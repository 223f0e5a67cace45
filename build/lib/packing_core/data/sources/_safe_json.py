"""JSON parsed safely, for the small files the lab reads whole (profiles, configs, indexes, batches)."""
from __future__ import annotations

import json

from packing_core.data.sources._base import SourceError, display


class _NoConstant(ValueError):
    pass


def _refuse_constant(name: str):
    raise _NoConstant(name)


def load_json(data: bytes | str, name: str, *, max_items: int | None = None, duplicates: bool = False,
              max_int: int | None = None):
    """Parse JSON safely: no ``NaN``/``Infinity``, no nesting past the recursion limit, bounded size.

    ``max_items`` bounds the values (commas and colons, counted before parsing: a JSON bomb
    is refused before it costs memory); ``duplicates`` refuses an object with a key twice
    (plain ``json.loads`` keeps the last one silently); ``max_int`` refuses integers past it in
    size (a uint64 written as text must not wrap later).

    >>> load_json(b'{"a": 1, "a": 2}', "x.json", duplicates=True)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    packing_core.data.sources.SourceError: x.json holds the key 'a' twice in one object; ...
    >>> load_json(b'{"n": Infinity}', "x.json")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    packing_core.data.sources.SourceError: x.json holds Infinity, which is not a number JSON allows; ...
    """
    name = display(name)
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if max_items is not None:
        items = raw.count(b",") + raw.count(b":")
        if items > max_items:
            raise SourceError(f"{name} holds about {items:,} JSON values, more than the lab reads in one "
                             f"({max_items:,}); check that it is the right file, or make it smaller")

    def pairs(items):
        out = dict(items)
        if len(out) < len(items):
            seen: set = set()
            twice = next(k for k, _ in items if k in seen or seen.add(k))
            raise SourceError(f"{name} holds the key {display(twice)!r} twice in one object; JSON readers "
                             "keep only one of them silently: fix the file so each key appears once")
        return out

    def integer(text: str) -> int:
        value = int(text)
        if max_int is not None and abs(value) > max_int:
            raise SourceError(f"{name} holds the integer {value:,}, past {max_int:,} in size; "
                             "store ordinary 64-bit integers")
        return value

    try:
        text = raw.decode("utf-8")
        return json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=pairs if duplicates else None,
                          parse_int=integer)
    except UnicodeDecodeError as e:
        raise SourceError(f"{name} is not UTF-8 text (byte {e.start} is 0x{raw[e.start]:02x}); re-save it as UTF-8") \
            from None
    except _NoConstant as e:
        raise SourceError(f"{name} holds {e}, which is not a number JSON allows; write a finite number") from None
    except json.JSONDecodeError as e:
        raise SourceError(f"{name} is not JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
    except RecursionError:
        raise SourceError(f"{name} is nested too deeply to read; no file the lab reads needs more than a few "
                         "levels of nesting") from None
    except SourceError:
        raise
    except ValueError as e:
        raise SourceError(f"{name} holds a value too large to read ({str(e)[:120]}); store ordinary numbers") \
            from None
