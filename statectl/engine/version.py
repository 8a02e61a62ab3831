"""version: which statectl this is, and the versions of what it runs on: rocksdict and its RocksDB,
pyspark and Java (the Spark jobs' needs), and Python.

``installed_versions`` reads only the installed distributions' metadata (no import, no process: it is what
``statectl --version`` prints, which scripts call on their hot start path: the version comes from the name of
the distribution's ``<name>-<version>.dist-info`` dir on sys.path, importlib.metadata only when there is
none, e.g. an egg-info install); ``versions`` adds what only
running something tells: the RocksDB library (a store made in a temporary dir) and ``java -version``.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from statectl import __version__

__all__ = ["Versions", "installed_versions", "versions"]


@dataclass
class Versions:
    """Each version as found; None: not found (not installed, or it did not run). ``java_path`` is the
    java Spark would run ($JAVA_HOME/bin/java, else PATH)."""

    statectl: str
    python: str
    rocksdict: str | None
    rocksdb: str | None = None
    pyspark: str | None = None
    java: str | None = None
    java_path: str | None = None


def _dist_version(name: str) -> str | None:
    # The first dist-info of that name on sys.path, as importlib.metadata finds it, without its import
    # (email, zipfile, csv...) and its read of every distribution's METADATA.
    prefix = name.replace("-", "_").lower() + "-"
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for n in names:
            if n.lower().startswith(prefix) and n.endswith(".dist-info") and "-" not in n[len(prefix):-10]:
                return n[len(prefix):-10]
    import importlib.metadata

    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def installed_versions() -> Versions:
    """statectl's, Python's, and the installed rocksdict's and pyspark's versions, from metadata only."""
    return Versions(statectl=__version__, python=sys.version.split()[0], rocksdict=_dist_version("rocksdict"),
                    pyspark=_dist_version("pyspark"))


def versions() -> Versions:
    """installed_versions, plus the RocksDB library's version and the Java found (``java -version``, at most
    30 s). Never raises: what is missing or does not run is None."""
    from statectl.rocks.probe import rocksdb_version
    from statectl.spark.probe import check_java, java_binary

    out = installed_versions()
    if out.rocksdict is not None:
        out.rocksdb = rocksdb_version()
    out.java_path = java_binary()[0]
    if out.java_path is not None:
        out.java = check_java(pyspark_installed=True)[1]
    return out
