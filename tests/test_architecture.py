"""The package's import structure (issue #15): one direction, no cycles, no private names
shared between modules.

Every ``import``/``from ... import`` of :mod:`smsg_ms` is read with :mod:`ast`, at module level
and inside functions alike (a function-level import is a dependency too; it only runs later).
``from X import Y`` where ``X.Y`` is a module counts as an import of ``X.Y``.

Layers, lowest first; a module may import modules of its own layer or a lower one:

====  =============================================  ============================================
  0   ``version``, ``devices``, ``plan``,             plain data, MindSpore's device-count rule,
      ``words``, ``errors``                           the mark of bad input
  1   ``networks``                                    built-in networks (MindSpore cells)
  2   ``graph``                                       capture and the operator graph
  3   ``cost``                                        symbolic cost model
  4   ``search``                                      strategy search (problem, solvers)
  5   ``planner``                                     graph → cost → search → Plan
  6   ``integration``, ``dryrun``, ``compare``,       write-back, checks, MindSpore's compiler,
      ``cli_options``, ``cli_output``                 command-line helpers the commands share
  7   ``report``                                      tables, explain view, plots
  8   ``cli``, ``cli_explain``, ``cli_check``,       entry points (the commands)
      ``cli_export``, ``cli_dryrun``
      ``smsg_ms`` (the package's API)
====  =============================================  ============================================

One rule lets a lower layer call up: :mod:`smsg_ms.graph.capture` compiles networks through the
dry-run. That is allowed for a *launcher*: a module of ``dryrun``
(``dryrun.runner``, ``dryrun.toolchain``) whose imports never leave such modules, so the upward edge can
neither close a cycle nor pull in any upper layer. The code that runs inside the child process
(``dryrun.child``, ``dryrun.jobs``) imports graph, networks and integration, and is started as a separate
process (``python -m``), never imported by the graph layer.
"""
from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "smsg_ms"

#: top-level part of a module name → layer (module docstring)
LAYERS = {
    "version": 0, "devices": 0, "plan": 0, "words": 0, "errors": 0,
    "networks": 1,
    "graph": 2,
    "cost": 3,
    "search": 4,
    "planner": 5,
    "integration": 6, "dryrun": 6, "compare": 6, "cli_options": 6, "cli_output": 6,
    "report": 7,
    "cli": 8, "cli_explain": 8, "cli_check": 8, "cli_export": 8, "cli_dryrun": 8, "": 8, "__main__": 8,
}
#: packages whose launcher modules (importing nothing of smsg_ms outside them) lower layers
#: may call
DRYRUN = ("smsg_ms.dryrun",)
#: private names still imported across modules, with the public name that replaces them (none)
KNOWN_PRIVATE: dict[str, str] = {}


def is_launcher(module: str, imports: dict) -> bool:
    """A launcher: a module of :data:`DRYRUN` whose imports of :mod:`smsg_ms`, followed through,
    never leave the launcher modules (``dryrun.runner`` imports ``dryrun.toolchain`` only)."""
    todo, seen = [module], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if not name.startswith(DRYRUN) or name == DRYRUN[0]:
            return False
        todo.extend(t for t, _, _ in imports.get(name, ()))
    return True


def module_names(root: Path = PACKAGE) -> dict[str, Path]:
    """``{dotted module name: file}`` of every module of the package."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_package(name: str, modules: dict[str, Path]) -> bool:
    return name in modules and modules[name].name == "__init__.py"


def imports_of(name: str, path: Path, modules: dict[str, Path]):
    """``(target module, imported names, line)`` of every import of an smsg_ms module in
    ``path`` (module ``name``); and ``{local name: module}`` of the names bound to modules."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if _is_package(name, modules) else name.rpartition(".")[0]
    found, aliases = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "smsg_ms" and a.name in modules:
                    found.append((a.name, [], node.lineno))
                    aliases[a.asname or a.name] = a.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] != "smsg_ms":
                continue
            plain = []
            for a in node.names:
                sub = f"{source}.{a.name}"
                if sub in modules:          # a module: an import of that module
                    found.append((sub, [], node.lineno))
                    aliases[a.asname or a.name] = sub
                else:
                    plain.append(a.name)
            if plain:
                found.append((source, plain, node.lineno))
    return found, aliases, tree


def layer_of(module: str) -> int:
    parts = module.split(".")
    return LAYERS[parts[1] if len(parts) > 1 else ""]


def _private(attr: str) -> bool:
    return attr.startswith("_") and not (attr.startswith("__") and attr.endswith("__"))


def scan(root: Path = PACKAGE):
    """``(dependency graph, upward imports, private uses)`` of the whole package."""
    modules = module_names(root)
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    upward, private, imports = [], [], {}
    for name, path in modules.items():
        found, aliases, tree = imports_of(name, path, modules)
        imports[name] = found
        for target, names, line in found:
            if target != name:
                graph.add_edge(name, target)
            where = f"{path.relative_to(root.parent)}:{line}"
            private += [f"{where}: from {target} import {n}" for n in names
                        if _private(n) and target != name
                        and f"{target}.{n}" not in KNOWN_PRIVATE]
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in aliases and _private(node.attr)
                    and aliases[node.value.id] != name):
                private.append(f"{path.relative_to(root.parent)}:{node.lineno}: "
                               f"{aliases[node.value.id]}.{node.attr}")
    for name, found in imports.items():
        for target, _, line in found:
            if layer_of(target) <= layer_of(name):
                continue
            if not is_launcher(target, imports):
                upward.append(f"{modules[name].relative_to(root.parent)}:{line}: {name} "
                              f"(layer {layer_of(name)}) imports {target} "
                              f"(layer {layer_of(target)})")
    return graph, upward, private


