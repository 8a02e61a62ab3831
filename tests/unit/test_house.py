"""The house rules a newcomer relies on, held by a test: no module over 600 lines, no function over 60
(signature and docstring included, as the AST counts them), every module opening with a docstring that
says what it owns, and no name with a leading underscore imported across modules of the package.

An exception is named in ALLOWED with the reason; an entry that is no longer needed fails the test too,
so the list only shrinks.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = [ROOT / "statectl", ROOT / "tools"]
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60

# "path::qualified.name" (a function) or "path" (a module) -> why it stays as it is.
ALLOWED: dict[str, str] = {}


def _modules() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in pkg.rglob("*.py") if "__pycache__" not in p.parts)


def _rel(p: Path) -> str:
    return p.relative_to(ROOT).as_posix()


def _functions(tree: ast.AST, prefix: str = ""):
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = f"{prefix}{node.name}"
            yield name, node.end_lineno - node.lineno + 1
            yield from _functions(node, name + ".")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")
        else:
            yield from _functions(node, prefix)


def _oversized() -> dict[str, int]:
    found: dict[str, int] = {}
    for p in _modules():
        text = p.read_text()
        lines = text.count("\n")
        if lines > MAX_MODULE_LINES:
            found[_rel(p)] = lines
        for name, n in _functions(ast.parse(text)):
            if n > MAX_FUNCTION_LINES:
                found[f"{_rel(p)}::{name}"] = n
    return found


def test_no_module_over_600_lines_and_no_function_over_60() -> None:
    found = _oversized()
    unexpected = {k: v for k, v in found.items() if k not in ALLOWED}
    assert not unexpected, "over the limit (split it, or name it in ALLOWED with why):\n" + "\n".join(
        f"  {k}: {v} lines" for k, v in sorted(unexpected.items()))
    stale = sorted(set(ALLOWED) - set(found))
    assert not stale, f"ALLOWED names what is within the limits now; remove: {stale}"


def test_every_module_says_what_it_owns() -> None:
    missing = [_rel(p) for p in _modules()
               if p.stat().st_size and not ast.get_docstring(ast.parse(p.read_text()))]
    assert not missing, f"modules without a docstring: {missing}"


def test_no_private_name_is_imported_from_another_module() -> None:
    crossing = []
    for p in _modules():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("statectl"):
                crossing += [f"{_rel(p)}: from {node.module} import {a.name}" for a in node.names
                             if a.name.startswith("_") and not a.name.startswith("__")]
    assert not crossing, "private names used across modules (make them public):\n" + "\n".join(crossing)


def test_every_statectl_import_names_a_module_that_exists() -> None:
    """Imports inside functions run only when their command does: a module that moved must not leave one
    behind that fails with ModuleNotFoundError in front of a user."""
    import importlib.util

    missing = []
    for p in _modules():
        for node in ast.walk(ast.parse(p.read_text())):
            names = ([node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else
                     [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            missing += [f"{_rel(p)}: {n}" for n in names
                        if n.startswith("statectl") and importlib.util.find_spec(n) is None]
    assert not missing, "imports of modules that do not exist:\n" + "\n".join(missing)
