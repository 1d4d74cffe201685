"""The app is a thin client of `tevcore.studio`: no module under app/ reaches the engine's floors itself.

A page collects input and renders; what it asks for is done by a page service in `tevcore.studio`, which applies
the room's caps and takes the compute-queue turn. So every module of the app (pages, view helpers, figures) may
import from tevcore only the service layer (`studio`), the room's services (`room`) and the plain floor-0 and
floor-3 values (`results`, `parsing`, `config`); the engine, the verifiers, the target, the drafters, the decoding
loop, the lab, training and the CLI are reached through `studio` only. Every import counts, at module level or
inside a function.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parents[2] / "app"
ALLOWED = ("tevcore.studio", "tevcore.room", "tevcore.results", "tevcore.parsing", "tevcore.config")


def app_modules() -> list[Path]:
    return sorted(APP.rglob("*.py"))


def tevcore_imports(source: str) -> list[str]:
    """Every tevcore module named by an import statement of `source`, wherever the statement sits."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found += [node.module] if node.module != "tevcore" else [f"tevcore.{a.name}" for a in node.names]
    return [name for name in found if name == "tevcore" or name.startswith("tevcore.")]


def forbidden(source: str) -> list[str]:
    return [name for name in tevcore_imports(source)
            if not any(name == allowed or name.startswith(allowed + ".") for allowed in ALLOWED)]


@pytest.mark.parametrize("path", app_modules(), ids=lambda p: str(p.relative_to(APP)))
def test_an_app_module_reaches_tevcore_through_the_page_services_only(path: Path):
    bad = forbidden(path.read_text())
    assert not bad, (f"app/{path.relative_to(APP)} imports {', '.join(sorted(set(bad)))}: call a service of "
                     "tevcore.studio instead (the app reaches the engine only through it)")


def test_the_check_sees_a_forbidden_import_at_any_depth():
    late = "def f():\n    from tevcore.verify.laws import exit_law\n    import tevcore.engine.tree\n"
    assert forbidden(late) == ["tevcore.verify.laws", "tevcore.engine.tree"]
    assert forbidden("from tevcore import lab\n") == ["tevcore.lab"]
    assert forbidden("from tevcore.studio import comparison\nfrom tevcore.room.limits import Limits\n") == []
