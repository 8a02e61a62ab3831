"""The static shell completion scripts for bash, zsh and fish, written from statectl's command tree.

Each script completes every command, every flag (the global ones also after a command name, as
``hoist_global_options`` allows), the fixed values of choice flags, and file or directory names for path
flags. They are static: they never run statectl while completing, so they stay fast and work where
statectl's Python environment is slow to start or broken. The tree comes from tools/cmdtree.py.
"""

from __future__ import annotations

from typing import Optional

from tools.cmdtree import HEADER, PROG, Cmd, Opt, command_tree, first_sentence, statectl_version


def sh_quote(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


# -- bash --------------------------------------------------------------------------------------------

# The completion function proper: finds the command path in the words so far (skipping option values),
# then offers subcommands, options, or an option's values from the tables written above it.
_BASH_MAIN = r"""_statectl() {
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
"""


def _bash_case(name: str, comment: list[str], arms: list[str], default: Optional[str] = "REPLY=''") -> list[str]:
    """A shell function ``name`` that sets REPLY by a ``case`` on its first argument."""
    tail = [f"        *) {default} ;;"] if default else []
    return [*comment, f"{name}() {{", "    case $1 in", *arms, *tail, "    esac", "}", ""]


def _bash_value_arms(cmds: list[Cmd]) -> list[str]:
    out = []
    for c in cmds:
        arms = []
        for o in c.all_options():
            if not o.takes_value:
                continue
            value = " ".join(o.choices) if o.kind == "choice" else "@" + o.kind
            arms.append(f"                {'|'.join(o.names)}) REPLY={sh_quote(value)} ;;")
        if arms:
            out += [f"        {sh_quote(' '.join(c.path))})", "            case $2 in", *arms,
                    "            esac ;;"]
    return out


def bash_completion(tree: Optional[Cmd] = None) -> str:
    """A bash completion script (no bash-completion package needed) for every command and flag."""
    tree = tree or command_tree()
    cmds = list(tree.walk())
    out = [
        "# bash completion for statectl                                   -*- shell-script -*-",
        "# " + HEADER.format(version=statectl_version()),
        "# Install: source it from ~/.bashrc, or copy it to ~/.local/share/bash-completion/completions/statectl",
        "# (or /etc/bash_completion.d/statectl).",
        "",
    ]
    def words(c: Cmd, names: list[str]) -> str:
        return f"        {sh_quote(' '.join(c.path))}) REPLY={sh_quote(' '.join(names))} ;;"

    out += _bash_case("_statectl_commands",
                      ["# The subcommands of the command path $1 ('' for statectl itself, 'snapshots' ...), in REPLY."],
                      [words(c, [s.path[-1] for s in c.subcommands]) for c in cmds if c.subcommands])
    out += _bash_case("_statectl_options", ["# The options accepted after the command path $1, in REPLY."],
                      [words(c, [n for o in c.all_options() for n in o.names]) for c in cmds])
    value = _bash_case("_statectl_value",
                       ["# How to complete the value of option $2 after command path $1, in REPLY: @file, @dir, @text",
                        "# (anything), or the words to offer; empty when $2 takes no value."],
                       _bash_value_arms(cmds), default=None)
    value.insert(3, "    REPLY=''")
    return "\n".join(out + value + [_BASH_MAIN])


# -- zsh ---------------------------------------------------------------------------------------------

def _zsh_desc(text: str) -> str:
    s = first_sentence(text)
    for a, b in (("\\", "\\\\"), ("[", "\\["), ("]", "\\]"), (":", "\\:")):
        s = s.replace(a, b)
    return s


_ZSH_ACTIONS = {"file": "_files", "dir": "_files -/", "text": " "}


def _zsh_spec(o: Opt) -> list[str]:
    desc = _zsh_desc(o.help)
    if o.kind == "choice":
        action = f":{o.value_name}:({' '.join(o.choices)})"
    elif o.kind in _ZSH_ACTIONS:
        action = f":{o.value_name}:{_ZSH_ACTIONS[o.kind]}"
    else:
        action = ""
    exclude = "*" if o.multiple else ("(" + " ".join(o.names) + ")" if len(o.names) > 1 else "")
    specs = []
    for n in o.names:
        suffix = "" if not o.takes_value else ("=" if n.startswith("--") else "+")
        specs.append(sh_quote(f"{exclude}{n}{suffix}[{desc}]{action}"))
    return specs


def zsh_func(c: Cmd) -> str:
    """The name of the zsh function that completes command ``c``."""
    return "_" + "_".join((PROG,) + c.path).replace("-", "_")


def _zsh_group_dispatch(c: Cmd) -> list[str]:
    """The part of a group's function that offers its subcommands, or hands over to the one named."""
    out = ["  case $state in", "    command)", "      local -a commands=("]
    for s in c.subcommands:
        item = s.path[-1] + ":" + first_sentence(s.help).replace("\\", "\\\\").replace(":", "\\:")
        out.append(f"        {sh_quote(item)}")
    out += ["      )",
            f"      _describe -t commands {sh_quote(c.words + ' command')} commands && ret=0 ;;",
            "    args)",
            f"      curcontext=${{curcontext%:*:*}}:{c.page}-$words[1]:",
            "      case $words[1] in"]
    out += [f"        {s.path[-1]}) {zsh_func(s)} && ret=0 ;;" for s in c.subcommands]
    return out + ["      esac ;;", "  esac"]


def _zsh_function(c: Cmd) -> list[str]:
    specs = [s for o in c.all_options() for s in _zsh_spec(o)]
    if c.is_group:
        specs += ["'1: :->command'", "'*:: :->args'"]
    else:
        specs += [sh_quote(f"{':' if a.required else '::'}{a.name}: ") for a in c.arguments]
    body = " \\\n    ".join(["_arguments -C -s -S"] + specs)
    out = [f"{zsh_func(c)}() {{",
           "  local curcontext=$curcontext state state_descr line ret=1",
           "  typeset -A opt_args",
           f"  {body} && ret=0"]
    if c.is_group:
        out += _zsh_group_dispatch(c)
    return out + ["  return ret", "}", ""]


def zsh_completion(tree: Optional[Cmd] = None) -> str:
    """A zsh completion function (#compdef) for every command and flag."""
    tree = tree or command_tree()
    out = [
        "#compdef statectl",
        "# zsh completion for statectl. " + HEADER.format(version=statectl_version()),
        "# Install: copy this file as _statectl into a directory on $fpath, then run compinit",
        "# (or source it after compinit).",
        "",
    ]
    for c in tree.walk():
        out += _zsh_function(c)
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


# True when the words before the cursor name the command path given as arguments (option values skipped).
_FISH_PATH = """function __statectl_path --description 'true if the words before the cursor name this statectl command'
    set -l words (commandline -opc)
    set -e words[1]
    set -l path
    set -l skip 0
    for w in $words
        if test $skip = 1
            set skip 0
            continue
        end
        switch $w
            case --
                break
            case '-*=*'
            case '-*'
                if contains -- $w (__statectl_value_options $path)
                    set skip 1
                end
            case '*'
                if contains -- $w (__statectl_commands $path)
                    set -a path $w
                end
        end
    end
    test "$path" = "$argv"
end
"""

_FISH_VALUES = {"choice": None, "file": " -r -F", "dir": " -x -a '(__fish_complete_directories (commandline -ct))'",
                "text": " -x"}


def _fish_switch(name: str, description: str, arms: list[tuple[Cmd, str]]) -> list[str]:
    """A fish function ``name`` that prints, for the command path in its arguments, one arm's words."""
    out = [f"function {name} --description {_fish_quote(description)}", "    switch \"$argv\""]
    for c, words in arms:
        out += [f"        case {_fish_quote(' '.join(c.path))}", "            printf '%s\\n' " + words]
    return out + ["    end", "end", ""]


def _fish_option(cond: str, o: Opt) -> str:
    flags = "".join(f" -l {n[2:]}" for n in o.long) + "".join(f" -s {n[1:]}" for n in o.short)
    if o.kind == "choice":
        value = " -x -a " + _fish_quote(" ".join(o.choices))
    else:
        value = _FISH_VALUES.get(o.kind) or ""
    return f"complete -c statectl {cond}{flags}{value} -d {_fish_quote(first_sentence(o.help))}"


def fish_completion(tree: Optional[Cmd] = None) -> str:
    """A fish completion script for every command and flag."""
    tree = tree or command_tree()
    cmds = list(tree.walk())
    out = ["# fish completion for statectl. " + HEADER.format(version=statectl_version()),
           "# Install: copy to ~/.config/fish/completions/statectl.fish", ""]
    out += _fish_switch("__statectl_commands", "the subcommands of a statectl command path",
                        [(c, " ".join(s.path[-1] for s in c.subcommands)) for c in cmds if c.subcommands])
    value_arms = [(c, [n for o in c.all_options() if o.takes_value for n in o.names]) for c in cmds]
    out += _fish_switch("__statectl_value_options", "the options that take a value after a statectl command path",
                        [(c, "-- " + " ".join(names)) for c, names in value_arms if names])
    out += [_FISH_PATH, "complete -c statectl -f", ""]
    for c in cmds:
        cond = "-n " + _fish_quote(("__statectl_path " + " ".join(c.path)).strip())
        out.append(f"# {c.words}")
        out += [f"complete -c statectl {cond} -a {s.path[-1]} -d {_fish_quote(first_sentence(s.help))}"
                for s in c.subcommands]
        out += [_fish_option(cond, o) for o in c.all_options()]
        out.append("")
    return "\n".join(out)
