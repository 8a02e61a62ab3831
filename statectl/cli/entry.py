"""The console script's entry point. ``statectl --version`` alone, which scripts call on their hot start path,
is answered here from the installed packages' metadata before typer and the command registry load (typer's
import is most of what that command would otherwise cost); every other command line goes to cli.main, whose
``--version`` prints the same text, and ends without the interpreter's final garbage collections."""

from __future__ import annotations

import gc
import sys


def run() -> None:
    """Console-script entry point (and ``python -m statectl``)."""
    if sys.argv[1:] == ["--version"]:
        from statectl.cli.base import render_versions
        from statectl.engine.version import installed_versions

        sys.stdout.write(render_versions(installed_versions(), full=False) + "\n")
        return
    from statectl.cli.main import run as run_main

    try:
        run_main()
    finally:
        # The process ends here. The interpreter's last collections would walk every object still alive, most of
        # them the models botocore's client loaded (0.1-0.8 s at exit, depending on the machine's load); frozen,
        # they are left to the process's end. Files and leases are closed by the commands themselves.
        gc.freeze()
