"""Every example in --help pastes into a shell as it is (issue 22, item 2): kept as a literal block at 80
columns, continued with backslashes, and it parses back into the command it documents (its flags exist,
take the values given)."""

from __future__ import annotations

import shlex

import pytest
import typer
from typer.testing import CliRunner

from statectl.cli.common import EXAMPLE_WIDTH, shell_lines
from statectl.cli.main import app
from tests.unit.cli.test_common import _commands

COMMANDS = _commands()


def examples_of(help_text: str) -> list[str]:
    """The example commands of a --help text, continuation lines joined."""
    out: list[str] = []
    lines = help_text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("statectl ") and not lines[i].startswith("Usage"):
            command = line
            while command.endswith("\\"):
                i += 1
                command = command[:-1] + lines[i].strip()
            out.append(command)
        i += 1
    return out


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_help_examples_are_literal_and_parse_back(path: str):
    r = CliRunner().invoke(app, [*path.split(), "--help"], terminal_width=80, env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    examples = examples_of(r.output)
    assert examples, f"{path}: no example"
    in_examples = False
    for line in r.output.splitlines():
        in_examples = in_examples or line.strip().startswith("Example")
        if in_examples and line.strip().startswith("Exit codes"):
            break
        if in_examples and not line.strip().startswith("#"):
            code = line.split(" #")[0]
            assert len(code) <= EXAMPLE_WIDTH + 2, f"{path}: example line wider than 80 columns: {line!r}"
    for example in examples:
        args = shlex.split(example, comments=True)
        assert args[0] == "statectl"
        rest, i = [], 1
        while i < len(args):  # the global options, wherever they stand (main takes them anywhere)
            if args[i] in ("-o", "--output", "--profile", "--config"):
                i += 2
            elif args[i] in ("-q", "--quiet", "-v", "--verbose", "--debug"):
                i += 1
            else:
                rest.append(args[i])
                i += 1
        named = [c for c in COMMANDS if rest[:len(c.split())] == c.split()]
        assert named, f"{path}: example names no command: {example}"
        words = max(named, key=len).split()  # an example may show a related command (lease show, lease break)
        cmd = COMMANDS[" ".join(words)]
        try:
            cmd.make_context(" ".join(words), rest[len(words):], resilient_parsing=False)
        except typer.Exit:
            pass
        except Exception as e:  # a flag that does not exist, a value of the wrong kind
            if type(e).__name__ in ("NoSuchOption", "BadParameter", "BadOptionUsage", "UsageError"):
                pytest.fail(f"{path}: example does not parse: {example}: {e}")


def test_shell_lines_break_between_flags_and_keep_quotes_and_comments():
    text = shell_lines("statectl standby follow --kafka broker:9092 --job page-views --task 'Partition 0' "
                       "--store counts --state-dir /var/samza/state --metrics-port 9464 # a comment here")
    lines = text.splitlines()
    assert all(len(line) <= EXAMPLE_WIDTH for line in lines[:-1])
    assert all(line.endswith(" \\") for line in lines[:-1]) and lines[-1].endswith("# a comment here")
    assert "--task 'Partition 0'" in text
    assert shlex.split(text.replace("\\\n", " "), comments=True) == shlex.split(
        "statectl standby follow --kafka broker:9092 --job page-views --task 'Partition 0' --store counts "
        "--state-dir /var/samza/state --metrics-port 9464")
