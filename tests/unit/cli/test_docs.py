"""completions/ and man/ are generated from the live command tree (tools/cmdtree.py, tools/completions.py,
tools/docs.py), committed, fresh, and work: bash really completes, zsh and fish parse them, man renders the
pages without warnings, and each command's section of the capability pages (docs/*.md) is in its man page."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tools import cmdtree, completions, docs

ROOT = Path(__file__).resolve().parents[3]
BASH = ROOT / docs.COMPLETION_FILES["bash"]
ZSH = ROOT / docs.COMPLETION_FILES["zsh"]
FISH = ROOT / docs.COMPLETION_FILES["fish"]


@pytest.fixture(scope="module")
def tree() -> cmdtree.Cmd:
    return cmdtree.command_tree()


@pytest.fixture(scope="module")
def files() -> dict[str, str]:
    return docs.generate()


def _need(program: str) -> str:
    path = shutil.which(program)
    if path is None:
        pytest.skip(f"{program} is not installed (make test-tools, or apt-get install {program})")
    return path


def _run(args: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=30, cwd=ROOT, **kw)


# -- fresh and complete -------------------------------------------------------------------------------

def test_committed_files_equal_freshly_generated_ones(files):
    assert docs.stale(ROOT, files) == [], "completions/ or man/ are stale: run make docs"


def test_generation_is_deterministic(files):
    assert docs.generate() == files
    for seed in ("1", "2"):      # click keeps some option names in sets: hash order must not leak out
        r = _run([sys.executable, "-c", "import sys; from tools import docs; "
                  "sys.stdout.write(repr(sorted(docs.generate().items())))"], env={**os.environ, "PYTHONHASHSEED": seed})
        assert r.returncode == 0, r.stderr
        assert r.stdout == repr(sorted(files.items()))
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", "".join(files.values())), "no dates in generated files"


def test_a_man_page_of_a_vanished_command_is_stale_and_write_removes_it(tmp_path, files):
    for rel, content in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(content, encoding="utf-8")
    (tmp_path / "man/statectl-vanished.1").write_text(".TH X 1\n", encoding="utf-8")
    (tmp_path / "man/other-tool.1").write_text(".TH Y 1\n", encoding="utf-8")
    (tmp_path / docs.COMPLETION_FILES["fish"]).write_text("# edited by hand\n", encoding="utf-8")
    assert docs.stale(tmp_path, files) == [docs.COMPLETION_FILES["fish"], "man/statectl-vanished.1"]
    assert docs.write(tmp_path) == [docs.COMPLETION_FILES["fish"], "man/statectl-vanished.1"]
    assert not (tmp_path / "man/statectl-vanished.1").exists()
    assert (tmp_path / "man/other-tool.1").exists()
    assert docs.stale(tmp_path) == [] and docs.write(tmp_path) == []


def test_check_mode_exits_1_on_stale_files(tmp_path):
    r = _run([sys.executable, "-m", "tools.docs", "--check", "--root", str(tmp_path)])
    assert r.returncode == 1 and "run make docs" in r.stderr


def test_the_tree_is_walked_not_listed(tree):
    """Every command the app has is in the tree (so a new command such as doctor needs no edit here)."""
    import typer.main

    from statectl.cli.main import app

    root = typer.main.get_command(app)
    assert [c.path[0] for c in tree.subcommands] == [n for n, c in root.commands.items() if not c.hidden]
    leaves = {c.path for c in tree.walk() if c.path and not c.is_group}
    assert {("backup",), ("restore",), ("diff",), ("gc",), ("snapshots", "list"), ("snapshots", "show"),
            ("snapshots", "verify"), ("config", "show")} <= leaves


def test_a_new_command_and_flag_appear_without_touching_the_generator():
    import typer

    app = typer.Typer()

    @app.callback()
    def main(output: str = typer.Option(None, "--output", "-o")) -> None:
        """A tool."""

    @app.command("frobnicate", epilog="Examples:\n\n  tool frobnicate --widget-dir /tmp\n")
    def frobnicate(widget_dir: Path = typer.Option(None, "--widget-dir", help="Where widgets live.")) -> None:
        """Frobnicate the widgets."""

    out = docs.generate(app)
    for rel in docs.COMPLETION_FILES.values():
        assert "frobnicate" in out[rel] and "widget-dir" in out[rel]
    assert "\\-\\-widget\\-dir" in out["man/statectl-frobnicate.1"]
    assert "tool frobnicate" in out["man/statectl-frobnicate.1"]


def test_every_command_and_flag_is_in_every_completion_script(tree):
    bash, zsh, fish = (p.read_text(encoding="utf-8") for p in (BASH, ZSH, FISH))
    for c in tree.walk():
        if c.path:
            name = c.path[-1]
            assert re.search(rf"REPLY='[^']*\b{name}\b", bash), f"bash lacks {c.words}"
            assert f"'{name}:" in zsh and f"{completions.zsh_func(c)}()" in zsh, f"zsh lacks {c.words}"
            assert f"-a {name} " in fish, f"fish lacks {c.words}"
        cond = "'" + ("__statectl_path " + " ".join(c.path)).strip() + "'"
        fish_lines = [line for line in fish.splitlines() if f"-n {cond} " in line]
        zsh_func = zsh.split(f"{completions.zsh_func(c)}() {{", 1)[1].split("\n}\n", 1)[0]
        for o in c.all_options():
            for n in o.names:
                assert n in bash, f"bash lacks {c.words} {n}"
                assert re.search(rf"'(\([^)]*\))?\*?{re.escape(n)}[=+]?\[", zsh_func), f"zsh lacks {c.words} {n}"
                flag = f"-l {n[2:]}" if n.startswith("--") else f"-s {n[1:]}"
                assert any(re.search(rf"{re.escape(flag)}( |$)", line) for line in fish_lines), \
                    f"fish lacks {c.words} {n}"


def test_value_hints(tree):
    by_path = {c.path: {n: o for o in c.all_options() for n in o.names} for c in tree.walk()}
    assert by_path[()]["--output"].choices == ("text", "json")
    assert by_path[("backup",)]["-o"].choices == ("text", "json")
    assert by_path[("backup",)]["--state-dir"].kind == "dir"
    assert by_path[("restore",)]["--target-dir"].kind == "dir"
    assert by_path[("snapshots", "show")]["--index-file"].kind == "file"
    assert by_path[()]["--config"].kind == "file"
    assert by_path[("backup",)]["--all"].kind == "flag"
    assert by_path[("backup",)]["--job"].kind == "text"
    assert "--version" not in by_path[("backup",)]       # only before the command


def test_choices_match_the_config_validator_and_the_engine(tree):
    """The choices an option's type lists (help, completions) are what the code behind it accepts: --output
    as config.KEYS["output"] (its env and profile path), --format the dataset readers' formats, the serdes
    what formats.serdes.kind_of reads."""
    from statectl import config
    from statectl.formats.serdes import kind_of
    from statectl.local.datasets import FORMATS

    by_path = {c.path: {n: o for o in c.all_options() for n in o.names} for c in tree.walk()}
    for c in by_path[()]["--output"].choices:
        assert config.KEYS["output"].parse(c) == c
    with pytest.raises((ValueError, TypeError)):
        config.KEYS["output"].parse("no-such-output")
    load = by_path[("adstore", "load")]
    assert load["--format"].choices == FORMATS
    assert load["--key-serde"].choices == load["--value-serde"].choices
    for name in load["--key-serde"].choices:
        kind_of(name)
    assert by_path[("standby", "follow")]["--layout"].choices == ("standby-root", "active-path")


def test_the_exit_status_section_is_the_exit_code_table(files):
    from statectl import errors

    page = files["man/statectl.1"]
    status = page.split(".SH EXIT STATUS\n", 1)[1].split(".SH ", 1)[0]
    assert status.startswith("".join(f".TP\n\\fB{c.code}\\fR\n{docs.text_line(c.meaning)}\n" for c in errors.EXIT_CODES))


def test_the_generator_imports_nothing_heavy():
    code = ("import sys, tools.docs; "
            "print(sorted(m for m in ('typer', 'rich', 'boto3', 'rocksdict', 'kafka') if m in sys.modules))")
    r = _run([sys.executable, "-c", code])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


# -- bash ---------------------------------------------------------------------------------------------

def test_bash_syntax():
    r = _run(["bash", "-n", str(BASH)])
    assert r.returncode == 0, r.stderr


_BASH_DRIVER = r"""
source "$1"; shift
while IFS= read -r line; do
    eval "COMP_WORDS=($line)"
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}
    COMPREPLY=()
    _statectl
    printf '%s\x1f' "${COMPREPLY[@]}"
    printf '\n'
