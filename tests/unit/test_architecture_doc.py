"""docs/ARCHITECTURE.md is the map a newcomer reads first: every module and package it names exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "ARCHITECTURE.md"

# `engine/drain/`, `kafka/tails.py`, `catalog/retention.py` and the like, in backticks or at a line's start.
PATH = re.compile(r"(?<![\w./-])((?:[a-z_]+/)+(?:[a-z_]+\.py)?)(?![\w/])")


def _named_paths() -> set[str]:
    return {m.group(1) for m in PATH.finditer(DOC.read_text())}


def _exists(path: str) -> bool:
    return any((base / path).exists() for base in (ROOT / "statectl", ROOT))


def test_every_module_the_architecture_page_names_exists() -> None:
    named = _named_paths()
    assert len(named) > 20, "the page names the packages and modules it describes"
    missing = sorted(p for p in named if not _exists(p))
    assert not missing, f"docs/ARCHITECTURE.md names what does not exist: {missing}"


def test_every_package_of_statectl_is_on_the_page() -> None:
    named = _named_paths()
    pkg = ROOT / "statectl"
    packages = sorted(i.parent.relative_to(pkg).as_posix() + "/" for i in pkg.rglob("__init__.py") if i.parent != pkg)
    unnamed = [p for p in packages if p not in named]
    assert not unnamed, f"packages the architecture page does not describe: {unnamed}"
