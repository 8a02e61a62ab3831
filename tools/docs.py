"""Shell completion scripts and man pages, generated from statectl's own command tree.

``python -m tools.docs --write`` (``make docs``, from the repository root) rewrites ``completions/`` and ``man/`` and
removes the man pages of commands that no longer exist; ``--check`` exits 1 when the files on disk
are stale. Nothing here lists commands or flags by hand: they, their help, their examples and their
value hints come from walking ``typer.main.get_command(app)``, so a new command or flag appears on the
next ``make docs`` (and tests/unit/cli/test_docs.py fails until it is run). The exit codes come from
statectl.errors.EXIT_CODES and the environment from statectl.config.KEYS.

It lives outside the package: statectl installs no generator it never runs.

The completion scripts are static: they never run statectl while completing, so they stay fast and
work where statectl's Python environment is slow to start or broken.
"""

from __future__ import annotations

import inspect
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional

PROG = "statectl"
COMPLETION_FILES = {"bash": "completions/statectl.bash", "zsh": "completions/_statectl",
                    "fish": "completions/statectl.fish"}
MAN_DIR = "man"


_HEADER = "Generated from the statectl {version} command tree by `make docs`; do not edit."


# -- the command tree ------------------------------------------------------------------------------

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

_ENV_TAG = re.compile(r"\s*\[env (STATECTL_[A-Z0-9_]+)\]")


def _paragraphs(text: str) -> list[str]:
    return [p.strip("\n") for p in re.split(r"\n\s*\n", inspect.cleandoc(text or "")) if p.strip()]


def _join(paragraph: str) -> str:
    return " ".join(line.strip() for line in paragraph.splitlines() if line.strip())


def _is_exit_codes(paragraph: str) -> bool:
    return paragraph.lstrip().lower().startswith("exit codes:")


@dataclass
class _Epilog:
    examples: list[list[str]] = field(default_factory=list)   # blocks of command lines
    exit_codes: str = ""
    notes: list[str] = field(default_factory=list)


def _epilog(text: str) -> _Epilog:
    """Split an epilog into example blocks (indented paragraphs), its "Exit codes:" line and the rest."""
    out = _Epilog()
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
        elif _is_exit_codes(para):
            out.exit_codes = _join(para).split(":", 1)[1].strip()
        else:
            out.notes.append(_join(para))
    return out


def _first_sentence(text: str) -> str:
    """The first sentence of a help text, for completion menus and NAME lines."""
    para = _join(_paragraphs(text)[0]) if _paragraphs(text) else ""
    para = _ENV_TAG.sub("", para).strip()
    m = re.search(r"\.(\s|$)", para)
    return (para[:m.start()] if m else para).strip()


def _summary(text: str) -> str:
    """A NAME-line summary: the first sentence, cut at its first colon, lower-cased like man pages."""
    s = _first_sentence(text).split(": ", 1)[0].strip()
    if len(s) > 1 and s[0].isupper() and s[1].islower():
        s = s[0].lower() + s[1:]
    return s


def _version() -> str:
    from statectl import __version__

    return __version__


# -- bash --------------------------------------------------------------------------------------------

