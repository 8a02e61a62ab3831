"""What every state command shares: the settings flags, the Env of a run (its Session, output, progress
bars), exit-code lines, and result rendering."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import os
import signal
import sys
import threading
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Callable, Literal, Optional, TypeVar

import typer

from statectl import config
from statectl.cli.base import GlobalOptions, exit_codes_epilog, global_options
from statectl.errors import UsageError

if TYPE_CHECKING:
    from statectl.cli.hints import Invocation
    from statectl.progress import ProgressReporter
    from statectl.session import Session


def _flag(*decls: str, help: str, metavar: str | None = None) -> Any:
    """A settings flag: its option names, help and (optionally) the name of its value. The help of a flag
    named like a setting gets the setting's default for ``{default}`` (from config.KEYS, the one table of
    defaults) and its environment variable."""
    return field(default=None, metadata={"decls": decls, "help": help, "metavar": metavar})


@dataclass(frozen=True)
class Flags:
    """The settings flags of one command run as given (None: not given, so the environment, the profile or
    the default decides). Each command takes the ones it names in ``@state_command``."""

    blobstore: Optional[str] = _flag("--blobstore", help="Blob store URL: file:///path or s3://bucket/prefix.")
    s3_endpoint: Optional[str] = _flag("--s3-endpoint", help="Endpoint URL of an S3-compatible store.")
    sse: Optional[Literal["AES256", "aws:kms"]] = _flag("--sse", help="S3 server-side encryption.")
    sse_kms_key_id: Optional[str] = _flag("--sse-kms-key-id", help="The KMS key of --sse aws:kms.")
    kafka: Optional[str] = _flag("--kafka", help="The job's Kafka bootstrap servers.")
    zookeeper: Optional[str] = _flag("--zookeeper", help="A standalone job's zk.connect, where its job model "
                                                         "is.")
    job: Optional[str] = _flag("--job", help="Job name.")
    job_id: Optional[str] = _flag("--job-id", help="Job id (default {default}).")
    task: Optional[str] = _flag("--task", help="Task name (default '{default}').")
    store: Optional[str] = _flag("--store", help="Store name.")
    state_dir: Optional[Path] = _flag("--state-dir", help="The job's state dir (DIR/<store>/<task dir>).")
    standby_root: Optional[Path] = _flag("--standby-root", help="statectl's dir for standby replicas (default: "
                                                                "<state-dir>.statectl-standby; never in the state "
                                                                "dir, on its filesystem).")
    store_dir: Optional[Path] = _flag("--store-dir", help="The store dir itself (instead of --state-dir).")
    keep_last: Optional[int] = _flag("--keep-last", help="Snapshots kept per task and store (default {default}).")
    parallelism: Optional[int] = _flag("--parallelism", "-j", help="Transfers in flight (default {default}).")
    limit_rate: Optional[str] = _flag("--limit-rate", metavar="RATE",
                                      help="Bandwidth cap, e.g. 50MiB/s (default {default}).")
    chunk_size: Optional[str] = _flag("--chunk-size", help="Largest blob uploaded (default {default}).")
    ttl: Optional[str] = _flag("--ttl", help="Expiry of uncommitted blobs (default {default}).")
    grace: Optional[str] = _flag("--grace", help="Age before a blob no snapshot needs is deleted (default "
                                                 "{default}).")
    create: Optional[bool] = _flag("--create", help="Create a missing file:// blob store dir (else exit 10).")

    def settings(self) -> dict[str, Any]:
        """The flags that are settings (all but --store-dir), paths as strings, for config.resolve."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in config.KEYS:
                out[f.name] = str(value) if isinstance(value, Path) else value
        return out


BLOBSTORE = ("blobstore", "s3_endpoint")
STORE_REF = ("job", "job_id", "task", "store")
# The nine flags that say where a store's state is (CLI.md "Where the state is").
STORE = (*BLOBSTORE, "kafka", *STORE_REF, "state_dir", "store_dir")


def flag_help(name: str) -> str:
    """The --help text of a settings flag: its help, the default from config.KEYS, its [env ...] tag."""
    f = _FIELDS[name]
    text = f.metadata["help"]
    key = config.KEYS.get(name)
    if key is not None:
        text = text.format(default=key.default_text()) + f" [env STATECTL_{name.upper()}]"
    return text


