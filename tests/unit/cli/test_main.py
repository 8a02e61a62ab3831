"""Hoisting global options in front of the command (statectl.cli.main)."""

from __future__ import annotations

import pytest

from statectl.cli.main import hoist_global_options

# ---- hoisting global options ---------------------------------------------------------------------

HOIST = [
    ("no-args", [], []),
    ("already-in-front", ["-o", "json", "backup"], ["-o", "json", "backup"]),
    ("short-output-after-command", ["backup", "--store", "x", "-o", "json"], ["-o", "json", "backup", "--store", "x"]),
    ("long-output-equals", ["backup", "--output=json", "--store", "x"], ["--output=json", "backup", "--store", "x"]),
    ("long-output-separate", ["backup", "--output", "json"], ["--output", "json", "backup"]),
    ("quiet", ["backup", "--store", "x", "-q"], ["-q", "backup", "--store", "x"]),
    ("flags", ["restore", "--verbose", "-v", "--quiet", "--debug"], ["--verbose", "-v", "--quiet", "--debug", "restore"]),
    ("config-and-profile", ["backup", "--config", "/etc/s.toml", "--profile=staging", "--store", "x"],
     ["--config", "/etc/s.toml", "--profile=staging", "backup", "--store", "x"]),
    ("order-of-globals-kept", ["backup", "-q", "--store", "x", "-o", "json", "--debug"],
     ["-q", "-o", "json", "--debug", "backup", "--store", "x"]),
    ("nested-command", ["snapshots", "show", "abc", "-o", "json"], ["-o", "json", "snapshots", "show", "abc"]),
    ("double-dash-stops", ["restore", "--", "-o", "json"], ["restore", "--", "-o", "json"]),
    ("double-dash-after-global", ["restore", "-q", "--", "-q", "--output=json"],
     ["-q", "restore", "--", "-q", "--output=json"]),
    ("value-missing-at-end", ["backup", "-o"], ["backup", "-o"]),
    ("value-attached-to-other-option", ["backup", "--store=-q"], ["backup", "--store=-q"]),
    ("not-a-global", ["backup", "--output-dir", "x", "--quietly"], ["backup", "--output-dir", "x", "--quietly"]),
]


@pytest.mark.parametrize("args, expected", [pytest.param(a, e, id=i) for i, a, e in HOIST])
def test_hoist_global_options(args, expected):
    original = list(args)
    assert hoist_global_options(args) == expected
    assert args == original  # the input list is not changed


# ---- the error edge, on typer's public API --------------------------------------------------------

def _tool(body):
    """A one-command app with statectl's group (its error edge) around ``body``."""
    import typer

    from statectl.cli.main import StatectlGroup

    tool = typer.Typer(cls=StatectlGroup, rich_markup_mode=None, pretty_exceptions_enable=False)
    tool.callback()(lambda: None)
    tool.command("probe")(body)
    return tool


def _invoke(tool, *args):
    from typer.testing import CliRunner

    return CliRunner().invoke(tool, list(args))


def test_the_cli_uses_no_private_typer_module():
    from pathlib import Path

    import statectl.cli

    import ast

    for module in Path(statectl.cli.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            assert not any(n.startswith("typer._") or n == "click" or n.startswith("click.") for n in names), \
                f"{module.name} imports {names}"


def test_usage_errors_are_caught_through_the_public_class():
    import typer

    from statectl.cli.main import ClickUsageError

    assert ClickUsageError.__name__ == "UsageError" and ClickUsageError.exit_code == 2
    assert issubclass(typer.BadParameter, ClickUsageError) and issubclass(ClickUsageError, typer.TyperException)


@pytest.mark.parametrize("args, message", [
    (["backup", "--nope"], "Error: No such option: --nope"),
    (["backup", "--job"], "Error: Option '--job' requires an argument."),
    (["backup", "--parallelism", "x"], "Error: Invalid value for '"),
    (["nosuch"], "Error: No such command 'nosuch'."),
    (["snapshots", "show", "a", "b"], "Error: Got unexpected extra argument"),
])
def test_a_usage_error_is_one_line_with_a_hint_and_exit_2(args, message):
    from statectl.cli.main import app

    r = _invoke(app, *args)
    assert r.exit_code == 2
    lines = r.stderr.splitlines()
    assert lines[0].startswith(message) and len(lines) <= 2
    assert all(line.startswith("Hint: see 'statectl") for line in lines[1:])
    assert r.stdout == ""


@pytest.mark.parametrize("args", [[], ["snapshots"], ["lease"], ["config"]])
def test_a_group_without_arguments_prints_its_help(args):
    from statectl.cli.main import app

    r = _invoke(app, *args)
    assert r.exit_code == 2 and "Usage:" in r.output and "Error" not in r.output


def test_an_interrupt_exits_130_and_an_error_its_own_code():
    from statectl.cli.main import Terminated
    from statectl.errors import LockHeldError

    def interrupted():
        raise KeyboardInterrupt

    def terminated():
        raise Terminated("SIGTERM")

    def locked():
        raise LockHeldError("the store is held", hint="stop the job")

    def broken():
        raise RuntimeError("boom")

    r = _invoke(_tool(interrupted), "probe")
    assert (r.exit_code, r.stderr) == (130, "Interrupted.\n")
    r = _invoke(_tool(terminated), "probe")
    assert (r.exit_code, r.stderr) == (130, "Interrupted by SIGTERM.\n")
    r = _invoke(_tool(locked), "probe")
    assert (r.exit_code, r.stderr) == (11, "Error: the store is held\nHint: stop the job\n")
    r = _invoke(_tool(broken), "probe")
    assert r.exit_code == 1 and r.stderr.startswith("Error: unexpected RuntimeError: boom\n")