@pytest.fixture(scope="module")
def scanned():
    return scan()


def test_every_module_has_a_layer():
    unknown = sorted(m for m in module_names() if (m.split(".") + [""])[1] not in LAYERS)
    assert not unknown, f"modules outside the layer table: {unknown}"


def test_no_import_cycle(scanned):
    graph = scanned[0]
    cycles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert not cycles, f"modules importing each other (directly or through others): {cycles}"


def test_imports_flow_from_lower_layers_to_higher_ones(scanned):
    assert not scanned[1], "imports from a lower layer of a higher one:\n" + "\n".join(scanned[1])


def test_no_private_name_used_across_modules(scanned):
    assert not scanned[2], "private names used outside their module:\n" + "\n".join(scanned[2])


def test_known_private_names_are_still_needed():
    """An allow-list entry goes once nothing imports the private name any more."""
    modules = module_names()
    used = set()
    for name, path in modules.items():
        for target, names, _ in imports_of(name, path, modules)[0]:
            used.update(f"{target}.{n}" for n in names)
    assert set(KNOWN_PRIVATE) <= used, f"stale entries: {set(KNOWN_PRIVATE) - used}"


def test_the_checks_see_the_package():
    """The scan itself: it finds a known import of each kind (so an empty result means clean
    code, not a scan that reads nothing)."""
    modules = module_names()
    found, _, _ = imports_of("smsg_ms.cli", modules["smsg_ms.cli"], modules)
    targets = {t for t, _, _ in found}
    assert "smsg_ms.networks" in targets                 # module level, relative
    assert "smsg_ms.graph.capture" in targets            # inside a function
    graph, _, _ = scan()
    assert graph.number_of_edges() > 100


def test_the_rules_catch_what_they_forbid(tmp_path):
    """A planted cycle, upward import and private use are reported (the rules can fail)."""
    pkg = tmp_path / "smsg_ms"
    (pkg / "graph").mkdir(parents=True)
    (pkg / "search").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "graph" / "__init__.py").write_text("")
    (pkg / "search" / "__init__.py").write_text("")
    (pkg / "graph" / "a.py").write_text("def f():\n    from ..search import b\n    b._hidden()\n")
    (pkg / "search" / "b.py").write_text("from ..graph.a import f, _g\n")
    modules = module_names(pkg)
    found, aliases, _ = imports_of("smsg_ms.graph.a", modules["smsg_ms.graph.a"], modules)
    assert [t for t, _, _ in found] == ["smsg_ms.search.b"]
    assert aliases == {"b": "smsg_ms.search.b"}
    assert layer_of("smsg_ms.graph.a") < layer_of("smsg_ms.search.b")
    found, _, _ = imports_of("smsg_ms.search.b", modules["smsg_ms.search.b"], modules)
    assert found == [("smsg_ms.graph.a", ["f", "_g"], 1)]
    graph, upward, private = scan(pkg)
    assert [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1] == [
        ["smsg_ms.graph.a", "smsg_ms.search.b"]]
    assert len(upward) == 1 and "smsg_ms.graph.a (layer 2) imports smsg_ms.search.b" in upward[0]
    assert sorted(p.split(": ", 1)[1] for p in private) == [
        "from smsg_ms.graph.a import _g", "smsg_ms.search.b._hidden"]


def test_reading_a_plan_loads_no_planner():
    """The planner package loads its modules on first use: reading and describing a plan
    (``smsg-ms explain``) imports neither numpy nor the search."""
    import subprocess
    import sys

    code = ("import sys, smsg_ms, smsg_ms.integration.writeback, smsg_ms.planner.write_back; "
            "print(sorted(m for m in ('numpy', 'smsg_ms.search', 'smsg_ms.planner.problem') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=PACKAGE.parent, check=True)
    assert out.stdout.strip() == "[]"


def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
            if any(getattr(t, "id", "") == "__all__" for t in targets):
                # a literal list, or a computed one (then its strings somewhere inside)
                names.update(c.value for c in ast.walk(node.value)
                             if isinstance(c, ast.Constant) and isinstance(c.value, str))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.If, ast.Try)):
            names.update(_top_level_names(ast.Module(body=node.body, type_ignores=[])))
    return names


def test_every_imported_name_exists():
    """``from smsg_ms.X import name`` names something ``X`` defines (or lists in ``__all__``,
    for a package that loads it on first use): a moved name cannot be missed in a rarely run
    function-level import."""
    modules = module_names()
    defined = {m: _top_level_names(ast.parse(p.read_text())) for m, p in modules.items()}
    missing = [f"{name}: from {target} import {n}"
               for name, path in modules.items()
               for target, names, _ in imports_of(name, path, modules)[0]
               for n in names if n != "*" and n not in defined[target]]
    assert not missing, "imported names that do not exist:\n" + "\n".join(missing)


def test_the_planner_s_public_names_load():
    """Each name :mod:`smsg_ms.planner` lists loads from the module its table names."""
    import importlib

    import smsg_ms.planner as planner

    assert sorted(planner.__all__) == sorted(n for names in planner._PUBLIC.values()
                                             for n in names)
    for module, names in planner._PUBLIC.items():
        for name in names:
            value = getattr(planner, name)
            assert value is getattr(importlib.import_module(f"smsg_ms.planner.{module}"), name)
    with pytest.raises(AttributeError):
        planner.no_such_name
