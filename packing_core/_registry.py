"""One registry style for every list a newcomer extends: strategies, models, input formats.

A :class:`Registry` is a dict from a name to an entry, in registration order, with
``register`` / ``unregister`` / ``names()`` and a look-up that refuses an unknown name in one
line naming the choices. Views (``names_view``, ``mapping_view``, ``memo``) are built once and
built again only after a ``register`` or ``unregister``, so a module that imported ``STRATEGIES``
at start-up still sees a strategy registered later, and a look-up costs a dictionary read::

    >>> colours = Registry("colour")
    >>> _ = colours.register("red", "#f00")
    >>> NAMES = colours.names_view()
    >>> _ = colours.register("blue", "#00f")
    >>> NAMES, "blue" in NAMES, colours.get("blue")
    (('red', 'blue'), True, '#00f')
    >>> colours.get("green")
    Traceback (most recent call last):
    packing_core._validate.InputError: unknown colour 'green': choose one of red, blue
    >>> _ = colours.unregister("red"); NAMES
    ('blue',)
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Generic, TypeVar

from packing_core._validate import InputError

T = TypeVar("T")
V = TypeVar("V")


class Registry(Generic[T]):
    """``name -> entry`` in registration order; ``what`` names an entry in messages ("strategy")."""

    def __init__(self, what: str, *, fix: str = "") -> None:
        self.what = what
        self.fix = fix          # appended to the unknown-name message: ", or the path of a local model folder"
        self._entries: dict[str, T] = {}
        self.version = 0        # bumped by register and unregister: a view rebuilds only when it changed

    def register(self, name: str, entry: T) -> T:
        """Add ``entry`` under ``name`` (after the others); a name may be registered once."""
        if not isinstance(name, str) or not name:
            raise TypeError(f"a {self.what} is registered under a non-empty name, got {name!r}")
        if name in self._entries:
            raise ValueError(f"a {self.what} named {name!r} is already registered; pick another name")
        self._entries[name] = entry
        self.version += 1
        return entry

    def unregister(self, name: str) -> T:
        """Remove ``name`` (tests register throwaway entries) and return its entry."""
        entry = self._entries.pop(name)
        self.version += 1
        return entry

    def names(self, where: Callable[[T], bool] | None = None) -> tuple[str, ...]:
        """Registered names in order; ``where(entry)`` keeps only some."""
        return tuple(n for n, e in self._entries.items() if where is None or where(e))

    def entries(self) -> tuple[T, ...]:
        return tuple(self._entries.values())

    def find(self, name) -> T | None:
        """The entry called ``name``, or None."""
        return self._entries.get(name) if isinstance(name, str) else None

    def get(self, name) -> T:
        """The entry called ``name``, or one line naming the choices (an :class:`InputError`)."""
        entry = self.find(name)
        if entry is None:
            raise InputError(f"unknown {self.what} {name!r}: choose one of {', '.join(self._entries)}{self.fix}")
        return entry

    def __contains__(self, name) -> bool:
        return isinstance(name, str) and name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    def memo(self, build: Callable[[], V]) -> Callable[[], V]:
        """``build()``, computed once per state of the registry: again only after a register or unregister.

        >>> r = Registry("thing"); calls = []
        >>> size = r.memo(lambda: calls.append(1) or len(r))
        >>> size(), size(), len(calls)
        (0, 0, 1)
        >>> _ = r.register("a", 1); size(), len(calls)
        (1, 2)
        """
        state: list = [None, None]    # [version built at, value]

        def read() -> V:
            if state[0] != self.version:
                state[1], state[0] = build(), self.version
            return state[1]

        return read

    def names_view(self, where: Callable[[T], bool] | None = None, doc: str = "") -> NamesView:
        """A read-only sequence of the names (``where`` keeps some), rebuilt only when the registry changes."""
        return NamesView(self.memo(lambda: self.names(where)), doc)

    def mapping_view(self, value: Callable[[T], V], doc: str = "") -> MappingView[V]:
        """A read-only ``name -> value(entry)`` mapping, rebuilt only when the registry changes."""
        return MappingView(self.memo(lambda: {n: value(e) for n, e in self._entries.items()}), doc)


class NamesView(Sequence[str]):
    """A live, read-only tuple of names: ``in``, ``len``, slicing, ``+`` and ``==`` act as on a tuple.

    A copy or a pickle is a plain tuple, so caches and workers see a value, not a view. Hand a widget
    or pandas ``tuple(view)``: they take the names as they are now, not a view they do not know.
    """

    def __init__(self, read: Callable[[], tuple[str, ...]], doc: str = "") -> None:
        self._read = read
        self.__doc__ = doc or type(self).__doc__

    def __getitem__(self, i):
        return self._read()[i]

    def __len__(self) -> int:
        return len(self._read())

    def __iter__(self) -> Iterator[str]:
        return iter(self._read())

    def __contains__(self, name) -> bool:
        return name in self._read()

    def __add__(self, other) -> tuple[str, ...]:
        return self._read() + tuple(other)

    def __radd__(self, other) -> tuple[str, ...]:
        return tuple(other) + self._read()

    def __eq__(self, other) -> bool:
        return self._read() == tuple(other) if isinstance(other, (tuple, list, NamesView)) else NotImplemented

    def __hash__(self) -> int:
        raise TypeError("a registry view changes as strategies register: hash tuple(view) instead")

    def __reduce__(self):
        return tuple, (self._read(),)

    def __repr__(self) -> str:
        return repr(self._read())


class MappingView(Mapping[str, V]):
    """A live, read-only ``name -> value`` mapping; a copy or a pickle is a plain dict."""

    def __init__(self, read: Callable[[], dict[str, V]], doc: str = "") -> None:
        self._read = read
        self.__doc__ = doc or type(self).__doc__

    def __getitem__(self, name: str) -> V:
        return self._read()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._read())

    def __len__(self) -> int:
        return len(self._read())

    def __reduce__(self):
        return dict, (self._read(),)

    def __repr__(self) -> str:
        return repr(self._read())
