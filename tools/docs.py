"""Man pages, and the writing of every generated file: completions/ and man/.

``python -m tools.docs --write`` (``make docs``, from the repository root) rewrites ``completions/`` and ``man/``
and removes the man pages of commands that no longer exist; ``--check`` exits 1 when the files on disk are
stale. Nothing here lists commands or flags by hand: they, their help, their examples and their value hints
come from the live command tree (tools/cmdtree.py), so a new command or flag appears on the next ``make
docs`` (and tests/unit/cli/test_docs.py fails until it is run). The exit codes come from
statectl.errors.EXIT_CODES and the environment from statectl.config.KEYS.

A command's page also carries the section of the capability pages (docs/*.md) headed exactly ``## statectl
<command path>``: the reasoning that is too long for --help lives there once, and reaches the man page from
it (rendered from its Markdown by ``markdown_roff``).

It lives outside the package: statectl installs no generator it never runs.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any, Optional

from tools.cmdtree import (
    ENV_TAG,
    HEADER,
    PROG,
    Cmd,
    Opt,
    command_tree,
    first_sentence,
    is_exit_codes,
    join_lines,
    paragraphs,
    parse_epilog,
    statectl_version,
    summary,
)
from tools.completions import bash_completion, fish_completion, zsh_completion

COMPLETION_FILES = {"bash": "completions/statectl.bash", "zsh": "completions/_statectl",
                    "fish": "completions/statectl.fish"}
MAN_DIR = "man"
DOCS_DIR = "docs"
ROOT = Path(__file__).resolve().parents[1]


# -- man pages ---------------------------------------------------------------------------------------

def _esc(text: str) -> str:
    """Text for roff: backslashes and hyphens literal (so options copy-paste), quotes straight."""
    return (text.replace("\\", "\\e").replace("-", "\\-").replace("'", "\\(aq").replace("`", "\\(ga"))


def text_line(text: str) -> str:
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
    return [f'.\\" {HEADER.format(version=statectl_version())}',
            f'.TH "{_esc(c.page.upper())}" 1 "" "statectl {_esc(statectl_version())}" "User Commands"',
            ".nh", ".ad l",
            ".SH NAME",
            f"{_esc(c.page)} \\- {_esc(summary(c.help))}"]


def _synopsis(c: Cmd) -> list[str]:
    return [".SH SYNOPSIS", _bold(c.words) + " " + _esc(c.usage)]


def _para_lines(paragraphs: list[str]) -> list[str]:
    out: list[str] = []
    for p in paragraphs:
        if out:
            out.append(".PP")
        if p.startswith("\b"):                      # click's "do not rewrap" marker
            out += [".nf", *(text_line(line) for line in p.splitlines()[1:]), ".fi"]
        else:
            out.append(text_line(join_lines(p)))
    return out


def _options(opts: list[Opt]) -> list[str]:
    out = []
    for o in opts:
        out += [".TP", _term(o.term), text_line(o.help) if o.help else "\\&"]
    return out


def _examples(blocks: list[list[str]]) -> list[str]:
    out: list[str] = []
    for block in blocks:
        out += [".PP", ".RS 4", ".EX", *(text_line(line) for line in block), ".EE", ".RE"]
    return out


def _see_also(refs: list[str]) -> list[str]:
    items = []
    for r in refs:
        items.append(f"\\fB{_esc(r)}\\fR(1)")
    return [".SH SEE ALSO", ",\n".join(items)]


def man_page(c: Cmd, tree: Cmd, sections: Optional[dict[str, tuple[str, list[str]]]] = None) -> str:
    """The man page of one command (or group), from its help, options, arguments and epilog, and from its
    section of the capability pages (``sections``, from doc_sections) at the end of its DESCRIPTION."""
    if not c.path:
        return _root_page(tree)
    ep = parse_epilog(c.epilog)
    help_paras = [p for p in paragraphs(c.help) if not is_exit_codes(p)]
    out = _th(c) + _synopsis(c) + [".SH DESCRIPTION"] + _para_lines(help_paras + ep.notes)
    if sections and c.words in sections:
        out += markdown_roff(sections[c.words][1])
    if c.arguments:
        out.append(".SH ARGUMENTS")
        for a in c.arguments:
            out += [".TP", "\\fI" + _esc(a.term) + "\\fR", text_line(a.help) if a.help else "\\&"]
    out.append(".SH OPTIONS")
    out += _options(c.options)
    if c.globals:
        out += [".SH GLOBAL OPTIONS",
                text_line("These options of statectl(1) may also be given after the command name:")
                .replace("statectl(1)", "\\fBstatectl\\fR(1)")]
        out += _options(c.globals)
    if c.subcommands:
        out.append(".SH COMMANDS")
        for s in c.subcommands:
            out += [".TP", _bold(s.words),
                    text_line(first_sentence(s.help) + ".") + f" See \\fB{_esc(s.page)}\\fR(1)."]
    out.append(".SH EXIT STATUS")
    if ep.exit_codes:
        out.append(text_line(ep.exit_codes.rstrip(".") + "."))
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
    out += [".SH DESCRIPTION"] + _para_lines([p for p in paragraphs(c.help) if not is_exit_codes(p)])
    out += [".PP", text_line("Each command has its own page (see SEE ALSO) and --help with examples.")]
    hoisted = c.subcommands[0].globals if c.subcommands else []
    if hoisted:
        names = ", ".join("/".join(o.names) for o in hoisted)
        out[-1] += " " + text_line(f"The global options {names} may also follow the command name.")
    out.append(".SH GLOBAL OPTIONS")
    out += _options(c.options)
    out.append(".SH COMMANDS")
    for s in c.walk():
        if not s.path or s.is_group:
            continue
        out += [".TP", _bold(s.words + (" " + s.usage.replace("[OPTIONS]", "").strip()).rstrip()),
                text_line(first_sentence(s.help) + ".") + f" See \\fB{_esc(s.page)}\\fR(1)."]
    out.append(".SH ENVIRONMENT")
    out.append(text_line("Settings are taken from flags, then STATECTL_* environment variables, then the profile "
                     "in the config file, then defaults."))
    for name, desc in _environment(tree, config):
        out += [".TP", _bold(name), text_line(desc)]
    out += [".SH FILES",
            ".TP", "\\fI./statectl.toml\\fR",
            text_line("The config file, unless --config or STATECTL_CONFIG names one. Each table is a profile; "
                  "[default] is used unless --profile names another."),
            ".TP", "\\fI$XDG_CONFIG_HOME/statectl/config.toml\\fR",
            text_line("The config file when there is no ./statectl.toml (XDG_CONFIG_HOME defaults to ~/.config)."),
            ".TP", "\\fI$XDG_DATA_HOME/statectl/blobs\\fR",
            text_line("The embedded default blob store (file://...) when no --blobstore is set "
                  "(XDG_DATA_HOME defaults to ~/.local/share).")]
    out.append(".SH EXIT STATUS")
    for exit_code in errors.EXIT_CODES:
        out += [".TP", _bold(str(exit_code.code)), text_line(exit_code.meaning)]
    out += [".PP", text_line("Errors are one line on stderr (Error: ...), often followed by Hint: ...; --debug "
                         "adds a traceback. An unknown code means failure.")]
    examples = [ep.examples[0] for ep in (parse_epilog(s.epilog) for s in c.walk() if s.path) if ep.examples]
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
            m = ENV_TAG.search(o.help)
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
            desc = ENV_TAG.sub("", opt.help).strip()
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


# -- capability pages (docs/*.md) ---------------------------------------------------------------------

_SECTION = re.compile(r"^## (statectl(?: [a-z][a-z0-9-]*)*)\s*$")


def doc_sections(docs_dir: Path) -> dict[str, tuple[str, list[str]]]:
    """The sections of the pages in ``docs_dir`` headed exactly ``## statectl <command path>``: command
    words -> (the page's name, the Markdown lines up to the next heading of level 1 or 2). A command headed
    on two pages is an error: its man page would have to choose."""
    out: dict[str, tuple[str, list[str]]] = {}
    for page in sorted(docs_dir.glob("*.md")):
        words, fenced = None, False
        for line in page.read_text(encoding="utf-8").splitlines():
            if line.startswith("```"):
                fenced = not fenced
            elif not fenced and re.match(r"#{1,2} ", line):
                m = _SECTION.match(line)
                words = m.group(1) if m else None
                if words in out:
                    raise ValueError(f"'## {words}' is in both {out[words][0]} and {page.name}")
                if words:
                    out[words] = (page.name, [])
                continue
            if words:
                out[words][1].append(line)
    return out


_BULLET = "\\(bu"
_INLINE = re.compile(r"`([^`]+)`|\*\*(.+?)\*\*|\[([^\]]+)\]\(([^)]+)\)")


def _inline(text: str) -> str:
    """One line of Markdown text in roff: `code` and **strong** bold, a link its text (and its target
    unless that is an anchor of the page)."""
    out, last = [], 0
    for m in _INLINE.finditer(text):
        out.append(_esc(text[last:m.start()]))
        code, strong, label, target = m.groups()
        if code is not None or strong is not None:
            out.append(_bold(code if code is not None else strong))
        else:
            out.append(_esc(label) + ("" if target.startswith("#") else f" ({_esc(target)})"))
        last = m.end()
    s = "".join(out) + _esc(text[last:])
    return "\\&" + s if s.startswith((".", "\\(aq")) else s


def _md_blocks(lines: list[str]) -> list[list[str]]:
    """Markdown lines as blocks: fenced code (its fence lines kept) is one block; otherwise a blank line
    ends a block."""
    blocks: list[list[str]] = [[]]
    fenced = False
    for line in lines:
        if line.startswith("```"):
            fenced = not fenced
            if fenced and blocks[-1]:
                blocks.append([])
            blocks[-1].append(line)
            if not fenced:
                blocks.append([])
        elif fenced or line.strip():
            blocks[-1].append(line)
        elif blocks[-1]:
            blocks.append([])
    return [b for b in blocks if b]


def _md_items(block: list[str]) -> list[tuple[str, str]]:
    """A list block as (marker, text) items; continuation lines join their item."""
    items: list[tuple[str, str]] = []
    for line in block:
        m = re.match(r"\s*([-*]|\d+\.) (.*)", line)
        if m and not line.startswith("    "):
            items.append((m.group(1), m.group(2).strip()))
        elif items:
            items[-1] = (items[-1][0], items[-1][1] + " " + line.strip())
    return items


def _md_code(lines: list[str]) -> list[str]:
    return [".PP", ".RS 4", ".EX", *(_inline_code(line) for line in lines), ".EE", ".RE"]


def _inline_code(line: str) -> str:
    return text_line(line) if line.strip() else "\\&"


def markdown_roff(lines: list[str]) -> list[str]:
    """The Markdown of a capability page's section as man page requests: paragraphs, ### headings, lists,
    tables (a row: its first cell as the tag, the others as the text) and code blocks."""
    out: list[str] = []
    for block in _md_blocks(lines):
        first = block[0]
        if first.startswith("```"):
            out += _md_code(block[1:-1] if block[-1].startswith("```") else block[1:])
        elif all(line.startswith("    ") for line in block):
            out += _md_code([line[4:] for line in block])
        elif first.startswith("#"):
            out += [".SS " + _inline(first.lstrip("#").strip())] + markdown_roff(block[1:])
        elif first.startswith("|"):
            rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in block]
            rows = [r for r in rows if not all(re.fullmatch(r":?-+:?", c) for c in r)][1:]
            out += [x for r in rows for x in (".TP", _inline(r[0]), _inline("; ".join(r[1:])) or "\\&")]
        elif re.match(r"([-*]|\d+\.) ", first):
            for marker, text in _md_items(block):
                out += [".IP " + (_BULLET if marker in "-*" else marker) + " 4", _inline(text)]
        else:
            out += [".PP", _inline(join_lines("\n".join(block)))]
    return out

# -- writing -----------------------------------------------------------------------------------------

def generate(app: Any = None) -> dict[str, str]:
    """Every generated file: relative path -> content (deterministic: no dates, CLI order)."""
    tree = command_tree(app)
    sections = doc_sections(ROOT / DOCS_DIR)
    files = {COMPLETION_FILES["bash"]: bash_completion(tree),
             COMPLETION_FILES["zsh"]: zsh_completion(tree),
             COMPLETION_FILES["fish"]: fish_completion(tree)}
    for c in tree.walk():
        files[f"{MAN_DIR}/{c.page}.1"] = man_page(c, tree, sections)
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
    parser.add_argument("--root", type=Path, default=ROOT,
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
