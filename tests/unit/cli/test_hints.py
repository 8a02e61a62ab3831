"""A hint that suggests a statectl command which then fails with exit 2 is a bug (issue 22, item 3): every
``statectl ...`` command named in a hint, note or message of the package (as text, or as a
statectl.errors.Command) parses with the current CLI (its command exists, its flags exist and take the values
given), without running it. How the CLI completes a hint's commands with the flags of the failing
invocation: tests/unit/cli/test_hint_scope.py, and tests/integration/test_hint_commands.py runs them."""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import pytest
import typer

import statectl
from tests.unit.cli.test_common import _commands

COMMANDS = _commands()
TOP = {c.split()[0] for c in COMMANDS}
PACKAGE = Path(statectl.__file__).parent
HOLE = "1"  # what an f-string's {expression} stands for: a name, an id, a number all parse as it


def _text(node: ast.AST) -> str:
    """The text a string expression can produce, f-string holes as HOLE, alternatives joined by " | "."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(HOLE if isinstance(v, ast.FormattedValue) else _text(v) for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _text(node.left) + _text(node.right)
    if isinstance(node, ast.IfExp):
        return _text(node.body) + " | " + _text(node.orelse)
    if isinstance(node, ast.BoolOp):
        return " | ".join(_text(v) for v in node.values)
    if isinstance(node, ast.Tuple):  # a hint of text and statectl.errors.Command parts
        return "".join(_text(e) for e in node.elts)
    command = _command(node)
    if command is not None:
        return f"'{command}'"
    if isinstance(node, ast.Call):  # a helper building the hint from its arguments (catalog.listing._nearest)
        texts = [_text(a) for a in [*node.args, *(k.value for k in node.keywords)]]
        return " | ".join(f"'{t}'" if t.startswith("statectl ") else t for t in texts)
    return ""


def _command(node: ast.AST) -> str | None:
    """The command line of a statectl.errors.Command made in the code: ``command("snapshots list", "--job", job)``
    or ``ref.command("standby follow", "--pre-restore")`` (StoreRef.command: its store's flags are left out),
    each expression a HOLE; None for any other expression."""
    if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)):
        return None
    func = node.func
    if not ((isinstance(func, ast.Name) and func.id == "command")
            or (isinstance(func, ast.Attribute) and func.attr == "command")):
        return None
    if node.args[0].value.split()[:1] and node.args[0].value.split()[0] not in TOP:  # typer's app.command("list")
        return None
    words = [a.value if isinstance(a, ast.Constant) and isinstance(a.value, str) else HOLE
             for a in node.args if not isinstance(a, ast.Starred)]
    return " ".join(["statectl", *words])


def _strings() -> list[tuple[str, int, str]]:
    """(file, line, text) of every hint= value and every string literal that names a statectl command."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        # The pieces of an f-string are read as part of it, not on their own.
        parts = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
        for node in ast.walk(tree):
            if id(node) in parts:
                continue
            if isinstance(node, ast.keyword) and node.arg == "hint":
                out.append((str(path.relative_to(PACKAGE)), node.value.lineno, _text(node.value)))
            elif _command(node) is not None:  # a Command made for a hint by a helper (catalog.listing)
                out.append((str(path.relative_to(PACKAGE)), node.lineno, _text(node)))
            elif isinstance(node, (ast.Constant, ast.JoinedStr)) and not isinstance(getattr(node, "value", None), bytes):
                text = _text(node)
                if "'statectl " in text or ": statectl " in text:
                    out.append((str(path.relative_to(PACKAGE)), node.lineno, text))
    return out


# A command quoted ('statectl drain status') or after a colon to the end of its text (": statectl standby
# follow --container 3 --pre-restore").
QUOTED = re.compile(r"'(statectl [^']+)'")
TRAILING = re.compile(r": (statectl [^'|()]+?)\s*(?:\||$)")


def hint_commands() -> list[tuple[str, str]]:
    found: dict[str, str] = {}
    for file, line, text in _strings():
        for m in [*QUOTED.finditer(text), *TRAILING.finditer(text)]:
            command = m.group(1).strip().replace(" ...", " " + HOLE)  # "--kafka ... --job ...": a template
            if m.re is TRAILING and command.split()[1] not in TOP:  # prose: "statectl follows the JDKs"
                continue
            found.setdefault(command, f"{file}:{line}")
    return sorted((where, command) for command, where in found.items())


HINTS = hint_commands()


def test_the_scan_finds_the_hints():
    commands = {c for _, c in HINTS}
    # One of each shape: quoted, after a colon with a hole, built by a helper from its argument.
    assert {"statectl drain status", "statectl standby follow --container 1 --pre-restore",
            "statectl snapshots list --job 1", "statectl backup --create", "statectl lease break"} <= commands, \
        sorted(commands)
    assert len(HINTS) >= 15


@pytest.mark.parametrize("where, command", HINTS, ids=[c for _, c in HINTS])
def test_every_command_a_hint_names_parses(where: str, command: str):
    args = shlex.split(command)
    assert args[0] == "statectl"
    rest = args[1:]
    named = [c for c in COMMANDS if rest[:len(c.split())] == c.split()]
    assert named, f"{where}: {command!r} names no statectl command"
    words = max(named, key=len).split()
    cmd = COMMANDS[" ".join(words)]
    try:
        cmd.make_context(" ".join(words), rest[len(words):], resilient_parsing=False)
    except typer.Exit:
        pass
    except Exception as e:  # a flag that does not exist, a value of the wrong kind: exit 2 when pasted
        pytest.fail(f"{where}: {command!r} does not parse: {type(e).__name__}: {e}")
