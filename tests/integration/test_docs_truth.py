"""The documentation tells the truth: the README's first-ten-minutes tour runs as written, and every
command has help with an example and appears in the README and the man pages."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import typer.main

from statectl.cli.main import app

ROOT = Path(__file__).resolve().parents[2]


def tour_script() -> str:
    readme = (ROOT / "README.md").read_text()
    m = re.search(r"<!-- tour:start -->\n```bash\n(.*?)```\n<!-- tour:end -->", readme, re.S)
    assert m, "README lost its tour block"
    return m.group(1)


def test_the_first_ten_minutes_run_as_written(tmp_path: Path):
    env = {"PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
           "HOME": str(tmp_path), "LANG": "C.UTF-8", "TOUR": str(tmp_path / "tour"),
           "XDG_CONFIG_HOME": str(tmp_path / "cfg"), "XDG_DATA_HOME": str(tmp_path / "data")}
    proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", tour_script()], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "all checks passed" in out
    assert "nothing changed since the snapshot" in out
    assert "the store changed since the snapshot" in out
    assert re.search(r"uploaded (\d+) of (\d+) files", out)
    assert "CRCs match" in out
    assert out.count("restored snapshot") == 2
    assert "Traceback" not in proc.stderr


def commands() -> list[tuple[str, object]]:
    """(path like "snapshots list", click command) for every leaf command of the CLI."""
    out = []

    def walk(cmd, path):
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in sorted(subs.items()):
                walk(sub, path + [name])
        else:
            out.append((" ".join(path), cmd))

    walk(typer.main.get_command(app), [])
    return out


def test_every_command_has_help_with_an_example_and_is_documented():
    readme = (ROOT / "README.md").read_text()
    from typer.testing import CliRunner

    runner = CliRunner()
    found = commands()
    assert {"backup", "restore", "diff", "gc", "doctor", "snapshots list", "config show"} <= {p for p, _ in found}
    for path, _ in found:
        r = runner.invoke(app, [*path.split(), "--help"])
        assert r.exit_code == 0, path
        assert "Example" in r.stdout and f"statectl {path}" in r.stdout, f"{path}: no example in --help"
        assert f"statectl {path}" in readme or f"`{path}" in readme, f"{path} is not in the README"
        page = ROOT / "man" / f"statectl-{path.replace(' ', '-')}.1"
        assert page.is_file(), f"no man page for {path}"
        name = path.split()[-1].replace("-", "\\-")  # roff spells a hyphen \-
        assert name in (ROOT / "man" / "statectl.1").read_text(), f"{path} not in statectl.1"


def test_the_docs_generator_lives_outside_the_installed_package():
    """tools/docs.py writes completions/ and man/ at build time; the package statectl installs holds no
    generator (setuptools packages only statectl*), and make docs runs it from the checkout."""
    import importlib.util

    import tomli

    from tools import docs

    assert Path(docs.__file__).resolve().parent == ROOT / "tools"
    assert importlib.util.find_spec("statectl.cli.docs") is None
    pyproject = tomli.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["tool"]["setuptools"]["packages"]["find"]["include"] == ["statectl*"]
    assert "python -m tools.docs --write" in (ROOT / "Makefile").read_text(encoding="utf-8")
    assert docs.stale(ROOT) == [], "completions/ or man/ are stale: run make docs"
