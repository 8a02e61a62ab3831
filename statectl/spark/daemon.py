"""The Python side of a Spark job's start: :func:`prefer_installed_pyspark`, which makes the job's driver and
Python workers import the installed pyspark rather than the copy in its zip, and the daemon that forks a
rescale's Python workers (``python -m statectl.spark.daemon``, Spark's ``spark.python.daemon.module``):
pyspark's own, started after that.

spark-submit puts ``$SPARK_HOME/python/lib/pyspark.zip`` (and py4j's zip) first on the PYTHONPATH of the
driver and of the workers. Python compiles every module it imports from a zip that holds no bytecode, at
every start: ``import pyspark`` takes 0.8 s from the zip against 0.15 s from the installed package, paid by
the driver before its SparkContext and by each worker (``pyspark.worker`` is imported after the fork) before
its first task. pip's pyspark is the package those zips are part of (``<site-packages>/pyspark/python/lib``),
the same code, with its bytecode compiled at install.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def prefer_installed_pyspark() -> None:
    """Move pyspark's zip, and py4j's when the installed py4j is its version, after the rest of ``sys.path``
    when they lie in the installed pyspark package (pip's) that the rest of ``sys.path`` finds: Python then
    imports that package, compiled. Nothing when pyspark is imported already or is not installed that way."""
    if "pyspark" in sys.modules:
        return
    moved = [p for p in sys.path if _own_zip(p)]
    if moved:
        sys.path[:] = [p for p in sys.path if p not in moved] + moved


def _own_zip(entry: str) -> bool:
    """Whether ``entry`` is a zip of ``<dir>/pyspark/python/lib`` where ``<dir>`` is on sys.path and holds the
    package (py4j's zip: only with the installed py4j of its version)."""
    lib = os.path.dirname(entry)
    name = os.path.basename(entry)
    package = os.path.dirname(os.path.dirname(lib))
    if not (entry.endswith(".zip") and lib.endswith(os.path.join("pyspark", "python", "lib"))):
        return False
    site = os.path.realpath(os.path.dirname(package))
    if site not in {os.path.realpath(p) for p in sys.path if p} or not os.path.isfile(os.path.join(package, "__init__.py")):
        return False
    if name == "pyspark.zip":
        return True
    if name.startswith("py4j-") and name.endswith("-src.zip"):
        return _installed_py4j(site) == name[len("py4j-"):-len("-src.zip")]
    return False


def _installed_py4j(site: str) -> str | None:
    """The version of the py4j installed in ``site`` beside pyspark, from its ``py4j/version.py`` (read, not
    imported: the zip's py4j would be; importlib.metadata's lookup scans every distribution, 20-60 ms at each
    start of the driver and of the workers' daemon); None when there is none."""
    import re

    try:
        text = Path(site, "py4j", "version.py").read_text()
    except OSError:
        return None
    m = re.search(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", text, re.MULTILINE)
    return m.group(1) if m else None


def main() -> None:
    """pyspark's daemon, importing the installed pyspark."""
    prefer_installed_pyspark()
    from pyspark.daemon import manager

    manager()


if __name__ == "__main__":
    main()