def flag_option(name: str) -> Any:
    """The annotated type typer reads a settings flag's option from."""
    f = _FIELDS[name]
    return Annotated[_TYPES[name], typer.Option(*f.metadata["decls"], help=flag_help(name), show_default=False,
                                                metavar=f.metadata["metavar"])]


_FIELDS = {f.name: f for f in dataclasses.fields(Flags)}
_TYPES = typing.get_type_hints(Flags)

F = TypeVar("F", bound=Callable[..., Any])


def state_command(*names: str) -> Callable[[F], F]:
    """Give a command the settings flags ``names`` and run it with an Env built from them.

    The command declares an ``env: Env`` parameter where the flags go (in ``names`` order) in its
    --help; it is called with the Env, which is closed when it returns or raises.
    """
    unknown = [n for n in names if n not in _FIELDS]
    if unknown:
        raise TypeError(f"not settings flags: {unknown}")

    def decorate(func: F) -> F:
        sig = inspect.signature(func, eval_str=True)
        if "env" not in sig.parameters or "ctx" in sig.parameters:
            raise TypeError(f"{func.__name__}: a state command takes 'env' (and no 'ctx')")
        params: list[inspect.Parameter] = []
        for p in sig.parameters.values():
            if p.name != "env":
                params.append(p)
                continue
            params.append(inspect.Parameter("ctx", p.kind, annotation=typer.Context))
            params += [inspect.Parameter(n, p.kind, default=None, annotation=flag_option(n)) for n in names]

        @functools.wraps(func)
        def command(ctx: typer.Context, **kwargs: Any) -> Any:
            from statectl.cli.hints import invocation

            g = global_options(ctx)
            g.invocation = invocation(ctx, config=g.config, profile=g.profile)  # for the hints of its errors
            flags = Flags(**{n: kwargs.pop(n) for n in names})
            with Env(ctx, flags) as env:
                return func(env=env, **kwargs)

        command.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        return command  # type: ignore[return-value]

    return decorate


