"""Imports point down the floors of tevcore, and no module imports itself through others.

A module may import only modules on its own floor or a lower one, and two
units on one floor may import each other only where the floor says so.
Every `import` counts, at module level or inside a function: a late import
still ties the two modules together, it only hides the tie from the reader.

The floors, lowest first (a unit is a subpackage or a top-level module):

| floor | units | what it holds |
| --- | --- | --- |
| 0 | `tevcore` (the package `__init__`), `parsing`, `outputs`, `results`, `diskwrite`, `filechecks`, `ranks` | plain helpers that import nothing of tevcore: parsers, result and file writers, file checks, the processes of a torchrun launch |
| 1 | `engine`, `timing` | the round's math and records; the one timer over the stage names of the records |
| 2 | `verify`, `target` | the exact verifiers; the target and its session (apart: neither imports the other) |
| 3 | `config`, `flags`, `proposer_protocol` | the decode config, the target flags, the `Proposer` interface |
| 4 | `proposers`, `decoding` | the drafters; the one decoding loop (apart: they meet only in `proposer_protocol`) |
| 5 | `lab`, `hf` | benchmarks, prompt sets, the simulator; the `model.generate(custom_generate=...)` door (apart: neither imports the other) |
| 6 | `train` | distillation data, training, drafter evaluation (reads the prompt sets of `lab`) |
| 7 | `cli`, `__main__`, `room` | the command line, which reaches every command module by name; the services of a hosted room (caps, queue, spaces, jobs) the app calls (apart: neither imports the other) |
| 8 | `studio` | the app's page services: requests checked against the room's caps, heavy work done in its compute-queue turns, the one capped reader, the lessons |
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "tevcore"

FLOORS = {
    "": 0, "parsing": 0, "outputs": 0, "results": 0, "diskwrite": 0, "filechecks": 0, "ranks": 0,
    "engine": 1, "timing": 1,
    "verify": 2, "target": 2,
    "config": 3, "flags": 3, "proposer_protocol": 3,
    "proposers": 4, "decoding": 4,
    "lab": 5, "hf": 5,
    "train": 6,
    "cli": 7, "__main__": 7, "room": 7,
    "studio": 8,
}
# units that share a floor but must not import each other
APART = [{"verify", "target"}, {"proposers", "decoding"}, {"lab", "hf"}, {"cli", "room"}]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def unit(module: str) -> str:
    """The subpackage or top-level module a module belongs to ('' for the package itself)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def imported(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Every tevcore module that `module` imports, wherever the import statement sits."""
    out: set[str] = set()
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
                base = ".".join(anchor + ([base] if base else []))
            # `from tevcore.x import y` imports the submodule tevcore.x.y when there is one
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in known:  # `import tevcore.x.y.attr`-like spellings: the nearest module
                name = name.rpartition(".")[0]
            if name.startswith("tevcore") and name != module:
                out.add(name)
    return out


def import_graph() -> nx.DiGraph:
    known = modules()
    graph = nx.DiGraph()
    graph.add_nodes_from(known)
    for module, path in known.items():
        graph.add_edges_from((module, other) for other in imported(module, path, known))
    return graph


def test_every_unit_has_a_floor():
    missing = sorted({unit(m) for m in modules()} - set(FLOORS))
    assert not missing, f"give these units a floor in FLOORS and in the README's layout table: {missing}"


def upward(graph: nx.DiGraph) -> list[str]:
    bad = []
    for source, dest in graph.edges:
        low, high = unit(source), unit(dest)
        if FLOORS[high] > FLOORS[low]:
            bad.append(f"{source} -> {dest} (floor {FLOORS[low]} imports floor {FLOORS[high]})")
        elif low != high and {low, high} in APART:
            bad.append(f"{source} -> {dest} ({low} and {high} must not import each other)")
    return sorted(bad)


def test_imports_point_down():
    bad = upward(import_graph())
    assert not bad, "imports that point up or across the floors:\n" + "\n".join(bad)


def test_no_import_cycles():
    cycles = sorted(" -> ".join(c + [c[0]]) for c in nx.simple_cycles(import_graph()))
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


@pytest.mark.parametrize("source,dest", [("tevcore.engine.builders", "tevcore.flags"),
                                         ("tevcore.decoding.loop", "tevcore.proposers.block"),
                                         ("tevcore.target.session", "tevcore.verify.rules")])
def test_the_check_sees_a_forbidden_import(source, dest):
    """The check itself catches an import pointing up or across (it is not vacuous)."""
    graph = import_graph()
    graph.add_edge(source, dest)
    assert any(line.startswith(f"{source} -> {dest} ") for line in upward(graph))


def test_the_check_sees_a_cycle_and_a_late_import(tmp_path):
    code = "def f():\n    from tevcore.cli import main\n"
    path = tmp_path / "x.py"
    path.write_text(code)
    assert "tevcore.cli" in imported("tevcore.lab.x", path, modules())
    graph = import_graph()
    graph.add_edge("tevcore.engine.tree", "tevcore.engine.records")
    assert list(nx.simple_cycles(graph))


def test_app_pages_build_no_target_session():
    """Pages call the services of app/appdata; a session (and the forward it runs) lives there, not in a page."""
    pages = sorted((PACKAGE.parent / "app" / "pages").glob("*.py"))
    assert pages
    bad = []
    for page in pages:
        for node in ast.walk(ast.parse(page.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "tevcore.target.session":
                bad.append(f"{page.name} imports {node.module}")
            elif isinstance(node, ast.Name) and node.id == "TargetSession":
                bad.append(f"{page.name} uses TargetSession")
    assert not bad, "\n".join(bad)
