"""The house rules of DESIGN.md, checked on the source: two packages in one direction, layers without cycles,
one public API."""
import ast
import importlib
import re
from pathlib import Path

import pytest

import packing_core

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "packing_core"
LAB = ROOT / "packing_lab"
# DESIGN.md's data flow, left to right; a module may import only from its own layer or those before it.
LAYERS = ["_lazy", "_limit_settings", "_validate", "_lengths", "_registry", "_settings", "data", "packing", "batch",
          "attention", "parallel",
          "check", "models", "verify", "integrations", "analysis", "cli"]
RANK = {name: i for i, name in enumerate(LAYERS)}
RANK["integrations"] = RANK["analysis"]   # side by side: neither imports the other
RANK["cli"] = RANK["analysis"] + 1
# the lab's own floors, above the whole library
LAB_LAYERS = ["advice", "bench", "demos", "zoo", "viz", "cli"]
LAB_RANK = {name: i for i, name in enumerate(LAB_LAYERS)}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    """Whether ``name`` (``packing_core.data.readers``) is a module file or a package of ours."""
    rel = Path(*name.split("."))
    return (ROOT / rel.with_suffix(".py")).is_file() or (ROOT / rel / "__init__.py").is_file()


def imports_of(path: Path) -> set[str]:
    """Every packing_core module ``path`` imports: top-level, lazy and ``import_module`` alike."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            subs = {f"{target}.{a.name}" for a in node.names}
            # ``from packing_core.data import readers`` imports the module readers, not the package's names
            if not all(_is_module(m) for m in subs):
                found.add(target)
            found.update(subs)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module":
            if node.args and isinstance(node.args[0], ast.Constant):
                found.add(str(node.args[0].value))
    return {m for m in found if m.split(".")[0] in ("packing_core", "packing_lab", "tools", "app_pages")}


def modules(*packages: Path) -> dict[str, set[str]]:
    mods = {module_name(p): imports_of(p) for package in (packages or (PACKAGE,)) for p in package.rglob("*.py")}
    names = set(mods)
    # keep only edges to real modules (``from packing_core.data import readers`` names a module too)
    return {m: {d for d in deps if d in names and d != m} for m, deps in mods.items()}


def layer(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) < 2 or parts[1] in ("__init__", "__main__"):
        return None            # the facade and the entry point sit above every layer
    return parts[1]


def test_the_layer_table_names_every_subpackage():
    present = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    present |= {p.stem for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", "__main__")}
    assert present <= set(RANK), f"add these to LAYERS in the order of DESIGN.md: {present - set(RANK)}"


def test_no_module_imports_from_a_layer_to_its_right():
    wrong = []
    for mod, deps in modules().items():
        if layer(mod) is None:
            continue
        for dep in deps:
            if layer(dep) is None:
                wrong.append(f"{mod} imports the package facade {dep}: import the defining module")
            elif RANK[layer(dep)] > RANK[layer(mod)] or (
                    layer(dep) != layer(mod) and RANK[layer(dep)] == RANK[layer(mod)]):
                wrong.append(f"{mod} ({layer(mod)}) imports {dep} ({layer(dep)})")
    assert wrong == []


def test_the_library_never_imports_the_lab_the_tools_or_the_pages():
    """Two products, one direction: the lab imports the library, never the reverse (lazy imports included)."""
    wrong = [f"{mod} imports {dep}" for mod, deps in modules().items() for dep in imports_of_any(mod)
             if dep.split(".")[0] != "packing_core"]
    assert wrong == []


def imports_of_any(module: str) -> set[str]:
    path = ROOT / Path(*module.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    return imports_of(path)


def test_the_lab_imports_its_own_floors_in_order():
    wrong = []
    for mod, deps in modules(LAB).items():
        parts = mod.split(".")
        if len(parts) < 2 or parts[1] in ("__init__", "__main__"):
            continue
        for dep in deps:
            dparts = dep.split(".")
            if dparts[0] != "packing_lab" or len(dparts) < 2:
                continue
            if LAB_RANK[dparts[1]] > LAB_RANK[parts[1]] or (dparts[1] != parts[1] and LAB_RANK[dparts[1]] == LAB_RANK[parts[1]]):
                wrong.append(f"{mod} ({parts[1]}) imports {dep} ({dparts[1]})")
    assert wrong == []


def test_the_lab_layer_table_names_every_subpackage():
    present = {p.name for p in LAB.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert present == set(LAB_LAYERS)


def test_there_are_no_import_cycles():
    graph = modules(PACKAGE, LAB)
    state: dict[str, int] = {}
    cycles = []

    def visit(node, path):
        state[node] = 1
        for dep in graph[node]:
            if state.get(dep) == 1:
                cycles.append(" -> ".join(path[path.index(dep):] + [dep]))
            elif dep not in state:
                visit(dep, path + [dep])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert cycles == []


def test_the_graph_sees_lazy_and_import_module_imports(tmp_path):
    src = tmp_path / "packing_core" / "data" / "x.py"
    src.parent.mkdir(parents=True)
    src.write_text("def f():\n    from packing_core.models import tiny\n    importlib.import_module('packing_lab.viz')\n")
    assert {"packing_core.models", "packing_core.models.tiny", "packing_lab.viz"} <= {
        d for d in _imports_in(src, tmp_path)}


def _imports_in(path, root):
    global ROOT
    saved, ROOT = ROOT, root
    try:
        return imports_of(path)
    finally:
        ROOT = saved


SUBPACKAGES = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())


LIBRARY_PACKAGES = ["packing_core", *(f"packing_core.{s}" for s in SUBPACKAGES), "packing_core.data.sources"]


def test_the_library_exports_at_most_150_names_each_with_one_meaning():
    """Each subpackage exports what a user calls; a name exported twice (the top level and its subpackage) is one object."""
    homes: dict[str, list] = {}
    for name in LIBRARY_PACKAGES:
        module = importlib.import_module(name)
        for public in module.__all__:
            homes.setdefault(public, []).append((name, getattr(module, public)))
    assert len(homes) <= 150, f"{len(homes)} public names: cut each subpackage to what a user calls"
    two = {n: [p for p, _ in h] for n, h in homes.items() if any(v is not h[0][1] for _, v in h[1:])}
    assert two == {}, f"names that mean two things: {two}"


def test_the_top_level_is_short():
    # DESIGN: about 25 names along the data flow; the rest live in their subpackage's list
    assert len(packing_core.__all__) <= 26, f"{len(packing_core.__all__)} top-level names: move some to a subpackage"
    assert set(packing_core.SUBPACKAGES) == set(SUBPACKAGES)


MAX_MODULE_LINES = 400


def test_every_module_of_the_library_the_lab_and_the_pages_is_at_most_400_lines():
    """DESIGN: a module that grows past about 400 lines splits along the data flow (data files are not modules)."""
    files = [*PACKAGE.rglob("*.py"), *LAB.rglob("*.py"), *ROOT.glob("app_pages/*.py"), ROOT / "app.py"]
    sizes = {str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines()) for p in files}
    assert len(sizes) > 120
    assert {p: n for p, n in sizes.items() if n > MAX_MODULE_LINES} == {}, "split along the data flow"


def test_a_file_named_registry_registers_something():
    for path in PACKAGE.rglob("registry.py"):
        defined = {n.name for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(n, ast.FunctionDef)}
        assert any(n.startswith("register") for n in defined), f"{path.relative_to(ROOT)} registers nothing: rename it"


@pytest.mark.parametrize("package", ["", *SUBPACKAGES])
def test_every_package_names_its_api_once_and_every_name_resolves(package):
    from packing_core._lazy import export_table

    name = "packing_core" + (f".{package}" if package else "")
    module = importlib.import_module(name)
    assert module.__all__, f"{name} has no __all__"
    # the lazy table is the TYPE_CHECKING block: what editors and pyright read is what loads
    assert set(module.__all__) == set(export_table(name, module.__file__))
    folder = Path(module.__file__).parent
    submodules = {p.stem for p in folder.glob("*.py")} | {p.name for p in folder.iterdir() if (p / "__init__.py").exists()}
    # a loaded submodule of the same name would shadow the lazy name (``from pkg import name`` gives the module)
    assert not set(module.__all__) & submodules, f"{name} exports names of its own modules"
    for public in module.__all__:
        value = getattr(module, public)
        assert not isinstance(value, type(packing_core)), f"{name}.{public} is a module, not a function or type"


@pytest.mark.parametrize("package", [f"packing_lab.{s}" for s in LAB_LAYERS if s != "cli"])
def test_no_name_a_lab_package_exports_is_one_of_its_modules(package):
    """``from packing_lab.demos import warm`` must mean one thing: a module, or the function, never either."""
    module = importlib.import_module(package)
    folder = Path(module.__file__).parent
    submodules = {p.stem for p in folder.glob("*.py")} | {p.name for p in folder.iterdir() if (p / "__init__.py").exists()}
    assert not set(module.__all__) & submodules, f"{package} exports names of its own modules"


def test_a_lazy_package_refuses_an_unknown_name():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        packing_core.attention.nope  # noqa: B018


USERS = [*ROOT.glob("app.py"), *ROOT.glob("app_pages/*.py"), *ROOT.glob("benchmarks/*.py"), *ROOT.glob("scripts/*")]


def public_imports(path: Path) -> list[tuple[str, str]]:
    """``(package, name)`` a file takes from packing_core (Python parsed with ast; shell scripts by line)."""
    if path.suffix == ".py":
        return [(node.module, a.name) for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(("packing_core", "packing_lab"))
                for a in node.names]
    found = []
    for module, line in re.findall(r"from (packing_(?:core|lab)[\w.]*) import ([^;\n]+)", path.read_text(encoding="utf-8")):
        found += [(module, n.split(" as ")[0].strip(" ()")) for n in line.split(",")]
    return [(m, n) for m, n in found if n]


@pytest.mark.parametrize("path", USERS, ids=lambda p: str(p.relative_to(ROOT)))
def test_pages_benchmarks_and_scripts_import_packages_never_module_files(path):
    text = path.read_text(encoding="utf-8")
    packages = {"packing_core", *(f"packing_core.{s}" for s in SUBPACKAGES), *(f"packing_lab.{s}" for s in LAB_LAYERS)}
    wrong = [f"{m}.{n}" for m, n in public_imports(path) if m not in packages]
    wrong += re.findall(r"import packing_(?:core|lab)\.[\w.]+", text)
    assert wrong == [], f"{path.name} reaches inside a package: {wrong}"
    not_public = [f"{m}.{n}" for m, n in public_imports(path)
                  if m in packages and n not in importlib.import_module(m).__all__]
    for sub, name in re.findall(r"\bpc\.(\w+)(?:\.(\w+))?", text):
        if sub in SUBPACKAGES:
            if name and name not in importlib.import_module(f"packing_core.{sub}").__all__:
                not_public.append(f"pc.{sub}.{name}")
        elif sub not in packing_core.__all__:
            not_public.append(f"pc.{sub}")
    assert not_public == [], f"{path.name} uses names that are not public: {not_public}"


def test_nothing_reads_transformers_private_attributes():
    hits = [f"{p.relative_to(ROOT)}: {m}" for p in PACKAGE.rglob("*.py")
            for m in re.findall(r"AttentionInterface\._\w+|_global_mapping", p.read_text(encoding="utf-8"))]
    assert hits == []


def test_the_library_never_imports_streamlit():
    assert [p for p in PACKAGE.rglob("*.py") if re.search(r"^\s*(import|from)\s+streamlit", p.read_text(), re.M)] == []


# ---------------------------------------------------------------- one meaning per name
PACKAGES = sorted([".".join(("packing_core", *p.parent.relative_to(PACKAGE).parts))
                   for p in PACKAGE.rglob("__init__.py") if p.parent != PACKAGE]
                  + [".".join(("packing_lab", *p.parent.relative_to(LAB).parts))
                     for p in LAB.rglob("__init__.py") if p.parent != LAB])


def test_no_two_packages_export_the_same_name():
    """A name means one thing: only a package and its own subpackage (which it re-exports) may share one."""
    exported = {name: set(importlib.import_module(name).__all__) for name in PACKAGES}
    assert len(exported) > 10 and "packing_core.data.sources" in exported
    exported["packing_lab.cli"] -= {"main"}   # each command-line package's entry point is its ``main``
    shared = [f"{a} and {b}: {sorted(exported[a] & exported[b])}" for a in PACKAGES for b in PACKAGES
              if a < b and not b.startswith(a + ".") and exported[a] & exported[b]]
    assert shared == []


def test_our_backends_and_transformers_implementations_have_different_names():
    from packing_core.attention import ATTENTION_READERS, BACKENDS, IMPLEMENTATIONS, TRAINER_READERS

    assert set(BACKENDS).isdisjoint(IMPLEMENTATIONS) and set(TRAINER_READERS).isdisjoint(set(BACKENDS) | set(IMPLEMENTATIONS))
    # the rest of the readers are ours, or a trainer's own model (Megatron-core, OLMo-core)
    assert set(ATTENTION_READERS) - set(IMPLEMENTATIONS) <= set(BACKENDS) | set(TRAINER_READERS)


def test_segment_ids_is_only_the_segment_a_kernel_attends_within():
    """``segment_ids`` is EffectiveAttention's; pieces are ``piece_ids``, documents ``document_ids``."""
    homes = {PACKAGE / "attention" / "semantics.py", PACKAGE / "attention" / "sharing.py"}   # the reading, and what it reaches
    other = [f"{p.relative_to(PACKAGE)}:{n}: {line.strip()}" for p in sorted(PACKAGE.rglob("*.py")) if p not in homes
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if "segment_ids" in line and not re.search(r"def segment_ids\(self\)", line)]
    assert other == []


SCRIPTS = sorted(p for p in ROOT.glob("benchmarks/*.py") if not p.name.startswith("_"))


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_every_benchmark_records_the_one_machine_shape_with_its_load_average(path):
    """``experiments.machine_info`` (a ``Machine``: CPUs, versions, load before and after), never a dict of its own."""
    text = path.read_text(encoding="utf-8")
    assert "machine_info" in text or "run_benchmark" in text, f"{path.name} records no machine"
    assert not re.findall(r"platform\.\w+\(|os\.getloadavg|sys\.path\.(insert|append)", text), path.name


def test_the_server_start_and_the_run_finished_frame_have_one_home():
    helpers = ("def start_streamlit(", "def run_finished(", "def free_port(", 'f"{url}/_stcore/health"')
    files = [p for p in [*ROOT.glob("benchmarks/*.py"), *ROOT.glob("tests/**/*.py")] if p != Path(__file__)]
    homes = {h: [str(p.relative_to(ROOT)) for p in files if h in p.read_text(encoding="utf-8")] for h in helpers}
    assert homes == {h: ["benchmarks/_server.py"] for h in helpers}