def _sh_quote(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


def bash_completion(tree: Optional[Cmd] = None) -> str:
    """A bash completion script (no bash-completion package needed) for every command and flag."""
    tree = tree or command_tree()
    cmds = list(tree.walk())
    out = [
        "# bash completion for statectl                                   -*- shell-script -*-",
        "# " + _HEADER.format(version=_version()),
        "# Install: source it from ~/.bashrc, or copy it to ~/.local/share/bash-completion/completions/statectl",
        "# (or /etc/bash_completion.d/statectl).",
        "",
        "# The subcommands of the command path $1 ('' for statectl itself, 'snapshots' ...), in REPLY.",
        "_statectl_commands() {",
        "    case $1 in",
    ]
    for c in cmds:
        if c.subcommands:
            out.append(f"        {_sh_quote(' '.join(c.path))}) REPLY={_sh_quote(' '.join(s.path[-1] for s in c.subcommands))} ;;")
    out += ["        *) REPLY='' ;;", "    esac", "}", "",
            "# The options accepted after the command path $1, in REPLY.",
            "_statectl_options() {",
            "    case $1 in"]
    for c in cmds:
        names = " ".join(n for o in c.all_options() for n in o.names)
        out.append(f"        {_sh_quote(' '.join(c.path))}) REPLY={_sh_quote(names)} ;;")
    out += ["        *) REPLY='' ;;", "    esac", "}", "",
            "# How to complete the value of option $2 after command path $1, in REPLY: @file, @dir, @text",
            "# (anything), or the words to offer; empty when $2 takes no value.",
            "_statectl_value() {",
            "    REPLY=''",
            "    case $1 in"]
    for c in cmds:
        arms = []
        for o in c.all_options():
            if not o.takes_value:
                continue
            value = " ".join(o.choices) if o.kind == "choice" else "@" + o.kind
            arms.append(f"                {'|'.join(o.names)}) REPLY={_sh_quote(value)} ;;")
        if arms:
            out += [f"        {_sh_quote(' '.join(c.path))})", "            case $2 in", *arms,
                    "            esac ;;"]
    out += ["    esac", "}", "", r"""_statectl() {
    local cur=${COMP_WORDS[COMP_CWORD]} path='' word opt='' pending=0 i REPLY
    local IFS=$' \t\n'
    COMPREPLY=()
    # Which command the words so far name, skipping option values ('--opt value', '--opt=value').
    for ((i = 1; i < COMP_CWORD; i++)); do
        word=${COMP_WORDS[i]}
        if ((pending)); then
            [[ $word == = ]] && continue     # COMP_WORDBREAKS splits --opt=value into --opt = value
            pending=0
            continue
        fi
        case $word in
            --) break ;;
            -*=*) ;;
            -*)
                _statectl_value "$path" "$word"
                [[ -n $REPLY ]] && pending=1 opt=$word
                ;;
            *)
                _statectl_commands "$path"
                [[ " $REPLY " == *" $word "* ]] && path=${path:+$path }$word
                ;;
        esac
    done
    local prefix=''
    if ((pending)); then
        [[ $cur == = ]] && cur=''
    elif [[ $cur == --*=* ]]; then                   # --opt=val when '=' does not break words
        opt=${cur%%=*} prefix=${cur%%=*}= cur=${cur#*=}
        _statectl_value "$path" "$opt"
        [[ -n $REPLY ]] && pending=1
    fi
    if ((pending)); then
        _statectl_value "$path" "$opt"
        case $REPLY in
            @file) compopt -o filenames 2>/dev/null; IFS=$'\n' COMPREPLY=($(compgen -f -P "$prefix" -- "$cur")) ;;
            @dir) compopt -o filenames 2>/dev/null; IFS=$'\n' COMPREPLY=($(compgen -d -P "$prefix" -- "$cur")) ;;
            @text) ;;
            *) COMPREPLY=($(compgen -P "$prefix" -W "$REPLY" -- "$cur")) ;;
        esac
        return 0
    fi
    if [[ $cur == -* ]]; then
        _statectl_options "$path"
    else
        _statectl_commands "$path"
    fi
    COMPREPLY=($(compgen -W "$REPLY" -- "$cur"))
    return 0
}

complete -F _statectl statectl
"""]
    return "\n".join(out)


# -- zsh ---------------------------------------------------------------------------------------------

def _zsh_desc(text: str) -> str:
    s = _first_sentence(text)
    for a, b in (("\\", "\\\\"), ("[", "\\["), ("]", "\\]"), (":", "\\:")):
        s = s.replace(a, b)
    return s


def _zsh_spec(o: Opt) -> list[str]:
    desc = _zsh_desc(o.help)
    if o.kind == "choice":
        action = f":{o.value_name}:({' '.join(o.choices)})"
    elif o.kind == "file":
        action = f":{o.value_name}:_files"
    elif o.kind == "dir":
        action = f":{o.value_name}:_files -/"
    elif o.kind == "text":
        action = f":{o.value_name}: "
    else:
        action = ""
    exclude = "*" if o.multiple else ("(" + " ".join(o.names) + ")" if len(o.names) > 1 else "")
    specs = []
    for n in o.names:
        suffix = "" if not o.takes_value else ("=" if n.startswith("--") else "+")
        specs.append(_sh_quote(f"{exclude}{n}{suffix}[{desc}]{action}"))
    return specs


def _zsh_func(c: Cmd) -> str:
    return "_" + "_".join((PROG,) + c.path).replace("-", "_")


def zsh_completion(tree: Optional[Cmd] = None) -> str:
    """A zsh completion function (#compdef) for every command and flag."""
    tree = tree or command_tree()
    out = [
        "#compdef statectl",
        "# zsh completion for statectl. " + _HEADER.format(version=_version()),
        "# Install: copy this file as _statectl into a directory on $fpath, then run compinit",
        "# (or source it after compinit).",
        "",
    ]
    for c in tree.walk():
        specs = [s for o in c.all_options() for s in _zsh_spec(o)]
        if c.is_group:
            specs += ["'1: :->command'", "'*:: :->args'"]
        else:
            for a in c.arguments:
                colon = ":" if a.required else "::"
                specs.append(_sh_quote(f"{colon}{a.name}: "))
        body = " \\\n    ".join(["_arguments -C -s -S"] + specs)
        out += [f"{_zsh_func(c)}() {{",
                "  local curcontext=$curcontext state state_descr line ret=1",
                "  typeset -A opt_args",
                f"  {body} && ret=0"]
        if c.is_group:
            out += ["  case $state in",
                    "    command)",
                    "      local -a commands=("]
            for s in c.subcommands:
                item = s.path[-1] + ":" + _first_sentence(s.help).replace("\\", "\\\\").replace(":", "\\:")
                out.append(f"        {_sh_quote(item)}")
            out += ["      )",
                    f"      _describe -t commands {_sh_quote(c.words + ' command')} commands && ret=0 ;;",
                    "    args)",
                    f"      curcontext=${{curcontext%:*:*}}:{c.page}-$words[1]:",
                    "      case $words[1] in"]
            for s in c.subcommands:
                out.append(f"        {s.path[-1]}) {_zsh_func(s)} && ret=0 ;;")
            out += ["      esac ;;", "  esac"]
        out += ["  return ret", "}", ""]
    out += ["if [[ $funcstack[1] == _statectl ]]; then",
            "  _statectl \"$@\"     # autoloaded from $fpath",
            "else",
            "  compdef _statectl statectl     # sourced",
            "fi",
            ""]
    return "\n".join(out)


# -- fish --------------------------------------------------------------------------------------------

def _fish_quote(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def fish_completion(tree: Optional[Cmd] = None) -> str:
    """A fish completion script for every command and flag."""
    tree = tree or command_tree()
    cmds = list(tree.walk())
    out = [
        "# fish completion for statectl. " + _HEADER.format(version=_version()),
        "# Install: copy to ~/.config/fish/completions/statectl.fish",
        "",
        "function __statectl_commands --description 'the subcommands of a statectl command path'",
        "    switch \"$argv\"",
    ]
    for c in cmds:
        if c.subcommands:
            out += [f"        case {_fish_quote(' '.join(c.path))}",
                    "            printf '%s\\n' " + " ".join(s.path[-1] for s in c.subcommands)]
    out += ["    end", "end", "",
            "function __statectl_value_options --description 'the options that take a value after a statectl command path'",
            "    switch \"$argv\""]
    for c in cmds:
        names = [n for o in c.all_options() if o.takes_value for n in o.names]
        if names:
            out += [f"        case {_fish_quote(' '.join(c.path))}",
                    "            printf '%s\\n' -- " + " ".join(names)]
    out += ["    end", "end", "",
            "function __statectl_path --description 'true if the words before the cursor name this statectl command'",
            "    set -l words (commandline -opc)",
            "    set -e words[1]",
            "    set -l path",
            "    set -l skip 0",
            "    for w in $words",
            "        if test $skip = 1",
            "            set skip 0",
            "            continue",
            "        end",
            "        switch $w",
            "            case --",
            "                break",
            "            case '-*=*'",
            "            case '-*'",
            "                if contains -- $w (__statectl_value_options $path)",
            "                    set skip 1",
            "                end",
            "            case '*'",
            "                if contains -- $w (__statectl_commands $path)",
            "                    set -a path $w",
            "                end",
            "        end",
            "    end",
            "    test \"$path\" = \"$argv\"",
            "end",
            "",
            "complete -c statectl -f",
            ""]
    for c in cmds:
        cond = "-n " + _fish_quote(("__statectl_path " + " ".join(c.path)).strip())
        out.append(f"# {c.words}")
        for s in c.subcommands:
            out.append(f"complete -c statectl {cond} -a {s.path[-1]} -d {_fish_quote(_first_sentence(s.help))}")
        for o in c.all_options():
            flags = "".join(f" -l {n[2:]}" for n in o.long) + "".join(f" -s {n[1:]}" for n in o.short)
            if o.kind == "choice":
                value = " -x -a " + _fish_quote(" ".join(o.choices))
            elif o.kind == "file":
                value = " -r -F"
            elif o.kind == "dir":
                value = " -x -a '(__fish_complete_directories (commandline -ct))'"
            elif o.kind == "text":
                value = " -x"
            else:
                value = ""
            out.append(f"complete -c statectl {cond}{flags}{value} -d {_fish_quote(_first_sentence(o.help))}")
        out.append("")
    return "\n".join(out)


# -- man pages ---------------------------------------------------------------------------------------

def _esc(text: str) -> str:
    """Text for roff: backslashes and hyphens literal (so options copy-paste), quotes straight."""
    return (text.replace("\\", "\\e").replace("-", "\\-").replace("'", "\\(aq").replace("`", "\\(ga"))


def _text(text: str) -> str:
    """One input line of running text; a leading '.' or "'" would be read as a request."""
    s = _esc(text)
    return "\\&" + s if s.startswith((".", "\\(aq")) else s


def _bold(text: str) -> str:
    return "\\fB" + _esc(text) + "\\fR"


def _term(term: str) -> str:
    """An option's --help term ("-o, --output <str>") with the names bold and the value italic."""
    out = []
    for tok in term.split(" "):
        bare = tok.rstrip(",;")
        if bare.startswith("-"):
            out.append(_bold(bare) + tok[len(bare):])
        elif tok in ("/", ";"):
            out.append(tok)
        else:
            out.append("\\fI" + _esc(tok) + "\\fR")
    return " ".join(out)


def _th(c: Cmd) -> list[str]:
    return [f'.\\" {_HEADER.format(version=_version())}',
            f'.TH "{_esc(c.page.upper())}" 1 "" "statectl {_esc(_version())}" "User Commands"',
            ".nh", ".ad l",
            ".SH NAME",
            f"{_esc(c.page)} \\- {_esc(_summary(c.help))}"]


def _synopsis(c: Cmd) -> list[str]:
    return [".SH SYNOPSIS", _bold(c.words) + " " + _esc(c.usage)]


def _para_lines(paragraphs: list[str]) -> list[str]:
    out: list[str] = []
    for p in paragraphs:
        if out:
            out.append(".PP")
        if p.startswith("\b"):                      # click's "do not rewrap" marker
            out += [".nf", *(_text(line) for line in p.splitlines()[1:]), ".fi"]
        else:
            out.append(_text(_join(p)))
    return out


def _options(opts: list[Opt]) -> list[str]:
    out = []
    for o in opts:
        out += [".TP", _term(o.term), _text(o.help) if o.help else "\\&"]
    return out


def _examples(blocks: list[list[str]]) -> list[str]:
    out: list[str] = []
    for block in blocks:
        out += [".PP", ".RS 4", ".EX", *(_text(line) for line in block), ".EE", ".RE"]
    return out


def _see_also(refs: list[str]) -> list[str]:
    items = []
    for r in refs:
        items.append(f"\\fB{_esc(r)}\\fR(1)")
    return [".SH SEE ALSO", ",\n".join(items)]


def man_page(c: Cmd, tree: Cmd) -> str:
    """The man page of one command (or group), from its help, options, arguments and epilog."""
    if not c.path:
        return _root_page(tree)
    ep = _epilog(c.epilog)
    help_paras = [p for p in _paragraphs(c.help) if not _is_exit_codes(p)]
    out = _th(c) + _synopsis(c) + [".SH DESCRIPTION"] + _para_lines(help_paras + ep.notes)
    if c.arguments:
        out.append(".SH ARGUMENTS")
        for a in c.arguments:
            out += [".TP", "\\fI" + _esc(a.term) + "\\fR", _text(a.help) if a.help else "\\&"]
    out.append(".SH OPTIONS")
    out += _options(c.options)
    if c.globals:
        out += [".SH GLOBAL OPTIONS",
                _text("These options of statectl(1) may also be given after the command name:")
                .replace("statectl(1)", "\\fBstatectl\\fR(1)")]
        out += _options(c.globals)
    if c.subcommands:
        out.append(".SH COMMANDS")
        for s in c.subcommands:
            out += [".TP", _bold(s.words),
                    _text(_first_sentence(s.help) + ".") + f" See \\fB{_esc(s.page)}\\fR(1)."]
    out.append(".SH EXIT STATUS")
    if ep.exit_codes:
        out.append(_text(ep.exit_codes.rstrip(".") + "."))
        out.append(".PP")
    out.append("Every code is described in \\fBstatectl\\fR(1); an unknown code means failure.")
    if ep.examples:
        out.append(".SH EXAMPLES")
        out += _examples(ep.examples)[1:]
    parent = tree if len(c.path) == 1 else next(x for x in tree.walk() if x.path == c.path[:-1])
    refs = [PROG] + ([parent.page] if parent.path else []) + [s.page for s in c.subcommands]
    out += _see_also(refs)
    return "\n".join(out) + "\n"


def _root_page(tree: Cmd) -> str:
    from statectl import config, errors

    c = tree
    out = _th(c) + _synopsis(c)
    out += [".SH DESCRIPTION"] + _para_lines([p for p in _paragraphs(c.help) if not _is_exit_codes(p)])
    out += [".PP", _text("Each command has its own page (see SEE ALSO) and --help with examples.")]
    hoisted = c.subcommands[0].globals if c.subcommands else []
    if hoisted:
        names = ", ".join("/".join(o.names) for o in hoisted)
        out[-1] += " " + _text(f"The global options {names} may also follow the command name.")
    out.append(".SH GLOBAL OPTIONS")
    out += _options(c.options)
    out.append(".SH COMMANDS")
    for s in c.walk():
        if not s.path or s.is_group:
            continue
        out += [".TP", _bold(s.words + (" " + s.usage.replace("[OPTIONS]", "").strip()).rstrip()),
                _text(_first_sentence(s.help) + ".") + f" See \\fB{_esc(s.page)}\\fR(1)."]
    out.append(".SH ENVIRONMENT")
    out.append(_text("Settings are taken from flags, then STATECTL_* environment variables, then the profile "
                     "in the config file, then defaults."))
    for name, desc in _environment(tree, config):
        out += [".TP", _bold(name), _text(desc)]
    out += [".SH FILES",
            ".TP", "\\fI./statectl.toml\\fR",
            _text("The config file, unless --config or STATECTL_CONFIG names one. Each table is a profile; "
                  "[default] is used unless --profile names another."),
            ".TP", "\\fI$XDG_CONFIG_HOME/statectl/config.toml\\fR",
            _text("The config file when there is no ./statectl.toml (XDG_CONFIG_HOME defaults to ~/.config)."),
            ".TP", "\\fI$XDG_DATA_HOME/statectl/blobs\\fR",
            _text("The embedded default blob store (file://...) when no --blobstore is set "
                  "(XDG_DATA_HOME defaults to ~/.local/share).")]
    out.append(".SH EXIT STATUS")
    for exit_code in errors.EXIT_CODES:
        out += [".TP", _bold(str(exit_code.code)), _text(exit_code.meaning)]
    out += [".PP", _text("Errors are one line on stderr (Error: ...), often followed by Hint: ...; --debug "
                         "adds a traceback. An unknown code means failure.")]
    examples = [ep.examples[0] for ep in (_epilog(s.epilog) for s in c.walk() if s.path) if ep.examples]
    if examples:
        out.append(".SH EXAMPLES")
        out += _examples(examples)[1:]
    out += _see_also([s.page for s in c.walk() if s.path])
    return "\n".join(out) + "\n"


def _environment(tree: Cmd, config: Any) -> list[tuple[str, str]]:
    """STATECTL_* variables: those the options' help names ([env X]), then every config.KEYS entry."""
    by_env: dict[str, Opt] = {}
    by_name: dict[str, Opt] = {}
    for c in tree.walk():
        for o in c.options:
            m = _ENV_TAG.search(o.help)
            if m:
                by_env.setdefault(m.group(1), o)
            for n in o.long:
                by_name.setdefault(n[2:].replace("-", "_"), o)
    names = list(by_env)
    names += [f"STATECTL_{k.upper()}" for k in config.KEYS if f"STATECTL_{k.upper()}" not in names]
    out = []
    for env in names:
        key = env[len("STATECTL_"):].lower()
        spec = config.KEYS.get(key)
        opt = by_env.get(env) or by_name.get(key)
        if opt is not None:
            desc = _ENV_TAG.sub("", opt.help).strip()
            desc = desc.rstrip(".") + ". Same as " + ", ".join(opt.long or opt.names) + "."
            if not opt.takes_value:
                desc += " A boolean: 1, true, yes or on."
        elif spec is not None and spec.help:
            desc = spec.help[0].upper() + spec.help[1:] + "."
        else:
            desc = re.sub(r"\bs3\b", "S3", key.replace("_", " "))
            desc = desc[0].upper() + desc[1:] + "."
        if spec is not None and spec.secret:
            desc += " A secret: config show masks it."
        if spec is not None:
            desc += f" Profile key: {key}."
        out.append((env, desc))
    return out


# -- writing -----------------------------------------------------------------------------------------

def generate(app: Any = None) -> dict[str, str]:
    """Every generated file: relative path -> content (deterministic: no dates, CLI order)."""
    tree = command_tree(app)
    files = {COMPLETION_FILES["bash"]: bash_completion(tree),
             COMPLETION_FILES["zsh"]: zsh_completion(tree),
             COMPLETION_FILES["fish"]: fish_completion(tree)}
    for c in tree.walk():
        files[f"{MAN_DIR}/{c.page}.1"] = man_page(c, tree)
    return files


def _generated_man_pages(root: Path) -> set[str]:
    return {f"{MAN_DIR}/{p.name}" for p in (root / MAN_DIR).glob(f"{PROG}*.1")}


def stale(root: Path, files: Optional[dict[str, str]] = None) -> list[str]:
    """Paths under ``root`` that differ from ``files`` (default: generate()), are missing, or are man
    pages of commands that no longer exist."""
    files = generate() if files is None else files
    out = []
    for rel, content in files.items():
        p = root / rel
        if not p.is_file() or p.read_text(encoding="utf-8") != content:
            out.append(rel)
    out += sorted(_generated_man_pages(root) - set(files))
    return out


def write(root: Path) -> list[str]:
    """Write every generated file under ``root`` and delete man pages of vanished commands; returns
    the paths that changed. Idempotent."""
    files = generate()
    changed = stale(root, files)
    for rel in changed:
        p = root / rel
        if rel in files:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(files[rel], encoding="utf-8")
        else:
            p.unlink()
    return changed


def main(argv: Optional[list[str]] = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tools.docs", description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="rewrite completions/ and man/")
    mode.add_argument("--check", action="store_true", help="exit 1 if they are stale")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1],
                        help="the project root (default: this checkout)")
    args = parser.parse_args(argv)
    if args.write:
        for rel in write(args.root):
            print(f"updated {rel}")
        return 0
    bad = stale(args.root)
    for rel in bad:
        print(f"stale: {rel}", file=sys.stderr)
    if bad:
        print("run make docs", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
