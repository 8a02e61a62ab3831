"""What the root command and every command module share without the settings machinery (cli.common, which
imports config and re-exports these): the global options of a run, kept on the root context, and the
"Exit codes" paragraph of a command's help; and the text of the versions (cli.entry answers ``statectl
--version`` with it before typer loads). ``statectl --help`` imports no more than this."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from statectl.errors import describe_exit_codes

if TYPE_CHECKING:
    from statectl.cli.hints import Invocation

__all__ = ["GlobalOptions", "exit_codes_epilog", "global_options", "render_versions"]


def exit_codes_epilog(*codes: int | tuple[int, str]) -> str:
    """A command's "Exit codes: ..." paragraph: each code with its name in statectl.errors.EXIT_CODES, or
    with what it means for this command (a ``(code, meaning)`` pair)."""
    return f"Exit codes: {describe_exit_codes(codes)}."


@dataclass
class GlobalOptions:
    config: Optional[str] = None
    profile: Optional[str] = None
    output: Optional[str] = None
    resolved_output: Optional[str] = None  # what the command's settings resolved it to (flag, env, profile)
    result_written: bool = False  # the command printed its result (an error after it adds no JSON document)
    invocation: Optional[Invocation] = None  # what the command line gave the command (cli.hints)
    verbose: bool = False
    quiet: bool = False
    debug: bool = False


def global_options(ctx: Any) -> GlobalOptions:
    """The run's GlobalOptions, on the root of ``ctx`` (a click/typer Context), made on first use."""
    root = ctx.find_root()
    if not isinstance(root.obj, GlobalOptions):
        root.obj = GlobalOptions()
    return root.obj


def render_versions(v: Any, *, full: bool) -> str:
    """The text of an engine.version.Versions: a line each; ``full``: with RocksDB and Java (statectl version;
    without: statectl --version)."""
    def found(value: str | None) -> str:
        return value if value is not None else "not found"

    rocksdict = found(v.rocksdict)
    if full and v.rocksdict is not None:
        rocksdict += f" (RocksDB {found(v.rocksdb)})"
    lines = [f"statectl {v.statectl}", f"python {v.python}", f"rocksdict {rocksdict}", f"pyspark {found(v.pyspark)}"]
    if full:
        where = "" if v.java_path is None else f" ({v.java_path}{'' if v.java else ' did not run'})"
        lines.append(f"java {found(v.java)}{where}")
    return "\n".join(lines)