done
"""


def _bash_complete(lines: list[list[str]]) -> list[list[str]]:
    """COMPREPLY for each list of words (the last one is the word being completed), in one bash."""
    import shlex

    stdin = "".join(" ".join(shlex.quote(w) for w in words) + "\n" for words in lines)
    r = _run(["bash", "--norc", "--noprofile", "-c", _BASH_DRIVER, "driver", str(BASH)], input=stdin)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    out = r.stdout.split("\n")[:-1]
    assert len(out) == len(lines)
    return [sorted(x for x in row.split("\x1f") if x) for row in out]


@pytest.mark.parametrize("words, expected", [
    (["statectl", "snap"], ["snapshots"]),
    (["statectl", "snapshots", "l"], ["list"]),
    (["statectl", "backup", "--ke"], ["--keep-last"]),
    (["statectl", "-o", ""], ["json", "text"]),
    (["statectl", "--output", "j"], ["json"]),
    (["statectl", "backup", "-o", ""], ["json", "text"]),            # global options also after the command
    (["statectl", "--output", "=", ""], ["json", "text"]),           # --output=<TAB> (COMP_WORDBREAKS has =)
    (["statectl", "--output=t"], ["--output=text"]),                  # ... and when it has not
    (["statectl", "-o", "json", "snapshots", "v"], ["verify"]),      # option values are skipped
    (["statectl", "--config", "snapshots", "l"], ["lease"]),         # 'snapshots' is the value of --config: commands, not its list
    (["statectl", "snapshots", "--job", "x", "show", "--index"], ["--index-file"]),
    (["statectl", "config", ""], ["show"]),
    (["statectl", "backup", "--job", ""], []),                       # free text: nothing to offer
    (["statectl", "backup", "--ve"], ["--verbose"]),
    (["statectl", "--vers"], ["--version"]),
    (["statectl", "backup", "--vers"], []),
])
def test_bash_completes(words, expected):
    assert _bash_complete([words]) == [sorted(expected)]


def test_bash_completes_paths_for_path_options(tmp_path):
    (tmp_path / "state dir").mkdir()
    (tmp_path / "state.toml").write_text("")
    prefix = str(tmp_path / "state")
    got = _bash_complete([["statectl", "backup", "--state-dir", prefix],
                          ["statectl", "--config", prefix],
                          ["statectl", "restore", "--target-dir=" + prefix]])
    assert got == [[prefix + " dir"], sorted([prefix + " dir", prefix + ".toml"]), ["--target-dir=" + prefix + " dir"]]


def test_bash_completes_every_command_and_flag(tree):
    cases, expected = [], []
    for c in tree.walk():
        if c.is_group:
            cases.append(["statectl", *c.path, ""])
            expected.append(sorted(s.path[-1] for s in c.subcommands))
        for o in c.all_options():
            for n in o.names:
                cases.append(["statectl", *c.path, n])
                expected.append(n)
    got = _bash_complete(cases)
    for words, want, have in zip(cases, expected, got):
        if isinstance(want, list):
            assert have == want, words
        else:
            assert want in have, words


# -- zsh and fish -------------------------------------------------------------------------------------

def test_zsh_syntax_and_registration():
    zsh = _need("zsh")
    r = _run([zsh, "-n", str(ZSH)])
    assert r.returncode == 0, r.stderr
    # Sourced after compinit it registers itself for statectl (autoloaded from $fpath it runs instead).
    r = _run([zsh, "-f", "-c", f"autoload -Uz compinit && compinit -u -D && source {ZSH} && print -r -- $_comps[statectl]"],
             env={**os.environ, "HOME": str(ROOT / ".pytest_cache")})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "_statectl"


def test_fish_syntax():
    fish = _need("fish")
    r = _run([fish, "--no-execute", str(FISH)])
    assert r.returncode == 0, r.stderr


def test_fish_completes(tmp_path):
    fish = _need("fish")
    cases = {"statectl snap": ["snapshots"], "statectl snapshots l": ["list"], "statectl backup --ke": ["--keep-last"],
             "statectl -o ": ["json", "text"], "statectl backup -o j": ["json"],
             "statectl config show --st": ["--state-dir", "--store"], "statectl --vers": ["--version"],
             "statectl snapshots show --index": ["--index-file"], "statectl --config snapshots l": ["lease"]}
    script = f"source {FISH}\n" + "".join(f"complete -C {_fish_str(line)}; echo '=='\n" for line in cases)
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path)}
    r = _run([fish, "--no-config", "-c", script], env=env)
    assert r.returncode == 0, r.stderr
    blocks = r.stdout.split("==\n")[:-1]
    got = {line: sorted(x.split("\t")[0] for x in block.splitlines()) for line, block in zip(cases, blocks)}
    assert got == {line: sorted(want) for line, want in cases.items()}


def _fish_str(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


# -- man pages ----------------------------------------------------------------------------------------

def _pages() -> list[Path]:
    return sorted((ROOT / docs.MAN_DIR).glob("statectl*.1"))


def _render(page: Path) -> str:
    """The page as plain text, wide enough that no option name is broken across lines."""
    r = _run(["groff", "-man", "-Tutf8", "-ww", "-rLL=250n", "-P-c", "-P-b", "-P-u", "-P-o", str(page)])
    assert r.returncode == 0 and r.stderr == "", f"{page.name}: {r.stderr}"
    return re.sub(r".\x08", "", r.stdout)


def test_man_pages_render_without_warnings():
    if shutil.which("groff"):
        for page in _pages():
            r = _run(["groff", "-man", "-Tutf8", "-ww", "-z", str(page)])
            assert r.returncode == 0 and r.stderr == "", f"{page.name}: {r.stderr}"
    if shutil.which("man"):
        r = _run(["man", "--warnings", "-l", "-P", "cat", str(ROOT / "man/statectl.1")],
                 env={**os.environ, "MANWIDTH": "80", "MAN_KEEP_FORMATTING": ""})
        assert r.returncode == 0 and r.stderr == "", r.stderr
        text = re.sub(r".\x08", "", r.stdout)
        for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "GLOBAL OPTIONS", "COMMANDS", "ENVIRONMENT", "FILES",
                        "EXIT STATUS", "EXAMPLES", "SEE ALSO"):
            assert re.search(rf"^{section}$", text, re.M), section
    if not (shutil.which("groff") or shutil.which("man")):
        for page in _pages():
            _lint_roff(page.name, page.read_text(encoding="utf-8"))


def _lint_roff(name: str, text: str) -> None:
    """Without groff or man: requests are known man macros, text lines do not start like requests."""
    known = {"TH", "SH", "SS", "TP", "IP", "PP", "RS", "RE", "EX", "EE", "nf", "fi", "nh", "ad", "B", "I"}
    lines = text.splitlines()
    assert lines[0].startswith('.\\"') and lines[1].startswith(".TH "), name
    for line in lines:
        if line.startswith('.\\"'):
            continue
        if line.startswith("."):
            assert line[1:].split(" ")[0] in known, f"{name}: {line}"
        assert not line.startswith("'") and line.strip() == line.rstrip() and line, f"{name}: {line!r}"
        assert not re.search(r"(?<!\\)-", line.replace("\\-", "")), f"{name}: unescaped hyphen: {line}"


def test_man_pages_document_every_command_flag_exit_code_and_variable(tree):
    from statectl import config, errors

    have = {p.name for p in _pages()}
    assert have == {c.page + ".1" for c in tree.walk()}
    render = _render if shutil.which("groff") else (lambda p: p.read_text(encoding="utf-8").replace("\\-", "-"))
    texts = {c.path: render(ROOT / docs.MAN_DIR / (c.page + ".1")) for c in tree.walk()}
    root = texts[()]
    for c in tree.walk():
        for o in c.options:
            for n in o.names:
                assert re.search(rf"(^|[\s,]){re.escape(n)}\b", texts[c.path], re.M), f"{c.page}.1 lacks {n}"
        for n in (n for o in c.globals for n in o.names):
            assert n in texts[c.path], f"{c.page}.1 lacks global {n}"
        if c.path and not c.is_group:
            assert c.words in root, f"statectl.1 lacks {c.words}"
        for block in cmdtree.parse_epilog(c.epilog).examples:
            for line in block:
                assert line in texts[c.path], f"{c.page}.1 lacks the example {line}"
    exit_status = root.split("EXIT STATUS", 1)[1].split("EXAMPLES", 1)[0]
    for code in (0, 1, 2, 3, 10, 11, 12, 13, 14, 130):
        assert re.search(rf"^\s+{code}\s", exit_status, re.M), f"statectl.1 lacks exit code {code}"
    assert {c.code for c in errors.EXIT_CODES} == {0, 1, 2, 3, 10, 11, 12, 13, 14, 130}
    environment = root.split("ENVIRONMENT", 1)[1].split("FILES", 1)[0]
    for key in config.KEYS:
        assert f"STATECTL_{key.upper()}" in environment
    assert "STATECTL_CONFIG" in environment and "STATECTL_PROFILE" in environment
    assert "./statectl.toml" in root and "$XDG_CONFIG_HOME/statectl/config.toml" in root
    assert f"statectl {__import__('statectl').__version__}" in root


# -- the capability pages' sections -----------------------------------------------------------------

_PAGE = """# Widgets

