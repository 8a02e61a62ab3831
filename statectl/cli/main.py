"""The statectl command: global options, error handling at the edge, and the command registry."""

from __future__ import annotations

import os
import signal
import sys
from typing import Annotated, Any, Literal, Optional

import typer
from typer.core import TyperCommand, TyperGroup

from statectl.cli.base import GlobalOptions, global_options
from statectl.cli.registry import COMMANDS, LazyCommands
from statectl.errors import EXIT_FAILURE, EXIT_INTERRUPTED, StatectlError, describe_exit_codes

EXIT_CODES_HELP = "Exit codes: " + describe_exit_codes(meanings={EXIT_FAILURE: "failure (diff: different)"}) + "."

# click's UsageError (bad flags or arguments), reached through typer's public BadParameter: typer vendors
# click privately (typer._click), and the separately installed click, if any, has other classes.
ClickUsageError: type[typer.TyperException] = next(
    c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")


def _shows_help(e: BaseException) -> bool:
    """click's NoArgsIsHelpError (a group or command given no arguments prints its help): told by name, as
    typer itself does (typer.rich_utils), since no public name exports it."""
    return type(e).__name__ == "NoArgsIsHelpError"


def _stderr(message: str) -> None:
    from statectl.redact import redact

    sys.stderr.write(redact(message) + "\n")
    sys.stderr.flush()


_GLOBAL_WITH_VALUE = {"--config", "--profile", "--output", "-o"}
_GLOBAL_FLAGS = {"--verbose", "-v", "--quiet", "-q", "--debug"}


def hoist_global_options(args: list[str]) -> list[str]:
    """Move global options written after the command name to the front, so that
    ``statectl backup ... -o json`` works like ``statectl -o json backup ...``."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            rest.extend(args[i:])
            break
        name = a.split("=", 1)[0]
        if a in _GLOBAL_FLAGS:
            front.append(a)
        elif name in _GLOBAL_WITH_VALUE and "=" in a:
            front.append(a)
        elif a in _GLOBAL_WITH_VALUE and i + 1 < len(args):
            front.extend(args[i:i + 2])
            i += 1
        else:
            rest.append(a)
        i += 1
    return front + rest


class StatectlGroup(TyperGroup):
    """Maps StatectlError to ``Error: ...`` / ``Hint: ...`` on stderr and its exit code, everywhere."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        if ctx.parent is None:
            args = hoist_global_options(list(args))
        words = list(args)  # click's parser consumes ``args``
        try:
            return super().parse_args(ctx, args)
        except ClickUsageError as e:
            if _shows_help(e):
                raise
            raise _usage_exit(e, ctx, words) from None

    def invoke(self, ctx: typer.Context):
        try:
            return super().invoke(ctx)
        except StatectlError as e:
            from statectl.cli.hints import hint_text

            hint = hint_text(e, ctx.find_root().command, getattr(ctx.find_root().obj, "invocation", None))
            _stderr(f"Error: {e}")
            if hint:
                _stderr(f"Hint: {hint}")
            if _debug(ctx):
                _stderr(_traceback())
            _json_error(ctx, str(e), hint, e.exit_code)
            raise typer.Exit(e.exit_code) from None
        except KeyboardInterrupt as e:
            message = f"Interrupted by {e.args[0]}." if isinstance(e, Terminated) else "Interrupted."
            _stderr(message)
            _json_error(ctx, message, None, EXIT_INTERRUPTED)
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except ClickUsageError as e:
            if _shows_help(e):
                raise
            raise _usage_exit(e, ctx) from None
        except (typer.Exit, typer.Abort, typer.TyperException):
            raise
        except Exception as e:
            if _debug(ctx):
                _stderr(_traceback())
            _stderr(f"Error: unexpected {type(e).__name__}: {e}")
            _stderr("Hint: run again with --debug for a traceback, and report it")
            _json_error(ctx, f"unexpected {type(e).__name__}: {e}", "run again with --debug for a traceback, and "
                        "report it", EXIT_FAILURE)
            raise typer.Exit(EXIT_FAILURE) from None


class RootGroup(StatectlGroup):
    """The statectl group: its commands are the registry's, each built when first used (cli.registry), and
    its help lists them by their summaries without loading them."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        lazy = LazyCommands(COMMANDS)
        lazy.update(self.commands)
        self.commands = lazy

    def list_commands(self, ctx: typer.Context) -> list[str]:
        return list(self.commands)  # the names, in the registry's order, without building a command

    def format_commands(self, ctx: typer.Context, formatter: Any) -> None:
        commands = self.commands
        if not isinstance(commands, LazyCommands):
            return super().format_commands(ctx, formatter)
        names = self.list_commands(ctx)
        if not names:
            return None
        limit = formatter.width - 6 - max(len(n) for n in names)
        rows = []
        for name in names:
            summary = commands.summary(name)
            if summary is None:
                cmd = self.get_command(ctx, name)
                if cmd is None or cmd.hidden:
                    continue
                rows.append((name, cmd.get_short_help_str(limit)))
            else:
                # The summary shortened as the command's own help would be (click's first-sentence rule).
                rows.append((name, TyperCommand(name=name, help=summary).get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)
        return None


def _json_error(ctx: typer.Context, message: str, hint: str | None, code: int, args: list[str] | None = None) -> None:
    """Under ``--output json``, the error as the command's one JSON document on stdout too (a script that
    parses stdout gets ``{"error": ..., "hint": ..., "exit_code": ...}`` rather than nothing); the
    ``Error:`` line on stderr stays for people. The output setting is the one the command resolved (flag,
    STATECTL_OUTPUT, profile), or, when the error came before that, the flag or the environment's: an
    unknown command is found before the global options are taken in, so the flag is read from what was
    parsed of the command line (``args``: the words, when even that failed)."""
    root = ctx.find_root()
    g = root.obj
    if getattr(g, "result_written", False):  # the result is the document (diff: different, verify: problems)
        return
    output = (getattr(g, "resolved_output", None) or getattr(g, "output", None) or root.params.get("output")
              or _output_flag(args or []) or os.environ.get("STATECTL_OUTPUT"))
    if output != "json":
        return
    import json

    from statectl.redact import redact

    sys.stdout.write(redact(json.dumps({"error": message, "hint": hint, "exit_code": code}, ensure_ascii=False))
                     + "\n")
    sys.stdout.flush()


def _usage_exit(e: typer.TyperException, ctx: typer.Context | None = None,
                args: list[str] | None = None) -> typer.Exit:
    """A bad flag or argument, said in the same one-line form as every other error (click would
    print a usage banner first)."""
    _stderr(f"Error: {e.format_message()}")
    bad = getattr(e, "ctx", None)
    hint = f"see '{bad.command_path} --help'" if bad is not None else None
    if hint:
        _stderr(f"Hint: {hint}")
    if ctx is not None:
        _json_error(ctx, e.format_message(), hint, e.exit_code, args)
    return typer.Exit(e.exit_code)


def _output_flag(args: list[str]) -> str | None:
    """The value of the last ``--output``/``-o`` among the options in front of ``args`` (where
    hoist_global_options put the global ones), or None."""
    found, i = None, 0
    while i < len(args) and args[i].startswith("-") and args[i] != "--":
        if args[i].startswith("--output="):
            found = args[i].split("=", 1)[1]
        elif args[i] in _GLOBAL_WITH_VALUE:
            found = args[i + 1] if args[i] in ("--output", "-o") and i + 1 < len(args) else found
            i += 1
        i += 1
    return found


def _traceback() -> str:
    import traceback

    return traceback.format_exc().rstrip()


def _debug(ctx: typer.Context) -> bool:
    obj = ctx.find_root().obj
    return bool(getattr(obj, "debug", False))


app = typer.Typer(
    cls=RootGroup,
    name="statectl",
    help="Operations tool for the local RocksDB state of stream-processing jobs (Apache Samza formats): "
         "incremental snapshots to S3 or a local dir, fast restores.\n\n" + EXIT_CODES_HELP,
    pretty_exceptions_show_locals=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    """--version: statectl's version on the first line, then what `statectl version` reads from the installed
    packages alone (no RocksDB, no java -version: scripts call --version on their hot start path)."""
    if value:
        from statectl.cli.base import render_versions
        from statectl.engine.version import installed_versions

        print(render_versions(installed_versions(), full=False))
        raise typer.Exit(0)


@app.callback()
def main(
    ctx: typer.Context,
    config: Annotated[Optional[str], typer.Option("--config", help="Config file (default ./statectl.toml, then $XDG_CONFIG_HOME/statectl/config.toml). [env STATECTL_CONFIG]", show_default=False)] = None,
    profile: Annotated[Optional[str], typer.Option("--profile", help="Profile (table) of the config file to use (default: default). [env STATECTL_PROFILE]", show_default=False)] = None,
    output: Annotated[Optional[Literal["text", "json"]], typer.Option("--output", "-o", help="Result format. [env STATECTL_OUTPUT]", show_default=False)] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="More detail on stderr.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress or notes on stderr.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Tracebacks for errors.")] = False,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version (and rocksdict's and pyspark's).")] = False,
) -> None:
    from statectl.redact import add_from_env

    add_from_env()
    g = global_options(ctx)
    g.config, g.profile, g.output, g.verbose, g.quiet, g.debug = config, profile, output, verbose, quiet, debug
    if debug or verbose:
        import logging

        from statectl.redact import RedactingFilter

        logging.basicConfig(level=logging.DEBUG if debug else logging.INFO, stream=sys.stderr,
                            format="%(levelname)s %(name)s: %(message)s")
        for handler in logging.getLogger().handlers:
            handler.addFilter(RedactingFilter())


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised in the main thread so that it unwinds like Ctrl-C: temp dirs removed,
    leases released, exit 130."""


def _terminate(signum: int, _frame: object) -> None:
    raise Terminated(signal.Signals(signum).name)


def run() -> None:
    """Run the statectl command line (cli.entry, the console script, calls it for all but a lone --version)."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _terminate)
    # A path that is not valid UTF-8 (a surrogate-escaped file name) must not crash the output of a result.
    sys.stdout.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    app()


__all__ = ["app", "run", "GlobalOptions"]
