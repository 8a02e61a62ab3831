"""cli.registry: every command's summary (what the root help lists without loading it) is the first paragraph
of its own help; the commands load on first use; ``statectl --version`` from the console script's fast path
prints what the typer app's --version prints."""

from __future__ import annotations

import subprocess
import sys

import pytest
import typer.main
from typer.testing import CliRunner

from statectl.cli.main import RootGroup, app
from statectl.cli.registry import COMMANDS, LazyCommands, build


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_summary_is_the_first_paragraph_of_the_commands_help(name: str):
    cmd = build(name, COMMANDS[name])
    assert cmd.name == name
    first = " ".join((cmd.help or "").split("\n\n")[0].split())
    assert COMMANDS[name].summary == first


def test_the_root_help_lists_the_summaries_as_the_loaded_commands_would():
    root = typer.main.get_command(app)
    assert isinstance(root, RootGroup) and isinstance(root.commands, LazyCommands)

    def listed() -> str:
        ctx = root.make_context("statectl", ["--help"], resilient_parsing=True, terminal_width=100)
        assert root.list_commands(ctx) == list(COMMANDS)
        text = root.get_help(ctx)
        return text[text.index("Commands:"):]

    lazy = listed()
    assert all(root.commands.summary(n) == COMMANDS[n].summary for n in COMMANDS)  # nothing was loaded
    for name in COMMANDS:  # load every command: the list then comes from the commands themselves
        assert root.commands[name].name == name
    assert all(root.commands.summary(n) is None for n in COMMANDS)
    assert lazy == listed()


def test_commands_load_when_first_used():
    commands = LazyCommands(COMMANDS)
    assert list(commands) == list(COMMANDS) and len(commands) == len(COMMANDS)
    assert commands.summary("gc") == COMMANDS["gc"].summary
    assert commands["gc"].name == "gc"
    assert commands.summary("gc") is None
    assert "nope" not in commands
    with pytest.raises(KeyError):
        commands["nope"]


def test_the_fast_version_prints_what_the_app_prints():
    fast = subprocess.run([sys.executable, "-m", "statectl", "--version"], capture_output=True, text=True, timeout=60)
    assert fast.returncode == 0, fast.stderr
    slow = CliRunner().invoke(app, ["--version"])
    assert slow.exit_code == 0
    assert fast.stdout == slow.output
