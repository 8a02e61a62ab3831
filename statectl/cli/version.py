"""statectl version (and the global --version)"""

from __future__ import annotations

import os
import sys

import typer

from statectl.cli.common import exit_codes_epilog, global_options, print_json

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
    from statectl.engine.version import versions

    v = versions()
    if (global_options(ctx).output or os.environ.get("STATECTL_OUTPUT")) == "json":
        print_json(v)
        return
    sys.stdout.write(render(v, full=True) + "\n")


def render(v, *, full: bool) -> str:
    """The text of a Versions: a line each; ``full``: with RocksDB and Java (statectl version)."""
    def found(value: str | None) -> str:
        return value if value is not None else "not found"

    rocksdict = found(v.rocksdict)
    if full and v.rocksdict is not None:
        rocksdict += f" (RocksDB {found(v.rocksdb)})"
    lines = [f"statectl {v.statectl}", f"python {v.python}", f"rocksdict {rocksdict}", f"pyspark {found(v.pyspark)}"]
    if full:
        where = "" if v.java_path is None else f" ({v.java_path}{'' if v.java else ' did not run'})"
        lines.append(f"java {found(v.java)}{where}")
    return "\n".join(lines)
