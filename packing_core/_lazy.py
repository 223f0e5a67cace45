"""Lazy exports that editors and type checkers still see.

A package names its public API once, as plain imports inside ``if TYPE_CHECKING:``.
Pyright, go-to-definition and ``help()`` read those imports statically; at run time
nothing there executes, and ``lazy_exports`` turns the same lines into ``__all__`` and a
module ``__getattr__``, so a name loads its module on first use. ``from packing_core.packing
import make_plan`` then costs numpy alone, and torch loads only with the names that need it::

    if TYPE_CHECKING:
        from .plan import Plan, PlanMetrics
    __all__, __getattr__, __dir__ = lazy_exports(__name__, __file__)

>>> import packing_core.packing as packing
>>> "make_plan" in packing.__all__, "numpy" in packing.__all__
(True, False)
"""
from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from pathlib import Path


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def export_table(package: str, file: str) -> dict[str, tuple[str, str]]:
    """``{public name: (defining module, name there)}`` from the ``if TYPE_CHECKING:`` block of ``file``."""
    table: dict[str, tuple[str, str]] = {}
    for node in ast.parse(Path(file).read_text(encoding="utf-8")).body:
        if not (isinstance(node, ast.If) and _is_type_checking(node.test)):
            continue
        for stmt in node.body:
            if not isinstance(stmt, ast.ImportFrom):
                continue
            if stmt.level:
                base = package.split(".")[: len(package.split(".")) - stmt.level + 1]
                module = ".".join(base + ([stmt.module] if stmt.module else []))
            else:
                module = stmt.module or ""
            for alias in stmt.names:
                table[alias.asname or alias.name] = (module, alias.name)
    return table


def lazy_exports(package: str, file: str) -> tuple[list[str], Callable[[str], object], Callable[[], list[str]]]:
    """``(__all__, __getattr__, __dir__)`` for the package ``package`` whose ``__init__`` is ``file``."""
    table = export_table(package, file)

    def __getattr__(name: str) -> object:
        try:
            module, original = table[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(module), original)
        setattr(sys.modules[package], name, value)   # later look-ups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(table))

    return sorted(table), __getattr__, __dir__
