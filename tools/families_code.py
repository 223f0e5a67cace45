"""Read a family's modeling code (its source file, never imported here): the mask call and the kernel names.

Two facts of the families table come from the code, not from a run:

- **the mask call**: where the model calls ``masking_utils.create_causal_mask`` (or its sliding,
  chunked or generate variants), and whether it passes ``position_ids``. Without them
  ``_preprocess_mask_arguments`` never looks for packed sequences, and position resets do not
  reach the mask (``modeling_opt.OPTDecoder.forward``, ``modeling_roberta.RobertaModel._create_attention_masks``);
- **the kernel behind a function**: ``@use_kernel_func_from_hub_with_fallback("causal_conv1d_fn", "causal_conv1d")``
  above ``causal_conv1d_fn`` names the fast kernel transformers swaps in when the package is installed.

>>> src = '''
... class M:
...     def forward(self, x, position_ids):
...         kw = {"config": 1, "position_ids": position_ids}
...         return create_causal_mask(**kw)
... '''
>>> mask_calls(src)
(('M.forward', True),)
"""
from __future__ import annotations

import ast
import importlib.util
from functools import cache

MASK_FUNCTIONS = ("create_causal_mask", "create_sliding_window_causal_mask", "create_chunked_causal_mask",
                  "create_masks_for_generate", "create_bidirectional_mask")
_CAUSAL_MASKS = MASK_FUNCTIONS[:4]


def _called_name(node: ast.Call) -> str:
    """``f`` for ``f(...)``, ``obj.f(...)`` and ``table[key](...)`` (a dict of mask functions)."""
    f = node.func.value if isinstance(node.func, ast.Subscript) else node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def _dict_keys(func: ast.AST, name: str, seen: frozenset = frozenset()) -> set[str]:
    """Keys given to a dict called ``name`` in ``func``: ``{...}`` (with ``**other``), ``dict(...)``,
    ``other.copy()`` and ``name[key] = ...``."""
    keys: set[str] = set()
    if name in seen:
        return keys
    seen = seen | {name}
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            v = node.value
            if isinstance(v, ast.Dict):
                keys |= {k.value for k in v.keys if isinstance(k, ast.Constant)}
                keys |= {k for base, val in zip(v.keys, v.values) if base is None and isinstance(val, ast.Name)
                         for k in _dict_keys(func, val.id, seen)}
            elif isinstance(v, ast.Call) and _called_name(v) == "dict":
                keys |= {k.arg for k in v.keywords if k.arg}
            elif (isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr == "copy"
                  and isinstance(v.func.value, ast.Name)):
                keys |= _dict_keys(func, v.func.value.id, seen)
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if (isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == name
                        and isinstance(t.slice, ast.Constant)):
                    keys.add(t.slice.value)
    return keys


def _passes_position_ids(call: ast.Call, func: ast.AST) -> bool:
    for k in call.keywords:
        if k.arg == "position_ids":
            return not (isinstance(k.value, ast.Constant) and k.value.value is None)
        if k.arg is None and isinstance(k.value, ast.Name) and "position_ids" in _dict_keys(func, k.value.id):
            return True
    return False


def mask_calls(source: str) -> tuple[tuple[str, bool], ...]:
    """Each causal-mask call in ``source``: (the enclosing ``Class.method``, whether it passes position_ids)."""
    tree = ast.parse(source)
    found = []

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                # mask_function = create_causal_mask if ... else create_sliding_window_causal_mask
                names = set(_CAUSAL_MASKS) | {t.id for a in ast.walk(child) if isinstance(a, ast.Assign)
                                              and any(isinstance(n, ast.Name) and n.id in _CAUSAL_MASKS
                                                      for n in ast.walk(a.value))
                                              for t in a.targets if isinstance(t, ast.Name)}
                for call in ast.walk(child):
                    # table[key]() with no arguments calls a lambda that holds the real call: that one counts
                    if isinstance(call, ast.Call) and _called_name(call) in names and (call.args or call.keywords):
                        found.append((f"{prefix}{child.name}", _passes_position_ids(call, child)))
    visit(tree, "")
    return tuple(dict.fromkeys(found))


def kernel_names(source: str) -> dict[str, str]:
    """``function -> kernel name`` for every function decorated ``@use_kernel_func_from_hub_with_fallback(name, ...)``."""
    out = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef):
            for d in node.decorator_list:
                if (isinstance(d, ast.Call) and _called_name(d) == "use_kernel_func_from_hub_with_fallback"
                        and d.args and isinstance(d.args[0], ast.Constant)):
                    out[node.name] = d.args[0].value
    return out


@cache
def modeling_source(module: str) -> str:
    """The source text of a transformers modeling module, found without importing it."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin:
        return ""
    with open(spec.origin, encoding="utf-8") as f:
        return f.read()


def mask_facts(module: str) -> tuple[str, bool]:
    """(where the model builds its causal mask, whether every such call passes position_ids).

    ``("", False)`` when the modeling code never calls ``create_causal_mask``: it builds its own mask.
    """
    calls = [c for c in mask_calls(modeling_source(module)) if "generate" not in c[0]]   # generation only
    if not calls:
        return "", False
    return calls[0][0], all(sees for _, sees in calls)
