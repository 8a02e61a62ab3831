"""Spark's probe for ``statectl doctor``: ``java -version`` runs, and pyspark imports with its spark-submit
and suits that Java. Both are needed only by the Spark jobs: while pyspark is not installed, a missing or
broken Java is a skip, not a failure. The Spark jobs' own requirement (:func:`require_spark`, exit 13)
is the same checks."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path

from statectl.errors import MissingDependencyError
from statectl.probe import FAIL, OK, SKIP, Check, dist_version

JAVA, SPARK = "java", "spark"
NAMES = (JAVA, SPARK)

JAVA_TIMEOUT_S = 30.0
SPARK_HINT = "pip install pyspark (only the Spark jobs need it)"
SPARK_INSTALL_HINT = "pip install 'statectl[spark]' (pyspark; it needs a Java 17)"
JDK_HINT = "install a JDK 17 (e.g. apt-get install openjdk-17-jre-headless), or set JAVA_HOME to one"
_REINSTALL_HINT = "reinstall it: pip install --force-reinstall pyspark"

_JAVA_VERSION = re.compile(r'version "([^"]+)"')


def probe() -> list[Check]:
    """The ``java`` and ``spark`` checks (see the module doc). Never raises; runs ``java -version`` (at most
    JAVA_TIMEOUT_S) and imports pyspark when it is installed."""
    pyspark_installed = importlib.util.find_spec("pyspark") is not None
    java, java_version = check_java(pyspark_installed)
    return [java, check_spark(pyspark_installed, java, java_version)]


def java_binary() -> tuple[str | None, str]:
    """(path of the java that Spark would run, where it came from): $JAVA_HOME/bin/java, else PATH."""
    home = os.environ.get("JAVA_HOME")
    if home:
        java = Path(home) / "bin" / "java"
        return (str(java) if java.is_file() else None), f"JAVA_HOME={home}"
    return shutil.which("java"), "PATH"


def java_major(version: str) -> int | None:
    """17 for "17.0.15", 8 for "1.8.0_392"; None when there is no number in it."""
    parts = re.findall(r"\d+", version)
    if not parts:
        return None
    major = int(parts[0])
    return int(parts[1]) if major == 1 and len(parts) > 1 else major


def check_java(pyspark_installed: bool) -> tuple[Check, str | None]:
    """``java -version`` runs: the check, and the version it printed (None when it did not run). Only the
    Spark jobs need Java: without pyspark a missing or broken Java is a skip."""
    problem_status = FAIL if pyspark_installed else SKIP
    needed = "" if pyspark_installed else " (only the Spark jobs need it)"
    java, source = java_binary()
    if java is None:
        where = f"{source} has no bin/java" if source != "PATH" else "no java on PATH"
        return Check(JAVA, problem_status, where + needed, JDK_HINT), None
    try:
        proc = subprocess.run([java, "-version"], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=JAVA_TIMEOUT_S, errors="replace")
    except subprocess.TimeoutExpired:
        return Check(JAVA, problem_status, f"{java} -version did not finish within {JAVA_TIMEOUT_S:g}s" + needed,
                     JDK_HINT), None
    except OSError as e:
        return Check(JAVA, problem_status, f"{java} does not run: {e.strerror or e}" + needed, JDK_HINT), None
    out = (proc.stderr or "") + (proc.stdout or "")
    m = _JAVA_VERSION.search(out)
    if proc.returncode != 0 or not m:
        first = next((line.strip() for line in out.splitlines() if line.strip()), "no output")
        return Check(JAVA, problem_status, f"{java} -version failed (exit {proc.returncode}): {first}" + needed,
                     JDK_HINT), None
    return Check(JAVA, OK, f"java {m.group(1)} ({java})"), m.group(1)


def check_spark(pyspark_installed: bool, java: Check, java_version: str | None) -> Check:
    """pyspark imports, has its spark-submit, and the Java found suits its version. Skipped when pyspark
    is not installed (it is optional); a failure only when it is installed but cannot run."""
    if not pyspark_installed:
        return Check(SPARK, SKIP, "pyspark is not installed", SPARK_HINT)
    try:
        import pyspark
    except Exception as e:
        return Check(SPARK, FAIL, f"pyspark is installed but does not import: {type(e).__name__}: {e}",
                     _REINSTALL_HINT)
    version = getattr(pyspark, "__version__", None) or dist_version("pyspark")
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    if not (submit.is_file() and os.access(submit, os.X_OK)):
        return Check(SPARK, FAIL, f"pyspark {version} has no runnable {submit}", _REINSTALL_HINT)
    if java.status != OK or java_version is None:
        return Check(SPARK, FAIL, f"pyspark {version} is installed but Java is not usable: {java.detail}", JDK_HINT)
    major = java_major(java_version)
    needs = 17 if (java_major(version) or 0) >= 4 else 8
    if major is not None and major < needs:
        return Check(SPARK, FAIL, f"pyspark {version} needs Java {needs} or newer; the java found is {java_version}",
                     JDK_HINT)
    return Check(SPARK, OK, f"pyspark {version} with java {java_version} ({submit})")


def spark_submit_path(what: str = "adstore load --spark") -> Path:
    """The spark-submit of the pyspark install; MissingDependencyError (13) when pyspark is not installed."""
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.origin:
        raise MissingDependencyError(f"pyspark is not installed; {what} needs it",
                                     hint=SPARK_INSTALL_HINT)
    return Path(spec.origin).parent / "bin" / "spark-submit"


def require_spark(what: str = "adstore load --spark") -> Path:
    """Raise MissingDependencyError (exit 13, with the install hint) unless pyspark imports with its
    spark-submit and a Java it can run on is found; return spark-submit's path."""
    submit = spark_submit_path(what)
    java, version = check_java(True)
    if java.status != OK:
        raise MissingDependencyError(f"{what} needs Java: {java.detail}", hint=java.hint)
    spark = check_spark(True, java, version)
    if spark.status != OK:
        raise MissingDependencyError(f"{what} cannot run Spark: {spark.detail}",
                                     hint=spark.hint or SPARK_INSTALL_HINT)
    return submit


def spark_at_hand(what: str) -> Path:
    """spark-submit's path, after the checks of :func:`require_spark` that run nothing (pyspark installed, a java
    found); the rest (``java -version``, pyspark's import: 0.3-1.5 s) only when a build fails (statectl.spark.submit)."""
    submit = spark_submit_path(what)
    if java_binary()[0] is None:
        require_spark(what)  # raises, with the JDK hint
    return submit
