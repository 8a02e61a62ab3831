"""The console script's entry point. ``statectl --version`` alone, which scripts call on their hot start path,
is answered here from the installed packages' metadata before typer and the command registry load (typer's
import is most of what that command would otherwise cost); every other command line goes to cli.main, whose
``--version`` prints the same text."""

from __future__ import annotations

import sys


def run() -> None:
    """Console-script entry point (and ``python -m statectl``)."""
    if sys.argv[1:] == ["--version"]:
        from statectl.cli.base import render_versions
        from statectl.engine.version import installed_versions

        sys.stdout.write(render_versions(installed_versions(), full=False) + "\n")
        return
    from statectl.cli.main import run as run_main

    run_main()
