"""Trainers' own code, from the wheels ``scripts/install.sh --dev`` puts with --no-deps into .vendor/.

axolotl, LLaMA-Factory, Megatron-core, OLMo-core and verl each import far more at package level
than the function that builds a batch needs (Megatron-core takes 12 s and wants Transformer
Engine; OLMo-core wants cached_path; verl wants tensordict; LLaMA-Factory wants peft). So the
tests run the library's own source text, not a copy of it: :func:`library_functions` compiles
just the named functions (or a class's methods) out of the installed file, under that file's
name, and :func:`library_module` loads one self-contained file without its package ``__init__``.
"""
from __future__ import annotations

import ast
import importlib.util
import os
import sys
import types
from pathlib import Path

import pytest

from tests._support import ROOT, skip_or_fail

# the pins of requirements-dev-nodeps.txt, for the skip message
PINS = {"axolotl": "axolotl==0.19.0", "llamafactory": "llamafactory==0.9.5", "megatron": "megatron-core==0.16.1",
        "olmo_core": "ai2-olmo-core==3.0.0", "verl": "verl==0.9.1", "torchtune": "torchtune==0.6.1"}


def vendor_dir() -> Path:
    return Path(os.environ.get("PACKING_LAB_VENDOR", ROOT / ".vendor"))


def library_file(relpath: str) -> Path:
    """The installed file, or a skip (a failure under CI) naming the install step."""
    path = vendor_dir() / relpath
    if not path.is_file():
        top = relpath.split("/")[0]
        skip_or_fail(f"{PINS.get(top, top)} is not installed: scripts/install.sh --dev puts it, with --no-deps, "
                     f"into .vendor/ (or $PACKING_LAB_VENDOR); missing {path}")
        pytest.skip(f"{PINS.get(top, top)} is not installed in {vendor_dir()}")
    return path


def _node(tree: ast.Module, name: str) -> ast.stmt:
    cls, _, meth = name.rpartition(".")
    body = tree.body
    if cls:
        body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls).body
    node = next(n for n in body if isinstance(n, ast.FunctionDef | ast.ClassDef) and n.name == meth)
    if cls:       # a method, compiled as a plain function (a staticmethod's decorator dropped)
        node.decorator_list = [d for d in node.decorator_list if not (isinstance(d, ast.Name) and d.id == "staticmethod")]
    return node


def library_functions(relpath: str, names: list[str], namespace: dict) -> dict:
    """The named functions of an installed file, compiled from its own text into ``namespace`` (by short name).

    ``namespace`` supplies what their bodies use (``torch``, ``np``, ...), in place of the
    file's imports. A name ``Class.method`` takes one method of a class. Tracebacks and
    ``inspect.getsourcefile`` point at the installed file.
    """
    path = library_file(relpath)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    nodes = [_node(tree, n) for n in names]
    code = compile(ast.Module(body=nodes, type_ignores=[]), str(path), "exec")
    exec(code, namespace)
    return {n.rpartition(".")[2]: namespace[n.rpartition(".")[2]] for n in names}


def library_module(relpath: str, name: str, stubs: dict[str, dict] | None = None) -> types.ModuleType:
    """One installed file as a module named ``name``, without its package ``__init__``.

    ``stubs`` maps module names its imports need to the few attributes used from them (a
    stub stands in only while the file loads; ``sys.modules`` is restored afterwards).
    """
    path = library_file(relpath)
    saved = {mod: sys.modules.get(mod) for mod in [*(stubs or {}), name]}
    try:
        for mod, attrs in (stubs or {}).items():
            m = types.ModuleType(mod)
            m.__path__ = []
            m.__dict__.update(attrs)
            sys.modules[mod] = m
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    finally:
        for mod, before in saved.items():
            if before is None:
                sys.modules.pop(mod, None)
            else:
                sys.modules[mod] = before
