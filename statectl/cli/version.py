"""statectl version (and the global --version)"""

from __future__ import annotations

import os
import sys

import typer

from statectl.cli.base import exit_codes_epilog, global_options, render_versions

EPILOG = (
    "Examples:\n\n"
    "  statectl version\n\n"
    "  statectl version -o json\n\n"
    + exit_codes_epilog(0)
)


def version(ctx: typer.Context) -> None:
    """Print statectl's version and those of rocksdict and its RocksDB, pyspark and Java found.

    Changes nothing. Runs java -version and opens a scratch store in a temporary dir; statectl --version
    prints the same without them (no RocksDB, no Java), from the installed packages alone. A missing one
    says "not found". -o json (or STATECTL_OUTPUT; the config file is not read) prints one document."""
    from statectl.cli.common import print_json
    from statectl.engine.version import versions

    v = versions()
    if (global_options(ctx).output or os.environ.get("STATECTL_OUTPUT")) == "json":
        print_json(v)
        return
    sys.stdout.write(render_versions(v, full=True) + "\n")