Intro, in no man page.

## statectl frobnicate

Why it **frobnicates** with `--widget-dir`, in [the guide](guide.md#why) and [below](#notes).

### In depth

- one item, continued
  on a second line
- `two`

1. first

| code | meaning |
| --- | --- |
| 0 | ok |
| 14 | refused |

```sh
statectl frobnicate --widget-dir /tmp
# ## statectl not-a-heading: in a fence

.dot-led line
```

    an indented block

## Notes

Not frobnicate's.

## statectl frobnicate twice
"""


def test_a_section_of_a_capability_page_ends_at_the_next_heading_of_its_level(tmp_path):
    (tmp_path / "widgets.md").write_text(_PAGE, encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "deep.md").write_text("## statectl frobnicate\n\nnot a capability page\n")
    sections = docs.doc_sections(tmp_path)
    assert set(sections) == {"statectl frobnicate", "statectl frobnicate twice"}
    page, lines = sections["statectl frobnicate"]
    text = "\n".join(lines)
    assert page == "widgets.md" and "### In depth" in text and "not-a-heading" in text
    assert "Intro" not in text and "Not frobnicate's" not in text and "not a capability page" not in text
    (tmp_path / "other.md").write_text("# Other\n\n## statectl frobnicate\n\nagain\n", encoding="utf-8")
    with pytest.raises(ValueError, match="statectl frobnicate' is in both other.md and widgets.md"):
        docs.doc_sections(tmp_path)


def test_a_section_renders_into_the_man_page_of_its_command(tmp_path):
    import typer

    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """A tool."""

    @app.command("frobnicate", epilog="Examples:\n\n  tool frobnicate\n")
    def frobnicate(widget_dir: Path = typer.Option(None, "--widget-dir", help="Where widgets live.")) -> None:
        """Frobnicate the widgets."""

    (tmp_path / "widgets.md").write_text(_PAGE, encoding="utf-8")
    tree = cmdtree.command_tree(app)
    cmd = tree.subcommands[0]
    page = docs.man_page(cmd, tree, docs.doc_sections(tmp_path))
    assert page != docs.man_page(cmd, tree, {})
    description = page.split(".SH DESCRIPTION\n", 1)[1].split(".SH OPTIONS", 1)[0]
    assert ".SS In depth" in description and ".IP \\(bu 4" in description and ".IP 1. 4" in description
    assert "\\fB\\-\\-widget\\-dir\\fR" in description and "the guide (guide.md#why)" in description
    assert "below (" not in description                     # an anchor of the page is no address
    assert ".TP\n14\nrefused" in description and "code" not in description.split(".SS", 1)[1].split(".EX")[0]
    assert "\\&.dot\\-led line" in description and "an indented block" in description
    _lint_roff("frobnicate.1", page)
    if shutil.which("groff"):
        path = tmp_path / "frobnicate.1"
        path.write_text(page, encoding="utf-8")
        text = " ".join(_render(path).split())
        for words in ("Why it frobnicates with --widget-dir, in the guide (guide.md#why) and below.",
                      "one item, continued on a second line", "14 refused", ".dot-led line",
                      "# ## statectl not-a-heading: in a fence"):
            assert words in text


def test_every_command_section_of_the_capability_pages_is_in_that_command_s_man_page(tree, files):
    sections = docs.doc_sections(ROOT / docs.DOCS_DIR)
    by_words = {c.words: c for c in tree.walk()}
    assert {"statectl backup", "statectl restore", "statectl gc", "statectl snapshots copy",
            "statectl version"} <= set(sections)
    for words, (page, lines) in sections.items():
        assert words in by_words, f"docs/{page}: '## {words}' names no command"
        man = files[f"{docs.MAN_DIR}/{by_words[words].page}.1"]
        roff = "\n".join(docs.markdown_roff(lines))
        assert roff and roff in man.split(".SH OPTIONS", 1)[0], f"{by_words[words].page}.1 lacks docs/{page}'s section"