def stop_on_signals() -> tuple[threading.Event, list[int]]:
    """For a command that runs until stopped: SIGTERM and SIGINT set the returned event (the engine then
    stops cleanly) instead of raising; the list gets the signals received, first first."""
    stop = threading.Event()
    received: list[int] = []

    def on_signal(signum: int, frame: Any) -> None:  # noqa: ARG001 - signal handler signature
        received.append(signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return stop, received


# The Spark options of the commands that run a Spark job (adstore load --spark, rescale).
SPARK_MASTER = Annotated[str, typer.Option("--master", help="Spark master: local[*] (default), yarn, k8s://...",
                                           show_default=False)]
SPARK_CONF = Annotated[Optional[list[str]], typer.Option("--spark-conf", help="KEY=VALUE for spark-submit "
                                                                              "(repeatable).", show_default=False)]


def parse_spark_conf(values: list[str] | None) -> dict[str, str]:
    """--spark-conf KEY=VALUE... as a dict; UsageError for a value without ``=`` or a key."""
    out = {}
    for v in values or []:
        k, sep, val = v.partition("=")
        if not sep or not k:
            raise UsageError(f"--spark-conf {v!r}: expected KEY=VALUE")
        out[k] = val
    return out


EXAMPLE_WIDTH = 78  # an example line fits an 80-column terminal with its indent


def literal_examples(epilog: str | None) -> str | None:
    """``epilog`` with each example paragraph (one indented ``statectl ...`` command) made a literal block
    (click's ``\\b`` marker: never re-wrapped), the command broken into ``\\``-continued lines at flag
    boundaries so that every line fits EXAMPLE_WIDTH columns and the whole pastes into a shell as it is."""
    if not epilog:
        return epilog
    out = []
    for para in epilog.split("\n\n"):
        lines = para.split("\n")
        if all(line.startswith("  statectl ") for line in lines):  # one command a line
            para = "\b\n" + "\n".join(shell_lines(line.strip()) for line in lines)
        out.append(para)
    return "\n\n".join(out)


def shell_lines(command: str, *, indent: str = "  ", width: int = EXAMPLE_WIDTH) -> str:
    """``command`` (one shell command line) as lines of at most ``width`` columns, joined by `` \\``
    continuations: broken only between words outside quotes, a flag kept with its value; a trailing
    ``# comment`` stays at the end of the last line (a continuation inside it would end the command)."""
    words: list[str] = []
    word, quote, comment = "", None, ""
    for i, ch in enumerate(command):  # split at spaces outside quotes, keeping the quotes
        if quote is None and ch == "#" and not word:  # a comment: to the end, after the last line
            comment = " " + command[i:].strip()
            break
        if quote:
            word += ch
            quote = None if ch == quote else quote
        elif ch in "'\"":
            word, quote = word + ch, ch
        elif ch == " ":
            if word:
                words.append(word)
            word = ""
        else:
            word += ch
    if word:
        words.append(word)
    units: list[str] = []  # a flag and its value stay on one line
    for w in words:
        if units and units[-1].startswith("-") and " " not in units[-1] and not w.startswith("-") \
                and "=" not in units[-1]:
            units[-1] += " " + w
        else:
            units.append(w)
    lines: list[str] = []
    line = indent
    for u in units:
        cont = indent + "    "
        if line.strip() and len(line) + 1 + len(u) + 2 > width:
            lines.append(line + " \\")
            line = cont + u
        else:
            line = line + (" " if line.strip() else "") + u
    lines.append(line + comment)
    return "\n".join(lines)


class Env:
    """One command run: the Session its flags resolve to (settings and adapters), plus what only the CLI
    has: the flags as given, output rendering and progress bars. Closes the Session on exit."""

    def __init__(self, ctx: typer.Context, flags: Flags):
        from statectl.session import Session, resolve_settings

        g = global_options(ctx)
        overrides = dict(flags.settings(), output=g.output, quiet=g.quiet or None, verbose=g.verbose or None,
                         debug=g.debug or None)
        self.flags = flags
        self.settings = resolve_settings(overrides, config_file=g.config, profile=g.profile)
        if not self.settings.quiet:
            from statectl.redact import redact

            for warning in self.settings.warnings:  # a typo in a profile not in use
                sys.stderr.write(redact(f"warning: {warning}") + "\n")
        self.session: Session = Session(self.settings, create_blobstore=bool(flags.create))
        self.json = self.settings.output == "json"
        g.resolved_output = self.settings.output
        self._global = g
        self._progress: ProgressReporter | None = None

    @property
    def progress(self) -> ProgressReporter:
        """Rich progress bars on a terminal; otherwise only notes, as plain lines on stderr (rich is
        not even imported: a cron run starts faster)."""
        if self._progress is None:
            from statectl.cli.progress import NoteProgress, RichProgress

            s = self.settings
            if sys.stderr.isatty() and not s.quiet and not self.json and not os.environ.get("CI"):
                from rich.console import Console

                self._progress = RichProgress(Console(stderr=True, markup=False, highlight=False))
            else:
                self._progress = NoteProgress(quiet=s.quiet)
        return self._progress

    def close(self) -> None:
        close_display = getattr(self._progress, "close", None)  # a terminal's display ends with the command
        if close_display is not None:
            close_display()
        self.session.close()

    def __enter__(self) -> "Env":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- output ----------------------------------------------------------------------------------

    def emit(self, result: Any, text: str) -> None:
        """Print the result: JSON of the dataclass under --output json, else ``text``."""
        from statectl.redact import redact

        out = json_text(result) if self.json else text
        if out:
            sys.stdout.write(redact(out) + "\n")
            sys.stdout.flush()
        self._global.result_written = True


def to_jsonable(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        # A field marked internal (a plan's parsed index, kept for executing it) is not part of the JSON.
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)
                if not f.metadata.get("internal")}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, Path):
        return str(obj)
    return obj


def json_text(obj: Any) -> str:
    return json.dumps(to_jsonable(obj), indent=2, ensure_ascii=False)


def print_json(obj: Any) -> None:
    from statectl.redact import redact

    sys.stdout.write(redact(json_text(obj)) + "\n")
    sys.stdout.flush()


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """``header`` and ``rows`` as lines of columns two spaces apart, each as wide as its widest cell (the last
    column not padded)."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    return ["  ".join([*(c.ljust(w) for c, w in zip(r, widths)), r[-1]]).rstrip() for r in [header, *rows]]


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """``1 store``, ``2 stores``: ``n`` and the noun, in the plural (``nouns``, default noun + s) unless one."""
    return f"{n} {noun if n == 1 else nouns or noun + 's'}"


def human_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"
