"""statectl's command tree as data, and the reading of its help texts.

``command_tree()`` walks the live click command tree of the typer app into :class:`Cmd`, :class:`Opt` and
:class:`Arg`; the help helpers split a help text into paragraphs, an epilog into its example blocks, its
"Exit codes:" line and the rest, and cut the one-sentence summaries that completion menus and man page
NAME lines show. tools/completions.py and tools/docs.py write their files from these; nothing here lists a
command or a flag by hand.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from typing import Any, Iterator

PROG = "statectl"
HEADER = "Generated from the statectl {version} command tree by `make docs`; do not edit."


@dataclass(frozen=True)
class Opt:
    """One option as the CLI declares it."""

    names: tuple[str, ...]           # e.g. ("--output", "-o")
    term: str                        # "-o, --output <str>", as --help prints it
    help: str                        # the help text, as --help prints it
    takes_value: bool
    kind: str                        # "flag", "choice", "file", "dir" or "text"
    choices: tuple[str, ...] = ()
    value_name: str = ""             # "output", "state-dir": names the value in zsh's messages
    multiple: bool = False

    @property
    def long(self) -> tuple[str, ...]:
        return tuple(n for n in self.names if n.startswith("--"))

    @property
    def short(self) -> tuple[str, ...]:
        return tuple(n for n in self.names if not n.startswith("--"))


@dataclass(frozen=True)
class Arg:
    """One positional argument."""

    name: str
    term: str
    help: str
    required: bool


@dataclass
class Cmd:
    """One command (or group) of the tree; ``path`` is () for statectl itself."""

    path: tuple[str, ...]
    help: str
    epilog: str
    usage: str                       # "[OPTIONS] [snapshot]"
    options: list[Opt]
    arguments: list[Arg]
    subcommands: list["Cmd"] = field(default_factory=list)
    globals: list[Opt] = field(default_factory=list)   # root options that may also follow this command

    @property
    def words(self) -> str:
        return " ".join((PROG,) + self.path)

    @property
    def page(self) -> str:
        return "-".join((PROG,) + self.path)

    @property
    def is_group(self) -> bool:
        return bool(self.subcommands)

    def all_options(self) -> list[Opt]:
        """Its own options, then the global options it accepts that it does not shadow."""
        own = {n for o in self.options for n in o.names}
        return self.options + [o for o in self.globals if not own.intersection(o.names)]

    def walk(self) -> Iterator["Cmd"]:
        yield self
        for sub in self.subcommands:
            yield from sub.walk()


def command_tree(app: Any = None) -> Cmd:
    """Walk the live click command tree of ``app`` (default: statectl's) into Cmd/Opt/Arg."""
    import typer.main

    if app is None:
        from statectl.cli.main import app
    root = typer.main.get_command(app)
    ctx = _context(root, PROG, None)
    tree = _cmd(root, ctx, ())
    hoisted = _hoisted_globals(tree.options)
    for cmd in tree.walk():
        if cmd.path:
            cmd.globals = hoisted
    return tree


def _context(cmd: Any, name: str, parent: Any) -> Any:
    # The command's own context_settings (e.g. help_option_names -h/--help) apply as they do at run time.
    return cmd.context_class(cmd, info_name=name, parent=parent, **dict(cmd.context_settings))


def _cmd(cmd: Any, ctx: Any, path: tuple[str, ...]) -> Cmd:
    options: list[Opt] = []
    arguments: list[Arg] = []
    for p in cmd.get_params(ctx):
        if getattr(p, "hidden", False):
            continue
        record = p.get_help_record(ctx) or (p.name, "")
        if p.param_type_name == "option":
            options.append(_opt(p, record))
        else:
            arguments.append(Arg(p.name, record[0], record[1], bool(p.required)))
    node = Cmd(path=path, help=inspect.cleandoc(cmd.help or ""), epilog=cmd.epilog or "",
               usage=" ".join(cmd.collect_usage_pieces(ctx)), options=options, arguments=arguments)
    for name in cmd.list_commands(ctx) if hasattr(cmd, "list_commands") else []:
        sub = cmd.get_command(ctx, name)
        if sub is None or sub.hidden:
            continue
        node.subcommands.append(_cmd(sub, _context(sub, name, ctx), path + (name,)))
    return node


def _opt(p: Any, record: tuple[str, str]) -> Opt:
    # Sorted: click builds the help option's names from a set, in hash order.
    names = tuple(sorted(dict.fromkeys(tuple(p.opts) + tuple(p.secondary_opts)),
                         key=lambda n: (not n.startswith("--"), n)))
    takes_value = not (getattr(p, "is_flag", False) or getattr(p, "count", False))
    kind, choices = ("flag", ()) if not takes_value else _value_kind(p)
    value_name = (p.metavar or p.name or "value").lower().replace("_", "-")
    return Opt(names=names, term=record[0], help=record[1], takes_value=takes_value, kind=kind,
               choices=choices, value_name=value_name, multiple=bool(getattr(p, "multiple", False)))


def _value_kind(p: Any) -> tuple[str, tuple[str, ...]]:
    """How a shell completes this option's value: fixed choices, files, directories, or nothing."""
    desc = getattr(p, "type_descriptor", None)
    choices = getattr(desc, "choices", None) if desc is not None else None
    choices = choices or getattr(getattr(p, "type", None), "choices", None)  # a Literal's (click's Choice)
    if choices:
        return "choice", tuple(str(getattr(c, "value", c)) for c in choices)
    name = p.name or ""
    if desc is not None and (desc.is_path or desc.is_file):
        kind = desc.path_type if desc.is_path else "file"
        if kind == "path":
            kind = "dir" if name.endswith("dir") else "file"
        return kind, ()
    # Plain-string options that name files by their role: --config PATH, --*-file.
    if name == "config" or name.endswith(("_file", "_path")):
        return "file", ()
    if name.endswith("_dir"):
        return "dir", ()
    return "text", ()


def _hoisted_globals(root_options: list[Opt]) -> list[Opt]:
    """The root options that may also be written after a command name: those that
    ``hoist_global_options`` moves to the front (probed, so this follows main.py)."""
    try:
        from statectl.cli.main import hoist_global_options
    except ImportError:
        return []
    out = []
    for o in root_options:
        names = []
        for n in o.names:
            args = ["cmd", n, "x"] if o.takes_value else ["cmd", n]
            moved = [n, "x", "cmd"] if o.takes_value else [n, "cmd"]
            if hoist_global_options(list(args)) == moved:
                names.append(n)
        if names:
            out.append(Opt(names=tuple(names), term=o.term, help=o.help, takes_value=o.takes_value, kind=o.kind,
                           choices=o.choices, value_name=o.value_name, multiple=o.multiple))
    return out


# -- help text ---------------------------------------------------------------------------------------

ENV_TAG = re.compile(r"\s*\[env (STATECTL_[A-Z0-9_]+)\]")


def paragraphs(text: str) -> list[str]:
    return [p.strip("\n") for p in re.split(r"\n\s*\n", inspect.cleandoc(text or "")) if p.strip()]


def join_lines(paragraph: str) -> str:
    return " ".join(line.strip() for line in paragraph.splitlines() if line.strip())


def is_exit_codes(paragraph: str) -> bool:
    return paragraph.lstrip().lower().startswith("exit codes:")


@dataclass
class Epilog:
    examples: list[list[str]] = field(default_factory=list)   # blocks of command lines
    exit_codes: str = ""
    notes: list[str] = field(default_factory=list)


def parse_epilog(text: str) -> Epilog:
    """Split an epilog into example blocks (indented paragraphs), its "Exit codes:" line and the rest."""
    out = Epilog()
    for para in re.split(r"\n\s*\n", text or ""):
        if not para.strip():
            continue
        literal = para.startswith("\b\n")  # click's "do not rewrap" marker (cli.common.literal_examples)
        lines = [line for line in para.splitlines()[1 if literal else 0:] if line.strip()]
        if re.fullmatch(r"\s*examples?:\s*", para, re.IGNORECASE):
            continue
        if all(line[:1].isspace() for line in lines):
            # as --help shows them: continuation lines keep their indent under the command
            indent = min(len(line) - len(line.lstrip()) for line in lines)
            out.examples.append([line[indent:].rstrip() for line in lines])
        elif is_exit_codes(para):
            out.exit_codes = join_lines(para).split(":", 1)[1].strip()
        else:
            out.notes.append(join_lines(para))
    return out


def first_sentence(text: str) -> str:
    """The first sentence of a help text, for completion menus and NAME lines."""
    para = join_lines(paragraphs(text)[0]) if paragraphs(text) else ""
    para = ENV_TAG.sub("", para).strip()
    m = re.search(r"\.(\s|$)", para)
    return (para[:m.start()] if m else para).strip()


def summary(text: str) -> str:
    """A NAME-line summary: the first sentence, cut at its first colon, lower-cased like man pages."""
    s = first_sentence(text).split(": ", 1)[0].strip()
    if len(s) > 1 and s[0].isupper() and s[1].islower():
        s = s[0].lower() + s[1:]
    return s


def statectl_version() -> str:
    from statectl import __version__

    return __version__
